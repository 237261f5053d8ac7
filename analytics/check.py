"""The invariants of a run, checked after the fact: :class:`InvariantFold` folds every record of
the run's topics and :meth:`InvariantFold.report` lists each record that breaks one
(``webgym check``; :func:`analytics.check_cli.check_run` reads the log and feeds the fold).

The fold is pure (no I/O): feed it records with their coordinates (topic suffix, partition,
offset), in any interleaving of topics and partitions, each partition in offset order, at least
once each; the report is computed from everything folded, so feed the whole log first. Records of
other runs are ignored when a ``run_id`` is given (episode ids are ``<run_id>-<n>``).

How steps are numbered (``streams.orchestrator``, ``agents.browser.worker``,
``agents.policy.worker``); the checks below follow from it:

- ``started`` (step 0) -> one navigate op, step 0 -> observation 0;
- an observation -> infer request k, k = inferences applied so far + 1: requests are numbered
  1, 2, 3... without a gap; the inference answering request k has step k and names the request
  (``request_event_id``); request k + 1 exists only once inference k was applied;
- inference k -> act op k (the same action, ``inference_event_id`` naming it) -> observation k;
  or, when the reply did not parse, request k + 1 on the same screen (no act op, no observation
  k); or the end. So observation steps are 0 and the act steps; a *failure* observation (the
  browser side lost the episode) may also stand at the step after the last operation;
- the orchestrator's terminal event (event id ``<episode>:end``) has step N = inferences applied;
  the trajectory has N steps numbered 1..N, step k recording inference k and the observation the
  policy saw (observation j, j the last act step before k, or 0); the requests run to N, or to
  N + 1 when a timer or a failure observation ended the episode while the policy was thinking.

Invariants, by the name the report gives them (:data:`INVARIANTS`): ``ends``, ``steps``,
``after-end``, ``trajectory``, ``duplicates``, ``success``, ``dead-letters``.

Deduplication (at least once everywhere, so copies are expected). Two records of one topic are
copies of one event when they have the same ``event_id`` (ops, observations, inferences: ids are
deterministic, ``<episode>:<step>:<kind>``), or, for the records an episode has once (its start,
its terminal event, trajectory, scored trajectory, success), when they are for the same episode
and equal in every field but ``event_id`` and ``ts``. Every copy beyond the first is counted in
``duplicates_raw`` and dropped; the first copy in log order is the one consumers applied (copies
of one episode share a partition). A step event whose copies differ (an operation served twice
after a crash: a new screenshot, new timings, another sample) is still a copy: consumers keep the
first, so it is counted (``reexecuted``), not a violation. A once-per-episode record whose
versions differ is a violation (``duplicates_after_dedup``, must be 0). Records a dead letter
names were rejected by their consumer and are left out of every check.

Order ("nothing after the end"). Kafka orders records within a partition only, and an episode's
events lie on several topics, so the comparison uses the producer's ``ts`` in each record: the
moment its writer decided it. Operations and terminal events are both written by the
orchestrator (one clock; after a rebalance, the clocks of its hosts are assumed to agree better
than the time between an episode's last operation and its end); a re-sent copy keeps its
original ``ts``, and only the first copy of each event is compared, so redelivery is never
mistaken for new work. An operation whose ``ts`` is after the terminal event's is a violation.
Observations and inferences are answers written by other processes that may not have seen the
end yet: one produced after the end is allowed when it answers an operation issued at or before
the end (an operation of its step; for a failure observation, also the step after the last
operation), and a violation otherwise.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from infra.dead_letters import (
    HEADER_ERROR_CLASS,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_TOPIC,
    dead_letter_event_id,
)
from streams.filters import reaches_learner

INVARIANTS: dict[str, str] = {
    "ends": "every episode was started once and has exactly one terminal event (finished or "
    "aborted); an aborted one says why",
    "steps": "step numbers are contiguous: one navigate op at step 0, infer requests 1..M with "
    "no gap, each inference, act op and observation answers the event of its step, and the "
    "terminal step counts the inferences",
    "after-end": "nothing is produced for an episode after its terminal event: no operation, "
    "and no answer to an operation issued after it",
    "trajectory": "every ended episode has a trajectory and a scored trajectory, each equal to "
    "the fold of its steps (inferences, actions, observation references, terminal event)",
    "duplicates": "no episode has two different starts, trajectories, scored trajectories or "
    "successes (identical re-deliveries are only counted)",
    "success": "every success is the scored trajectory of its episode, which passes the success "
    "filter (reward 1, not aborted, no judge error, not blocked, not an evaluation); every such "
    "one is a success",
    "dead-letters": "every dead letter names its source (topic, partition, offset: a record of "
    "the log) and an error class, in its record and its headers; every record that does not "
    "decode has its dead letter",
}

# Read in this order: the dead-letter topic first, so each dead letter it holds names a record
# that was already in its topic when that topic's end was taken.
TOPICS = (
    "dlq",
    "episodes",
    "ops.navigate",
    "ops.infer",
    "ops.act",
    "observations",
    "inferences",
    "trajectories",
    "trajectories.scored",
    "trajectories.success",
)
STEP_TOPICS = ("ops.navigate", "ops.infer", "ops.act", "observations", "inferences")
TRAJECTORY_TOPICS = ("trajectories", "trajectories.scored", "trajectories.success")
# Topics the loop itself consumes: a record there that does not decode must be dead-lettered.
# (trajectories.success is read only by the optional learner.)
DEAD_LETTERED = (
    "episodes",
    "ops.navigate",
    "ops.infer",
    "ops.act",
    "observations",
    "inferences",
    "trajectories",
    "trajectories.scored",
)
COUNTS = (
    "started",
    "ended",
    "finished",
    "aborted",
    "lost",
    "duplicates_raw",
    "reexecuted",
    "duplicates_after_dedup",
    "dead_letters",
    "undecodable",
    "trajectories",
    "scored",
    "successes",
    "records",
)
# The fields of step events the checks read (screenshots and contexts are not kept).
_KEPT = {
    "episodes": (
        "event_id",
        "episode_id",
        "step",
        "ts",
        "kind",
        "task_id",
        "reason",
        "final_answer",
    ),
    "ops.navigate": ("event_id", "episode_id", "step", "ts"),
    "ops.infer": ("event_id", "episode_id", "step", "ts"),
    "ops.act": ("event_id", "episode_id", "step", "ts", "action", "inference_event_id"),
    "observations": ("event_id", "episode_id", "step", "ts", "url", "title", "failure"),
    "inferences": (
        "event_id",
        "episode_id",
        "step",
        "ts",
        "action",
        "parse_error",
        "policy_version",
        "request_event_id",
    ),
}
_REFERENCED = ("ops.infer", "observations", "inferences")  # trajectories point into these
_WHAT = {
    "ops.navigate": "navigate op",
    "ops.infer": "infer request",
    "ops.act": "act op",
    "observations": "observation",
    "inferences": "inference",
}


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


@dataclass
class CheckReport:
    run_id: str | None
    counts: dict[str, int]
    violations: list[Violation]
    runs_seen: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def by_invariant(self) -> dict[str, int]:
        found = Counter(v.invariant for v in self.violations)
        return {name: found[name] for name in INVARIANTS}

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "ok": self.ok,
            "counts": self.counts,
            "violations_by_invariant": self.by_invariant(),
            "violations": [v.as_dict() for v in self.violations],
            "invariants": INVARIANTS,
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


def run_of(episode_id: str) -> str:
    return episode_id.rpartition("-")[0]


class InvariantFold:
    """Every record of a run, kept slim (no screenshots, no contexts), then checked at once."""

    def __init__(self, run_id: str | None = None, topic_prefix: str = "webgym") -> None:
        self.run_id = run_id
        self.topic_prefix = topic_prefix
        self._records: dict[str, dict[str, list[Copy]]] = defaultdict(lambda: defaultdict(list))
        self._dead_letters: list[Copy] = []
        self._undecodable: list[tuple[At, str, str]] = []  # where, episode (the key), error
        self._at: dict[At, Copy] = {}
        self._last_offset: dict[tuple[str, int], int] = {}
        self.runs_seen: set[str] = set()
        self.records = 0

    # -- folding -------------------------------------------------------------------------------

    def apply(
        self,
        suffix: str,
        record: dict[str, Any],
        partition: int,
        offset: int,
        headers: Iterable[tuple[str, bytes | None]] = (),
    ) -> bool:
        """Fold one decoded record of topic ``suffix``; False when it was ignored (another run,
        or a topic the checks do not read)."""
        at = At(suffix, partition, offset)
        self._note(at)
        if suffix == "dlq":
            kept = {**record, "original_value": None}
            self._dead_letters.append(_copy(at, record, kept, tuple(headers)))
            return True
        episode_id = record.get("episode_id")
        if suffix not in TOPICS or not episode_id:
            return False
        self.runs_seen.add(run_of(episode_id))
        if not self._wanted(episode_id):
            return False
        self.records += 1
        if suffix in _KEPT:
            kept = {name: record.get(name) for name in _KEPT[suffix]}
            if suffix == "observations":
                kept["screenshot_sha256"] = hashlib.sha256(
                    record.get("screenshot") or b""
                ).hexdigest()
        else:
            kept = record
        copy = _copy(at, record, kept)
        self._records[episode_id][suffix].append(copy)
        if suffix in _REFERENCED:
            self._at[at] = copy
        return True

    def apply_undecodable(
        self, suffix: str, partition: int, offset: int, key: bytes | None, error: str
    ) -> None:
        """Note a record that did not decode (its key, an episode id, places it in a run)."""
        at = At(suffix, partition, offset)
        self._note(at)
        episode_id = (key or b"").decode("utf-8", "replace")
        if suffix in TOPICS and suffix != "dlq" and self._wanted(episode_id):
            self._undecodable.append((at, episode_id, error))

    def apply_all(self, events: Iterable[Any]) -> int:
        """Fold :class:`analytics.log_tail.TailEvent` s; returns how many were folded."""
        folded = 0
        for tail_event in events:
            event = tail_event.event
            if event.error is not None or event.event_type is None:
                self.apply_undecodable(
                    tail_event.suffix, event.partition, event.offset, event.key, event.error or ""
                )
            else:
                folded += self.apply(
                    tail_event.suffix, event.record, event.partition, event.offset, event.headers
                )
        return folded

    def _note(self, at: At) -> None:
        key = (at.topic, at.partition)
        self._last_offset[key] = max(self._last_offset.get(key, -1), at.offset)

    def _wanted(self, episode_id: str) -> bool:
        return self.run_id is None or run_of(episode_id) == self.run_id

    # -- the report ----------------------------------------------------------------------------

    def report(self) -> CheckReport:
        """Every violation of the records folded so far, and the counts (see the docstring)."""
        quarantined = {at for at in map(self._source, self._dead_letters) if at is not None}
        counts: Counter[str] = Counter({name: 0 for name in COUNTS})
        counts["records"] = self.records
        violations: list[Violation] = []
        for episode_id in sorted(self._records):
            episode = Episode.build(episode_id, self._records[episode_id], quarantined)
            counts.update(episode.counts())
            violations += _check_ends(episode)
            violations += _check_steps(episode)
            violations += _check_after_end(episode)
            violations += _check_trajectories(episode, self._at)
            violations += _check_duplicates(episode)
            violations += _check_success(episode)
        violations += self._check_dead_letters(quarantined, counts)
        return CheckReport(self.run_id, dict(counts), violations, sorted(self.runs_seen))

    def _source(self, dead_letter: Copy) -> At | None:
        """The coordinates a dead letter names, as a topic suffix of this deployment."""
        record = dead_letter.record
        suffix = self._suffix(record.get("source_topic") or "")
        if suffix is None:
            return None
        return At(suffix, record.get("source_partition", -1), record.get("source_offset", -1))

    def _suffix(self, topic: str) -> str | None:
        start = f"{self.topic_prefix}."
        return topic[len(start) :] if topic.startswith(start) else None

    def _check_dead_letters(self, quarantined: set[At], counts: Counter[str]) -> list[Violation]:
        out = []
        firsts: dict[str, Copy] = {}
        for copy in self._dead_letters:
            key = copy.record.get("original_key")
            episode_id = (key or b"").decode("utf-8", "replace") if key is not None else None
            if self.run_id is not None and (episode_id is None or not self._wanted(episode_id)):
                continue
            if copy.event_id in firsts:
                counts["duplicates_raw"] += 1
                continue
            firsts[copy.event_id] = copy
            for problem in self._dead_letter_problems(copy):
                out.append(Violation("dead-letters", episode_id, problem, copy.at))
        counts["dead_letters"] = len(firsts)
        counts["undecodable"] = len(self._undecodable)
        for at, episode_id, error in self._undecodable:
            if at.topic in DEAD_LETTERED and at not in quarantined:
                message = f"does not decode ({error[:200]}) and no dead letter names it"
                out.append(Violation("dead-letters", episode_id or None, message, at))
        return out

    def _dead_letter_problems(self, copy: Copy) -> list[str]:
        record = copy.record
        topic = record.get("source_topic") or ""
        partition, offset = record.get("source_partition"), record.get("source_offset")
        error_class = (record.get("error_class") or "").strip()
        problems = []
        suffix = self._suffix(topic)
        if not topic:
            problems.append("names no source topic")
        elif suffix is None:
            problems.append(f"source topic {topic!r} is not a {self.topic_prefix}.* topic")
        if partition is None or offset is None or partition < 0 or offset < 0:
            problems.append(f"source coordinates [{partition}]@{offset} name no record")
        elif suffix in TOPICS:
            last = self._last_offset.get((suffix, partition))
            if last is None or offset > last:
                ends = "is empty" if last is None else f"ends at offset {last}"
                problems.append(f"names {topic}[{partition}]@{offset}, but that partition {ends}")
        if not error_class:
            problems.append("names no error class")
        expected_id = dead_letter_event_id(topic, partition, offset)
        if copy.event_id != expected_id:
            problems.append(f"event id {copy.event_id!r} is not {expected_id!r}")
        headers = {name: value for name, value in copy.headers}
        for name, value in (
            (HEADER_TOPIC, topic),
            (HEADER_PARTITION, str(partition)),
            (HEADER_OFFSET, str(offset)),
            (HEADER_ERROR_CLASS, error_class),
        ):
            got = headers.get(name)
            if got is None:
                problems.append(f"header {name} is missing")
            elif got.decode("utf-8", "replace").strip() != value:
                problems.append(f"header {name} says {got!r}, the record {value!r}")
        return problems


# -- one episode, deduplicated ---------------------------------------------------------------------


@dataclass
class Episode:
    """An episode's records after deduplication (see the module docstring)."""

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
        episode = cls(episode_id, {}, {s: {} for s in STEP_TOPICS}, {}, [], None)
        for suffix, copies in records.items():
            kept = sorted((c for c in copies if c.at not in quarantined), key=_log_order)
            if kept and (episode.first_at is None or kept[0].at < episode.first_at):
                episode.first_at = kept[0].at
            if suffix == "episodes":
                episode._once("started", [c for c in kept if c.record["kind"] == "started"])
                episode._once("ended", [c for c in kept if c.record["kind"] != "started"])
            elif suffix in TRAJECTORY_TOPICS:
                episode._once(suffix, kept)
            else:
                episode._step_events(suffix, kept)
        return episode

    def _once(self, name: str, copies: list[Copy]) -> None:
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
        return end if end is not None and end.event_id == f"{self.episode_id}:end" else None

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


