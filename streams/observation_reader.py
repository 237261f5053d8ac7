"""Fetching one event by its place in the log (partition and offset).

Trajectories name where each step's observation, inference request and inference lie, so judges,
replay and the learner read a screenshot or the exact context a policy saw straight from the log,
without a side store. Blocking (a Kafka consumer with manual assignment, no group, nothing
committed); thread-safe; call it from a thread in async code. Raises :class:`EventUnavailable`
when the record is gone (retention) or is not the event asked for.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

from confluent_kafka import TopicPartition

from infra.consumer import build_consumer
from infra.settings import Settings
from schemas.serde import EventDecodeError, SchemaCatalog, default_catalog


class EventUnavailable(LookupError):
    pass


ObservationUnavailable = EventUnavailable  # the name judges know it by


class EventReader:
    def __init__(
        self,
        settings: Settings,
        suffix: str,
        event_type: str,
        catalog: SchemaCatalog | None = None,
    ):
        self._topic = settings.topic(suffix)
        self._event_type = event_type
        self._schemas = catalog or default_catalog()
        self._consumer = build_consumer(
            settings,
            group_id=f"webgym-event-reader-{uuid.uuid4().hex[:8]}",  # never commits
            client_id="webgym-event-reader",
            # Random access: after each record the consumer's next fetch sits at the end of the
            # log, and the broker would hold it (and the next assign) for fetch.wait.max.ms.
            # Fetch one record batch at a time, not megabytes of the screenshots that follow it
            # (the broker still returns a first batch larger than this whole).
            **{
                "fetch.wait.max.ms": 5,
                "max.partition.fetch.bytes": 64 * 1024,
                "queued.min.messages": 1,
            },
        )
        self._lock = threading.Lock()

    def fetch(
        self, partition: int, offset: int, event_id: str | None = None, timeout_s: float = 10.0
    ) -> dict[str, Any]:
        if partition < 0 or offset < 0:
            raise EventUnavailable(f"no log position recorded for {event_id or 'it'}")
        with self._lock:
            self._consumer.assign([TopicPartition(self._topic, partition, offset)])
            try:
                message = self._consumer.poll(timeout_s)
            finally:
                # Assigned, the consumer would keep fetching the partition every 5 ms between
                # reads: hundreds of requests a second per reader, taking the broker's CPU.
                self._consumer.unassign()
        where = f"{self._topic}[{partition}]@{offset}"
        if message is None or message.error() is not None:
            problem = "nothing arrived" if message is None else message.error().str()
            raise EventUnavailable(f"cannot read {where}: {problem}")
        if message.offset() != offset:
            raise EventUnavailable(f"{where} is gone (retention); got {message.offset()}")
        try:
            record = self._schemas.decode(message.value(), self._event_type).record
        except EventDecodeError as error:
            raise EventUnavailable(f"{where} does not decode: {error}") from error
        if event_id is not None and record["event_id"] != event_id:
            raise EventUnavailable(f"{where} holds {record['event_id']}, not {event_id}")
        return record

    def close(self) -> None:
        self._consumer.close()


class ObservationReader(EventReader):
    def __init__(self, settings: Settings, catalog: SchemaCatalog | None = None):
        super().__init__(settings, "observations", "observation", catalog)
