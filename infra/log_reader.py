"""Reading a topic from its first offset to its current end: the log as a list of events.

For checks and reports over a finished run (tests, ``webgym run``'s own checks, later the
invariant checker): no consumer group, nothing committed. Records that do not decode are returned
as ``LoggedEvent`` with ``event_type`` ``None`` and the error, so a checker can count them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_NOT_AVAILABLE, TopicPartition

from infra.consumer import build_consumer, watermarks
from infra.settings import Settings
from schemas.serde import EventDecodeError, SchemaCatalog, default_catalog


@dataclass(frozen=True)
class LoggedEvent:
    partition: int
    offset: int
    key: bytes | None
    event_type: str | None
    record: dict[str, Any]
    headers: list[tuple[str, bytes]]
    error: str | None = None
    # The Kafka message timestamp (the producer's create time unless the topic says otherwise).
    timestamp_ms: int | None = None


def read_topic(
    settings: Settings,
    suffix: str,
    catalog: SchemaCatalog | None = None,
    timeout_s: float = 30.0,
) -> list[LoggedEvent]:
    """Every record of ``settings.topic(suffix)`` up to its end now, by partition and offset."""
    catalog = catalog or default_catalog()
    topic = settings.topic(suffix)
    consumer = build_consumer(
        settings,
        group_id=f"webgym-log-reader-{uuid.uuid4().hex[:8]}",
        client_id="webgym-log-reader",
    )
    try:
        partitions = consumer.list_topics(topic, timeout=timeout_s).topics[topic].partitions
        ends = {}
        for partition in partitions:
            low, high = watermarks(consumer, TopicPartition(topic, partition), timeout_s)
            if high > low:
                ends[partition] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        events: list[LoggedEvent] = []
        done = {p: False for p in ends}
        while not all(done.values()):
            message = consumer.poll(timeout_s)
            if message is None:
                raise TimeoutError(f"{topic} stopped delivering before its end")
            if message.error() is not None:
                raise RuntimeError(f"reading {topic}: {message.error().str()}")
            partition, offset = message.partition(), message.offset()
            if offset + 1 >= ends[partition]:
                done[partition] = True
            headers = list(message.headers() or [])
            timestamp_ms = message_timestamp_ms(message)
            try:
                decoded = catalog.decode(message.value())
                events.append(
                    LoggedEvent(
                        partition,
                        offset,
                        message.key(),
                        decoded.event_type,
                        decoded.record,
                        headers,
                        timestamp_ms=timestamp_ms,
                    )
                )
            except EventDecodeError as error:
                events.append(
                    LoggedEvent(
                        partition,
                        offset,
                        message.key(),
                        None,
                        {},
                        headers,
                        str(error),
                        timestamp_ms,
                    )
                )
        return sorted(events, key=lambda e: (e.partition, e.offset))
    finally:
        consumer.close()


def message_timestamp_ms(message) -> int | None:
    """The Kafka timestamp of a consumed message in epoch ms, or None when it has none."""
    kind, value = message.timestamp()
    return None if kind == TIMESTAMP_NOT_AVAILABLE else value
