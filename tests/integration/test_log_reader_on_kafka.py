"""The readers without a group on the real broker: exactly to the end, then onwards; single events
at their positions, and what retention leaves of them.

Each test writes to its own prefix, holding only the observations topic, so it can count every
record and delete some without touching the session's shared topics.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import TopicPartition

from infra.log_reader import (
    EventUnavailable,
    OffsetFetcher,
    TopicReader,
    read_topic,
    require_topics,
)
from infra.producer import EventProducer
from infra.settings import Settings
from infra.topic_admin import TopicMissing, build_admin, delete_topics, ensure_topic
from infra.topics import topic_spec
from tests.samples import sample


@pytest.fixture
def own(stack_settings: Settings) -> Iterator[Settings]:
    settings = stack_settings.model_copy(
        update={"topic_prefix": f"test-reader-{uuid.uuid4().hex[:8]}", "default_partitions": 3}
    )
    ensure_topic(settings, topic_spec("observations"))
    yield settings
    delete_topics(settings)


def write(settings: Settings, episode: str, steps: range) -> list[tuple[int, int, str]]:
    """Observations of ``episode`` (one partition); their (partition, offset, event id)."""
    producer = EventProducer.connect(settings, client_id="test-reader")
    placed: list[tuple[int, int, str]] = []
    for step in steps:
        event_id = f"{episode}:{step}:observation"
        record = {**sample("observation"), "episode_id": episode, "step": step}
        producer.produce(
            settings.topic("observations"),
            episode,
            "observation",
            {**record, "event_id": event_id},
            on_delivery=lambda _, m, e=event_id: placed.append((m.partition(), m.offset(), e)),
        )
    producer.flush()
    return placed


def ids(events) -> list[str]:
    return sorted(e.event.record["event_id"] for e in events)


def test_reads_exactly_to_the_end_then_follows(own):
    before = write(own, "ep-a", range(3)) + write(own, "ep-b", range(2))
    with TopicReader(own, ["observations"]) as reader:
        assert reader.total == 5
        after = write(own, "ep-c", range(2))  # after the ends were noted
        assert ids(reader.read_to_end()) == sorted(e for _, _, e in before)
        assert reader.caught_up()
        followed = []
        deadline = time.monotonic() + 30
        while len(followed) < 2 and time.monotonic() < deadline:
            followed += reader.poll(0.5)
        assert ids(followed) == sorted(e for _, _, e in after)
        assert reader.poll(0.5) == []


def test_since_starts_at_the_first_record_at_or_after_the_time(own):
    write(own, "ep-old", range(2))
    time.sleep(0.05)
    since_ms = int(time.time() * 1000)
    time.sleep(0.05)
    new = write(own, "ep-new", range(2))
    with TopicReader(own, ["observations"], since_ms) as reader:
        assert reader.total == 2
        assert ids(reader.read_to_end()) == sorted(e for _, _, e in new)


def test_a_missing_topic_reads_as_empty_and_require_topics_names_it(own):
    assert read_topic(own, "episodes") == []
    with pytest.raises(TopicMissing, match=rf"{own.topic_prefix}\.episodes.*webgym topics create"):
        require_topics(own, ["observations", "episodes"])
    require_topics(own, ["observations"])


def test_fetches_events_at_their_positions(own):
    placed = write(own, "ep-f", range(3))
    fetcher = OffsetFetcher(own, "observations")
    try:
        for partition, offset, event_id in placed:
            record = fetcher.fetch(partition, offset, event_id)
            assert record["event_id"] == event_id
        partition, offset, event_id = placed[0]
        with pytest.raises(EventUnavailable, match=f"holds {event_id}"):
            fetcher.fetch(partition, offset, "ep-f:9:observation")
        with pytest.raises(EventUnavailable, match="past the end of the log"):
            fetcher.fetch(partition, offset + 100, timeout_s=5.0)
    finally:
        fetcher.close()


def test_deleted_records_are_unavailable_and_deleted_partitions_read_at_once(own):
    placed = write(own, "ep-d", range(3))
    (partition,) = {p for p, _, _ in placed}
    first, event_id = placed[0][1], placed[0][2]
    admin = build_admin(own)
    everything = TopicPartition(own.topic("observations"), partition, placed[-1][1] + 1)
    for future in admin.delete_records([everything]).values():
        future.result(timeout=30)
    fetcher = OffsetFetcher(own, "observations")
    try:
        with pytest.raises(EventUnavailable, match=r"is gone \(retention\)|nothing arrived"):
            fetcher.fetch(partition, first, event_id, timeout_s=2.0)
    finally:
        fetcher.close()
    with TopicReader(own, ["observations"]) as reader:
        assert reader.caught_up() and reader.total == 0
    assert read_topic(own, "observations", timeout_s=2.0) == []