# -- the checks, one per invariant ----------------------------------------------------------------


def _check_ends(episode: Episode) -> list[Violation]:
    out = []
    name = episode.episode_id
    start, ends = episode.start, episode.once.get("ended", [])
    if start is None:
        at = ends[0].at if ends else episode.first_at
        out.append(Violation("ends", name, "has events but no started event", at))
    elif not ends:
        out.append(Violation("ends", name, "started but never ended (lost)", start.at))
    if len(ends) > 1:
        kinds = ", ".join(f"{c.record['kind']} ({c.record.get('reason')!r}, {c.at})" for c in ends)
        out.append(
            Violation("ends", name, f"{len(ends)} different terminal events: {kinds}", ends[1].at)
        )
    for end in ends:
        if end.record["kind"] == "aborted" and not (end.record.get("reason") or "").strip():
            out.append(Violation("ends", name, "aborted without a reason", end.at))
    return out


def _check_steps(episode: Episode) -> list[Violation]:
    out = []
    name = episode.episode_id
    navigate, requests = episode.steps["ops.navigate"], episode.steps["ops.infer"]
    inferences, acts = episode.steps["inferences"], episode.steps["ops.act"]
    observations = episode.steps["observations"]

    def flag(message: str, copy: Copy) -> None:
        out.append(Violation("steps", name, message, copy.at))

    for suffix, first, other in episode.conflicts:
        step = first.record["step"]
        flag(
            f"two different {_WHAT[suffix]}s for step {step}: {first.event_id} ({first.at}) and "
            f"{other.event_id}",
            other,
        )
    for step, copy in navigate.items():
        if step != 0:
            flag(f"navigate op at step {step}: the only navigation is at step 0", copy)
    last_request = max(requests, default=0)
    for step in range(1, last_request + 1):
        if step not in requests:
            later = requests[min(s for s in requests if s > step)]
            flag(f"infer requests skip step {step}: they must be numbered 1, 2, 3...", later)
        elif step < last_request and step not in inferences:
            flag(
                f"infer request {step} has no inference, yet request {step + 1} followed it",
                requests[step],
            )
    for step, copy in requests.items():
        if step < 1:
            flag(f"infer request at step {step}: requests are numbered from 1", copy)
    for step, copy in inferences.items():
        request = requests.get(step)
        if request is None:
            flag(f"inference for step {step} answers no infer request of step {step}", copy)
        elif copy.record["request_event_id"] != request.event_id:
            flag(
                f"inference for step {step} names request {copy.record['request_event_id']!r}, "
                f"not {request.event_id!r} ({request.at})",
                copy,
            )
    for step, copy in acts.items():
        inference = inferences.get(step)
        if inference is None:
            flag(f"act op for step {step} follows no inference of step {step}", copy)
        elif copy.record["inference_event_id"] != inference.event_id:
            flag(
                f"act op for step {step} names inference {copy.record['inference_event_id']!r}, "
                f"not {inference.event_id!r} ({inference.at})",
                copy,
            )
        elif copy.record["action"] != inference.record["action"]:
            flag(
                f"act op for step {step} sends {_action(copy.record['action'])}, but inference "
                f"{inference.at} chose {_action(inference.record['action'])}",
                copy,
            )
    operations = set(navigate) | set(acts)
    for step, copy in observations.items():
        if copy.record.get("failure"):
            if step > max(operations, default=-1) + 1:
                flag(
                    f"failure observation at step {step}, beyond the step after the last "
                    f"operation ({max(operations, default=None)})",
                    copy,
                )
        elif step not in operations:
            op = "navigate op" if step == 0 else "act op"
            flag(f"observation for step {step} answers no {op} of step {step}", copy)
    end = episode.orchestrator_end
    if end is not None:
        applied = end.record["step"]
        if last_request not in (applied, applied + 1):
            flag(
                f"the terminal event counts {applied} steps, but infer requests run to step "
                f"{last_request} (expected {applied} or {applied + 1})",
                end,
            )
        for step, copy in acts.items():
            if step > applied:
                flag(f"act op for step {step}, beyond the terminal step {applied}", copy)
    return out


