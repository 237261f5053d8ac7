"""Run statistics as the log tells them: :class:`RunStats` folds events into the figures of
``webgym stats`` (and of any other view that wants them).

The fold is pure (no I/O) and incremental: feed it ``(suffix, record)`` pairs from the topics in
:data:`TOPICS`, in any interleaving of topics and partitions, at least once each; it is idempotent
on ``event_id`` (per topic), and :meth:`RunStats.figures` can be called at any time. Records of
other runs are ignored when a ``run_id`` is given (episode ids are ``<run_id>-<n:06d>``). The
figures are defined in :meth:`RunStats.figures`.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from analytics.episodes import TOPICS as EPISODE_TOPICS
from analytics.episodes import EpisodeFold, EpisodeView
from analytics.rates import rates
from infra.log_reader import TopicReader
from infra.settings import Settings
from infra.topics import TOPICS as TOPIC_TABLE
from schemas.difficulty import DIFFICULTIES
from schemas.event_ids import run_id_of
from schemas.inference import backend_error, parse_error

TOPICS = (*EPISODE_TOPICS, "policy.versions", "dlq")
# Compacted topics that describe rather than happen: read whole even with a start time.
REFERENCE_TOPICS = ("tasks", "policy.versions")
PERCENTILES = (50, 95, 99)
GROUPS = ("domain", "difficulty", "site", "policy_version")
_NICE_BUCKETS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)


@dataclass(frozen=True)
class Hop:
    """One hand-over in the step cycle: the event ``source`` at step s causes ``target`` at step
    s + ``step_offset`` of the same episode."""

    name: str
    source: str
    target: str
    step_offset: int
    who: str
    operation: str | None = None  # the operation type whose round trip this hop is


# Each hop: producer ``ts`` of one event to the producer ``ts`` of the event it caused, matched by
# episode and step; so each includes Kafka delivery, queueing and the work of the process named.
# The judge hop ends at the Kafka timestamp of the scored record (the judge copies the
# trajectory's ``ts``). Producer clocks on different hosts may disagree; values are kept as
# measured.
HOPS: tuple[Hop, ...] = (
    Hop("navigate_op->observation", "navigate_op", "observation", 0, "browser", "navigate"),
    Hop("observation->infer_request", "observation", "infer_request", 1, "orchestrator"),
    Hop("infer_request->inference", "infer_request", "inference", 0, "policy", "infer"),
    Hop("inference->act_op", "inference", "act_op", 0, "orchestrator"),
    Hop("act_op->observation", "act_op", "observation", 0, "browser", "act"),
    # Only on an unparseable reply: the orchestrator asks again on the same screen.
    Hop("unparsed inference->infer_request", "unparsed", "infer_request", 1, "orchestrator"),
    Hop("answer->episode end", "answer", "end", 0, "orchestrator"),
    Hop("episode end->scored", "ended", "scored", 0, "assembler + judge", "judge"),
)
HOP_WHO = {hop.name: hop.who for hop in HOPS}
# A step event is the stage named by its event type (the topic table's), on whichever topic.
_STAGE_OF_TOPIC = {
    spec.suffix: spec.event_type
    for spec in TOPIC_TABLE
    if spec.event_type in {hop.source for hop in HOPS} | {hop.target for hop in HOPS}
}
_EPISODE_LEVEL = ("ended", "scored")  # keyed by episode only (their step is not needed)


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile of ``values`` (need not be sorted); None when there are none.

    The p-th percentile of n sorted samples is the sample at rank ceil(p / 100 × n) (1-based):
    always a measured value.
    """
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def distribution(values: list[float]) -> dict[str, Any]:
    """Count, p50/p95/p99 (nearest rank), mean and max of ``values``."""
    ordered = sorted(values)
    out: dict[str, Any] = {"n": len(ordered)}
    for p in PERCENTILES:
        out[f"p{p}"] = percentile(ordered, p)
    out["mean"] = sum(ordered) / len(ordered) if ordered else None
    out["max"] = ordered[-1] if ordered else None
    return out


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float] | None:
    """The Wilson score interval of a success rate (95% by default); None without trials.
    Unlike the normal approximation it stays within [0, 1] and is not empty at 0 or n of n."""
    if n <= 0:
        return None
    p, z2 = successes / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # Exact bounds at 0 and n of n (rounding would leave 0.9999...).
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


