"""One episode's records as :mod:`analytics.check` reads them: each record kept slim
(:class:`Copy`), then deduplicated into an :class:`Episode` (the rules are in the docstring of
:meth:`Episode.build`), and the :class:`Violation` every check reports."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from infra.topics import episode_topics, event_type
from schemas.event_ids import episode_event_id

TRAJECTORY_TOPICS = tuple(
    suffix
    for suffix in episode_topics()
    if event_type(suffix) in ("trajectory", "scored_trajectory")
)
# The topics of the step cycle: one event per step, ids ``<episode>:<step>:<kind>``.
STEP_TOPICS = tuple(
    suffix
    for suffix in episode_topics()
    if suffix != "episodes" and suffix not in TRAJECTORY_TOPICS
)
EVENT_NAMES = {suffix: event_type(suffix).replace("_", " ") for suffix in STEP_TOPICS}


@dataclass(frozen=True, order=True)
class At:
    """Where a record lies: topic suffix, partition, offset."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


@dataclass(frozen=True)
class Violation:
    invariant: str  # a key of INVARIANTS
    episode_id: str | None
    message: str
    at: At | None  # the record that breaks it (or, for a missing one, the record that needs it)

    def as_dict(self) -> dict[str, Any]:
        where = (
            None
            if self.at is None
            else {
                "topic": self.at.topic,
                "partition": self.at.partition,
                "offset": self.at.offset,
            }
        )
        return {
            "invariant": self.invariant,
            "episode_id": self.episode_id,
            "message": self.message,
            "at": where,
        }