def _check_after_end(episode: Episode) -> list[Violation]:
    end = episode.end
    if end is None:
        return []
    out = []
    name, end_ts = episode.episode_id, end.ts
    before: dict[str, set[int]] = {}
    for suffix in ("ops.navigate", "ops.infer", "ops.act"):
        before[suffix] = set()
        for step, copy in episode.steps[suffix].items():
            if copy.ts <= end_ts:
                before[suffix].add(step)
                continue
            out.append(
                Violation(
                    "after-end",
                    name,
                    f"{_WHAT[suffix]} for step {step} produced {copy.ts - end_ts} ms after the "
                    f"terminal event ({end.at})",
                    copy.at,
                )
            )
    operations = before["ops.navigate"] | before["ops.act"]
    for step, copy in episode.steps["inferences"].items():
        if copy.ts > end_ts and step not in before["ops.infer"]:
            message = (
                f"inference for step {step} produced {copy.ts - end_ts} ms after the terminal "
                f"event ({end.at}), answering no request issued before it"
            )
            out.append(Violation("after-end", name, message, copy.at))
    for step, copy in episode.steps["observations"].items():
        if copy.ts <= end_ts:
            continue
        if copy.record.get("failure"):
            answered = step <= max(operations, default=-1) + 1
        else:
            answered = step in operations
        if not answered:
            message = (
                f"observation for step {step} produced {copy.ts - end_ts} ms after the terminal "
                f"event ({end.at}), answering no operation issued before it"
            )
            out.append(Violation("after-end", name, message, copy.at))
    return out


