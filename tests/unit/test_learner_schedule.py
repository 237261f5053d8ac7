"""The learner's schedule: whole records per step, the staleness bound, and the input offsets
a version records (the first record not yet trained, per partition)."""

from __future__ import annotations

from collections import deque

from learner.loop import PendingRecord, input_offsets, next_batch
from learner.samples import Sample


def _record(partition: int, offset: int, steps: int, version: int = 0, gone=()) -> PendingRecord:
    episode = f"ep-{partition}-{offset}"
    samples = [Sample(episode, s, version, [], "r") for s in range(1, steps + 1)]
    return PendingRecord(partition, offset, samples, [f"{episode}:{s}" for s in gone])


def test_a_step_takes_whole_records_until_it_has_enough_samples():
    pending = deque([_record(0, 0, 2), _record(1, 0, 2), _record(0, 1, 3)])
    placed, dropped = next_batch(pending, fresh_per_step=3, version=0, max_staleness=2)
    assert [(s.episode_id, p, o) for s, p, o in placed] == [
        ("ep-0-0", 0, 0), ("ep-0-0", 0, 0), ("ep-1-0", 1, 0), ("ep-1-0", 1, 0)
    ]  # fmt: skip
    assert dropped == [] and [r.offset for r in pending] == [1]
    placed, _ = next_batch(pending, fresh_per_step=8, version=0, max_staleness=2)
    assert len(placed) == 3 and not pending  # a short tail is trained whole when asked


def test_stale_and_vanished_samples_are_dropped_and_named():
    pending = deque([_record(0, 0, 2, version=1, gone=[3]), _record(0, 1, 1, version=5)])
    placed, dropped = next_batch(pending, fresh_per_step=3, version=6, max_staleness=2)
    assert [s.episode_id for s, _, _ in placed] == ["ep-0-1"]
    assert dropped == ["ep-0-0:3", "ep-0-0:1", "ep-0-0:2"]


def test_input_offsets_stop_at_the_first_untrained_record():
    pending = deque([_record(1, 4, 1), _record(0, 9, 1), _record(1, 6, 1)])
    positions = {0: 10, 1: 7, 2: 3}  # after the last record read per partition
    assert input_offsets(positions, pending) == {0: 9, 1: 4, 2: 3}
    assert input_offsets(positions, deque()) == positions