@dataclass(frozen=True)
class Copy:
    """One record as read: where, its event id and ``ts``, a digest of the rest, what is kept."""

    at: At
    event_id: str
    ts: int
    content: str  # digest of every field but event_id and ts
    record: dict[str, Any]
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass
class Episode:
    """An episode's records after deduplication (see :meth:`build`)."""

    episode_id: str
    # started / ended / trajectory topics -> the distinct versions, first copy of each, log order
    once: dict[str, list[Copy]]
    steps: dict[str, dict[int, Copy]]  # step topic -> step -> first copy of that step's event
    by_id: dict[str, dict[str, Copy]]  # step topic -> event id -> first copy
    conflicts: list[tuple[str, Copy, Copy]]  # two different event ids at one step (first, other)
    first_at: At | None
    duplicates_raw: int = 0
    reexecuted: int = 0

    @classmethod
    def build(
        cls, episode_id: str, records: dict[str, list[Copy]], quarantined: set[At]
    ) -> Episode:
        """Deduplicate an episode's records (at least once everywhere, so copies are expected).

        Two records of one topic are copies of one event when they have the same ``event_id``
        (ops, observations, inferences: ids are deterministic, ``<episode>:<step>:<kind>``), or,
        for the records an episode has once (its start, its terminal event, trajectory, scored
        trajectory, success), when they are for the same episode and equal in every field but
        ``event_id`` and ``ts``. Every copy beyond the first is counted in ``duplicates_raw`` and
        dropped; the first copy in log order is the one consumers applied (copies of one episode
        share a partition). A step event whose copies differ (an operation served twice after a
        crash: a new screenshot, new timings, another sample) is still a copy: consumers keep the
        first, so it is counted (``reexecuted``), not a violation. A once-per-episode record
        whose versions differ is a violation (``duplicates_after_dedup``, must be 0). Records a
        dead letter names were rejected by their consumer and are left out of every check.
        """
        episode = cls(episode_id, {}, {s: {} for s in STEP_TOPICS}, {}, [], None)
        for suffix, copies in records.items():
            kept = sorted((c for c in copies if c.at not in quarantined), key=_log_order)
            if kept and (episode.first_at is None or kept[0].at < episode.first_at):
                episode.first_at = kept[0].at
            if suffix == "episodes":
                starts = [c for c in kept if c.record["kind"] == "started"]
                episode._keep_distinct_versions("started", starts)
                ends = [c for c in kept if c.record["kind"] != "started"]
                episode._keep_distinct_versions("ended", ends)
            elif suffix in TRAJECTORY_TOPICS:
                episode._keep_distinct_versions(suffix, kept)
            else:
                episode._step_events(suffix, kept)
        return episode

    def _keep_distinct_versions(self, name: str, copies: list[Copy]) -> None:
        distinct: dict[str, Copy] = {}
        for copy in copies:
            distinct.setdefault(copy.content, copy)
        self.once[name] = list(distinct.values())
        self.duplicates_raw += len(copies) - len(distinct)

    def _step_events(self, suffix: str, copies: list[Copy]) -> None:
        firsts: dict[str, Copy] = {}
        for copy in copies:
            first = firsts.get(copy.event_id)
            if first is None:
                firsts[copy.event_id] = copy
                other = self.steps[suffix].setdefault(copy.record["step"], copy)
                if other is not copy:
                    self.conflicts.append((suffix, other, copy))
            else:
                self.duplicates_raw += 1
                self.reexecuted += copy.content != first.content
        self.by_id[suffix] = firsts

    def first(self, name: str) -> Copy | None:
        versions = self.once.get(name) or []
        return versions[0] if versions else None

    @property
    def start(self) -> Copy | None:
        return self.first("started")

    @property
    def end(self) -> Copy | None:
        return self.first("ended")

    @property
    def orchestrator_end(self) -> Copy | None:
        """The terminal event when the orchestrator wrote it (``streams.orchestrator._end``):
        its step is the number of inferences applied. An operator's abort says nothing of it."""
        end = self.end
        ours = end is not None and end.event_id == episode_event_id(self.episode_id, "end")
        return end if ours else None

    def counts(self) -> Counter[str]:
        end = self.end
        counts: Counter[str] = Counter()
        counts["started"] = self.start is not None
        counts["ended"] = end is not None
        counts["finished"] = end is not None and end.record["kind"] == "finished"
        counts["aborted"] = end is not None and end.record["kind"] == "aborted"
        counts["lost"] = self.start is not None and end is None
        counts["duplicates_raw"] = self.duplicates_raw
        counts["reexecuted"] = self.reexecuted
        counts["duplicates_after_dedup"] = sum(
            max(0, len(versions) - 1) for versions in self.once.values()
        )
        counts["trajectories"] = self.first("trajectories") is not None
        counts["scored"] = self.first("trajectories.scored") is not None
        counts["successes"] = self.first("trajectories.success") is not None
        return counts


def record_copy(
    at: At,
    record: dict[str, Any],
    kept: dict[str, Any],
    headers: tuple[tuple[str, bytes | None], ...] = (),
) -> Copy:
    return Copy(
        at,
        record.get("event_id") or "",
        record.get("ts") or 0,
        _content_digest(record),
        kept,
        headers,
    )


def _content_digest(record: dict[str, Any]) -> str:
    """Every field but event_id and ts, canonically; bytes by their sha256."""
    content = {k: v for k, v in record.items() if k not in ("event_id", "ts")}
    text = json.dumps(content, sort_keys=True, default=_bytes_as_digest)
    return hashlib.sha256(text.encode()).hexdigest()


def _bytes_as_digest(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return "sha256:" + hashlib.sha256(value).hexdigest()
    raise TypeError(f"cannot compare a {type(value).__name__}")


def _log_order(copy: Copy) -> tuple[int, int]:
    return copy.at.partition, copy.at.offset


def differing_fields(first: dict[str, Any], other: dict[str, Any]) -> list[str]:
    names = sorted((set(first) | set(other)) - {"event_id", "ts"})
    return [n for n in names if first.get(n) != other.get(n)]


def describe_action(action: dict[str, Any] | None) -> str:
    if action is None:
        return "none"
    fields = ", ".join(f"{k}={v!r}" for k, v in action.items() if k != "kind" and v is not None)
    return f"{action['kind']}({fields})"


def short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value) if not isinstance(value, dict) else describe_action(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