def _check_trajectories(episode: Episode, at_index: dict[At, Copy]) -> list[Violation]:
    out = []
    name = episode.episode_id
    end = episode.end
    trajectory = episode.first("trajectories")
    scored = episode.first("trajectories.scored")
    if end is not None:
        for suffix, copy in (("trajectories", trajectory), ("trajectories.scored", scored)):
            if copy is None:
                message = f"ended ({end.record['kind']}) but has nothing on {suffix}"
                out.append(Violation("trajectory", name, message, end.at))
    if trajectory is not None:
        for problem in _fold_problems(episode, trajectory.record, at_index):
            out.append(Violation("trajectory", name, f"trajectory: {problem}", trajectory.at))
    if scored is not None:
        if trajectory is not None:
            differ = [
                f
                for f in trajectory.record
                if f != "event_id" and scored.record.get(f) != trajectory.record[f]
            ]
            if differ:
                message = (
                    f"scored trajectory differs from its trajectory ({trajectory.at}) in "
                    f"{', '.join(differ)}"
                )
                out.append(Violation("trajectory", name, message, scored.at))
        else:
            for problem in _fold_problems(episode, scored.record, at_index):
                out.append(
                    Violation("trajectory", name, f"scored trajectory: {problem}", scored.at)
                )
    return out