class RunStats:
    """The figures of one run (or of everything in the log when ``run_id`` is None)."""

    def __init__(self, run_id: str | None = None) -> None:
        self.run_id = run_id
        self.episodes = EpisodeFold()
        self._seen: set[str] = set()
        self._at: dict[tuple[str, str, int], int] = {}  # (episode, stage, step) -> ts
        self._act_kind: dict[tuple[str, int], str] = {}
        self._model_ms: dict[tuple[str, int], float] = {}
        self.hops: dict[str, list[float]] = defaultdict(list)
        self.operations: dict[str, list[float]] = defaultdict(list)
        self.service: dict[str, list[float]] = defaultdict(list)
        self.steps_ts: list[int] = []  # producer ts of each inference
        self.ended_ts: list[int] = []  # producer ts of each episode end
        self.inferences: list[tuple[int, int]] = []  # (ts, policy_version) of versioned ones
        self.inferences_without_version = 0  # from backends without weights
        self.parse_errors = 0
        self.backend_errors = 0  # steps the backend gave no reply to (failed, timed out)
        self.trajectory_steps: dict[str, tuple[int, int]] = {}  # episode -> (steps, repeated)
        self.announcements: list[tuple[int, int]] = []  # (ts, policy_version)
        self.dead_letters: Counter[tuple[str, str]] = Counter()  # (source topic, error class)
        self.undecodable: Counter[str] = Counter()
        self.first_ts: int | None = None
        self.last_ts: int | None = None
        self.run_ids: set[str] = set()  # runs whose events were counted
        self.runs_seen: set[str] = set()  # every run in the log, counted or not

    # -- folding -------------------------------------------------------------------------------

    def apply(self, suffix: str, record: dict[str, Any], log_ts: int | None = None) -> bool:
        """Fold one decoded record of topic ``suffix``; ``log_ts`` is its Kafka timestamp (used
        for the judge hop). Returns False when it was ignored (seen, or of another run)."""
        if suffix in REFERENCE_TOPICS:
            return self._apply_reference(suffix, record)
        if suffix == "dlq":
            return self._apply_dead_letter(record)
        episode_id = record.get("episode_id")
        if not episode_id:
            return False
        self.runs_seen.add(run_id_of(episode_id))
        if not self._wanted(episode_id):
            return False
        event_id = f"{suffix}/{record.get('event_id')}"
        if event_id in self._seen:
            return False
        self._seen.add(event_id)
        self.episodes.apply(suffix, record)
        self.run_ids.add(run_id_of(episode_id))
        ts = record["ts"]
        self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
        self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)
        handler = getattr(self, "_" + suffix.replace(".", "_"), None)
        if handler is not None:
            handler(episode_id, record, log_ts)
        stage = _STAGE_OF_TOPIC.get(suffix)
        if stage is not None:  # after the handler: a hop's sample reads what the handler noted
            self._stage(episode_id, stage, record["step"], ts)
        return True

    def apply_undecodable(self, suffix: str) -> None:
        """Count a record of ``suffix`` that did not decode (not idempotent: no event id)."""
        self.undecodable[suffix] += 1

    def apply_all(self, events: Iterable[Any]) -> int:
        """Fold :class:`infra.log_reader.TopicEvent` s; returns how many were counted."""
        counted = 0
        for tail_event in events:
            event = tail_event.event
            if event.error is not None:
                self.apply_undecodable(tail_event.suffix)
            else:
                counted += self.apply(tail_event.suffix, event.record, event.timestamp_ms)
        return counted

    def _wanted(self, episode_id: str) -> bool:
        return self.run_id is None or run_id_of(episode_id) == self.run_id

    def _apply_reference(self, suffix: str, record: dict[str, Any]) -> bool:
        event_id = f"{suffix}/{record.get('event_id')}"
        if event_id in self._seen:
            return False
        self._seen.add(event_id)
        if suffix == "tasks":
            self.episodes.apply(suffix, record)
        else:
            self.announcements.append((record["ts"], record["policy_version"]))
        return True

    def _apply_dead_letter(self, record: dict[str, Any]) -> bool:
        event_id = f"dlq/{record.get('event_id')}"
        key = (record.get("original_key") or b"").decode("utf-8", "replace")
        if event_id in self._seen or (self.run_id is not None and not self._wanted(key)):
            return False
        self._seen.add(event_id)
        self.dead_letters[(record["source_topic"], record["error_class"])] += 1
        return True

    def _stage(self, episode_id: str, stage: str, step: int, ts: float) -> None:
        """Record that ``stage`` happened and emit every hop it completes."""
        if stage in _EPISODE_LEVEL:
            step = 0
        key = (episode_id, stage, step)
        if key in self._at:  # a second event for the same stage: the first one counts
            return
        self._at[key] = ts
        for hop in HOPS:
            if hop.source == stage:
                target = self._at.get((episode_id, hop.target, step + hop.step_offset))
                if target is not None:
                    self._sample(hop, episode_id, step, target - ts)
            if hop.target == stage:
                source = self._at.get((episode_id, hop.source, step - hop.step_offset))
                if source is not None:
                    self._sample(hop, episode_id, step - hop.step_offset, ts - source)

    def _sample(self, hop: Hop, episode_id: str, source_step: int, value: float) -> None:
        self.hops[hop.name].append(value)
        if hop.operation is None:
            return
        self.operations[hop.operation].append(value)
        if hop.operation == "act":
            self.operations[f"act.{self._act_kind[(episode_id, source_step)]}"].append(value)
        if hop.operation == "infer":
            model_ms = self._model_ms[(episode_id, source_step)]
            self.service["infer minus model"].append(value - model_ms)

    def _episodes(self, episode_id: str, record: dict[str, Any], log_ts: int | None) -> None:
        if record["kind"] != "started":
            self.ended_ts.append(record["ts"])
            self._stage(episode_id, "end", record["step"], record["ts"])
            self._stage(episode_id, "ended", 0, record["ts"])

    def _ops_act(self, episode_id: str, record: dict[str, Any], log_ts: int | None) -> None:
        self._act_kind[(episode_id, record["step"])] = record["action"]["kind"]

    def _observations(self, episode_id: str, record: dict[str, Any], log_ts: int | None) -> None:
        for phase, ms in record.get("timings_ms", {}).items():
            self.service[f"browser.{phase}"].append(ms)

    def _inferences(self, episode_id: str, record: dict[str, Any], log_ts: int | None) -> None:
        step, ts = record["step"], record["ts"]
        self.steps_ts.append(ts)
        if record["policy_version"] is None:
            self.inferences_without_version += 1
        else:
            self.inferences.append((ts, record["policy_version"]))
        self.service["model"].append(record["latency_ms"])
        self._model_ms[(episode_id, step)] = record["latency_ms"]
        action = record.get("action")
        if parse_error(record) is not None:
            self.parse_errors += 1
        if backend_error(record) is not None:
            self.backend_errors += 1
        if action is None:
            self._stage(episode_id, "unparsed", step, ts)
        elif action["kind"] == "answer":
            self._stage(episode_id, "answer", step, ts)

    def _trajectories_scored(
        self, episode_id: str, record: dict[str, Any], log_ts: int | None
    ) -> None:
        steps = record["steps"]
        self.trajectory_steps[episode_id] = (len(steps), sum(1 for s in steps if s["repeated"]))
        if log_ts is not None:
            self._stage(episode_id, "scored", 0, log_ts)

    # -- figures -------------------------------------------------------------------------------

    def figures(self) -> dict[str, Any]:
        """Every figure as plain JSON-friendly values.

        Definitions (the table and the JSON use the same names):

        - *judged*: the episode's scored trajectory is in the log; *succeeded*: its trajectory is
          on ``trajectories.success`` (reward 1, not aborted, no judge error, not blocked).
          Success rates are succeeded / judged, grouped by the task's domain, difficulty, site,
          and by the newest policy version whose weights served a step of the episode ("-" when
          none did: the steps came from backends without weights, scripted, heuristic or
          latency-model, whose inferences name no version). These are *training* figures:
          evaluation episodes (``purpose`` "eval") are left out.
        - *held out*: evaluation episodes, judged apart (:func:`_heldout`).
        - *steps*: policy steps, one per ``inferences`` event; *parse-error rate*: inferences
          whose reply did not parse / inferences. *Repetition rate*: steps of judged trajectories
          marked ``repeated`` (the action left the screen unchanged) / steps of judged
          trajectories.
        - *window* and rates: as every view defines them (``analytics.rates``): a run's window
          runs from the first start of its episodes to their last event; over several runs the
          union of the runs' windows (idle time between runs left out); episodes per hour =
          episodes ended × 3600 / window seconds, steps per second = steps / window seconds,
          overall and per run (``throughput.runs``). ``window`` is the span of every event read
          (the timeline's axis).
        - *hops*: see :data:`HOPS`.
        - *operations*: the round trip of each operation type, request event to result event:
          navigate, act (all kinds, and per action kind), infer, judge (the same samples as the
          matching hops).
        - *service*: time measured inside the worker: ``model`` (the inference's
          ``latency_ms``), ``infer minus model`` (the infer round trip less the model time:
          Kafka, queueing, prompt building) and ``browser.<phase>`` (the observation's
          ``timings_ms``: transit, wait, navigate, act, screenshot, total...).
        - Percentiles are nearest-rank (:func:`percentile`).
        - *policy lag*: see :meth:`_policy_lag`.
        - *migrations*: episodes a browser worker took over from another (their partition moved)
          and rebuilt from the log: how many, their *pause* (the previous owner's last
          observation to the new owner's first, the observation's ``migration_pause``) and the
          rebuild itself (``migration``: reading the log and running the steps again).
        - *dead letters*: records on ``dlq``, by source topic and error class (with a run
          filter: those whose original key is an episode of the run).
        """
        every = list(self.episodes.episodes.values())
        views = [v for v in every if v.purpose == "train"]
        window_s = (self.last_ts - self.first_ts) / 1000 if self.first_ts is not None else 0.0
        steps = len(self.steps_ts)
        trajectory_steps = sum(n for n, _ in self.trajectory_steps.values())
        repeated = sum(r for _, r in self.trajectory_steps.values())
        return {
            "run_id": self.run_id,
            "run_ids": sorted(self.run_ids),
            "window": {
                "first_ts": self.first_ts,
                "last_ts": self.last_ts,
                "seconds": window_s,
            },
            "episodes": self._episode_figures(every, views),
            "throughput": rates(every),
            "success_by": {group: self._success_by(views, group) for group in GROUPS},
            "heldout": _heldout([v for v in every if v.purpose != "train"]),
            "steps": {
                "steps": steps,
                "parse_errors": self.parse_errors,
                "parse_error_rate": rate(self.parse_errors, steps),
                "backend_errors": self.backend_errors,
                "trajectory_steps": trajectory_steps,
                "repeated_steps": repeated,
                "repetition_rate": rate(repeated, trajectory_steps),
            },
            "latency_ms": {
                "operations": _distributions(self.operations, _operation_order),
                "hops": {
                    hop.name: {"who": hop.who, **distribution(self.hops[hop.name])}
                    for hop in HOPS
                    if self.hops.get(hop.name)
                },
                "service": _distributions(self.service, _service_order),
            },
            "policy_lag": self._policy_lag(),
            "migrations": {
                "count": len(self.service.get("browser.migration_pause", [])),
                "pause_ms": distribution(self.service.get("browser.migration_pause", [])),
                "rebuild_ms": distribution(self.service.get("browser.migration", [])),
            },
            "dead_letters": {
                "total": sum(self.dead_letters.values()),
                "by_source_topic": _count_by(self.dead_letters, 0),
                "by_error_class": _count_by(self.dead_letters, 1),
            },
            "undecodable": dict(sorted(self.undecodable.items())),
            "timeline": timeline(self.first_ts, self.last_ts, self.steps_ts, self.ended_ts),
        }

    def _episode_figures(
        self, views: list[EpisodeView], training: list[EpisodeView]
    ) -> dict[str, Any]:
        """Counts over every episode; judged and success over training episodes only."""
        judged = [v for v in training if v.state == "judged"]
        successes = sum(1 for v in judged if v.success)
        return {
            "started": sum(1 for v in views if v.started_ts is not None),
            "ended": sum(1 for v in views if v.end_kind is not None),
            "finished": sum(1 for v in views if v.end_kind == "finished"),
            "aborted": sum(1 for v in views if v.end_kind == "aborted"),
            "in_flight": sum(1 for v in views if v.started_ts is not None and not v.ended),
            "judged": len(judged),
            "successes": successes,
            "success_rate": rate(successes, len(judged)),
            "judge_errors": sum(1 for v in judged if v.judge_error is not None),
            "blocked": sum(1 for v in judged if v.blocked),
            "terminations": dict(
                Counter(
                    (v.reason or "").split(":")[0] for v in views if v.end_kind is not None
                ).most_common()
            ),
        }

    def _success_by(self, views: list[EpisodeView], group: str) -> dict[str, dict[str, Any]]:
        counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for view in views:
            if view.state != "judged":
                continue
            value = _group_value(view, group)
            counts[value][0] += 1
            counts[value][1] += view.success
        return {
            value: {"judged": j, "successes": s, "rate": rate(s, j)}
            for value, (j, s) in sorted(counts.items(), key=lambda item: _group_order(group, item))
        }

    def _policy_lag(self) -> dict[str, Any]:
        """Policy lag of an inference: the newest version announced on ``policy.versions`` at or
        before the inference's ``ts`` (or the inference's own, if newer) minus the inference's
        ``policy_version``; inferences that name no version (backends without weights) have no
        lag and are counted apart (``without_version``). ``policy.versions`` is compacted: only
        the last announcement per policy name is certain to remain, so older history may be
        missing."""
        announced = sorted(self.announcements)
        times = [ts for ts, _ in announced]
        newest: list[int] = []
        for _, version in announced:
            newest.append(max(version, newest[-1]) if newest else version)
        lags = []
        for ts, version in self.inferences:
            index = bisect.bisect_right(times, ts)
            latest = max(version, newest[index - 1]) if index else version
            lags.append(latest - version)
        behind = sum(1 for lag in lags if lag > 0)
        return {
            "inferences": len(lags),
            "announced_versions": sorted({v for _, v in announced}),
            "mean": sum(lags) / len(lags) if lags else None,
            "max": max(lags) if lags else None,
            "behind": behind,
            "behind_rate": rate(behind, len(lags)),
            "by_versions_behind": {str(k): n for k, n in sorted(Counter(lags).items())},
            "by_policy_version": {
                str(k): n for k, n in sorted(Counter(v for _, v in self.inferences).items())
            },
            "without_version": self.inferences_without_version,
        }


