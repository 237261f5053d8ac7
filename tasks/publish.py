"""Publishing a task set to the compacted ``webgym.tasks`` topic, keyed by ``task_id``.

Idempotent: the topic's current state is read first (:class:`tasks.catalog.TaskCatalog`)
and only tasks that are new, or whose encoded record differs from the one on the topic, are
produced; loading the same file twice appends nothing. Tasks on the topic that the input lacks
are left alone (loading never deletes). Within one call, a later task with the same id wins, as
it would on the topic.

Delivery: at least once, with the idempotent producer of :mod:`infra.producer`; the call returns
only after every produced record was acknowledged, and raises :class:`DeliveryError` otherwise
(then loading again publishes what is still missing). Two loaders running at once may both
produce the same change: harmless, compaction keeps one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message

from infra.producer import EventProducer
from infra.settings import Settings
from infra.topic_admin import TopicMissing, build_admin, existing_partitions
from schemas.serde import SchemaCatalog, default_catalog
from tasks.catalog import TaskCatalog
from tasks.webgym_format import gc_paused

PublishProgress = Callable[[int, int], None]  # records acknowledged, records to produce
_NO_LEADER_YET = {
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
}
_REFRESH_BACKOFF_S = (0.1, 0.2, 0.5, 1.0, 2.0, 4.0)
_POLL_EVERY = 1000  # records produced between serving delivery reports


@dataclass(frozen=True)
class PublishCounts:
    new: int
    changed: int
    unchanged: int

    @property
    def produced(self) -> int:
        return self.new + self.changed


def publish_tasks(
    settings: Settings,
    tasks: Iterable[dict[str, Any]],
    *,
    producer: EventProducer | None = None,
    progress: PublishProgress | None = None,
    report: Callable[[str], None] = lambda line: None,
    flush_timeout_s: float = 120.0,
) -> PublishCounts:
    """Produce the tasks that are new or changed; return how many were new, changed, unchanged."""
    topic = settings.topic("tasks")
    current = _published(settings, report)
    report(f"comparing with the {len(current)} tasks on {topic}...")
    changes, counts = _changes(current, tasks, default_catalog())
    if not changes:
        return counts
    producer = producer or EventProducer.connect(settings, client_id="webgym-task-loader")
    acknowledged = 0

    def delivered(error: KafkaError | None, message: Message) -> None:
        nonlocal acknowledged
        acknowledged += error is None  # failures are collected and raised by flush()

    report(f"publishing {len(changes)} tasks to {topic}...")
    for produced, (task_id, value) in enumerate(changes.items(), 1):
        producer.produce_raw(topic, task_id, value, None, on_delivery=delivered)
        if produced % _POLL_EVERY == 0:
            producer.poll(0)
            if progress is not None:
                progress(acknowledged, len(changes))
    producer.flush(flush_timeout_s)
    if progress is not None:
        progress(acknowledged, len(changes))
    return counts


def read_published_tasks(settings: Settings) -> list[dict[str, Any]]:
    """Every task on the tasks topic now (the latest record per task_id)."""
    return _published(settings).tasks()


def _published(
    settings: Settings, report: Callable[[str], None] = lambda line: None
) -> TaskCatalog:
    topic = settings.topic("tasks")
    if topic not in existing_partitions(build_admin(settings), settings):
        raise TopicMissing(
            f"topic {topic} does not exist on {settings.bootstrap_servers}; create the topics "
            "with `webgym topics create` (or start the local stack with `webgym up`)"
        )
    report(f"reading the current task set from {topic}...")
    current = TaskCatalog(settings)
    backoffs = iter(_REFRESH_BACKOFF_S)
    while True:
        try:
            with gc_paused():
                current.refresh()
            return current
        except KafkaException as exc:
            # A topic created a moment ago may have no partition leader yet: wait, then retry.
            # The failure comes before any record is read, so the catalog is still empty.
            backoff_s = next(backoffs, None)
            if backoff_s is None or exc.args[0].code() not in _NO_LEADER_YET:
                raise
            time.sleep(backoff_s)


def _changes(
    current: TaskCatalog, tasks: Iterable[dict[str, Any]], schemas: SchemaCatalog
) -> tuple[dict[str, bytes], PublishCounts]:
    """The encoded records to produce, by task_id, and the counts."""
    latest = {task["task_id"]: task for task in tasks}
    changes: dict[str, bytes] = {}
    new = changed = unchanged = 0
    for task_id, task in latest.items():
        existing = current.cached(task_id)
        # Equal decoded records encode equally: a re-load of an unchanged file encodes nothing.
        if existing is not None and existing == task:
            unchanged += 1
            continue
        value = schemas.encode("task", task)
        if existing is None:
            new += 1
        elif schemas.encode("task", existing) == value:  # e.g. tuples for lists, extra keys
            unchanged += 1
            continue
        else:
            changed += 1
        changes[task_id] = value
    return changes, PublishCounts(new, changed, unchanged)
