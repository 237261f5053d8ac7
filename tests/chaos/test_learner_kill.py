"""The learner SIGKILLed in the middle of a weight upload while rollouts run beside it.

The learner holds at ``mid-upload`` (``WEBGYM_LEARNER_HOLD_AT``: the weights of its first version
are stored, the manifest is not) and is killed there; a new learner, without the hold, takes
over. At the kill the version's files are stored but its manifest is not, no event names it and
no offset is committed; afterwards no version event names partial weights, every announced
version verifies, and across the two learners no sample is trained twice; the rollouts' log keeps
every invariant. (The e2e tier's killed-learner test holds the learner at the other points of its
cycle; this run is its mid-upload case.)
"""

from __future__ import annotations

import os
from collections import Counter

from commands.children import Child, settings_env
from infra.minio_store import build_minio
from infra.processes import thread_stats
from infra.weights import read_manifest, stored_versions
from tests.chaos.conftest import Fault, assert_none_aborted, chaos_options, chaos_run
from tests.e2e.test_learner import _check_manifest, _committed, _versions
from tests.integration.model_servers import tiny_model_fixture  # noqa: F401

# Long enough for the learner to reach its first upload mid-run (asserted below); 80 was not
# always, under load the run ended first.
EPISODES = 120
LEARNER_ARGS = (
    "--lora-rank", "4", "--lr", "1e-3", "--fresh-per-step", "3", "--replay-per-step", "1",
    "--publish-every", "1", "--keep-versions", "100", "--idle-s", "3",
)  # fmt: skip


def test_a_learner_killed_mid_upload_announces_no_partial_version(
    run_settings, tiny_model, request, monkeypatch
):
    fault = Fault("SIGKILL learner during a weight upload, restarted")
    # Only the learner reads the hold; the replacement is started without it.
    monkeypatch.setenv("WEBGYM_LEARNER_HOLD_AT", "mid-upload")
    versions_at_kill: list[int] = []
    stored_at_kill: list[list[int]] = []
    ended_at_kill: list[int] = []
    manifest_at_kill: list[str] = []
    committed_at_kill: list[dict[int, int]] = []
    replacement: list[Child] = []
    learner_nices: list[set[int]] = []

    def strike(summary, children):
        learner = children["learner"]
        if fault.struck_ms or "holding at mid-upload" not in learner.text():
            return
        learner.kill()
        fault.mark()
        ended_at_kill.append(summary.ended)
        versions_at_kill.extend(v["policy_version"] for v in _versions(run_settings))
        minio = build_minio(run_settings)
        stored_at_kill.append(stored_versions(minio, run_settings, "default"))
        try:
            read_manifest(minio, run_settings, "default", 1)
            manifest_at_kill.append("stored")
        except Exception as error:  # noqa: BLE001 (asserted on below)
            manifest_at_kill.append(str(error))
        committed_at_kill.append(_committed(run_settings))
        env = {**settings_env(run_settings)}
        env.pop("WEBGYM_LEARNER_HOLD_AT", None)
        os.environ.pop("WEBGYM_LEARNER_HOLD_AT", None)
        restarted = Child.start("learner-restarted", learner.argv, env, learner.log.parent)
        children["learner"] = restarted
        replacement.append(restarted)
        restarted.wait_for("ready at v", 300)
        # It re-reads what the killed one never committed; its first version must come whatever
        # is left of the run (episodes keep going while this waits).
        restarted.wait_for("published default v1", 300)
        # Training on the CPU, every thread of it (torch's too) yields to the rollouts: without
        # that, its catch-up on the backlog the kill left starved the browsers (CI: page loads
        # timed out, three episodes aborted).
        learner_nices.append({t.nice for t in thread_stats(restarted.process.pid)})

    options = chaos_options(
        "lk", episodes=EPISODES, error_rate=0.0, seed=6, stall_timeout_s=300.0,
        learner_model=str(tiny_model), learner_args=LEARNER_ARGS,
    )  # fmt: skip
    result = chaos_run(run_settings, options, fault, strike, request)
    assert fault.struck_ms, "the learner never reached its first upload"
    assert ended_at_kill[0] < EPISODES, "the learner was killed after the rollouts ended"
    assert_none_aborted(result, EPISODES)  # the rollouts never wait on the learner
    assert learner_nices == [{19}], learner_nices

    # At the kill: the weights of its first version stored, but not its manifest; no event
    # announced them and the killed learner committed no offset.
    [stored] = stored_at_kill
    assert stored == [1] and versions_at_kill == [], (stored, versions_at_kill)
    assert len(manifest_at_kill) == 1 and "missing" in manifest_at_kill[0], manifest_at_kill
    assert committed_at_kill == [{}], committed_at_kill
    # Afterwards: versions 1..n, each announced once, every file verified against its manifest.
    versions = _versions(run_settings)
    numbers = [v["policy_version"] for v in versions]
    assert numbers == list(range(1, len(numbers) + 1)) and numbers, numbers
    manifests = [_check_manifest(run_settings, v, str(tiny_model)) for v in versions]
    trained = Counter(key for m in manifests for key in m.training["trained_samples"])
    assert trained and all(n == 1 for n in trained.values()), trained.most_common(3)
    # The replacement removed the interrupted upload before publishing over it.
    assert "deleted unannounced (interrupted) uploads of default: v[1]" in replacement[0].text()
