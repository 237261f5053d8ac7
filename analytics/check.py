"""The invariants of a run, checked after the fact: :class:`InvariantFold` folds every record of
the run's topics and :meth:`InvariantFold.report` lists each record that breaks one
(``webgym check``; :func:`commands.check.check_run` reads the log and feeds the fold).

The fold is pure (no I/O): feed it records with their coordinates (topic suffix, partition,
offset), in any interleaving of topics and partitions, each partition in offset order, at least
once each; the report is computed from everything folded, so feed the whole log first. Records of
other runs are ignored when a ``run_id`` is given (episode ids are ``<run_id>-<n>``).

Invariants, by the name the report gives them (:data:`INVARIANTS`): ``ends``, ``steps``,
``after-end``, ``trajectory``, ``duplicates``, ``success``, ``dead-letters``. How copies are
deduplicated: :meth:`analytics.check_episode.Episode.build`; how steps are numbered:
:func:`analytics.check_steps.check_steps`; how "after the end" is ordered:
:func:`analytics.check_steps.check_after_end`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from analytics.check_episode import At, Copy, Episode, Violation, record_copy
from analytics.check_steps import check_after_end, check_ends, check_steps
from analytics.check_trajectories import check_duplicates, check_success, check_trajectories
from infra.dead_letters import (
    HEADER_ERROR_CLASS,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_TOPIC,
    dead_letter_event_id,
)
from infra.topics import episode_topics
from schemas.event_ids import run_id_of
from schemas.observation import digest_of

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
TOPICS = ("dlq", *episode_topics())
# Topics the loop itself consumes: a record there that does not decode must be dead-lettered.
# (trajectories.success is read only by the optional learner.)
DEAD_LETTERED = tuple(suffix for suffix in episode_topics() if suffix != "trajectories.success")
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
_KEPT_FIELDS = {
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
        "backend_error",
        "policy_version",
        "request_event_id",
    ),
}
_REFERENCED_TOPICS = ("ops.infer", "observations", "inferences")  # trajectories point into these


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


def run_of(episode_id: str) -> str:
    return run_id_of(episode_id)


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
        self._note_offset(at)
        if suffix == "dlq":
            kept = {**record, "original_value": None}
            self._dead_letters.append(record_copy(at, record, kept, tuple(headers)))
            return True
        episode_id = record.get("episode_id")
        if suffix not in TOPICS or not episode_id:
            return False
        self.runs_seen.add(run_of(episode_id))
        if not self._in_run(episode_id):
            return False
        self.records += 1
        if suffix in _KEPT_FIELDS:
            kept = {name: record.get(name) for name in _KEPT_FIELDS[suffix]}
            if suffix == "observations":
                kept["screenshot_sha256"] = digest_of(record)  # inline or stored
        else:
            kept = record
        copy = record_copy(at, record, kept)
        self._records[episode_id][suffix].append(copy)
        if suffix in _REFERENCED_TOPICS:
            self._at[at] = copy
        return True

    def apply_undecodable(
        self, suffix: str, partition: int, offset: int, key: bytes | None, error: str
    ) -> None:
        """Note a record that did not decode (its key, an episode id, places it in a run)."""
        at = At(suffix, partition, offset)
        self._note_offset(at)
        episode_id = (key or b"").decode("utf-8", "replace")
        if suffix in TOPICS and suffix != "dlq" and self._in_run(episode_id):
            self._undecodable.append((at, episode_id, error))

    def apply_all(self, events: Iterable[Any]) -> int:
        """Fold :class:`infra.log_reader.TopicEvent` s; returns how many were folded."""
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

    def _note_offset(self, at: At) -> None:
        key = (at.topic, at.partition)
        self._last_offset[key] = max(self._last_offset.get(key, -1), at.offset)

    def _in_run(self, episode_id: str) -> bool:
        return self.run_id is None or run_of(episode_id) == self.run_id

    # -- the report ----------------------------------------------------------------------------

    def report(self) -> CheckReport:
        """Every violation of the records folded so far, and the counts (see the module
        docstring)."""
        sources = map(self._dead_letter_source, self._dead_letters)
        quarantined = {at for at in sources if at is not None}
        counts: Counter[str] = Counter({name: 0 for name in COUNTS})
        counts["records"] = self.records
        violations: list[Violation] = []
        for episode_id in sorted(self._records):
            episode = Episode.build(episode_id, self._records[episode_id], quarantined)
            counts.update(episode.counts())
            violations += check_ends(episode)
            violations += check_steps(episode)
            violations += check_after_end(episode)
            violations += check_trajectories(episode, self._at)
            violations += check_duplicates(episode)
            violations += check_success(episode)
        violations += self._check_dead_letters(quarantined, counts)
        return CheckReport(self.run_id, dict(counts), violations, sorted(self.runs_seen))

    def _dead_letter_source(self, dead_letter: Copy) -> At | None:
        """The coordinates a dead letter names, as a topic suffix of this deployment."""
        record = dead_letter.record
        suffix = self._topic_suffix(record.get("source_topic") or "")
        if suffix is None:
            return None
        return At(suffix, record.get("source_partition", -1), record.get("source_offset", -1))

    def _topic_suffix(self, topic: str) -> str | None:
        start = f"{self.topic_prefix}."
        return topic[len(start) :] if topic.startswith(start) else None

    def _check_dead_letters(self, quarantined: set[At], counts: Counter[str]) -> list[Violation]:
        out = []
        firsts: dict[str, Copy] = {}
        for copy in self._dead_letters:
            key = copy.record.get("original_key")
            episode_id = (key or b"").decode("utf-8", "replace") if key is not None else None
            if self.run_id is not None and (episode_id is None or not self._in_run(episode_id)):
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
        suffix = self._topic_suffix(topic)
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