def _fold_problems(
    episode: Episode, trajectory: dict[str, Any], at_index: dict[At, Copy]
) -> list[str]:
    """How ``trajectory`` differs from the fold of the episode's events."""
    out = []
    steps = trajectory["steps"]
    numbers = [s["step"] for s in steps]
    if numbers != list(range(1, len(steps) + 1)):
        out.append(f"steps are numbered {numbers}, not 1..{len(steps)}")
    if trajectory["step"] != len(steps):
        out.append(f"says {trajectory['step']} steps but holds {len(steps)}")
    start, end = episode.start, episode.end
    if start is not None:
        if trajectory["task_id"] != start.record["task_id"]:
            out.append(
                f"task {trajectory['task_id']!r}, but the episode started on "
                f"{start.record['task_id']!r}"
            )
        if trajectory["started_ts"] != start.ts:
            out.append(f"started_ts {trajectory['started_ts']}, the started event says {start.ts}")
    if end is not None:
        kind, reason = end.record["kind"], end.record.get("reason") or end.record["kind"]
        if trajectory["aborted"] != (kind == "aborted"):
            out.append(f"aborted={trajectory['aborted']}, but the terminal event is {kind}")
        if trajectory["termination"] != reason:
            out.append(
                f"termination {trajectory['termination']!r}, the terminal event says {reason!r}"
            )
        if trajectory.get("final_answer") != end.record.get("final_answer"):
            out.append(
                f"final answer {trajectory.get('final_answer')!r}, the terminal event says "
                f"{end.record.get('final_answer')!r}"
            )
        if episode.orchestrator_end is not None and end.record["step"] != len(steps):
            out.append(f"{len(steps)} steps, the terminal event counts {end.record['step']}")
    acts = episode.steps["ops.act"]
    observations = episode.steps["observations"]
    seen = 0  # the step of the observation the policy sees: 0, then each act step
    versions = set()
    for number, step in enumerate(steps, start=1):
        where = f"step {number}"
        inference = _resolve(
            episode,
            at_index,
            "inferences",
            step.get("inference_event_id"),
            step.get("inference_partition", -1),
            step.get("inference_offset", -1),
            out,
            where,
        )
        if inference is not None:
            record = inference.record
            if record["step"] != number:
                out.append(f"{where}: inference {inference.at} is for step {record['step']}")
            for key in ("action", "parse_error", "policy_version"):
                if step.get(key) != record.get(key):
                    out.append(
                        f"{where}: {key} {_short(step.get(key))}, inference {inference.at} "
                        f"has {_short(record.get(key))}"
                    )
            _resolve(
                episode,
                at_index,
                "ops.infer",
                record.get("request_event_id"),
                step.get("request_partition", -1),
                step.get("request_offset", -1),
                out,
                where,
            )
        if step.get("policy_version") is not None:
            versions.add(step["policy_version"])
        expected = observations.get(seen)
        if expected is None:
            out.append(f"{where}: the policy saw observation {seen}, which is not in the log")
        elif step["observation_event_id"] != expected.event_id:
            out.append(
                f"{where}: observation {step['observation_event_id']!r}, but the policy "
                f"saw {expected.event_id!r} ({expected.at})"
            )
        observation = _resolve(
            episode,
            at_index,
            "observations",
            step["observation_event_id"],
            step.get("observation_partition", -1),
            step.get("observation_offset", -1),
            out,
            where,
        )
        if observation is not None:
            if observation.record.get("failure"):
                out.append(f"{where}: observation {observation.at} is a failure report")
            for key in ("url", "title", "screenshot_sha256"):
                # "" is the schema's default: a trajectory written before the field existed
                if step.get(key) and step[key] != observation.record.get(key):
                    out.append(
                        f"{where}: {key} {_short(step[key])}, observation "
                        f"{observation.at} has {_short(observation.record.get(key))}"
                    )
        action = step.get("action")
        act = acts.get(number)
        if act is not None:
            if act.record["action"] != action:
                out.append(
                    f"{where}: action {_action(action)}, act op {act.at} sent "
                    f"{_action(act.record['action'])}"
                )
            seen = number
        elif action is not None and action["kind"] != "answer" and number < len(steps):
            out.append(
                f"{where}: action {_action(action)} was never sent (no act op for step {number})"
            )
    if sorted(versions) != sorted(trajectory.get("policy_versions") or []):
        out.append(
            f"policy versions {trajectory.get('policy_versions')}, the steps have "
            f"{sorted(versions)}"
        )
    final = trajectory.get("final_observation_event_id")
    if final is not None:
        last = episode.by_id.get("observations", {}).get(final)
        if last is None or last.record.get("failure"):
            out.append(f"final observation {final!r} is not an observation of the episode")
    return out


