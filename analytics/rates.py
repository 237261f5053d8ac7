"""One definition of a step and of a rate window, shared by every view: ``webgym stats``, the
dashboard, ``webgym replay --list`` and a single replay.

- A **step** is one reply of the policy in an episode: one ``inferences`` event, parseable or not,
  the final answer included (the orchestrator's horizon counts the same thing). An episode's step
  count is the replies seen, or its scored trajectory's steps when the log kept more of those.
- A run's **window** runs from the first start of its episodes to the last event of its episodes
  (the judge's score included). Rates over several runs are over the union of their windows, so
  the idle time between runs is left out: steps per second = steps / window seconds, episodes per
  hour = episodes ended x 3600 / window seconds.

:func:`rates` is pure and takes the episode views of :class:`analytics.episodes.EpisodeFold`, so
every view computes the same figure from the same events.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from analytics.episodes import EpisodeView

STEP = "one reply of the policy (an inference event, parseable or not)"
WINDOW = (
    "from a run's first episode start to its last episode event; over several runs, the union "
    "of their windows (idle time between runs left out)"
)


@dataclass(frozen=True)
class RunWindow:
    """One run's window and what happened in it."""

    run_id: str
    first_ts: int
    last_ts: int
    steps: int
    episodes_ended: int

    @property
    def seconds(self) -> float:
        return (self.last_ts - self.first_ts) / 1000

    def figures(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
            "seconds": self.seconds,
            **per_time(self.steps, self.episodes_ended, self.seconds),
        }


def per_time(steps: int, ended: int, seconds: float) -> dict[str, Any]:
    return {
        "steps": steps,
        "episodes_ended": ended,
        "steps_per_s": steps / seconds if seconds > 0 else None,
        "episodes_per_hour": ended * 3600 / seconds if seconds > 0 else None,
    }


def run_windows(views: Iterable[EpisodeView]) -> list[RunWindow]:
    """Each run's window, oldest first (episodes with no timestamp yet are left out)."""
    grouped: dict[str, list[EpisodeView]] = defaultdict(list)
    for view in views:
        if view.last_ts or view.started_ts is not None:
            grouped[view.run_id].append(view)
    windows = []
    for run_id, members in grouped.items():
        first = min(v.last_ts if v.started_ts is None else v.started_ts for v in members)
        last = max(max(v.last_ts, v.started_ts or 0) for v in members)
        steps = sum(v.steps for v in members)
        ended = sum(1 for v in members if v.end_kind is not None)
        windows.append(RunWindow(run_id, first, last, steps, ended))
    return sorted(windows, key=lambda w: (w.first_ts, w.run_id))


def union_seconds(windows: Iterable[RunWindow]) -> float:
    """Seconds covered by at least one window (overlapping runs counted once)."""
    total_ms, end = 0, None
    for window in sorted(windows, key=lambda w: w.first_ts):
        if end is None or window.first_ts > end:
            total_ms += window.last_ts - window.first_ts
            end = window.last_ts
        elif window.last_ts > end:
            total_ms += window.last_ts - end
            end = window.last_ts
    return total_ms / 1000


def rates(views: Iterable[EpisodeView]) -> dict[str, Any]:
    """Steps and episodes ended per unit of window time, overall and per run, with the
    definitions (``definitions``) a view shows beside the figures."""
    windows = run_windows(views)
    seconds = union_seconds(windows)
    return {
        **per_time(sum(w.steps for w in windows), sum(w.episodes_ended for w in windows), seconds),
        "window_s": seconds,
        "runs": [w.figures() for w in windows],
        "definitions": {"step": STEP, "window": WINDOW},
    }
