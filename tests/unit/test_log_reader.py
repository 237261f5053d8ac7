"""The readers without a group, over an in-memory log: which records each returns, and when."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TopicPartition

import infra.log_reader as log_reader
from infra.log_reader import (
    EventUnavailable,
    LogStalled,
    OffsetFetcher,
    TopicReader,
    read_topic,
)
from infra.settings import Settings
from schemas.serde import default_catalog
from tests.samples import TS, sample

SETTINGS = Settings(topic_prefix="t")
CATALOG = default_catalog()


def observation(step: int) -> bytes:
    return CATALOG.encode("observation", {**sample("observation"), "event_id": f"ep:{step}:o"})


class Record:
    """What confluent-kafka's Message answers, for one stored record."""

    def __init__(self, topic: str, partition: int, offset: int, value: bytes, ts: int) -> None:
        self._at = (topic, partition, offset)
        self._value, self._ts = value, ts

    def topic(self) -> str:
        return self._at[0]

    def partition(self) -> int:
        return self._at[1]

    def offset(self) -> int:
        return self._at[2]

    def key(self) -> bytes:
        return b"ep"

    def value(self) -> bytes:
        return self._value

    def headers(self) -> None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return TIMESTAMP_CREATE_TIME, self._ts

    def error(self) -> None:
        return None


class FakeLog:
    """Topics of partitions of records; ``low`` is the first offset retention kept."""

    def __init__(self) -> None:
        self.partitions: dict[str, dict[int, list[Record]]] = {}
        self.low: dict[tuple[str, int], int] = {}
        self.consumers: list[FakeConsumer] = []

    def topic(self, suffix: str, partitions: int) -> str:
        name = SETTINGS.topic(suffix)
        self.partitions[name] = {p: [] for p in range(partitions)}
        return name

    def append(self, topic: str, partition: int, value: bytes, ts: int = TS) -> int:
        records = self.partitions[topic][partition]
        offset = len(records)
        records.append(Record(topic, partition, offset, value, ts))
        return offset

    def consumer(self, settings, group_id, client_id, **overrides) -> FakeConsumer:
        made = FakeConsumer(self)
        self.consumers.append(made)
        return made


class FakeConsumer:
    """Assigned partitions read in turn; a position below retention resets to the earliest."""

    def __init__(self, log: FakeLog) -> None:
        self.log = log
        self.positions: dict[tuple[str, int], int] = {}
        self.reads = 0
        self.closed = False

    def list_topics(self, topic: str, timeout: float) -> SimpleNamespace:
        partitions = dict.fromkeys(self.log.partitions.get(topic, {}))  # missing: none
        return SimpleNamespace(topics={topic: SimpleNamespace(partitions=partitions)})

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float) -> tuple[int, int]:
        high = len(self.log.partitions[tp.topic][tp.partition])
        return self.log.low.get((tp.topic, tp.partition), 0), high

    def offsets_for_times(self, wanted: list[TopicPartition], timeout: float):
        found = []
        for tp in wanted:
            records = self.log.partitions[tp.topic][tp.partition]
            at = next((r.offset() for r in records if r.timestamp()[1] >= tp.offset), -1)
            found.append(TopicPartition(tp.topic, tp.partition, at))
        return found

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.positions = {(tp.topic, tp.partition): tp.offset for tp in partitions}

    def unassign(self) -> None:
        self.positions = {}

    def poll(self, timeout: float) -> Record | None:
        for (topic, partition), position in self.positions.items():
            position = max(position, self.log.low.get((topic, partition), 0))
            records = self.log.partitions[topic][partition]
            if position < len(records):
                self.positions[(topic, partition)] = position + 1
                self.reads += 1
                return records[position]
        return None

    def consume(self, n: int, timeout: float) -> list[Record]:
        out = []
        while len(out) < n and (record := self.poll(0)) is not None:
            out.append(record)
        return out

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def log(monkeypatch) -> FakeLog:
    fake = FakeLog()
    monkeypatch.setattr(log_reader, "build_consumer", fake.consumer)
    return fake


def steps(events) -> list[tuple[int, int]]:
    return [(e.event.partition, e.event.offset) for e in events]


def test_reads_exactly_to_the_ends_noted_at_opening_then_follows(log):
    topic = log.topic("observations", 2)
    for step in range(3):
        log.append(topic, 0, observation(step))
    log.append(topic, 1, observation(9))
    with TopicReader(SETTINGS, ["observations"]) as reader:
        assert reader.total == 4 and not reader.caught_up()
        log.append(topic, 0, observation(3))  # written after the reader opened
        events = reader.read_to_end()
        assert sorted(steps(events)) == [(0, 0), (0, 1), (0, 2), (1, 0)]
        assert reader.caught_up()
        assert {e.suffix for e in events} == {"observations"}
        assert events[0].event.record["event_id"].startswith("ep:")
        assert events[0].event.timestamp_ms == TS
        assert steps(reader.poll(0)) == [(0, 3)]  # held back, then returned once
        assert reader.poll(0) == []


