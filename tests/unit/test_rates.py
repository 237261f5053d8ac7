"""analytics.rates: one definition of a step and of a rate window for every view."""

from __future__ import annotations

import pytest

from analytics.episodes import EpisodeView
from analytics.rates import rates, run_windows, union_seconds


def _view(episode_id: str, start_s: float, end_s: float, replies: int, scored: int = 0):
    view = EpisodeView(episode_id)
    view.started_ts, view.last_ts = int(start_s * 1000), int(end_s * 1000)
    view.ended_ts, view.end_kind = int(end_s * 1000), "finished"
    view.inferences, view.trajectory_steps = replies, scored
    return view


def test_a_step_is_a_reply_or_a_scored_step_when_the_log_kept_more_of_those():
    assert _view("r-000001", 0, 1, replies=4).steps == 4
    assert _view("r-000001", 0, 1, replies=2, scored=5).steps == 5


def test_idle_time_between_runs_is_left_out():
    views = [
        _view("a-000001", 0, 10, 5),
        _view("a-000002", 2, 20, 5),
        # an hour idle, then a second run
        _view("b-000001", 3620, 3630, 10),
    ]
    figures = rates(views)
    assert figures["window_s"] == pytest.approx(30)
    assert figures["steps_per_s"] == pytest.approx(20 / 30)
    assert figures["episodes_per_hour"] == pytest.approx(3 * 3600 / 30)
    by_run = {run["run_id"]: run for run in figures["runs"]}
    assert by_run["a"]["seconds"] == pytest.approx(20) and by_run["a"]["steps"] == 10
    assert by_run["b"]["steps_per_s"] == pytest.approx(1.0)
    assert "idle time between runs left out" in figures["definitions"]["window"]


def test_overlapping_runs_are_counted_once():
    windows = run_windows([_view("a-000001", 0, 10, 1), _view("b-000001", 5, 12, 1)])
    assert union_seconds(windows) == pytest.approx(12)
    assert rates([])["steps_per_s"] is None
