"""The task sampler's rules: keep N episodes in flight, start a new one the moment one ends.

No batches and no barrier (the paper's asynchronous rollout): each ``episode_ended`` notice frees
one slot, and the sampler fills it at once. Difficulty is drawn uniformly over the difficulties
present in the task set, or by the configured ratios; then a task of that difficulty among those
tried least often (so attempts spread evenly), skipping sites blocked until a later time. Pure;
the state is one JSON-serialisable dict (a row of the Faust ``curriculum`` table).

Guarantees: deterministic (the n-th episode of a run is drawn with ``Random(f"{seed}:{n}")`` and is
named ``<run_id>-<n:06d>``), idempotent on ``event_id``; the episodes an input started are
remembered with it, so a re-delivered input re-sends the same ``started`` events.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from streams.orchestrator import Output, Rules

REMEMBERED_INPUTS = 500  # far more than one commit interval can re-deliver


@dataclass(frozen=True)
class Picked:
    episode_id: str
    task: dict[str, Any]


def new_state() -> dict[str, Any]:
    return {
        "target": {"in_flight": 0, "max_episodes": None, "ratios": {}, "run_id": "", "seed": 0},
        "in_flight": {},  # episode_id -> task_id
        "started_total": 0,
        "attempts": {},  # task_id -> episodes started
        "blocked": {},  # website -> until_ts
        "started_by": {},  # input event_id -> episode ids it started
        "order": [],  # input event ids, oldest first (bounded)
    }


def apply(
    state: dict[str, Any] | None,
    event: dict[str, Any],
    tasks: list[dict[str, Any]],
    rules: Rules,
    now_ms: int,
) -> tuple[dict[str, Any], list[Output], bool]:
    """One curriculum event in: (new state, ``started`` events out, whether the state changed)."""
    state = copy(state) if state is not None else new_state()
    event_id = event["event_id"]
    if event_id in state["started_by"]:
        started = state["started_by"][event_id]
        return (
            state,
            [_started(state, e, now_ms) for e in started if e in state["in_flight"]],
            False,
        )
    kind = event["kind"]
    if kind == "target":
        run_id = event.get("run_id") or state["target"]["run_id"] or "run"
        if run_id != state["target"]["run_id"]:
            # A new run: episodes of the old one no longer hold slots, numbering starts again.
            state["in_flight"], state["started_total"] = {}, 0
        state["target"] = {
            "in_flight": event.get("in_flight") or 0,
            "max_episodes": event.get("max_episodes"),
            "ratios": dict(event.get("difficulty_ratios") or {}),
            "run_id": run_id,
            "seed": event.get("seed") if event.get("seed") is not None else 0,
        }
    elif kind == "episode_ended":
        state["in_flight"].pop(event.get("episode_id") or "", None)
    elif kind == "site_blocked" and event.get("website"):
        until = event.get("until_ts") or now_ms
        state["blocked"][event["website"]] = max(until, state["blocked"].get(event["website"], 0))
    picked = top_up(state, tasks, rules, now_ms)
    _remember(state, event_id, [p.episode_id for p in picked])
    return state, started_events(state, picked, now_ms), True


def copy(state: dict[str, Any]) -> dict[str, Any]:
    """A deep copy: table rows are replaced, never changed in place."""
    return json.loads(json.dumps(state))


def short_of_target(state: dict[str, Any], tasks: list[dict[str, Any]], now_ms: int) -> bool:
    """Whether a top-up would start an episode now (fewer in flight, budget and a task left)."""
    target = state["target"]
    budget = target["max_episodes"]
    if len(state["in_flight"]) >= target["in_flight"]:
        return False
    if budget is not None and state["started_total"] >= budget:
        return False
    blocked = {site: t for site, t in state["blocked"].items() if t > now_ms}
    return pick_task(tasks, target["ratios"], blocked, random.Random(0)) is not None


def started_events(state: dict[str, Any], picked: list[Picked], now_ms: int) -> list[Output]:
    return [_started(state, p.episode_id, now_ms, p.task) for p in picked]


def top_up(
    state: dict[str, Any], tasks: list[dict[str, Any]], rules: Rules, now_ms: int
) -> list[Picked]:
    """Start episodes until the target is in flight (or the run's episode budget is spent)."""
    target = state["target"]
    state["blocked"] = {site: t for site, t in state["blocked"].items() if t > now_ms}
    picked = []
    while len(state["in_flight"]) < target["in_flight"]:
        budget = target["max_episodes"]
        if budget is not None and state["started_total"] >= budget:
            break
        n = state["started_total"]
        rng = random.Random(f"{target['seed']}:{n}")
        task = pick_task(tasks, target["ratios"], state["blocked"], rng, state["attempts"])
        if task is None:
            break  # nothing to sample (no tasks yet, or every site blocked): retried later
        episode_id = f"{target['run_id']}-{n:06d}"
        state["started_total"] = n + 1
        state["in_flight"][episode_id] = task["task_id"]
        state["attempts"][task["task_id"]] = state["attempts"].get(task["task_id"], 0) + 1
        state.setdefault("tasks_of", {})[episode_id] = {
            "task_id": task["task_id"],
            "start_url": task.get("start_url"),
            "horizon": rules.horizon(task.get("difficulty", "")),
        }
        picked.append(Picked(episode_id, task))
    return picked


def pick_task(
    tasks: list[dict[str, Any]],
    ratios: dict[str, float],
    blocked: dict[str, int],
    rng: random.Random,
    attempts: dict[str, int] | None = None,
) -> dict[str, Any] | None:
    """A difficulty by the ratios, then, among its tasks tried least often, one at random.

    Preferring the least-tried tasks spreads attempts evenly: every task of a difficulty is
    tried once before any is tried twice.
    """
    available = [t for t in tasks if t.get("website") not in blocked]
    by_difficulty: dict[str, list[dict[str, Any]]] = {}
    for task in sorted(available, key=lambda t: t["task_id"]):
        by_difficulty.setdefault(task["difficulty"], []).append(task)
    difficulties = sorted(by_difficulty)
    if ratios:
        difficulties = [d for d in difficulties if ratios.get(d, 0) > 0]
    if not difficulties:
        return None
    weights = [ratios.get(d, 0) if ratios else 1.0 for d in difficulties]
    difficulty = rng.choices(difficulties, weights)[0]
    candidates = by_difficulty[difficulty]
    if attempts:
        fewest = min(attempts.get(t["task_id"], 0) for t in candidates)
        candidates = [t for t in candidates if attempts.get(t["task_id"], 0) == fewest]
    return rng.choice(candidates)


def _started(
    state: dict[str, Any], episode_id: str, now_ms: int, task: dict[str, Any] | None = None
) -> Output:
    info = state.get("tasks_of", {}).get(episode_id, {})
    return Output(
        "episodes",
        "episode",
        episode_id,
        {
            "event_id": f"{episode_id}:started",
            "episode_id": episode_id,
            "step": 0,
            "ts": now_ms,
            "kind": "started",
            "task_id": info.get("task_id") or (task or {}).get("task_id", ""),
            "start_url": info.get("start_url"),
            "horizon": info.get("horizon"),
        },
    )


def _remember(state: dict[str, Any], event_id: str, episode_ids: list[str]) -> None:
    state["started_by"][event_id] = episode_ids
    state["order"].append(event_id)
    while len(state["order"]) > REMEMBERED_INPUTS:
        forgotten = state["order"].pop(0)
        for episode_id in state["started_by"].pop(forgotten, []):
            if episode_id not in state["in_flight"]:
                state.get("tasks_of", {}).pop(episode_id, None)
    # Episodes that ended and whose starting input is forgotten need no task info any more.
    live = {e for ids in state["started_by"].values() for e in ids} | set(state["in_flight"])
    state["tasks_of"] = {e: t for e, t in state.get("tasks_of", {}).items() if e in live}
