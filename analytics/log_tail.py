"""Following topics from the start (or from a point in time) without joining anyone's group.

A :class:`LogTail` assigns every partition of the topics it is given (or only ``partitions``),
from offset 0 or from the first offset at or after ``since_ms``, under a fresh group id that never
commits: attaching it changes nothing for the running system. It remembers where each partition
ended when it was opened, so a caller can tell when it has caught up with the log as it was then
(:meth:`LogTail.read_to_end`), and then keep following (:meth:`LogTail.poll`). Records that do not
decode come back with ``event_type`` None and the error, so views can count them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from infra.consumer import build_consumer, drain, watermarks
from infra.log_reader import LoggedEvent, message_timestamp_ms
from infra.settings import Settings
from schemas.serde import EventDecodeError, SchemaCatalog, default_catalog


@dataclass(frozen=True)
class TailEvent:
    suffix: str  # the topic without the prefix, e.g. "observations"
    event: LoggedEvent


class LogTail:
    def __init__(
        self,
        settings: Settings,
        suffixes: Iterable[str],
        since_ms: int | None = None,
        catalog: SchemaCatalog | None = None,
        timeout_s: float = 30.0,
        partitions: Iterable[int] | None = None,
    ):
        only = None if partitions is None else set(partitions)  # None: every partition
        self._catalog = catalog or default_catalog()
        self._suffix_of = {settings.topic(s): s for s in suffixes}
        self._consumer = build_consumer(
            settings,
            group_id=f"webgym-view-{uuid.uuid4().hex[:10]}",  # fresh, never commits
            client_id="webgym-view",
            **{"fetch.wait.max.ms": 100},
        )
        wanted: list[TopicPartition] = []
        self._ends: dict[tuple[str, int], int] = {}
        for topic in self._suffix_of:
            metadata = self._consumer.list_topics(topic, timeout=timeout_s).topics[topic]
            for partition in metadata.partitions:
                if only is not None and partition not in only:
                    continue
                _, high = watermarks(self._consumer, TopicPartition(topic, partition), timeout_s)
                self._ends[(topic, partition)] = high
                start = OFFSET_BEGINNING if since_ms is None else since_ms
                wanted.append(TopicPartition(topic, partition, start))
        if since_ms is not None:
            wanted = self._consumer.offsets_for_times(wanted, timeout=timeout_s)
        self._positions = {(tp.topic, tp.partition): max(tp.offset, 0) for tp in wanted}
        for tp in wanted:
            if since_ms is not None and tp.offset < 0:  # nothing at or after the time: the end
                self._positions[(tp.topic, tp.partition)] = self._ends[(tp.topic, tp.partition)]
                tp.offset = self._ends[(tp.topic, tp.partition)]
        self._consumer.assign(wanted)

    def caught_up(self) -> bool:
        """Everything that was in the log when the tail was opened has been returned."""
        return all(self._positions[key] >= end for key, end in self._ends.items())

    def poll(self, timeout_s: float = 0.5, max_events: int = 500) -> list[TailEvent]:
        """The next records (possibly none), in partition order within each partition."""
        out = []
        for message in drain(self._consumer, max_events, timeout_s):
            if message.error() is not None:
                continue
            topic, partition = message.topic(), message.partition()
            self._positions[(topic, partition)] = message.offset() + 1
            try:
                decoded = self._catalog.decode(message.value())
                event_type, record, error = decoded.event_type, decoded.record, None
            except EventDecodeError as exc:
                event_type, record, error = None, {}, str(exc)
            logged = LoggedEvent(
                partition,
                message.offset(),
                message.key(),
                event_type,
                record,
                list(message.headers() or []),
                error,
                message_timestamp_ms(message),
            )
            out.append(TailEvent(self._suffix_of[topic], logged))
        return out

    def read_to_end(self, timeout_s: float = 30.0) -> list[TailEvent]:
        """Every record up to where the log ended when the tail was opened (and perhaps more)."""
        events: list[TailEvent] = []
        idle = 0.0
        while not self.caught_up():
            batch = self.poll(0.5)
            events += batch
            idle = 0.0 if batch else idle + 0.5
            if idle > timeout_s:
                raise TimeoutError("the log stopped delivering before its end")
        return events

    def close(self) -> None:
        self._consumer.close()


def require_topics(settings: Settings, suffixes: Iterable[str]) -> None:
    """Raise an AnalyticsError naming the missing topics (and how to find the right prefix)
    when any of ``suffixes`` does not exist; a view calls this before it opens a tail."""
    from analytics.errors import AnalyticsError
    from infra.topic_admin import topic_states

    wanted = {settings.topic(suffix) for suffix in suffixes}
    missing = [
        s.name for s in topic_states(settings) if s.outcome == "missing" and s.name in wanted
    ]
    if missing:
        raise AnalyticsError(
            f"topics missing on {settings.bootstrap_servers}: {', '.join(sorted(missing))}. "
            f"Is WEBGYM_TOPIC_PREFIX ({settings.topic_prefix!r}) the one of your run? "
            "`webgym topics list` shows the table; `webgym topics create` creates them"
        )