def _resolve(
    episode: Episode,
    at_index: dict[At, Copy],
    suffix: str,
    event_id: str | None,
    partition: int,
    offset: int,
    problems: list[str],
    where: str,
) -> Copy | None:
    """The record a trajectory points at: by its coordinates when it has them (any copy there
    must carry the event id), else the first copy of the event id."""
    what = _WHAT[suffix]
    if event_id is None:
        problems.append(f"{where}: names no {what}")
        return None
    if partition is not None and offset is not None and partition >= 0 and offset >= 0:
        at = At(suffix, partition, offset)
        copy = at_index.get(at)
        if copy is None:
            problems.append(f"{where}: {what} {event_id!r} points at {at}, which is not in the log")
        elif copy.event_id != event_id:
            problems.append(
                f"{where}: {what} {event_id!r} points at {at}, which holds {copy.event_id!r}"
            )
            return None
        return copy
    copy = episode.by_id.get(suffix, {}).get(event_id)
    if copy is None:
        problems.append(f"{where}: {what} {event_id!r} is not in the log")
    return copy


def _check_duplicates(episode: Episode) -> list[Violation]:
    out = []
    for name in ("started", *TRAJECTORY_TOPICS):
        versions = episode.once.get(name) or []
        if len(versions) > 1:
            first = versions[0]
            for other in versions[1:]:
                differ = _differing_fields(first.record, other.record)
                what = "started event" if name == "started" else f"record on {name}"
                message = (
                    f"a second, different {what} (the first is {first.at}; they differ in "
                    f"{', '.join(differ) or 'event_id'})"
                )
                out.append(Violation("duplicates", episode.episode_id, message, other.at))
    return out


