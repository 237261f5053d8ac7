"""Producing webgym events to Kafka.

Delivery guarantee: at least once, with no duplicates from producer retries. The producer is
idempotent (``enable.idempotence=true`` implies ``acks=all`` and in-order retries within a
partition), and :meth:`EventProducer.flush` raises :class:`DeliveryError` if any record of the
batch was not acknowledged, so a caller never commits input offsets past an event that was lost.
Assumes topics exist (``webgym topics create``) and the broker accepts messages up to
``message.max.bytes`` below.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from infra.kafka_config import client_config
from infra.settings import Settings
from infra.topics import LARGE_MESSAGE_BYTES
from schemas.serde import SchemaCatalog, default_catalog

Headers = list[tuple[str, bytes]]
DeliveryCallback = Callable[[KafkaError | None, Message], None]


class DeliveryError(RuntimeError):
    """The broker did not acknowledge one or more records; they may be lost."""


def build_producer(settings: Settings, client_id: str, **overrides: Any) -> Producer:
    """A confluent-kafka producer with the project's reliability defaults."""
    config: dict[str, Any] = {
        "client.id": client_id,
        # Retries cannot duplicate or reorder records within a partition.
        "enable.idempotence": True,
        # A record counts as sent only when every in-sync replica has it.
        "acks": "all",
        # Observations carry screenshots; the topics allow the same size.
        "message.max.bytes": LARGE_MESSAGE_BYTES,
        # Batch for at most 1 ms: a lone event of a step waits the whole linger before it is
        # sent, and every hop of a step pays it (bench.rollout measures Kafka's added time).
        "linger.ms": 1,
        # Send small requests at once: with Nagle and delayed ACKs a step can stall for 40 ms.
        "socket.nagle.disable": True,
        # Partition by murmur2 of the key, as the Java client and Faust (aiokafka) do: an episode
        # keeps one partition number on every topic, whichever client wrote the event.
        "partitioner": "murmur2_random",
    }
    config.update(overrides)
    return Producer(client_config(settings.bootstrap_servers, config))


def now_ms() -> int:
    return int(time.time() * 1000)


class EventProducer:
    """Encodes events with their schema and checks every delivery report."""

    def __init__(self, producer: Producer, catalog: SchemaCatalog | None = None):
        self._producer = producer
        self._catalog = catalog or default_catalog()
        self._failures: list[str] = []

    @classmethod
    def connect(cls, settings: Settings, client_id: str, **overrides: Any) -> EventProducer:
        return cls(build_producer(settings, client_id, **overrides))

    def produce(
        self,
        topic: str,
        key: str | bytes | None,
        event_type: str,
        record: dict[str, Any],
        headers: Headers | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        """Queue one event; encoding errors raise here, delivery errors at :meth:`flush`.

        ``on_delivery(error, message)`` runs from :meth:`poll` or :meth:`flush` once the broker
        answered, for callers that act on each acknowledgement (e.g. to commit inputs).
        """
        value = self._catalog.encode(event_type, record)
        self.produce_raw(topic, key, value, headers, on_delivery)

    def produce_raw(
        self,
        topic: str,
        key: str | bytes | None,
        value: bytes | None,
        headers: Headers | None,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        def delivered(error: KafkaError | None, message: Message) -> None:
            self._on_delivery(error, message)
            if on_delivery is not None:
                on_delivery(error, message)

        while True:
            try:
                self._producer.produce(
                    topic, value=value, key=key, headers=headers, on_delivery=delivered
                )
                return
            except BufferError:
                # Local queue full: serve delivery reports to make room, then try again.
                self._producer.poll(0.1)

    def poll(self, timeout: float = 0) -> None:
        self._producer.poll(timeout)

    def flush(self, timeout: float = 30.0) -> None:
        """Wait for every queued record; raise DeliveryError naming any that failed."""
        remaining = self._producer.flush(timeout)
        failures, self._failures = self._failures, []
        if remaining:
            failures.append(f"{remaining} records still unacknowledged after {timeout}s")
        if failures:
            raise DeliveryError("; ".join(failures[:5]) + (" ..." if len(failures) > 5 else ""))

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._failures.append(
                f"{message.topic()} key={message.key()!r}: {error.str()} (code {error.code()})"
            )