def _heldout(views: list[EpisodeView]) -> dict[str, Any]:
    """Held-out success over all evaluation episodes and by policy version, with intervals.

    Evaluation episodes are judged apart: succeeded = the scored trajectory passes the success
    filter (they never reach ``trajectories.success``), by the newest policy version that served
    a step, each rate with its 95% Wilson score interval (``ci_low``, ``ci_high``).
    """
    judged = [v for v in views if v.state == "judged"]
    by_version: dict[str, list[EpisodeView]] = defaultdict(list)
    for view in judged:
        by_version[_group_value(view, "policy_version")].append(view)
    ordered = sorted(by_version.items(), key=lambda item: _group_order("policy_version", item))
    return {
        **_with_interval(judged),
        "by_policy_version": {version: _with_interval(group) for version, group in ordered},
    }


def _with_interval(judged: list[EpisodeView]) -> dict[str, Any]:
    successes = sum(1 for v in judged if v.success)
    interval = wilson_interval(successes, len(judged))
    return {
        "judged": len(judged),
        "successes": successes,
        "rate": rate(successes, len(judged)),
        "ci_low": interval[0] if interval else None,
        "ci_high": interval[1] if interval else None,
    }


def timeline(
    first_ts: int | None,
    last_ts: int | None,
    steps_ts: list[int],
    ended_ts: list[int],
    max_buckets: int = 30,
) -> dict[str, Any]:
    """Steps and episode ends per time bucket; the bucket is the smallest of a few round sizes
    (1 s ... 1 day) that keeps at most ``max_buckets`` buckets over the window."""
    if first_ts is None or last_ts is None:
        return {"start_ts": None, "bucket_s": None, "steps": [], "episodes_ended": []}
    span_s = (last_ts - first_ts) / 1000
    bucket_s = next((b for b in _NICE_BUCKETS_S if span_s / b < max_buckets), _NICE_BUCKETS_S[-1])
    start = first_ts - first_ts % (bucket_s * 1000)
    count = (last_ts - start) // (bucket_s * 1000) + 1

    def per_bucket(stamps: list[int]) -> list[int]:
        out = [0] * count
        for ts in stamps:
            out[min(count - 1, max(0, (ts - start) // (bucket_s * 1000)))] += 1
        return out

    return {
        "start_ts": start,
        "bucket_s": bucket_s,
        "steps": per_bucket(steps_ts),
        "episodes_ended": per_bucket(ended_ts),
    }


def _group_value(view: EpisodeView, group: str) -> str:
    if group == "domain":
        return view.domain or "-"
    if group == "difficulty":
        return view.difficulty or "-"
    if group == "site":
        return view.website or "-"
    return str(max(view.policy_versions)) if view.policy_versions else "-"


def _group_order(group: str, item: tuple[str, Any]) -> tuple:
    value = item[0]
    if group == "difficulty" and value in DIFFICULTIES:
        return (0, DIFFICULTIES.index(value), value)
    if group == "policy_version" and value.isdigit():
        return (0, int(value), value)
    return (1, 0, value)


def _operation_order(name: str) -> tuple:
    base = name.split(".")[0]
    order = ("navigate", "act", "infer", "judge")
    return (order.index(base) if base in order else len(order), name != base, name)


def _service_order(name: str) -> tuple:
    return (name.startswith("browser."), name)


def _distributions(samples: dict[str, list[float]], order) -> dict[str, dict[str, Any]]:
    return {name: distribution(samples[name]) for name in sorted(samples, key=order)}


def _count_by(counts: Counter, index: int) -> dict[str, int]:
    out: Counter[str] = Counter()
    for key, n in counts.items():
        out[key[index]] += n
    return dict(out.most_common())


def read_figures(settings: Settings, run_id: str | None, since_ms: int | None = None) -> dict:
    """The figures of ``run_id`` (None: every run) from the log as it is now, the way `webgym
    stats --json` writes them; ``since_ms`` skips what the log holds from before (reference
    topics are read whole)."""
    run_stats = RunStats(run_id=run_id)
    with TopicReader(settings, TOPICS, since_ms, from_start=REFERENCE_TOPICS) as reader:
        for batch in reader.batches_to_end():
            run_stats.apply_all(batch)
    return run_stats.figures()
