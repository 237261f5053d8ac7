"""Episodes as the log tells them: one :class:`EpisodeView` per episode, folded from events.

:class:`EpisodeFold` is pure (no I/O): feed it ``(suffix, record)`` pairs from any topics of a run
in any interleaving, at least once each; it is idempotent on ``event_id`` and each view only ever
moves forward (a late ``started`` never reopens an ended episode). States, after the paper's task
monitor: ``waiting`` (started, nothing sent yet), ``navigating`` (first page requested),
``thinking`` (a screenshot is with the policy), ``acting`` (an action is with the browser),
``judging`` (ended, not yet scored) and ``judged``. A training episode succeeded when it is on
``trajectories.success``; an evaluation episode (``purpose`` "eval") never is, so it succeeded
when its scored trajectory passes the success filter (:func:`streams.filters.is_success`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from schemas.event_ids import run_id_of
from schemas.inference import parse_error
from schemas.purpose import is_eval
from streams.filters import is_success

STATES = ("waiting", "navigating", "thinking", "acting", "judging", "judged")
TOPICS = (
    "tasks",
    "episodes",
    "ops.navigate",
    "ops.infer",
    "ops.act",
    "observations",
    "inferences",
    "trajectories.scored",
    "trajectories.success",
)


@dataclass
class EpisodeView:
    episode_id: str
    task_id: str = ""
    website: str = ""
    difficulty: str = ""
    domain: str = ""
    state: str = "waiting"
    started_ts: int | None = None
    ended_ts: int | None = None
    judged_ts: int | None = None
    last_ts: int = 0
    end_kind: str | None = None  # finished / aborted
    reason: str | None = None
    final_answer: str | None = None
    trajectory_steps: int = 0  # steps of the scored trajectory
    url: str = ""
    inferences: int = 0
    parse_errors: int = 0
    policy_versions: set[int] = field(default_factory=set)
    reward: float | None = None
    success: bool = False
    judge_error: str | None = None
    blocked: bool = False
    repeated_steps: int = 0
    purpose: str = "train"  # "eval": held out, judged apart from training (never trained on)
    phase: str | None = None  # the experiment phase that produced the episode

    @property
    def steps(self) -> int:
        """The episode's steps as every view counts them (``analytics.rates``): the policy's
        replies seen, or the scored trajectory's steps when the log kept more of those."""
        return max(self.inferences, self.trajectory_steps)

    @property
    def run_id(self) -> str:
        return run_id_of(self.episode_id)

    @property
    def ended(self) -> bool:
        return self.state in ("judging", "judged")

    def summary(self) -> dict[str, Any]:
        """A JSON-friendly row (the dashboard's and ``replay --list``'s)."""
        return {
            "episode_id": self.episode_id,
            "task_id": self.task_id,
            "website": self.website,
            "difficulty": self.difficulty,
            "domain": self.domain,
            "state": self.state,
            "steps": self.steps,
            "url": self.url,
            "started_ts": self.started_ts,
            "ended_ts": self.ended_ts,
            "end_kind": self.end_kind,
            "reason": self.reason,
            "reward": self.reward,
            "success": self.success,
            "policy_versions": sorted(self.policy_versions),
        }


class EpisodeFold:
    def __init__(self) -> None:
        self.episodes: dict[str, EpisodeView] = {}
        self.tasks: dict[str, dict[str, Any]] = {}
        self._seen: set[str] = set()

    def apply(self, suffix: str, record: dict[str, Any]) -> EpisodeView | None:
        """Fold one event; returns the episode it changed (None: not about an episode, or seen)."""
        if suffix == "tasks":
            self.tasks[record["task_id"]] = record
            for view in self.episodes.values():
                if view.task_id == record["task_id"]:
                    self._describe(view)
            return None
        episode_id = record.get("episode_id")
        event_id = f"{suffix}/{record.get('event_id')}"
        if not episode_id or event_id in self._seen:
            return None
        self._seen.add(event_id)
        view = self.episodes.get(episode_id)
        if view is None:
            view = self.episodes[episode_id] = EpisodeView(episode_id)
        view.last_ts = max(view.last_ts, record.get("ts", 0))
        handler = getattr(self, "_" + suffix.replace(".", "_"), None)
        if handler is not None:
            handler(view, record)
        return view

    def _move(self, view: EpisodeView, state: str) -> None:
        # Forward only; within a step thinking and acting alternate.
        if view.ended and state not in ("judging", "judged"):
            return
        if view.state == "judged":
            return
        view.state = state

    def _describe(self, view: EpisodeView) -> None:
        task = self.tasks.get(view.task_id)
        if task is not None:
            view.website = view.website or task["website"]
            view.difficulty = view.difficulty or task["difficulty"]
            view.domain = task.get("domain") or ""

    def _episodes(self, view: EpisodeView, record: dict[str, Any]) -> None:
        view.task_id = record["task_id"]
        self._describe(view)
        if record["kind"] == "started":
            view.started_ts = record["ts"]
            view.purpose = record.get("purpose") or "train"
            view.phase = record.get("phase")
        else:
            view.ended_ts = record["ts"]
            view.end_kind = record["kind"]
            view.reason = record.get("reason")
            view.final_answer = record.get("final_answer")
            self._move(view, "judging")

    def _ops_navigate(self, view: EpisodeView, record: dict[str, Any]) -> None:
        view.task_id = view.task_id or record["task_id"]
        self._describe(view)
        self._move(view, "navigating")

    def _ops_infer(self, view: EpisodeView, record: dict[str, Any]) -> None:
        self._move(view, "thinking")

    def _ops_act(self, view: EpisodeView, record: dict[str, Any]) -> None:
        self._move(view, "acting")

    def _observations(self, view: EpisodeView, record: dict[str, Any]) -> None:
        view.url = record["url"]
        self._move(view, "thinking")

    def _inferences(self, view: EpisodeView, record: dict[str, Any]) -> None:
        view.inferences += 1
        view.parse_errors += parse_error(record) is not None  # a backend error is not one
        if record["policy_version"] is not None:  # None: a backend without weights acted
            view.policy_versions.add(record["policy_version"])

    def _trajectories_scored(self, view: EpisodeView, record: dict[str, Any]) -> None:
        view.task_id = record["task_id"]
        view.website = record["website"]
        view.difficulty = record["difficulty"]
        self._describe(view)
        view.reward = record["reward"]
        view.judge_error = record.get("judge_error")
        view.blocked = record.get("blocked", False)
        view.repeated_steps = sum(1 for s in record["steps"] if s["repeated"])
        view.trajectory_steps = len(record["steps"])
        view.judged_ts = record["ts"]
        view.started_ts = view.started_ts or record["started_ts"]
        view.purpose = record.get("purpose") or "train"
        view.phase = record.get("phase")
        if is_eval(record):  # never on trajectories.success: its success is the filter's verdict
            view.success = is_success(record)
        self._move(view, "judged")

    def _trajectories_success(self, view: EpisodeView, record: dict[str, Any]) -> None:
        view.success = True
