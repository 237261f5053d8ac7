"""Out-of-order steps are poison; re-delivered copies are not.

The orchestrator (``streams.orchestrator``), the browser worker (``agents.browser.worker``) and
the policy worker (``agents.policy.worker``) each tell an event whose step their episode never
asked for (far ahead, beyond the horizon, or behind and not the event applied for that step) from
a re-delivered copy of one they applied: the first is rejected (dead-lettered as
``OutOfOrderStep``), the second stays a no-op (or, when it is the last input applied, re-sends
its outputs).
"""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import TopicPartition

from agents.browser.worker import BrowserWorker, BrowserWorkerConfig, HeldEpisode, Operation
from agents.policy.worker import PolicyWorker, PolicyWorkerConfig
from infra.settings import Settings
from infra.step_reference import StepReference
from sites import generate_sites
from sites.tasks import generate_tasks
from streams.orchestrator import (
    APPLIED_MEMORY,
    STEPS_AHEAD_TOLERATED,
    Rules,
    on_inference,
    on_observation,
    on_started,
    resend,
)
from tests.samples import started_record, step_record

TASK = next(t for t in generate_tasks(generate_sites(count=2)) if t["difficulty"] == "hard")
RULES = Rules(horizons={"easy": 10, "medium": 20, "hard": 30}, parse_error_budget=3)
T0 = 1_795_000_000_000
EP = "run-000001"
CLICK = {"kind": "left_click", "x": 500, "y": 120}


def observation(step: int, **fields) -> dict:
    return {
        **step_record(EP, step, "observation", T0 + 1000 * step),
        "screenshot": f"jpeg {step}".encode(),
        "url": f"http://{TASK['website']}/p{step}",
        "title": f"Page {step}",
        **fields,
    }


def inference(step: int, action: dict | None = CLICK, **fields) -> dict:
    return {
        **step_record(EP, step, "inference", T0 + 1000 * step + 500),
        "policy_version": 0,
        "request_event_id": f"{EP}:{step}:infer",
        "raw_text": "reply",
        "action": action,
        "parse_error": None if action else "no tool call",
        **fields,
    }


def started() -> dict:
    return started_record(EP, TASK["task_id"], T0)


def at_step(steps: int) -> dict:
    """An episode that acted ``steps`` times and now waits for observation ``steps``."""
    state = on_started(None, started(), TASK, RULES, T0).state
    state = on_observation(state, observation(0), 0, 0, T0).state
    for step in range(1, steps + 1):
        state = on_inference(state, inference(step), T0).state
        if step < steps:
            state = on_observation(state, observation(step), 0, step, T0).state
    assert (state["status"], state["step"]) == ("acting", steps)
    return state


def assert_rejected(transition, state, *words: str) -> None:
    assert transition.rejected is not None
    assert (transition.changed, transition.outputs, transition.state) == (False, [], state)
    for word in words:
        assert word in transition.rejected


def assert_no_op(transition, state) -> None:
    assert transition.rejected is None
    assert (transition.changed, transition.outputs, transition.state) == (False, [], state)


# -- the orchestrator --------------------------------------------------------------------------


def test_an_observation_far_ahead_or_beyond_the_horizon_is_rejected():
    state = at_step(3)
    for step in (3 + STEPS_AHEAD_TOLERATED + 1, 31, -1):
        t = on_observation(state, observation(step), 0, 99, T0)
        assert_rejected(t, state, "out-of-order observation", f"step {step}", EP)


def test_an_observation_a_little_ahead_is_only_stale():
    state = at_step(3)
    for step in range(4, 4 + STEPS_AHEAD_TOLERATED):
        assert_no_op(on_observation(state, observation(step), 0, 99, T0), state)


def test_an_observation_behind_that_was_never_applied_is_rejected():
    state = at_step(3)
    t = on_observation(state, observation(1, event_id=f"{EP}:1:observation:forged"), 0, 99, T0)
    assert_rejected(t, state, "behind", "not the observation it applied")


def test_re_delivered_observations_stay_no_ops_even_beyond_the_applied_window():
    state = at_step(3)
    assert_no_op(on_observation(state, observation(1), 0, 1, T0), state)
    forgetful = {**state, "applied": state["applied"][-1:]}  # as after APPLIED_MEMORY inputs
    assert APPLIED_MEMORY > 3
    for step in (0, 1, 2):
        assert_no_op(on_observation(forgetful, observation(step), 0, step, T0), forgetful)
    # the last input applied, again: its outputs are re-sent, as before
    last = on_inference(state, inference(3), T0)
    assert last.rejected is None and last.outputs == resend(state)


def test_a_failure_observation_is_never_out_of_order():
    state = at_step(3)
    t = on_observation(state, observation(29, failure="renderer crashed"), 0, 99, T0)
    assert t.rejected is None
    assert t.outputs[0].record["kind"] == "aborted"


def test_an_inference_far_ahead_or_beyond_the_horizon_is_rejected():
    state = on_observation(at_step(3), observation(3), 0, 3, T0).state  # awaits inference 4
    for step in (4 + STEPS_AHEAD_TOLERATED + 1, 31, 0):
        t = on_inference(state, inference(step), T0)
        assert_rejected(t, state, "out-of-order inference", f"step {step}", EP)
    for step in range(5, 5 + STEPS_AHEAD_TOLERATED):
        assert_no_op(on_inference(state, inference(step), T0), state)


