"""The task sampler's rules: each run keeps its N episodes in flight, drawn only from its task sets.

No batches and no barrier (the paper's asynchronous rollout): each ``episode_ended`` notice frees
one slot of the run that holds the episode, and the sampler fills it at once. Pure; the state is
one JSON-serialisable dict (a row of the Faust ``curriculum`` table).

Guarantees: deterministic (the n-th episode of a run is drawn with ``Random(f"{seed}:{n}")`` and
is named ``<run_id>-<n:06d>``; a run's draws depend on its own target and history and on the
tasks and blocked sites of the moment, never on other runs), idempotent on ``event_id``; the
episodes an input started are remembered with it, so a re-delivered input re-sends the same
``started`` events.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from schemas.event_ids import episode_event_id, new_episode_id, run_id_of
from streams.orchestrator import Output, Rules
from tasks.sets import is_member

REMEMBERED_INPUTS = 500  # far more than one commit interval can re-deliver
REMEMBERED_RUNS = 1000  # finished runs whose counters are kept
DEFAULT_RUN = "run"  # the run of a target that names none
KEY = "sampler"  # the curriculum topic's one key (one partition, one table row)

Task = Mapping[str, Any]


PURPOSES = ("train", "eval")
# What a run's target stamps on each of its episodes, with the value of a target that names none
# (older targets: a training run served by whatever version the worker follows): ``purpose``
# ("train", or "eval": held out, never trained on), ``pinned_version`` (the policy version that
# must serve it; null: the followed one) and ``phase`` (a label such as "warm_start"); every
# ``started`` event of the run carries them.
RUN_MARKS: dict[str, Any] = {"purpose": "train", "pinned_version": None, "phase": None}


@dataclass(frozen=True)
class Picked:
    episode_id: str
    task: Task


def new_state() -> dict[str, Any]:
    return {
        "runs": {},  # run_id -> new_run()
        "run_order": [],  # run ids, by their first target
        "blocked": {},  # website -> until_ts
        "started_by": {},  # input event_id -> episode ids it started
        "order": [],  # input event ids, oldest first (bounded)
        "tasks_of": {},  # episode_id -> what its started event carries
    }


def new_run() -> dict[str, Any]:
    return {
        "target": {"in_flight": 0, "max_episodes": None, "ratios": {}, "task_sets": {}, "seed": 0}
        | dict(RUN_MARKS),
        "in_flight": {},  # episode_id -> task_id
        "started_total": 0,
        "attempts": {},  # task_id -> episodes of this run started on it
    }


def target_event(
    run_id: str,
    task_sets: Mapping[str, float],
    in_flight: int,
    max_episodes: int | None = None,
    *,
    seed: int = 0,
    difficulty_ratios: Mapping[str, float] | None = None,
    purpose: str = "train",
    pinned_version: int | None = None,
    phase: str | None = None,
    now_ms: int,
) -> dict[str, Any]:
    """A ``target`` for run ``run_id`` (each call a new input: a fresh event id).

    ``purpose`` "eval" marks every episode of the run as held out: none of them ever reaches the
    learner. ``pinned_version`` has them served by exactly that policy version; ``phase`` labels
    them for analytics.
    """
    if purpose not in PURPOSES:
        raise ValueError(f"purpose must be one of {', '.join(PURPOSES)}, not {purpose!r}")
    return {
        "event_id": f"{run_id}:target:{in_flight}:{uuid.uuid4().hex[:8]}",
        "ts": now_ms,
        "kind": "target",
        "in_flight": in_flight,
        "max_episodes": max_episodes,
        "difficulty_ratios": dict(difficulty_ratios or {}),
        "run_id": run_id,
        "task_sets": dict(task_sets),
        "seed": seed,
        "purpose": purpose,
        "pinned_version": pinned_version,
        "phase": phase,
    }


def stop_event(run_id: str, *, now_ms: int) -> dict[str, Any]:
    """A ``stop`` of run ``run_id``: none of its episodes starts after it."""
    return {
        "event_id": f"{run_id}:stop:{uuid.uuid4().hex[:8]}",
        "ts": now_ms,
        "kind": "stop",
        "run_id": run_id,
    }


def apply(
    state: dict[str, Any] | None,
    event: dict[str, Any],
    tasks: list[Task],
    rules: Rules,
    now_ms: int,
) -> tuple[dict[str, Any], list[Output], bool]:
    """One curriculum event in: (new state, ``started`` events out, whether the state changed).

    Runs: a ``target`` event names a run (``run_id``), the task sets it draws from with their
    weights (``task_sets``, see :mod:`tasks.sets`), the episodes to keep in flight, an episode
    budget, difficulty ratios and a seed. Several runs sample at once, each with its own target,
    slots, budget and attempt counts; a target of one run leaves the others alone, and a later
    target of the same run changes it in place (its numbering goes on). A target with
    ``in_flight`` 0, or a ``stop`` event, ends the run's sampling; its episodes in flight run to
    their end. Runs whose sampling ended and whose episodes all ended keep only their counters
    (so a late target of the same run never reuses an episode id); the oldest of them are
    forgotten past :data:`REMEMBERED_RUNS`.
    """
    state = upgraded(copy(state)) if state is not None else new_state()
    event_id = event["event_id"]
    if event_id in state["started_by"]:
        started = state["started_by"][event_id]
        live = {e for run in state["runs"].values() for e in run["in_flight"]}
        return state, [_started(state, e, now_ms) for e in started if e in live], False
    kind = event["kind"]
    if kind == "target":
        _set_target(state, event)
    elif kind == "stop":
        run = state["runs"].get(event.get("run_id") or DEFAULT_RUN)
        if run is not None:
            run["target"]["in_flight"] = 0
    elif kind == "episode_ended":
        run_id = run_holding(state, event.get("episode_id") or "")
        if run_id is not None:
            state["runs"][run_id]["in_flight"].pop(event["episode_id"])
    elif kind == "site_blocked" and event.get("website"):
        until = event.get("until_ts") or now_ms
        state["blocked"][event["website"]] = max(until, state["blocked"].get(event["website"], 0))
    picked = top_up(state, tasks, rules, now_ms)
    _remember(state, event_id, [p.episode_id for p in picked])
    _forget_finished_runs(state)
    return state, started_events(state, picked, now_ms), True


def copy(state: dict[str, Any]) -> dict[str, Any]:
    """A deep copy: table rows are replaced, never changed in place."""
    return json.loads(json.dumps(state))


def upgraded(state: dict[str, Any]) -> dict[str, Any]:
    """A row written before runs were kept apart (one ``target``) as a row of runs."""
    if "runs" in state:
        return state
    old = state.pop("target", {})
    fresh = new_state()
    fresh.update({k: v for k, v in state.items() if k in fresh})
    if old.get("run_id"):
        run = new_run()
        run["target"].update({k: old[k] for k in run["target"] if k in old})
        run["in_flight"] = state.get("in_flight", {})
        run["started_total"] = state.get("started_total", 0)
        run["attempts"] = state.get("attempts", {})
        fresh["runs"][old["run_id"]], fresh["run_order"] = run, [old["run_id"]]
    return fresh


def run_holding(state: dict[str, Any], episode_id: str) -> str | None:
    """The run with ``episode_id`` in flight (its id is ``<run_id>-<n:06d>``), or None."""
    guess = run_id_of(episode_id)
    run = state["runs"].get(guess)
    if run is not None and episode_id in run["in_flight"]:
        return guess
    return next((r for r, run in state["runs"].items() if episode_id in run["in_flight"]), None)


def short_of_target(state: dict[str, Any], tasks: list[Task], now_ms: int) -> bool:
    """Whether a top-up would start an episode now: some run has fewer in flight than its
    target, budget left, and a task of its sets to draw."""
    state = upgraded(copy(state))
    blocked = {site: t for site, t in state["blocked"].items() if t > now_ms}
    sets = _SetIndex(tasks)
    for run in state["runs"].values():
        target = run["target"]
        if not _has_room(run):
            continue
        weights = target["task_sets"]
        if pick_from_sets(sets.of(weights), weights, target["ratios"], blocked, random.Random(0)):
            return True
    return False


def empty_sets(record: dict[str, Any], tasks: list[Task]) -> list[str]:
    """The sets a ``target`` names that hold no task yet (its episodes wait for them)."""
    if record.get("kind") != "target":
        return []
    members = _SetIndex(tasks).of(record.get("task_sets") or {})
    return [name for name, tasks_of_set in members.items() if not tasks_of_set]


def started_events(state: dict[str, Any], picked: list[Picked], now_ms: int) -> list[Output]:
    """The ``started`` events of the episodes just picked; the time each started is kept with
    it, so a redelivered input re-sends events equal to these, whenever it comes again."""
    for p in picked:
        state["tasks_of"][p.episode_id]["started_ts"] = now_ms
    return [_started(state, p.episode_id, now_ms, p.task) for p in picked]


def top_up(state: dict[str, Any], tasks: list[Task], rules: Rules, now_ms: int) -> list[Picked]:
    """Start episodes until each run's target is in flight (or its episode budget is spent),
    runs in the order of their ids."""
    state["blocked"] = {site: t for site, t in state["blocked"].items() if t > now_ms}
    sets = _SetIndex(tasks)
    picked = []
    for run_id in sorted(state["runs"]):
        picked += _top_up_run(state, run_id, sets, rules)
    return picked


def pick_from_sets(
    sets: Mapping[str, list[Task]],
    weights: Mapping[str, float],
    ratios: Mapping[str, float],
    blocked: Mapping[str, int],
    rng: random.Random,
    attempts: Mapping[str, int] | None = None,
) -> Task | None:
    """A set by its weight (among those with a task to give), then one of its tasks
    (:func:`pick_task`)."""
    open_sets = []
    for name in sorted(weights):
        if weights[name] > 0:
            by_difficulty = _by_difficulty(sets.get(name, []), ratios, blocked)
            if by_difficulty:
                open_sets.append((name, by_difficulty))
    if not open_sets:
        return None
    _, by_difficulty = rng.choices(open_sets, [weights[name] for name, _ in open_sets])[0]
    return _pick_in(by_difficulty, ratios, rng, attempts)


def next_to_evaluate(
    sets: Mapping[str, list[Task]], blocked: Mapping[str, int], attempts: Mapping[str, int]
) -> Task | None:
    """An evaluation run's next task: the first (by set name, then task id) of those it tried
    least often. So a run of ``k * n`` episodes on ``n`` tasks evaluates each exactly ``k`` times,
    and every version evaluated with the same budget meets the same instances.

    An evaluation run (``purpose`` "eval") does not draw at random: it enumerates its sets' tasks
    in order, every task once before any task twice."""
    best = None
    for name in sorted(sets):
        for task in sets[name]:
            if task.get("website") in blocked:
                continue
            tried = attempts.get(task["task_id"], 0)
            if best is None or tried < best[0]:
                best = (tried, task)
    return best[1] if best else None


def pick_task(
    tasks: list[Task],
    ratios: Mapping[str, float],
    blocked: Mapping[str, int],
    rng: random.Random,
    attempts: Mapping[str, int] | None = None,
) -> Task | None:
    """A difficulty by the ratios, then, among its tasks tried least often, one at random.

    Preferring the least-tried tasks spreads attempts evenly: every task of a difficulty is
    tried once before any is tried twice.
    """
    return _pick_in(_by_difficulty(tasks, ratios, blocked), ratios, rng, attempts)


# -- helpers --------------------------------------------------------------------------------------


class _SetIndex:
    """The members of each named set, sorted by task id; computed once per set per input."""

    def __init__(self, tasks: list[Task]):
        self._tasks = tasks
        self._members: dict[str, list[Task]] = {}

    def of(self, weights: Mapping[str, float]) -> dict[str, list[Task]]:
        for name in weights:
            if name not in self._members:
                chosen = [t for t in self._tasks if is_member(t, name)]
                self._members[name] = sorted(chosen, key=lambda t: t["task_id"])
        return {name: self._members[name] for name in weights}


def _set_target(state: dict[str, Any], event: dict[str, Any]) -> None:
    run_id = event.get("run_id") or DEFAULT_RUN
    if run_id not in state["runs"]:
        state["runs"][run_id] = new_run()
        state["run_order"].append(run_id)
    state["runs"][run_id]["target"] = {
        "in_flight": event.get("in_flight") or 0,
        "max_episodes": event.get("max_episodes"),
        "ratios": dict(event.get("difficulty_ratios") or {}),
        "task_sets": dict(event.get("task_sets") or {}),
        "seed": event.get("seed") if event.get("seed") is not None else 0,
        "purpose": event.get("purpose") or "train",
        "pinned_version": event.get("pinned_version"),
        "phase": event.get("phase"),
    }


def _has_room(run: dict[str, Any]) -> bool:
    target = run["target"]
    budget = target["max_episodes"]
    if len(run["in_flight"]) >= target["in_flight"]:
        return False
    return budget is None or run["started_total"] < budget


def _top_up_run(state: dict[str, Any], run_id: str, sets: _SetIndex, rules: Rules) -> list[Picked]:
    """Start the episodes one run is short of.

    Drawing, per episode of any run but an evaluation run (:func:`next_to_evaluate`): a set by
    its weight among the run's sets that have a task to give, then a difficulty uniformly over
    that set's difficulties (or by the run's ratios), then, among the tasks of that difficulty
    the run tried least often, one at random (so attempts spread evenly). Only members of the
    run's sets are drawn, whatever else the tasks topic holds; a run that names no set draws
    nothing. Sites blocked until a later time (``site_blocked``) are skipped by every run.
    """
    run = state["runs"][run_id]
    target = run["target"]
    members = sets.of(target["task_sets"]) if _has_room(run) else {}
    picked = []
    while _has_room(run):
        n = run["started_total"]
        rng = random.Random(f"{target['seed']}:{n}")
        if target.get("purpose") == "eval":
            task = next_to_evaluate(members, state["blocked"], run["attempts"])
        else:
            task = pick_from_sets(
                members,
                target["task_sets"],
                target["ratios"],
                state["blocked"],
                rng,
                run["attempts"],
            )
        if task is None:
            break  # nothing to sample (no tasks yet, or every site blocked): retried later
        episode_id = new_episode_id(run_id, n)
        run["started_total"] = n + 1
        run["in_flight"][episode_id] = task["task_id"]
        run["attempts"][task["task_id"]] = run["attempts"].get(task["task_id"], 0) + 1
        state["tasks_of"][episode_id] = {
            "task_id": task["task_id"],
            "start_url": task.get("start_url"),
            "horizon": rules.horizon(task.get("difficulty", "")),
        } | {mark: target.get(mark, default) for mark, default in RUN_MARKS.items()}
        picked.append(Picked(episode_id, task))
    return picked


def _by_difficulty(
    tasks: list[Task], ratios: Mapping[str, float], blocked: Mapping[str, int]
) -> dict[str, list[Task]]:
    """The tasks that may be drawn, by difficulty (in task id order), allowed by the ratios."""
    by_difficulty: dict[str, list[Task]] = {}
    for task in sorted(tasks, key=lambda t: t["task_id"]):
        if task.get("website") in blocked:
            continue
        if ratios and ratios.get(task["difficulty"], 0) <= 0:
            continue
        by_difficulty.setdefault(task["difficulty"], []).append(task)
    return by_difficulty


def _pick_in(
    by_difficulty: dict[str, list[Task]],
    ratios: Mapping[str, float],
    rng: random.Random,
    attempts: Mapping[str, int] | None,
) -> Task | None:
    difficulties = sorted(by_difficulty)
    if not difficulties:
        return None
    weights = [ratios.get(d, 0) if ratios else 1.0 for d in difficulties]
    candidates = by_difficulty[rng.choices(difficulties, weights)[0]]
    if attempts:
        fewest = min(attempts.get(t["task_id"], 0) for t in candidates)
        candidates = [t for t in candidates if attempts.get(t["task_id"], 0) == fewest]
    return rng.choice(candidates)


def _started(
    state: dict[str, Any], episode_id: str, now_ms: int, task: Task | None = None
) -> Output:
    info = state["tasks_of"].get(episode_id, {})
    return Output(
        "episodes",
        "episode",
        episode_id,
        {
            "event_id": episode_event_id(episode_id, "started"),
            "episode_id": episode_id,
            "step": 0,
            "ts": info.get("started_ts", now_ms),  # a row from before started_ts: now
            "kind": "started",
            "task_id": info.get("task_id") or (task or {}).get("task_id", ""),
            "start_url": info.get("start_url"),
            "horizon": info.get("horizon"),
        }
        | {mark: info.get(mark, default) for mark, default in RUN_MARKS.items()},
    )


def _remember(state: dict[str, Any], event_id: str, episode_ids: list[str]) -> None:
    state["started_by"][event_id] = episode_ids
    state["order"].append(event_id)
    while len(state["order"]) > REMEMBERED_INPUTS:
        state["started_by"].pop(state["order"].pop(0), None)
    # Episodes that ended and whose starting input is forgotten need no task info any more.
    live = {e for ids in state["started_by"].values() for e in ids}
    live |= {e for run in state["runs"].values() for e in run["in_flight"]}
    state["tasks_of"] = {e: t for e, t in state["tasks_of"].items() if e in live}


def _forget_finished_runs(state: dict[str, Any]) -> None:
    """Finished runs (sampling ended, nothing in flight) keep only their counters; past
    REMEMBERED_RUNS of them, the oldest are forgotten."""
    finished = []
    for run_id in state["run_order"]:
        run = state["runs"][run_id]
        if run["in_flight"] or _may_start(run):
            continue
        run["attempts"] = {}
        finished.append(run_id)
    for run_id in finished[: max(0, len(finished) - REMEMBERED_RUNS)]:
        del state["runs"][run_id]
        state["run_order"].remove(run_id)


def _may_start(run: dict[str, Any]) -> bool:
    target = run["target"]
    budget = target["max_episodes"]
    return target["in_flight"] > 0 and (budget is None or run["started_total"] < budget)
