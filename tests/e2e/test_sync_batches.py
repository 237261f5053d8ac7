"""Synchronous batches through the whole pipeline (the rollout benchmark's baseline): the next
batch starts only when every episode of the previous one ended, and within a batch the
latency-model policy answers each step in lock-step."""

from __future__ import annotations

import uuid
from collections import defaultdict

from commands.local_run import RunOptions, run_local
from infra.log_reader import read_topic


def test_lock_step_batches_run_one_after_another(run_settings):
    options = RunOptions(
        episodes=6,
        in_flight=3,
        policy="latency-model",
        policy_args=(
            "--latency-median", "0.05", "--sync-batch", "3",
            "--sites-count", "3", "--sites-seed", "0",
        ),
        sites=3,
        run_id=f"e2e-y{uuid.uuid4().hex[:6]}",
        sync_batch=3,
    )  # fmt: skip
    summary = run_local(run_settings, options, start_stack=False)
    assert summary.ended == 6 and summary.aborted == 0

    episodes = [e.record for e in read_topic(run_settings, "episodes")]
    batches: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for record in episodes:
        batch = record["episode_id"].rpartition("-")[0]
        batches[batch][record["kind"]].append(record["ts"])
    assert sorted(batches) == [f"{options.run_id}-b000", f"{options.run_id}-b001"]
    first, second = (batches[b] for b in sorted(batches))
    assert len(first["started"]) == len(second["started"]) == 3
    assert max(first["finished"]) <= min(second["started"])  # no overlap between batches

    # Lock-step: no answer to step k of a batch before every live episode of it asked for k.
    asked: dict[tuple[str, int], list[int]] = defaultdict(list)
    answered: dict[tuple[str, int], list[int]] = defaultdict(list)
    for record in (e.record for e in read_topic(run_settings, "ops.infer")):
        asked[(record["episode_id"].rpartition("-")[0], record["step"])].append(record["ts"])
    for record in (e.record for e in read_topic(run_settings, "inferences")):
        answered[(record["episode_id"].rpartition("-")[0], record["step"])].append(record["ts"])
    assert answered and set(answered) == set(asked)
    for key, times in answered.items():
        assert min(times) >= max(asked[key]), key