def _check_success(episode: Episode) -> list[Violation]:
    name = episode.episode_id
    success, scored = episode.first("trajectories.success"), episode.first("trajectories.scored")
    if success is None:
        if scored is not None and reaches_learner(scored.record):
            message = "its scored trajectory passes the success filter, but it is not a success"
            return [Violation("success", name, message, scored.at)]
        return []
    if scored is None:
        return [Violation("success", name, "a success without a scored trajectory", success.at)]
    out = []
    differ = _differing_fields(scored.record, success.record)
    if differ:
        message = f"differs from its scored trajectory ({scored.at}) in {', '.join(differ)}"
        out.append(Violation("success", name, message, success.at))
    if not reaches_learner(scored.record):
        record = scored.record
        message = (
            f"its scored trajectory ({scored.at}) is no success: reward {record['reward']}, "
            f"aborted={record['aborted']}, judge error {record.get('judge_error')!r}, "
            f"blocked={record.get('blocked')}"
        )
        out.append(Violation("success", name, message, success.at))
    return out


# -- helpers ---------------------------------------------------------------------------------------


def _copy(
    at: At,
    record: dict[str, Any],
    kept: dict[str, Any],
    headers: tuple[tuple[str, bytes | None], ...] = (),
) -> Copy:
    return Copy(
        at, record.get("event_id") or "", record.get("ts") or 0, _digest(record), kept, headers
    )


def _digest(record: dict[str, Any]) -> str:
    """Every field but event_id and ts, canonically; bytes by their sha256."""
    content = {k: v for k, v in record.items() if k not in ("event_id", "ts")}
    text = json.dumps(content, sort_keys=True, default=_plain)
    return hashlib.sha256(text.encode()).hexdigest()


def _plain(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return "sha256:" + hashlib.sha256(value).hexdigest()
    raise TypeError(f"cannot compare a {type(value).__name__}")


def _log_order(copy: Copy) -> tuple[int, int]:
    return copy.at.partition, copy.at.offset


def _differing_fields(first: dict[str, Any], other: dict[str, Any]) -> list[str]:
    names = sorted((set(first) | set(other)) - {"event_id", "ts"})
    return [n for n in names if first.get(n) != other.get(n)]


def _action(action: dict[str, Any] | None) -> str:
    if action is None:
        return "none"
    fields = ", ".join(f"{k}={v!r}" for k, v in action.items() if k != "kind" and v is not None)
    return f"{action['kind']}({fields})"


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value) if not isinstance(value, dict) else _action(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
