"""Consuming webgym events from Kafka in a consumer group.

Delivery guarantee: at least once. Auto-commit is off; :meth:`EventConsumer.commit` commits the
positions of every record returned so far, so a caller that commits only after it has handled
(and flushed the outputs of) those records never skips one. After a crash, the group resumes
right after the last committed record, so handlers must be idempotent on ``event_id``.

Poison records (bytes that do not decode as a webgym event) never reach the caller and never
stall the partition: they go to the dead-letter topic first, then consumption moves on.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_STORED,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from infra.dead_letters import DeadLetterRouter
from infra.kafka_config import WORKER_SESSION_TIMEOUT_MS, client_config
from infra.settings import Settings
from schemas.serde import EventDecodeError, SchemaCatalog, default_catalog

log = logging.getLogger(__name__)


def build_consumer(settings: Settings, group_id: str, client_id: str, **overrides: Any) -> Consumer:
    """A confluent-kafka consumer with the project's reliability defaults."""
    config: dict[str, Any] = {
        "group.id": group_id,
        "client.id": client_id,
        # Commit explicitly after processing: at least once, never at most once.
        "enable.auto.commit": False,
        # A new group reads the whole log: replay and late-attached analytics start at 0.
        "auto.offset.reset": "earliest",
        # Records may carry screenshots; fetch them whole.
        "max.partition.fetch.bytes": 16 * 1024 * 1024,
        # Fetch and commit requests go out at once (no Nagle / delayed-ACK stalls).
        "socket.nagle.disable": True,
    }
    config.update(overrides)
    return Consumer(client_config(settings.bootstrap_servers, config))


def co_partitioned_group(settings: Settings) -> dict[str, Any]:
    """Consumer settings of a worker group whose members must get the same partition numbers of
    every topic they read (an episode's operations meet its browser context; its requests meet
    its screenshots).

    With ``settings.group_protocol`` "consumer" (KIP-848, Kafka 4.0+): the server-side ``range``
    assignor, which keeps co-partitioning and, since every member subscribes to the same topics,
    moves only the partitions a joining or leaving member changes: the rebalance callbacks see
    increments, and the other members keep what they hold. With "classic": the eager range
    assignor, where any change revokes every partition of every member."""
    if settings.group_protocol == "consumer":
        return {"group.protocol": "consumer", "group.remote.assignor": "range"}
    return {
        "partition.assignment.strategy": "range",
        "session.timeout.ms": WORKER_SESSION_TIMEOUT_MS,
    }


def commit_now(consumer: Consumer, attempts: int = 3) -> None:
    """Commit the stored offsets synchronously (a revocation's last word). A stale member epoch
    (the consumer protocol moved on while the commit was in flight) is retried; no stored offset
    is not an error; other failures are logged, and the partition's next owner redoes the
    records after the last commit (at least once)."""
    for attempt in range(1, attempts + 1):
        try:
            consumer.commit(asynchronous=False)
            return
        except KafkaException as exc:
            code = exc.args[0].code()
            if code == KafkaError._NO_OFFSET:
                return
            if code == KafkaError.STALE_MEMBER_EPOCH and attempt < attempts:
                time.sleep(0.1 * attempt)
                continue
            log.warning("commit on revoke failed: %s", exc)
            return


# Answers a broker gives while a partition's leadership is still settling (a topic created a
# moment ago, a broker that just restarted): worth asking again, not an error.
LEADERSHIP_SETTLING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
)


