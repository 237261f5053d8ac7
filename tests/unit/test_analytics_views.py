"""The pure views of the log: the episode fold, the dashboard snapshot, times, re-score diffs."""

from __future__ import annotations

import datetime

import pytest

from analytics.dashboard import DashboardState
from analytics.episodes import EpisodeFold
from analytics.errors import AnalyticsError
from analytics.rescore import compare, output_suffix, trajectory_of
from analytics.times import parse_since


def _event(suffix: str, episode: str, name: str, ts: int, **fields) -> tuple[str, dict]:
    """(suffix, record) of event ``<episode>:<name>`` of ``episode`` at ``ts``, with ``fields``."""
    return suffix, {"event_id": f"{episode}:{name}", "episode_id": episode, "ts": ts, **fields}


def _events(episode: str, task: str, ts: int, success: bool, version: int = 0):
    """The events of one finished episode of two actions, in log order per topic."""
    yield _event("episodes", episode, "started", ts, kind="started", task_id=task)
    yield _event("ops.navigate", episode, "0:navigate", ts + 1, task_id=task)
    for step in (0, 1, 2):
        at = ts + 10 * step
        yield _event("observations", episode, f"{step}:observation", at + 2, step=step,
                     url=f"http://a/{step}")  # fmt: skip
        yield _event("ops.infer", episode, f"{step}:infer", at + 3)
        yield _event("inferences", episode, f"{step}:inference", at + 4, policy_version=version,
                     parse_error="bad" if step == 1 else None)  # fmt: skip
        if step < 2:
            yield _event("ops.act", episode, f"{step + 1}:act", at + 5)
    yield _event("episodes", episode, "end", ts + 40, kind="finished", task_id=task,
                 reason="answer")  # fmt: skip
    yield _event(
        "trajectories.scored", episode, "scored", ts + 50,
        task_id=task, website="shop", difficulty="easy", reward=1.0 if success else 0.0,
        judge_error=None, blocked=False, started_ts=ts,
        steps=[{"repeated": False}, {"repeated": True}, {"repeated": False}],
    )  # fmt: skip
    if success:
        yield _event("trajectories.success", episode, "success", ts + 51)


def test_the_fold_follows_an_episode_through_its_states_once():
    fold = EpisodeFold()
    fold.apply(
        "tasks", {"task_id": "t1", "website": "shop", "difficulty": "easy", "domain": "shopping"}
    )
    states = []
    events = list(_events("run-000001", "t1", 1000, success=True))
    for suffix, record in events:
        view = fold.apply(suffix, record)
        states.append(view.state)
    assert states[0] == "waiting" and states[1] == "navigating"
    assert {"thinking", "acting", "judging"} <= set(states) and states[-1] == "judged"
    for suffix, record in events:  # delivered again: nothing moves
        assert fold.apply(suffix, record) is None
    view = fold.episodes["run-000001"]
    # a step is a reply
    assert (view.state, view.steps, view.inferences, view.parse_errors) == ("judged", 3, 3, 1)
    assert (view.domain, view.success, view.reward, view.repeated_steps) == (
        "shopping",
        True,
        1.0,
        1,
    )
    assert view.run_id == "run" and view.end_kind == "finished" and view.reason == "answer"


def test_a_late_event_never_reopens_an_ended_episode():
    fold = EpisodeFold()
    events = list(_events("run-000002", "t1", 0, success=False))
    end = next(i for i, (s, r) in enumerate(events) if s == "episodes" and r["kind"] == "finished")
    for suffix, record in events[end:]:
        fold.apply(suffix, record)
    for suffix, record in events[:end]:  # the rest arrives late (another partition)
        fold.apply(suffix, record)
    assert fold.episodes["run-000002"].state == "judged"


