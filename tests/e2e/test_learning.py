"""The CI-sized learning test: on one easy task, a version trained through the loop beats the
initial model on held-out instances.

`webgym experiment learn`'s recipe at the size of a test, on the real stack (Kafka, MinIO,
Chromium, the Faust worker, the learner and the policy worker as child processes): the tiny
random-initialised Qwen-VL policy, the heuristic teacher's warm start on MiniWoB++ click-dialog
training instances (seeds 0..39), the learner's full fine-tuning, and greedy evaluation of the base
model and of every published version on 20 held-out instances (seeds from 1,000,000).

Why a false failure is rarer than 1 in 1,000: the base model is random (its replies do not even
parse, so it scores 0 of 20), and on this page behaviour cloning reaches 100% (bench.tiny_policy).
The test asks for the best trained version to succeed on at least 10 of 20 held-out episodes,
which puts its 95% interval above the base model's; a version that truly succeeds 80% of the
time falls below 10 of 20 with probability under 0.1%.
"""

from __future__ import annotations

import pytest

from commands.experiment import LearnOptions, run_learning
from infra.log_reader import read_topic
from infra.minio_store import build_minio
from infra.weights import read_manifest
from tests.integration.model_servers import tiny_model_fixture  # noqa: F401

HELDOUT = 20


@pytest.mark.timeout(1200)
def test_a_version_trained_through_the_loop_beats_the_initial_model(run_settings):
    # One teacher sample per optimiser step with 15 replayed: 40 steps, about 640 samples
    # through the optimiser, one version (published at step 40, or when the input goes quiet if
    # the teacher failed an episode). With 54 steps and a version every 27, the first version,
    # at about 430 samples, already solved 20 of 20 held-out instances (v0: 0 of 20).
    options = LearnOptions(
        pages=("click-dialog",),
        train_seeds=40,
        heldout_seeds=HELDOUT,
        warm_start_episodes=40,
        on_policy_episodes=0,
        fresh_per_step=1,
        replay_per_step=15,
        publish_every=40,
        learner_idle_s=5.0,
    )
    result = run_learning(run_settings, options, report=print)
    initial, *trained = result["versions"]
    assert initial["version"] == 0 and initial["heldout_episodes"] == HELDOUT
    assert trained, "the learner published no version"
    assert all(v["heldout_episodes"] == HELDOUT for v in trained)
    best = max(trained, key=lambda v: v["heldout_success"])
    print({v["version"]: v["heldout_success"] for v in result["versions"]})
    assert best["heldout_success"] * HELDOUT >= 10, result["versions"]
    assert best["ci_low"] > initial["ci_high"], (best, initial)

    # Every version is on webgym.eval.results, and the held-out episodes were never trained on.
    results = [
        e.record
        for e in read_topic(run_settings, "eval.results")
        if e.record["eval_id"] == f"{result['experiment_id']}-eval"
    ]
    evaluated = sorted(r["policy_version"] for r in results if r["kind"] == "version")
    assert evaluated == sorted(v["version"] for v in result["versions"])
    episodes = {r["episode_id"] for r in results if r["kind"] == "episode"}
    assert len(episodes) == HELDOUT * len(evaluated)
    minio = build_minio(run_settings)
    trained_keys = set()
    for version in evaluated[1:]:
        manifest = read_manifest(minio, run_settings, result["experiment_id"], version)
        trained_keys |= {k.rsplit(":", 1)[0] for k in manifest.training["trained_samples"]}
        assert set(manifest.training["trained_by_phase"]) <= {"warm_start"}
    assert trained_keys and not trained_keys & episodes
    assert all(key.startswith(f"{result['experiment_id']}-warm-") for key in trained_keys)


def test_webgym_eval_measures_a_version_and_records_it(run_settings, tiny_model, tmp_path):
    """The command a user runs: it starts its own workers, publishes miniwob/heldout, evaluates
    the base model (v0) on every held-out instance once, greedy, and writes the curve."""
    import json
    import subprocess
    import sys

    from commands.children import settings_env

    out, png = tmp_path / "curve.json", tmp_path / "curve.png"
    argv = [sys.executable, "-m", "commands.main", "eval", "--versions", "0",
            "--model", str(tiny_model), "--pages", "click-dialog,focus-text", "--miniwob-seeds",
            "2", "--out", str(out),
            "--plot", str(png)]  # fmt: skip
    done = subprocess.run(argv, env=settings_env(run_settings), capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [row] = json.loads(out.read_text())
    heldout = [t for t in _published(run_settings) if t["task_set"] == "miniwob/heldout"]
    assert row["policy_version"] == 0 and row["episodes"] == len(heldout) > 0
    assert row["successes"] == 0  # a random model
    assert png.read_bytes()[:4] == b"\x89PNG"
    events = [e.record for e in read_topic(run_settings, "eval.results")]
    assert sum(e["kind"] == "episode" for e in events) == len(heldout)
    assert [e["policy_version"] for e in events if e["kind"] == "version"] == [0]
    assert "v0: held-out success" in done.stdout


def _published(settings):
    from tasks.publish import read_published_tasks

    return read_published_tasks(settings)
