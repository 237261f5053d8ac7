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

from infra.experiment import LearnOptions, run_learning
from infra.log_reader import read_topic
from infra.objects import build_minio
from infra.weights import read_manifest

HELDOUT = 20


def test_a_version_trained_through_the_loop_beats_the_initial_model(run_settings):
    options = LearnOptions(
        pages=("click-dialog",),
        train_seeds=40,
        heldout_seeds=HELDOUT,
        warm_start_episodes=48,
        on_policy_episodes=0,
        replay_per_step=24,
        publish_every=4,
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