def test_empty_and_fully_deleted_partitions_are_read_at_once(log):
    topic = log.topic("episodes", 2)
    for step in range(2):
        log.append(topic, 1, observation(step))
    log.low[(topic, 1)] = 2  # retention took both
    with TopicReader(SETTINGS, ["episodes"]) as reader:
        assert reader.caught_up() and reader.total == 0
        assert reader.read_to_end(idle_limit_s=0) == []


def test_a_missing_topic_reads_as_empty(log):
    assert read_topic(SETTINGS, "observations") == []


def test_since_starts_at_the_first_record_at_or_after_it_except_reference_topics(log):
    observations = log.topic("observations", 2)
    tasks = log.topic("tasks", 1)
    for step in range(4):
        log.append(observations, 0, observation(step), ts=TS + step)
    log.append(observations, 1, observation(9), ts=TS)  # before the time: none to read
    log.append(tasks, 0, observation(0), ts=TS - 1000)
    with TopicReader(SETTINGS, ["observations", "tasks"], TS + 2, from_start=["tasks"]) as reader:
        assert reader.total == 3
        events = reader.read_to_end()
    assert sorted((e.suffix, e.event.offset) for e in events) == [
        ("observations", 2),
        ("observations", 3),
        ("tasks", 0),
    ]


def test_only_the_partitions_asked_for(log):
    topic = log.topic("observations", 3)
    for partition in range(3):
        log.append(topic, partition, observation(partition))
    with TopicReader(SETTINGS, ["observations"], partitions=[1]) as reader:
        assert steps(reader.read_to_end()) == [(1, 0)]


def test_undecodable_records_come_back_with_their_error(log):
    topic = log.topic("observations", 1)
    log.append(topic, 0, b"not avro")
    (event,) = read_topic(SETTINGS, "observations")
    assert event.event_type is None and event.record == {} and event.error


def test_read_topic_sorts_by_partition_and_offset(log):
    topic = log.topic("observations", 2)
    log.append(topic, 1, observation(0))
    log.append(topic, 0, observation(1))
    log.append(topic, 1, observation(2))
    events = read_topic(SETTINGS, "observations")
    assert [(e.partition, e.offset) for e in events] == [(0, 0), (1, 0), (1, 1)]
    assert all(consumer.closed for consumer in log.consumers)


def test_a_log_that_stops_before_its_end_raises_log_stalled(log):
    topic = log.topic("observations", 1)
    log.append(topic, 0, observation(0))
    log.append(topic, 0, observation(1))
    with TopicReader(SETTINGS, ["observations"]) as reader:
        log.partitions[topic][0].pop()  # the broker said 2 records; only 1 comes
        with pytest.raises(LogStalled, match="stopped delivering"):
            reader.read_to_end(idle_limit_s=0)
    assert issubclass(LogStalled, TimeoutError)


def test_fetch_returns_the_event_and_remembers_it(log):
    topic = log.topic("observations", 2)
    log.append(topic, 1, observation(0))
    offset = log.append(topic, 1, observation(1))
    fetcher = OffsetFetcher(SETTINGS, "observations")
    consumer = log.consumers[0]
    first = fetcher.fetch(1, offset, "ep:1:o")
    first["screenshot"] = b"changed by the caller"
    again = fetcher.fetch(1, offset, "ep:1:o")
    assert consumer.reads == 1  # from the cache
    assert again["screenshot"] == sample("observation")["screenshot"]
    assert consumer.positions == {}  # unassigned between reads
    with pytest.raises(EventUnavailable, match="holds ep:1:o, not ep:0:o"):
        fetcher.fetch(1, offset, "ep:0:o")
    fetcher.close()
    assert consumer.closed


def test_the_cache_keeps_the_last_few(log):
    topic = log.topic("observations", 1)
    for step in range(3):
        log.append(topic, 0, observation(step))
    fetcher = OffsetFetcher(SETTINGS, "observations", cache_size=2)
    consumer = log.consumers[0]
    for offset in (0, 1, 2, 2, 1):
        fetcher.fetch(0, offset)
    assert consumer.reads == 3
    fetcher.fetch(0, 0)  # evicted first
    assert consumer.reads == 4


def test_fetch_refuses_what_it_cannot_vouch_for(log):
    topic = log.topic("observations", 1)
    log.append(topic, 0, observation(0))
    log.append(topic, 0, b"not avro")
    log.append(topic, 0, observation(2))
    fetcher = OffsetFetcher(SETTINGS, "observations")
    with pytest.raises(EventUnavailable, match="no log position recorded for ep:0:o"):
        fetcher.fetch(-1, -1, "ep:0:o")
    with pytest.raises(EventUnavailable, match="does not decode"):
        fetcher.fetch(0, 1)
    with pytest.raises(EventUnavailable, match="nothing arrived"):
        fetcher.fetch(0, 3, timeout_s=0)
    log.low[(topic, 0)] = 2  # retention
    with pytest.raises(EventUnavailable, match=r"t\.observations\[0\]@0 is gone \(retention\)"):
        fetcher.fetch(0, 0)
    tasks = log.topic("tasks", 1)
    log.append(tasks, 0, observation(0))
    with pytest.raises(EventUnavailable, match="does not decode"):
        OffsetFetcher(SETTINGS, "tasks").fetch(0, 0)  # the table says tasks hold tasks