def test_the_dashboard_snapshot_counts_what_the_events_say():
    state = DashboardState()
    for n, (version, success) in enumerate([(0, True), (0, False), (1, True), (1, True)]):
        for suffix, record in _events(f"run-{n:06d}", "t1", 60_000 * n, success, version):
            state.apply(suffix, record)
    state.apply(
        "episodes",
        {
            "event_id": "run-000009:started",
            "episode_id": "run-000009",
            "ts": 500_000,
            "kind": "started",
            "task_id": "t1",
        },
    )
    state.apply("dlq", {"event_id": "x"})
    snap = state.snapshot(now_ms=510_000)
    assert snap["totals"]["started"] == 5 and snap["totals"]["judged"] == 4
    assert snap["totals"]["successes"] == 3 and snap["totals"]["success_rate"] == 0.75
    assert [row["episode_id"] for row in snap["in_flight"]] == ["run-000009"]
    assert snap["in_flight"][0]["elapsed_s"] == 10.0 and snap["states"]["waiting"] == 1
    assert [
        (r["version"], r["judged"], r["successes"], r["success_rate"])
        for r in snap["by_policy_version"]
    ] == [(0, 2, 1, 0.5), (1, 2, 2, 1.0)]
    assert (
        0 < snap["by_policy_version"][0]["ci_low"] < 0.5 < snap["by_policy_version"][0]["ci_high"]
    )
    assert snap["heldout_by_policy_version"] == []  # no evaluation episode yet
    assert [p[1] for p in snap["success_curve"]] == [1.0, 0.5, 2 / 3, 0.75]
    assert snap["recent"][0]["episode_id"] == "run-000003"
    assert snap["recent"][0]["replay"] == "/replay/run-000003"
    assert sum(n for _, n in snap["throughput"]["ended_per_minute"]) == 4
    assert snap["dead_letters"] == 1


def test_times_are_durations_ago_or_iso():
    assert parse_since(None) is None and parse_since("  ") is None
    assert parse_since("10m", now_s=10_000) == (10_000 - 600) * 1000
    assert parse_since("1.5h", now_s=10_000) == int((10_000 - 5400) * 1000)
    moment = datetime.datetime(2026, 11, 30, 1, 0, tzinfo=datetime.UTC)
    assert parse_since("2026-11-30T01:00") == int(moment.timestamp() * 1000)
    assert parse_since("2026-11-30T02:00+01:00") == int(moment.timestamp() * 1000)
    with pytest.raises(AnalyticsError, match="duration ago"):
        parse_since("yesterday")


def test_rescore_compares_rewards_and_each_fact():
    old = {
        "reward": 1.0,
        "verdicts": [
            {"fact_group_id": "g1", "fact": "a", "satisfied": True},
            {"fact_group_id": "g2", "fact": "b", "satisfied": True},
        ],
    }
    new = {
        "reward": 0.0,
        "verdicts": [
            {"fact_group_id": "g1", "fact": "a", "satisfied": True},
            {"fact_group_id": "g2", "fact": "b", "satisfied": False},
            {"fact_group_id": "g3", "fact": "c", "satisfied": False},
        ],
    }
    assert compare(old, new) == (True, 2)
    assert compare(old, old) == (False, 0)
    scored = {
        "episode_id": "e",
        "event_id": "e:scored",
        "reward": 1.0,
        "verdicts": [],
        "judge_name": "j",
        "judge_version": "1",
        "judge_error": None,
        "blocked": False,
        "block_reason": None,
        "steps": [],
    }
    assert trajectory_of(scored) == {"episode_id": "e", "event_id": "e:trajectory", "steps": []}
    assert output_suffix("judge-v2") == "trajectories.rescored.judge-v2"
    with pytest.raises(AnalyticsError, match="lowercase"):
        output_suffix("../x")


def test_the_dashboard_shows_held_out_success_apart_from_training():
    state = DashboardState()
    for n, (purpose, success) in enumerate([("train", True), ("eval", False), ("eval", True)]):
        for suffix, record in _events(f"run-{n:06d}", "t1", 60_000 * n, success, 2):
            if suffix == "trajectories.scored" or record.get("kind") == "started":
                record = {**record, "purpose": purpose, "aborted": False}
            state.apply(suffix, record)
    snap = state.snapshot(now_ms=510_000)
    assert [(r["version"], r["judged"]) for r in snap["by_policy_version"]] == [(2, 1)]
    [heldout] = snap["heldout_by_policy_version"]
    assert (heldout["version"], heldout["judged"], heldout["successes"]) == (2, 2, 1)
    assert heldout["ci_low"] < 0.5 < heldout["ci_high"]
