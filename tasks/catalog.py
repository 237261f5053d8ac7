"""The task set as the stream processors and the task publisher see it: the compacted
``webgym.tasks`` topic, in memory.

``refresh()`` reads every record appended since the last call (the first call reads the topic from
the start), so tasks published while the processors run become available at the next refresh;
``get`` refreshes once on a miss. The latest record per ``task_id`` wins, as compaction keeps it;
a tombstone (empty value) removes the task. A record that does not decode is skipped with a logged
error (the task loader validates what it publishes; it is not the processors' job to repair it).
Blocking (it polls a Kafka consumer): call it from a thread in async code.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from infra.consumer import build_consumer, watermarks
from infra.settings import Settings
from schemas.serde import EventDecodeError, SchemaCatalog, default_catalog

log = logging.getLogger(__name__)


class TaskCatalog:
    def __init__(self, settings: Settings, catalog: SchemaCatalog | None = None):
        self._settings = settings
        self._schemas = catalog or default_catalog()
        self._topic = settings.topic("tasks")
        self._tasks: dict[str, dict[str, Any]] = {}
        self._next: dict[int, int] = {}  # partition -> next offset to read
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._tasks)

    def tasks(self) -> list[dict[str, Any]]:
        return list(self._tasks.values())

    def cached(self, task_id: str) -> dict[str, Any] | None:
        """The task if it was read already; never blocks."""
        return self._tasks.get(task_id)

    def get(self, task_id: str) -> dict[str, Any] | None:
        task = self._tasks.get(task_id)
        if task is None:
            self.refresh()
            task = self._tasks.get(task_id)
        return task

    def refresh(self, timeout_s: float = 10.0) -> int:
        """Read what is new on the topic; return how many records were read."""
        with self._lock:
            consumer = build_consumer(
                self._settings,
                group_id=f"webgym-task-catalog-{uuid.uuid4().hex[:8]}",  # never commits
                client_id="webgym-task-catalog",
            )
            try:
                return self._read_new(consumer, timeout_s)
            finally:
                consumer.close()

    def _read_new(self, consumer, timeout_s: float) -> int:
        metadata = consumer.list_topics(self._topic, timeout=timeout_s).topics[self._topic]
        if metadata.error is not None:
            raise RuntimeError(f"cannot read {self._topic}: {metadata.error.str()}")
        ends = {}
        for partition in metadata.partitions:
            _, high = watermarks(consumer, TopicPartition(self._topic, partition), timeout_s)
            if high > self._next.get(partition, 0):
                ends[partition] = high
        if not ends:
            return 0
        consumer.assign(
            [TopicPartition(self._topic, p, self._next.get(p, OFFSET_BEGINNING)) for p in ends]
        )
        read = 0
        while any(self._next.get(p, 0) < end for p, end in ends.items()):
            message = consumer.poll(timeout_s)
            if message is None:
                raise TimeoutError(f"{self._topic} did not deliver up to its end in {timeout_s}s")
            if message.error() is not None:
                raise RuntimeError(f"reading {self._topic}: {message.error().str()}")
            self._next[message.partition()] = message.offset() + 1
            read += 1
            self._apply(message.key(), message.value(), message.offset())
        return read

    def _apply(self, key: bytes | None, value: bytes | None, offset: int) -> None:
        if value is None:
            if key is not None:
                self._tasks.pop(key.decode(), None)
            return
        try:
            task = self._schemas.decode(value, "task").record
        except EventDecodeError as error:
            log.error("skipping undecodable task record at offset %d: %s", offset, error)
            return
        self._tasks[task["task_id"]] = task