def watermarks(consumer: Consumer, partition: TopicPartition, timeout_s: float) -> tuple[int, int]:
    """The partition's low and high offsets, asked again while its leadership settles.

    Guarantee: returns the broker's watermarks, or raises the broker's error once ``timeout_s``
    has passed (or at once for an error that is not about leadership).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return consumer.get_watermark_offsets(partition, max(timeout_s, 1.0))
        except KafkaException as exc:
            if exc.args[0].code() not in LEADERSHIP_SETTLING or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def drain(consumer: Consumer, max_messages: int, timeout_s: float) -> list[Message]:
    """What has arrived, without waiting for a batch to fill: up to ``timeout_s`` for the first
    message, then whatever else is already fetched (up to ``max_messages``).

    ``Consumer.consume(n, timeout)`` returns only when ``n`` messages are there or the timeout
    passes, which adds up to the whole timeout to every hop when traffic is light.
    """
    first = consumer.poll(timeout_s)
    if first is None:
        return []
    return [first, *consumer.consume(max_messages - 1, 0)] if max_messages > 1 else [first]


@dataclass(frozen=True)
class ConsumedEvent:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    event_type: str
    record: dict[str, Any]
    headers: list[tuple[str, bytes]]


class EventConsumer:
    """Decodes records; sends the ones that do not decode to the dead-letter topic."""

    def __init__(
        self,
        consumer: Consumer,
        dead_letters: DeadLetterRouter,
        catalog: SchemaCatalog | None = None,
    ):
        self._consumer = consumer
        self._dead_letters = dead_letters
        self._catalog = catalog or default_catalog()
        self.dead_lettered = 0

    def subscribe(self, topics: list[str]) -> None:
        self._consumer.subscribe(topics)

    def assign(self, topic: str, offsets: dict[int, int], timeout_s: float = 30.0) -> list[int]:
        """Read every partition of ``topic`` (no rebalancing): from ``offsets[p]`` where given,
        else from the group's committed offset, else from the start. Returns the partitions."""
        partitions = sorted(
            self._consumer.list_topics(topic, timeout=timeout_s).topics[topic].partitions
        )
        self._consumer.assign(
            [TopicPartition(topic, p, offsets.get(p, OFFSET_STORED)) for p in partitions]
        )
        return partitions

    def commit_offsets(self, topic: str, offsets: dict[int, int]) -> None:
        """Synchronously commit ``offsets`` (partition -> next offset to read) for the group."""
        if offsets:
            self._consumer.commit(
                offsets=[TopicPartition(topic, p, o) for p, o in sorted(offsets.items())],
                asynchronous=False,
            )

    def poll(self, timeout: float = 1.0) -> ConsumedEvent | None:
        """The next decodable event, or None when nothing (decodable) arrived in time."""
        message = self._consumer.poll(timeout)
        if message is None:
            return None
        return self._accept(message)

    def consume(self, max_events: int = 100, timeout: float = 1.0) -> list[ConsumedEvent]:
        """Up to ``max_events`` decodable events from one fetch."""
        messages = drain(self._consumer, max_events, timeout)
        events = []
        for message in messages:
            event = self._accept(message)
            if event is not None:
                events.append(event)
        return events

    def commit(self) -> None:
        """Synchronously commit the position after every record returned so far."""
        try:
            self._consumer.commit(asynchronous=False)
        except KafkaException as exc:
            # Nothing consumed since the last commit is not an error worth stopping for.
            if exc.args[0].code() != KafkaError._NO_OFFSET:
                raise

    def close(self) -> None:
        self._consumer.close()

    def _accept(self, message: Message) -> ConsumedEvent | None:
        error = message.error()
        if error is not None:
            if error.fatal():
                raise KafkaException(error)
            log.warning("consumer error (continuing): %s", error.str())
            return None
        try:
            decoded = self._catalog.decode(message.value())
        except EventDecodeError as exc:
            log.warning(
                "poison record %s[%d]@%d -> %s: %s",
                message.topic(),
                message.partition(),
                message.offset(),
                self._dead_letters.topic,
                exc,
            )
            self._dead_letters.route(message, exc)
            self.dead_lettered += 1
            return None
        return ConsumedEvent(
            topic=message.topic(),
            partition=message.partition(),
            offset=message.offset(),
            key=message.key(),
            event_type=decoded.event_type,
            record=decoded.record,
            headers=list(message.headers() or []),
        )
