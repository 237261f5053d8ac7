"""Reading Kafka without a consumer group: whole topics, what comes after, and single events.

Nothing here joins a group or commits, so attaching a reader changes nothing for the running
system. Three ways in: :class:`TopicReader` (topics to their end, then onwards; each record
once, in offset order within its partition), :func:`read_topic` (one topic from its start to
its end now) and :class:`OffsetFetcher` (the event at a known partition and offset). Readers
return records that do not decode as :class:`LoggedEvent` with ``event_type`` None and the
error, so checks can count them.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaException, Message, TopicPartition

from infra.consumer import build_consumer, drain, watermarks
from infra.settings import Settings
from infra.topic_admin import TopicMissing, topic_states
from infra.topics import event_type
from schemas.serde import EventDecodeError, SchemaCatalog, default_catalog

log = logging.getLogger(__name__)


# Producers stamp records with their own clocks: a read by time that starts this much early
# misses none.
CLOCK_MARGIN_MS = 10_000


def episode_start_bound_ms(settings: Settings, ts_ms: int) -> int:
    """The earliest time an episode alive at ``ts_ms`` can have started (no episode lives longer
    than ``episode_deadline_s``), less the clock margin: where a read of its records begins."""
    return ts_ms - int(settings.episode_deadline_s * 1000) - CLOCK_MARGIN_MS


class EventUnavailable(LookupError):
    """The event asked for is not at the position given, or no position was recorded."""


class LogStalled(TimeoutError):
    """The log delivered nothing for a while before the end a reader was reading to."""


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


@dataclass(frozen=True)
class TopicEvent:
    suffix: str  # the topic without the prefix, e.g. "observations"
    event: LoggedEvent


class TopicReader:
    """Topics from a start point to where they ended when the reader opened, then onwards.

    ``since_ms`` starts every topic but those in ``from_start`` at its first record at or after
    that time (at its end when there is none); the others start at their first record.

    Reads topics (every partition, or only ``partitions``) from the first offset still in the
    log, or from the first at or after ``since_ms``, and notes each partition's end when it
    opens. :meth:`batches_to_end` returns exactly the records before those ends; :meth:`poll`
    then follows what comes after. Each record comes once, in offset order within its partition.
    An empty partition (nothing written, or all of it deleted) is read at once; a topic that does
    not exist reads as empty (:func:`require_topics` refuses it instead). Nothing delivered for
    ``idle_limit_s`` before the end raises :class:`LogStalled`.
    """

    def __init__(
        self,
        settings: Settings,
        suffixes: Iterable[str],
        since_ms: int | None = None,
        *,
        from_start: Iterable[str] = (),
        partitions: Iterable[int] | None = None,
        catalog: SchemaCatalog | None = None,
        timeout_s: float = 30.0,
    ):
        self._catalog = catalog or default_catalog()
        self._suffix_of = {settings.topic(s): s for s in suffixes}
        self._consumer = build_consumer(
            settings,
            group_id=f"webgym-reader-{uuid.uuid4().hex[:10]}",  # fresh: assigned, never commits
            client_id="webgym-reader",
            # Followers see new records within 0.1 s, not the default 0.5 s of a fuller fetch.
            **{"fetch.wait.max.ms": 100},
        )
        self._ends: dict[tuple[str, int], int] = {}
        self._next: dict[tuple[str, int], int] = {}  # the next offset to return
        self._past_ends: list[TopicEvent] = []  # read while reading to the ends; poll's first
        try:
            self._start(since_ms, set(from_start), partitions, timeout_s)
        except BaseException:
            self._consumer.close()
            raise
        # Records between the start and the ends (fewer when compaction left gaps).
        self.total = sum(end - self._next[key] for key, end in self._ends.items())

    def _start(
        self,
        since_ms: int | None,
        from_start: set[str],
        partitions: Iterable[int] | None,
        timeout_s: float,
    ) -> None:
        only = None if partitions is None else set(partitions)
        by_time = []
        for topic, suffix in self._suffix_of.items():
            metadata = self._consumer.list_topics(topic, timeout=timeout_s).topics[topic]
            for partition in sorted(metadata.partitions):
                if only is not None and partition not in only:
                    continue
                low, high = watermarks(self._consumer, TopicPartition(topic, partition), timeout_s)
                self._ends[(topic, partition)] = high
                self._next[(topic, partition)] = low
                if since_ms is not None and suffix not in from_start:
                    by_time.append(TopicPartition(topic, partition, since_ms))
        if by_time:
            for found in self._consumer.offsets_for_times(by_time, timeout=timeout_s):
                key = (found.topic, found.partition)
                # -1: no record at or after the time yet.
                self._next[key] = found.offset if found.offset >= 0 else self._ends[key]
        self._consumer.assign([TopicPartition(t, p, o) for (t, p), o in self._next.items()])

    def caught_up(self) -> bool:
        """Every record before the ends noted at opening has been returned."""
        return all(self._next[key] >= end for key, end in self._ends.items())

    def batches_to_end(self, idle_limit_s: float = 30.0) -> Iterator[list[TopicEvent]]:
        """The records before the ends noted at opening, in batches as they arrive; the ones
        after wait for :meth:`poll`. Raises LogStalled after ``idle_limit_s`` without one."""
        idle_since = time.monotonic()
        while not self.caught_up():
            batch = self._receive(0.5, 500, hold_past_ends=True)
            if batch:
                idle_since = time.monotonic()
                yield batch
            elif time.monotonic() - idle_since > idle_limit_s:
                raise LogStalled(
                    f"the log stopped delivering for {idle_limit_s:.0f} s before its end; "
                    "check the broker with `webgym status`"
                )

    def read_to_end(self, idle_limit_s: float = 30.0) -> list[TopicEvent]:
        """Every record before the ends noted at opening (see :meth:`batches_to_end`)."""
        return [item for batch in self.batches_to_end(idle_limit_s) for item in batch]

    def poll(self, timeout_s: float = 0.5, max_events: int = 500) -> list[TopicEvent]:
        """The next records, possibly none (waiting up to ``timeout_s`` for the first)."""
        if self._past_ends:
            held, self._past_ends = self._past_ends, []
            return held
        return self._receive(timeout_s, max_events)

    def _receive(
        self, timeout_s: float, max_events: int, hold_past_ends: bool = False
    ) -> list[TopicEvent]:
        out = []
        for message in drain(self._consumer, max_events, timeout_s):
            error = message.error()
            if error is not None:
                if error.fatal():
                    raise KafkaException(error)
                log.warning("reader error (librdkafka retries): %s", error.str())
                continue
            key = (message.topic(), message.partition())
            self._next[key] = message.offset() + 1
            item = TopicEvent(self._suffix_of[message.topic()], _logged(message, self._catalog))
            past_end = message.offset() >= self._ends[key]
            (self._past_ends if hold_past_ends and past_end else out).append(item)
        return out

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> TopicReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def read_topic(
    settings: Settings,
    suffix: str,
    catalog: SchemaCatalog | None = None,
    timeout_s: float = 30.0,
) -> list[LoggedEvent]:
    """Every record of ``settings.topic(suffix)`` up to its end now (none after), by partition
    and offset. Raises LogStalled (a TimeoutError) after ``timeout_s`` without a record."""
    with TopicReader(settings, [suffix], catalog=catalog, timeout_s=timeout_s) as reader:
        events = [item.event for item in reader.read_to_end(timeout_s)]
    return sorted(events, key=lambda e: (e.partition, e.offset))


def require_topics(settings: Settings, suffixes: Iterable[str]) -> None:
    """Raise TopicMissing naming those of ``suffixes`` that do not exist (and how to find the
    right prefix); a view calls this before it opens a reader."""
    wanted = {settings.topic(suffix) for suffix in suffixes}
    missing = [
        s.name for s in topic_states(settings) if s.outcome == "missing" and s.name in wanted
    ]
    if missing:
        raise TopicMissing(
            f"topics missing on {settings.bootstrap_servers}: {', '.join(sorted(missing))}. "
            f"Is WEBGYM_TOPIC_PREFIX ({settings.topic_prefix!r}) the one of your run? "
            "`webgym topics list` shows the table; `webgym topics create` creates them"
        )


class OffsetFetcher:
    """The events of one topic at known positions, e.g. the observation a trajectory step names.

    Decodes them as the topic table's event type of ``suffix``. Keeps the last ``cache_size``
    records it read: a policy's context repeats recent screenshots.

    Blocking and thread-safe. Raises :class:`EventUnavailable` when no position was recorded,
    the record is gone (retention) or not there, does not decode, or is another event than the
    one named.
    """

    def __init__(
        self,
        settings: Settings,
        suffix: str,
        catalog: SchemaCatalog | None = None,
        cache_size: int = 32,
    ):
        self._topic = settings.topic(suffix)
        self._event_type = event_type(suffix)
        self._catalog = catalog or default_catalog()
        self._consumer = build_consumer(
            settings,
            group_id=f"webgym-offset-fetcher-{uuid.uuid4().hex[:8]}",  # never commits
            client_id="webgym-offset-fetcher",
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
        self._cache: OrderedDict[tuple[int, int], dict[str, Any]] = OrderedDict()
        self._cache_size = cache_size

    def fetch(
        self, partition: int, offset: int, event_id: str | None = None, timeout_s: float = 10.0
    ) -> dict[str, Any]:
        """The record at ``partition`` and ``offset`` (a copy the caller may change); with
        ``event_id``, only if it is that event. Raises EventUnavailable otherwise."""
        if partition < 0 or offset < 0:
            raise EventUnavailable(f"no log position recorded for {event_id or 'it'}")
        where = f"{self._topic}[{partition}]@{offset}"
        with self._lock:
            record = self._cache.get((partition, offset))
            if record is None:
                record = self._read(partition, offset, where, timeout_s)
                self._cache[(partition, offset)] = record
                if len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
            else:
                self._cache.move_to_end((partition, offset))
        if event_id is not None and record["event_id"] != event_id:
            raise EventUnavailable(f"{where} holds {record['event_id']}, not {event_id}")
        return dict(record)

    def _read(self, partition: int, offset: int, where: str, timeout_s: float) -> dict[str, Any]:
        self._consumer.assign([TopicPartition(self._topic, partition, offset)])
        try:
            message = self._consumer.poll(timeout_s)
        finally:
            # Assigned, the consumer would keep fetching the partition every 5 ms between
            # reads: hundreds of requests a second per fetcher, taking the broker's CPU.
            self._consumer.unassign()
        if message is None or message.error() is not None:
            problem = "nothing arrived" if message is None else message.error().str()
            raise EventUnavailable(f"cannot read {where}: {problem}")
        # Asked for an offset the log no longer (or not yet) has, the consumer starts over at its
        # first record (auto.offset.reset).
        if message.offset() > offset:
            raise EventUnavailable(f"{where} is gone (retention); got {message.offset()}")
        if message.offset() < offset:
            raise EventUnavailable(f"{where} is past the end of the log")
        try:
            return self._catalog.decode(message.value(), self._event_type).record
        except EventDecodeError as error:
            raise EventUnavailable(f"{where} does not decode: {error}") from error

    def close(self) -> None:
        self._consumer.close()


def _logged(message: Message, catalog: SchemaCatalog) -> LoggedEvent:
    """A consumed record as a LoggedEvent; one that does not decode carries its error."""
    try:
        decoded = catalog.decode(message.value())
        decoded_type, record, error = decoded.event_type, decoded.record, None
    except EventDecodeError as exc:
        decoded_type, record, error = None, {}, str(exc)
    kind, timestamp = message.timestamp()
    return LoggedEvent(
        message.partition(),
        message.offset(),
        message.key(),
        decoded_type,
        record,
        list(message.headers() or []),
        error,
        None if kind == TIMESTAMP_NOT_AVAILABLE else timestamp,
    )