def test_an_inference_behind_is_rejected_unless_it_is_the_one_applied():
    state = on_observation(at_step(3), observation(3), 0, 3, T0).state
    forged = inference(2, event_id=f"{EP}:2:inference:again")
    assert_rejected(on_inference(state, forged, T0), state, "behind", "not the inference")
    forgetful = {**state, "applied": state["applied"][-1:]}
    assert_no_op(on_inference(forgetful, inference(2), T0), forgetful)


def test_out_of_order_is_told_after_the_end_too():
    state = on_observation(at_step(3), observation(3), 0, 3, T0).state
    ended = on_inference(state, inference(4, {"kind": "answer", "text": "x"}), T0).state
    assert ended["end"] is not None
    assert_rejected(on_inference(ended, inference(20), T0), ended, "out-of-order inference")
    assert_rejected(on_observation(ended, observation(20), 0, 9, T0), ended)
    # a late answer to what was pending at the end is not poison, only ignored
    assert_no_op(on_inference(ended, inference(5), T0), ended)


# -- the browser worker ------------------------------------------------------------------------


@pytest.fixture
def worker() -> BrowserWorker:
    settings = Settings(parse_error_budget=3)
    return BrowserWorker(settings, BrowserWorkerConfig(navigate_concurrency=1, act_concurrency=1))


def op(step: int, episode_id: str = EP) -> dict:
    return {"episode_id": episode_id, "step": step}


def test_a_navigate_op_at_any_step_but_0_is_out_of_order(worker):
    assert "navigates only at step 0" in worker._out_of_order("navigate", op(5), 0)
    assert worker._out_of_order("navigate", op(0), 0) is None
    assert worker._out_of_order("navigate", op(0), 0) is None  # a re-sent copy


def test_act_ops_behind_or_too_far_ahead_are_out_of_order(worker):
    assert worker._out_of_order("navigate", op(0), 2) is None
    assert worker._out_of_order("act", op(1), 2) is None
    assert worker._out_of_order("act", op(1), 2) is None  # a re-sent copy repeats the step
    # unparseable replies skip steps: at most 1 + parse_error_budget between two act ops
    assert worker._out_of_order("act", op(5), 2) is None
    assert "step 4" in worker._out_of_order("act", op(4), 2)  # behind the last one taken
    assert "at most step 9" in worker._out_of_order("act", op(10), 2)
    assert worker.last_taken.last[EP] == (5, 2)  # poison moves no reference
    # a late copy of the navigate op does not move the reference back
    assert worker._out_of_order("navigate", op(0), 2) is None
    assert worker.last_taken.last[EP] == (5, 2)


class NoPage:
    """An episode's session that must not be touched."""

    def __getattr__(self, name):
        raise AssertionError(f"the page was used: {name}")


def test_a_navigate_op_that_comes_after_the_episode_moved_on_is_not_served(worker):
    """After a kill, the replacement can get an episode's act op before its re-delivered
    navigate op: the act op rebuilt the page from the log, so the navigate op is finished
    without navigating the page back to its start."""
    tp = ("ops.navigate", 2)
    worker.held[EP] = HeldEpisode(session=NoPage(), browser=None, partition=2, step=1)
    worker.offsets.started(tp, 41)
    asyncio.run(worker._serve(Operation("navigate", {**op(0), "ts": 0}, tp, 41, 0, 0.0)))
    assert worker.held[EP].step == 1 and worker.stats["observations"] == 0
    assert [(t.topic, t.partition, t.offset) for t in worker._to_store] == [(*tp, 42)]


def test_an_episode_seen_for_the_first_time_has_no_reference(worker):
    assert worker._out_of_order("act", op(7, "other"), 1) is None  # e.g. after a restart
    assert worker._out_of_order("act", op(8, "other"), 1) is None


# -- the policy worker -------------------------------------------------------------------------


@pytest.fixture
def policy() -> PolicyWorker:
    return PolicyWorker(Settings(), PolicyWorkerConfig("fake"), lambda weights: object())


def test_infer_requests_behind_or_more_than_one_ahead_are_out_of_order(policy):
    assert "start at step 1" in policy._out_of_order(op(0), 3)
    assert policy._out_of_order(op(1), 3) is None
    assert policy._out_of_order(op(1), 3) is None  # the orchestrator re-sent it
    assert policy._out_of_order(op(2), 3) is None
    assert "at most step 3" in policy._out_of_order(op(4), 3)
    assert "step 1" in policy._out_of_order(op(1), 3)  # behind the last one taken
    assert policy.last_requests.last[EP] == (2, 3)  # poison moves no reference
    assert policy._out_of_order(op(9, "joined"), 3) is None  # first seen: no reference


def test_an_assigned_or_revoked_partition_forgets_its_references(policy):
    assert policy._out_of_order(op(4), 3) is None
    assert policy._out_of_order(op(6, "other"), 5) is None
    policy._on_revoke(None, [TopicPartition("t", 3)])
    assert EP not in policy.last_requests.last and "other" in policy.last_requests.last
    assert policy._out_of_order(op(9), 3) is None  # another worker took 5..8 meanwhile
    policy._on_assign(None, [TopicPartition("t", 5)])
    assert policy._out_of_order(op(2, "other"), 5) is None


def test_the_reference_remembers_a_bounded_number_of_episodes():
    reference = StepReference("act op", capacity=2)
    for episode in ("a", "b", "c"):
        assert reference.refusal(episode, 5, 0, 1) is None
    assert list(reference.last) == ["b", "c"]
    assert reference.refusal("a", 1, 0, 1) is None  # forgotten: no reference any more
