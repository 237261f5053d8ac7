"""Held-out evaluation results, as events: one per evaluated episode, one per evaluated version.

An evaluation measures frozen policy versions on a held-out task set (``webgym eval``): each
version's episodes are one run marked ``purpose="eval"`` and pinned to the version, so the policy
decodes greedily and the learner never sees them. :class:`VersionTally` turns the scored
trajectories of one version's run into ``eval_result`` events (``webgym.eval.results``); the
learning curve is the version results in version order (:func:`curve`).

Guarantees: pure (no I/O); an episode counts once however often its scored trajectory is
re-delivered (the first score wins); every interval is the 95% Wilson interval; results are
grouped by task family (:func:`task_family`: the MiniWoB++ page, or the website).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from analytics.stats import wilson_interval
from streams.filters import is_success
from tasks.miniwob import page_of


def task_family(task_id: str, website: str | None = None) -> str:
    """What results are grouped by: a MiniWoB++ instance's page, else the task's website (else
    its id)."""
    return page_of(task_id) or website or task_id


def interval(successes: int, episodes: int) -> tuple[float, float]:
    """The 95% Wilson interval, (0, 1) without episodes."""
    return wilson_interval(successes, episodes) or (0.0, 1.0)


@dataclass
class VersionTally:
    """The outcomes of one version's evaluation run, as they are judged."""

    eval_id: str
    policy_name: str
    version: int
    task_set: str
    outcomes: dict[str, tuple[str, bool]] = field(default_factory=dict)  # episode -> family, ok

    def add(self, scored: dict[str, Any], now_ms: int) -> dict[str, Any] | None:
        """A scored trajectory of the version's run in: its ``episode`` result (None if the
        episode was counted already)."""
        episode_id = scored["episode_id"]
        if episode_id in self.outcomes:
            return None
        success = is_success(scored)
        self.outcomes[episode_id] = (task_family(scored["task_id"], scored.get("website")), success)
        return {
            **self._event(f"{self.eval_id}:v{self.version}:{episode_id}", "episode", now_ms),
            "episode_id": episode_id,
            "task_id": scored["task_id"],
            "success": success,
            "episodes": 1,
            "successes": int(success),
        }

    @property
    def episodes(self) -> int:
        return len(self.outcomes)

    @property
    def successes(self) -> int:
        return sum(ok for _, ok in self.outcomes.values())

    def result(
        self, now_ms: int, announced_ts: int | None = None, samples_seen: int | None = None
    ) -> dict[str, Any]:
        """The ``version`` result: success with its interval, overall and per task family."""
        by_family: dict[str, list[bool]] = {}
        for family, ok in self.outcomes.values():
            by_family.setdefault(family, []).append(ok)
        low, high = interval(self.successes, self.episodes)
        return {
            **self._event(f"{self.eval_id}:v{self.version}", "version", now_ms),
            "episodes": self.episodes,
            "successes": self.successes,
            "ci_low": round(low, 4),
            "ci_high": round(high, 4),
            "by_task": [
                {
                    "task": family,
                    "episodes": len(oks),
                    "successes": sum(oks),
                    "ci_low": round(interval(sum(oks), len(oks))[0], 4),
                    "ci_high": round(interval(sum(oks), len(oks))[1], 4),
                }
                for family, oks in sorted(by_family.items())
            ],
            "announced_ts": announced_ts,
            "samples_seen": samples_seen,
        }

    def _event(self, event_id: str, kind: str, now_ms: int) -> dict[str, Any]:
        return {
            "event_id": event_id,
            "ts": now_ms,
            "kind": kind,
            "eval_id": self.eval_id,
            "policy_name": self.policy_name,
            "policy_version": self.version,
            "task_set": self.task_set,
            "episode_id": None,
            "task_id": None,
            "success": None,
            "episodes": 0,
            "successes": 0,
            "ci_low": None,
            "ci_high": None,
            "by_task": [],
            "announced_ts": None,
            "samples_seen": None,
        }


def curve(results: Iterable[dict[str, Any]], eval_id: str | None = None) -> list[dict[str, Any]]:
    """The learning curve: one row per evaluated version (of ``eval_id``, or of every
    evaluation; a version evaluated twice keeps its latest result), in version order, with its
    success rate."""
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for record in results:
        if record["kind"] != "version" or (eval_id and record["eval_id"] != eval_id):
            continue
        key = (record["policy_name"], record["policy_version"])
        if key not in rows or record["ts"] >= rows[key]["ts"]:
            rows[key] = record
    return [
        {**row, "success": row["successes"] / row["episodes"] if row["episodes"] else None}
        for _, row in sorted(rows.items())
    ]
