"""Which operations a browser worker runs again to take an episode over (the log's records)."""

from __future__ import annotations

from agents.browser.migration import EpisodeLog, LoggedPage

NAVIGATE = {"episode_id": "e", "step": 0, "url": "http://a.webgym.test/"}


def act(step: int) -> dict:
    return {"episode_id": "e", "step": step, "action": {"kind": "scroll"}}


def page(step: int, failure: str | None = None) -> LoggedPage:
    return LoggedPage(f"http://a/{step}", "t", b"" if failure else b"jpeg", failure, 1000 + step)


def steps(plan) -> list[int]:
    return [op["step"] for _, op in plan]


def test_the_plan_runs_every_answered_operation_before_the_one_that_came():
    history = EpisodeLog(NAVIGATE, {1: act(1), 2: act(2)}, {0: page(0), 1: page(1), 2: page(2)})
    plan, reached = history.rebuild_plan(3)
    assert [kind for kind, _ in plan] == ["navigate", "act", "act"]
    assert (steps(plan), reached) == ([0, 1, 2], 2)


def test_an_operation_already_answered_is_rebuilt_not_run_twice():
    # The previous owner answered step 2, then died before committing: step 2 came again.
    history = EpisodeLog(NAVIGATE, {1: act(1), 2: act(2)}, {0: page(0), 1: page(1), 2: page(2)})
    plan, reached = history.rebuild_plan(2)
    assert (steps(plan), reached) == ([0, 1, 2], 2)


def test_an_operation_in_progress_is_served_from_the_page_before_it():
    # The previous owner took step 2 but never answered it: rebuild to step 1, then serve 2.
    history = EpisodeLog(NAVIGATE, {1: act(1), 2: act(2)}, {0: page(0), 1: page(1)})
    plan, reached = history.rebuild_plan(2)
    assert (steps(plan), reached) == ([0, 1], 1)


def test_steps_skipped_by_unparseable_replies_have_no_operation():
    history = EpisodeLog(NAVIGATE, {1: act(1), 4: act(4)}, {0: page(0), 1: page(1), 4: page(4)})
    plan, reached = history.rebuild_plan(5)
    assert (steps(plan), reached) == ([0, 1, 4], 4)


def test_a_failure_observation_marks_the_episode_over():
    history = EpisodeLog(NAVIGATE, {1: act(1)}, {0: page(0), 1: page(1, "renderer crashed")})
    assert history.failed is not None and history.failed.failure == "renderer crashed"
    assert EpisodeLog(NAVIGATE, {}, {0: page(0)}).failed is None
