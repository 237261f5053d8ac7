"""Routing poison records to the dead-letter topic.

Guarantee: :meth:`DeadLetterRouter.route` returns only after the broker acknowledged the dead
letter, so a consumer that then commits past the poison record has lost nothing. The dead letter
keeps the original key and value bytes and names its source (topic, partition, offset) and the
error twice: in the Avro ``dead_letter`` event and in record headers, so tools that never decode
Avro (kcat, the console consumer) can still see where it came from.
"""

from __future__ import annotations

from confluent_kafka import Message

from infra.producer import DeliveryCallback, EventProducer, now_ms
from infra.settings import Settings

HEADER_TOPIC = "webgym.source.topic"
HEADER_PARTITION = "webgym.source.partition"
HEADER_OFFSET = "webgym.source.offset"
HEADER_ERROR_CLASS = "webgym.error.class"
HEADER_ERROR = "webgym.error.message"
MAX_ERROR_CHARS = 2000


class OutOfOrderStep(ValueError):
    """A well-formed event whose step its consumer can tell was never asked for: far ahead of
    the episode, or behind it and not the event applied for that step. A poison record like one
    that does not decode (``schemas.serde.EventDecodeError``); a re-delivered copy of an event
    already applied is not one (consumers drop it by its ``event_id``)."""


def dead_letter_event_id(topic: str, partition: int, offset: int) -> str:
    """Deterministic: routing the same record twice yields the same event id."""
    return f"dlq:{topic}:{partition}:{offset}"


def dead_letter(
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    error: BaseException,
) -> tuple[dict, list[tuple[str, bytes]]]:
    """The ``dead_letter`` record and the headers for one poison record."""
    error_class = type(error).__name__
    error_text = str(error)[:MAX_ERROR_CHARS]
    record = {
        "event_id": dead_letter_event_id(topic, partition, offset),
        "ts": now_ms(),
        "source_topic": topic,
        "source_partition": partition,
        "source_offset": offset,
        "error_class": error_class,
        "error_message": error_text,
        "original_key": key,
        "original_value": value,
    }
    headers = [
        (HEADER_TOPIC, topic.encode()),
        (HEADER_PARTITION, str(partition).encode()),
        (HEADER_OFFSET, str(offset).encode()),
        (HEADER_ERROR_CLASS, error_class.encode()),
        (HEADER_ERROR, error_text.encode()),
    ]
    return record, headers


class DeadLetterRouter:
    def __init__(self, settings: Settings, producer: EventProducer):
        self.topic = settings.topic("dlq")
        self._producer = producer

    def route(self, message: Message, error: BaseException) -> None:
        """Write ``message`` to the dead-letter topic and wait for the acknowledgement."""
        self.route_nowait(message, error)
        self._producer.flush()

    def route_nowait(
        self,
        message: Message,
        error: BaseException,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        """Queue the dead letter; ``on_delivery`` runs once the broker answered."""
        record, headers = dead_letter(
            message.topic(),
            message.partition(),
            message.offset(),
            message.key(),
            message.value(),
            error,
        )
        self._producer.produce(
            self.topic, message.key(), "dead_letter", record, headers, on_delivery=on_delivery
        )
