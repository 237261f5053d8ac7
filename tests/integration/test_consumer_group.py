"""Avro events through the real broker and a consumer group: commit, restart, resume."""

from __future__ import annotations

import uuid

from infra.producer import now_ms
from tests.integration.helpers import drain, of_episode


def _episode_event(episode_id: str, step: int) -> dict:
    return {
        "event_id": f"{episode_id}:{step}:finished",
        "episode_id": episode_id,
        "step": step,
        "ts": now_ms(),
        "kind": "finished" if step == 9 else "started",
        "task_id": "task-1",
    }


def test_restarted_member_resumes_right_after_the_last_commit(settings, producer, make_consumer):
    topic = settings.topic("episodes")
    episode_id = f"ep-{uuid.uuid4().hex[:8]}"  # one key: one partition, strict order
    for step in range(10):
        producer.produce(topic, episode_id, "episode", _episode_event(episode_id, step))
    producer.flush()
    group = f"group-{uuid.uuid4().hex[:8]}"

    first = make_consumer(group, [topic])
    mine = of_episode(episode_id)
    committed = drain(first, 4, where=mine)
    assert [e.record["step"] for e in committed] == [0, 1, 2, 3]
    first.commit()
    # Two more are read but never committed: at least once means they come again.
    uncommitted = drain(first, 2, where=mine)
    assert [e.record["step"] for e in uncommitted] == [4, 5]
    first.close()

    second = make_consumer(group, [topic])
    resumed = drain(second, 6, where=mine)
    assert [e.record["step"] for e in resumed] == [4, 5, 6, 7, 8, 9]
    assert resumed[0].offset == committed[-1].offset + 1
    assert resumed[0].event_type == "episode"
    assert resumed[0].key == episode_id.encode()
    second.commit()
    assert drain(second, 1, timeout=3, where=mine) == []


def test_a_new_group_reads_from_offset_zero(settings, producer, make_consumer):
    topic = settings.topic("episodes")
    episode_id = f"ep-{uuid.uuid4().hex[:8]}"
    producer.produce(topic, episode_id, "episode", _episode_event(episode_id, 0))
    producer.flush()
    analytics = make_consumer(f"analytics-{uuid.uuid4().hex[:8]}", [topic])
    seen = drain(analytics, 10_000, timeout=8)
    assert episode_id in {e.record["episode_id"] for e in seen}
