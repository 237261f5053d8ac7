"""The orchestrator's rules (``streams.orchestrator``), driven event by event: no Kafka, no Faust.

Every output is checked to encode with its event type, as the stream processor will send it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from schemas.prompt.context import Current, Step, build_context
from schemas.prompt.reply import format_reply
from schemas.serde import default_catalog
from sites import generate_sites
from sites.tasks import generate_tasks
from streams.orchestrator import (
    Output,
    Rules,
    Transition,
    on_episode_event,
    on_inference,
    on_observation,
    on_started,
    on_timer,
    resend,
)
from tests.samples import started_record, step_record

TASKS = generate_tasks(generate_sites(count=3))
EASY = next(t for t in TASKS if t["difficulty"] == "easy")
HARD = next(t for t in TASKS if t["difficulty"] == "hard")
RULES = Rules(
    horizons={"easy": 3, "medium": 4, "hard": 5},
    parse_error_budget=2,
    deadline_ms=600_000,
    lease_ms=60_000,
    navigate_timeout_ms=20_000,
    act_timeout_ms=8_000,
)
T0 = 1_795_000_000_000
EP = "run-000000"


# -- fixtures: records as their producers write them ----------------------------------------------


def started(task: dict[str, Any] | None = EASY, horizon: int | None = None, **fields) -> dict:
    task_id = task["task_id"] if task else "nobody-published-this"
    start_url = task["start_url"] if task else None
    return started_record(EP, task_id, T0, **{"start_url": start_url, "horizon": horizon, **fields})


def observation(step: int, page: str = "home", **fields) -> dict:
    return {
        **step_record(EP, step, "observation", T0 + 1000 * step),
        "screenshot": f"jpeg of {page}".encode(),
        "width": 1280,
        "height": 768,
        "url": f"http://{EASY['website']}/{page}",
        "title": f"Page {page}",
        **fields,
    }


def inference(step: int, action: dict | None, policy_version: int = 7, memory: str = "") -> dict:
    reply = format_reply(action, thought=f"t{step}", memory=memory) if action else "no idea"
    return {
        **step_record(EP, step, "inference", T0 + 1000 * step + 500),
        "policy_version": policy_version,
        "request_event_id": f"{EP}:{step}:infer",
        "raw_text": reply,
        "action": action,
        "parse_error": None if action else "no <tool_call>...</tool_call> block in the reply",
        "memory": memory or None,
        "latency_ms": 120.0,
        "backend": "scripted",
        "model": "script",
    }


CLICK = {"kind": "left_click", "x": 500, "y": 120}
ANSWER = {"kind": "answer", "text": EASY["definite_answer"]}


def encoded(transition: Transition) -> list[Output]:
    """The outputs, after checking that each record fits its event type's schema."""
    catalog = default_catalog()
    for output in transition.outputs:
        catalog.decode(catalog.encode(output.event_type, output.record), output.event_type)
    return transition.outputs


def only(transition: Transition) -> Output:
    outputs = encoded(transition)
    assert len(outputs) == 1, outputs
    return outputs[0]


def navigating(task: dict = EASY, rules: Rules = RULES, **fields) -> dict:
    return on_started(None, started(task, **fields), task, rules, T0).state


def thinking(task: dict = EASY, rules: Rules = RULES) -> dict:
    return on_observation(navigating(task, rules), observation(0), 0, 10, T0 + 1000).state


def acting(task: dict = EASY) -> dict:
    return on_inference(thinking(task), inference(1, CLICK), T0 + 1500).state


def test_fixture_records_fit_their_schemas():
    catalog = default_catalog()
    catalog.encode("episode", started())
    catalog.encode("observation", observation(0))
    catalog.encode("inference", inference(1, CLICK))
    catalog.encode("inference", inference(1, None))
    catalog.encode("task", EASY)


# -- a whole episode ------------------------------------------------------------------------------


def test_a_full_episode_from_start_to_answer():
    # started -> navigate (step 0)
    t = on_started(None, started(), EASY, RULES, T0)
    assert t.changed
    assert only(t) == Output(
        "ops.navigate",
        "navigate_op",
        EP,
        {
            "event_id": f"{EP}:0:navigate",
            "episode_id": EP,
            "step": 0,
            "ts": T0,
            "url": EASY["start_url"],
            "timeout_ms": 20_000,
            "allowed_hosts": [EASY["website"]],
            "task_id": EASY["task_id"],
            "set_of_marks": False,  # practice-web tasks: coordinates
            "setup": None,
        },
    )
    state = t.state
    assert (state["status"], state["step"], state["horizon"]) == ("navigating", 0, 3)
    assert state["instruction"] == EASY["task_name"]
    assert state["deadline_ts"] == T0 + 600_000

    # observation 0 -> infer request step 1
    obs0 = observation(0, "home")
    t = on_observation(state, obs0, 3, 41, T0 + 1000)
    request = only(t)
    assert (request.topic, request.event_type, request.key) == ("ops.infer", "infer_request", EP)
    context = build_context(
        EASY["task_name"], [], Current(1, obs0["event_id"], obs0["title"], obs0["url"])
    )
    assert request.record == {
        "event_id": f"{EP}:1:infer",
        "episode_id": EP,
        "step": 1,
        "ts": T0 + 1000,
        "policy_version": None,
        "task_id": EASY["task_id"],
        "mode": "coordinate",
        "messages_json": json.dumps(context.messages),
        "observation_event_ids": [f"{EP}:0:observation"],
        "memory": None,
        "deadline_ts": T0 + 600_000,
        "purpose": "train",
        "pinned_version": None,
        "phase": None,
    }
    state = t.state
    assert (state["status"], state["step"]) == ("thinking", 1)
    assert state["current"]["sha256"] == hashlib.sha256(obs0["screenshot"]).hexdigest()

    # inference 1 (a click) -> act step 1
    inf1 = inference(1, CLICK, policy_version=7, memory="on the home page")
    t = on_inference(state, inf1, T0 + 1500)
    assert only(t) == Output(
        "ops.act",
        "act_op",
        EP,
        {
            "event_id": f"{EP}:1:act",
            "episode_id": EP,
            "step": 1,
            "ts": T0 + 1500,
            "policy_version": 7,
            "action": CLICK,
            "inference_event_id": f"{EP}:1:inference",
            "timeout_ms": 8_000,
            "set_of_marks": False,
        },
    )
    state = t.state
    assert (state["status"], state["step"], state["policy_version"]) == ("acting", 1, 7)

    # observation 1 -> infer request step 2, with step 1 as a full round
    obs1 = observation(1, "products/kettle")
    t = on_observation(state, obs1, 3, 57, T0 + 2000)
    request = only(t)
    history = [
        Step(1, obs0["event_id"], obs0["title"], obs0["url"], inf1["raw_text"], CLICK, None, True)
    ]
    context = build_context(
        EASY["task_name"], history, Current(2, obs1["event_id"], obs1["title"], obs1["url"])
    )
    assert request.record["event_id"] == f"{EP}:2:infer"
    assert request.record["step"] == 2
    assert request.record["policy_version"] == 7
    assert request.record["messages_json"] == json.dumps(context.messages)
    assert request.record["observation_event_ids"] == [
        f"{EP}:0:observation",
        f"{EP}:1:observation",
    ]
    assert request.record["memory"] == "on the home page"
    state = t.state

    # inference 2 (the answer) -> the end: terminal event, trajectory, sampler notice
    t = on_inference(state, inference(2, ANSWER, policy_version=8), T0 + 2500)
    outputs = encoded(t)
    assert [(o.topic, o.event_type, o.key) for o in outputs] == [
        ("episodes", "episode", EP),
        ("trajectories", "trajectory", EP),
        ("curriculum", "curriculum", "sampler"),
    ]
    terminal, trajectory, notice = (o.record for o in outputs)
    assert terminal == {
        "event_id": f"{EP}:end",
        "episode_id": EP,
        "step": 2,
        "ts": T0 + 2500,
        "policy_version": 8,
        "kind": "finished",
        "task_id": EASY["task_id"],
        "start_url": EASY["start_url"],
        "horizon": 3,
        "reason": "answer",
        "final_answer": EASY["definite_answer"],
    }
    assert notice == {
        "event_id": f"{EP}:ended",
        "ts": T0 + 2500,
        "kind": "episode_ended",
        "episode_id": EP,
        "task_id": EASY["task_id"],
        "website": EASY["website"],
        "reason": "finished: answer",
    }
    assert trajectory["event_id"] == f"{EP}:trajectory"
    assert trajectory["termination"] == "answer"
    assert trajectory["aborted"] is False
    assert trajectory["final_answer"] == EASY["definite_answer"]
    assert trajectory["policy_versions"] == [7, 8]
    assert trajectory["final_url"] == obs1["url"]
    assert trajectory["final_observation_event_id"] == obs1["event_id"]
    assert (trajectory["difficulty"], trajectory["horizon"]) == ("easy", 3)
    assert trajectory["started_ts"] == T0
    assert trajectory["step"] == 2
    assert [
        (
            s["step"],
            s["observation_event_id"],
            s["inference_event_id"],
            s["observation_partition"],
            s["observation_offset"],
            s["url"],
            s["policy_version"],
            s["action"],
            s["repeated"],
            s["trainable"],
        )
        for s in trajectory["steps"]
    ] == [
        (1, obs0["event_id"], f"{EP}:1:inference", 3, 41, obs0["url"], 7, CLICK, False, True),
        (2, obs1["event_id"], f"{EP}:2:inference", 3, 57, obs1["url"], 8, ANSWER, False, True),
    ]
    assert t.state["status"] == "ended"
    assert t.state["end"] == {
        "kind": "finished",
        "reason": "answer",
        "final_answer": EASY["definite_answer"],
        "ts": T0 + 2500,
    }


def test_the_start_url_and_horizon_of_the_started_event_win():
    state = navigating(horizon=12, start_url=f"http://{EASY['website']}/products")
    assert state["horizon"] == 12
    assert state["start_url"] == f"http://{EASY['website']}/products"


def test_a_start_for_an_unknown_task_ends_aborted_at_once():
    t = on_started(None, started(None), None, RULES, T0 + 5)
    outputs = encoded(t)
    assert [o.topic for o in outputs] == ["episodes", "trajectories", "curriculum"]
    assert outputs[0].record["kind"] == "aborted"
    assert outputs[0].record["reason"] == "unknown task 'nobody-published-this'"
    assert outputs[1].record["aborted"] is True
    assert outputs[1].record["steps"] == []
    assert outputs[2].record["reason"] == "aborted: unknown task 'nobody-published-this'"
    assert t.state["status"] == "ended"


# -- idempotency ----------------------------------------------------------------------------------


def test_the_last_input_redelivered_resends_its_outputs_unchanged():
    state = navigating()
    first = on_observation(state, observation(0), 0, 10, T0 + 1000)
    again = on_observation(first.state, observation(0), 0, 10, T0 + 9999)
    assert again.changed is False
    assert again.state is first.state
    assert again.outputs == first.outputs == resend(first.state)


def test_a_redelivered_start_resends_the_navigate_op():
    first = on_started(None, started(), EASY, RULES, T0)
    again = on_started(first.state, started(), EASY, RULES, T0 + 50)
    assert (again.changed, again.state, again.outputs) == (False, first.state, first.outputs)


def test_an_older_duplicate_returns_nothing():
    state = acting()
    # observation 0 and the start were applied before the inference: nothing to re-send
    for t in (
        on_observation(state, observation(0), 0, 10, T0 + 3000),
        on_started(state, started(), EASY, RULES, T0 + 3000),
    ):
        assert (t.changed, t.outputs, t.state) == (False, [], state)


def test_a_redelivered_answer_resends_the_end_and_nothing_else_moves():
    state = on_observation(acting(), observation(1), 0, 11, T0 + 2000).state
    end = on_inference(state, inference(2, ANSWER), T0 + 2500)
    again = on_inference(end.state, inference(2, ANSWER), T0 + 4000)
    assert again.changed is False
    assert again.outputs == end.outputs
    assert [o.topic for o in again.outputs] == ["episodes", "trajectories", "curriculum"]


def test_stale_observations_are_ignored():
    state = acting()  # waits for observation 1
    for stale in (observation(0, "old", event_id="other"), observation(2)):
        t = on_observation(state, stale, 0, 99, T0 + 3000)
        assert (t.changed, t.outputs, t.state) == (False, [], state)
    # while the policy thinks, no observation is awaited
    state = thinking()
    t = on_observation(state, observation(1), 0, 99, T0 + 3000)
    assert (t.changed, t.outputs) == (False, [])


def test_an_inference_for_another_step_is_ignored():
    state = thinking()
    t = on_inference(state, inference(2, CLICK), T0 + 2000)
    assert (t.changed, t.outputs, t.state) == (False, [], state)


def test_events_after_the_end_are_ignored():
    state = on_observation(acting(), observation(1), 0, 11, T0 + 2000).state
    ended = on_inference(state, inference(2, ANSWER), T0 + 2500).state
    for t in (
        on_observation(ended, observation(2), 0, 12, T0 + 3000),
        on_observation(ended, observation(2, failure="crashed"), 0, 12, T0 + 3000),
        on_inference(ended, inference(3, CLICK), T0 + 3000),
        on_timer(ended, T0 + 10**9),
        on_episode_event(ended, {"event_id": f"{EP}:end", "kind": "finished"}, T0 + 3000),
    ):
        assert (t.changed, t.outputs, t.state) == (False, [], ended)


def test_inputs_for_an_episode_never_opened_are_ignored():
    assert on_observation(None, observation(0), 0, 1, T0).state is None
    assert on_inference(None, inference(1, CLICK), T0).outputs == []
    assert on_episode_event(None, {"event_id": "x", "kind": "aborted"}, T0).changed is False


def test_states_are_replaced_never_changed_in_place():
    state = thinking()
    before = json.dumps(state, sort_keys=True)
    on_inference(state, inference(1, CLICK), T0 + 1500)
    on_observation(state, observation(1, failure="gone"), 0, 1, T0 + 1500)
    on_timer(state, T0 + 10**9)
    assert json.dumps(state, sort_keys=True) == before


# -- how an episode ends --------------------------------------------------------------------------


@pytest.mark.parametrize(("task", "horizon"), [(EASY, 3), (HARD, 5)])
def test_an_action_at_the_horizon_ends_the_episode_without_acting(task, horizon):
    state = navigating(task)
    assert state["horizon"] == horizon
    for step in range(1, horizon):
        state = on_observation(state, observation(step - 1, f"p{step}"), 0, step, T0).state
        state = on_inference(state, inference(step, CLICK), T0).state
        assert state["status"] == "acting"
    state = on_observation(state, observation(horizon - 1, "last"), 0, 9, T0).state
    navigate = {"kind": "navigate", "url": f"http://{task['website']}/about"}
    t = on_inference(state, inference(horizon, navigate), T0 + 7)
    outputs = encoded(t)
    assert [o.topic for o in outputs] == ["episodes", "trajectories", "curriculum"]
    assert outputs[0].record["kind"] == "finished"
    assert outputs[0].record["reason"] == "horizon"
    assert outputs[0].record["step"] == horizon
    assert outputs[0].record["final_answer"] is None
    assert len(outputs[1].record["steps"]) == horizon


def test_an_unparseable_reply_at_the_horizon_ends_the_episode():
    state = on_observation(acting(), observation(1), 0, 2, T0).state
    state = on_inference(state, inference(2, CLICK), T0).state
    state = on_observation(state, observation(2, "p2"), 0, 3, T0).state
    t = on_inference(state, inference(3, None), T0 + 9)  # within the budget, but step 3 of 3
    outputs = encoded(t)
    assert outputs[0].record["reason"] == "horizon"
    assert [o.topic for o in outputs] == ["episodes", "trajectories", "curriculum"]


def test_a_difficulty_without_a_horizon_gets_the_longest():
    assert RULES.horizon("unheard-of") == 5
    assert Rules(horizons={}).horizon("easy") == 10


def test_an_unparseable_reply_asks_again_on_the_same_screen_with_the_error_shown():
    state = thinking()
    t = on_inference(state, inference(1, None), T0 + 1500)
    request = only(t).record
    assert request["event_id"] == f"{EP}:2:infer"
    assert request["step"] == 2
    assert request["observation_event_ids"] == [f"{EP}:0:observation", f"{EP}:0:observation"]
    messages = json.loads(request["messages_json"])
    notes = messages[-1]["content"][0]["text"]
    assert "Your previous reply could not be parsed (no <tool_call>" in notes
    assert t.state["parse_errors"] == 1
    assert t.state["status"] == "thinking"
    # the next reply acts on that same screen, as step 2
    t = on_inference(t.state, inference(2, CLICK), T0 + 2000)
    assert only(t).record["event_id"] == f"{EP}:2:act"
    assert t.state["step"] == 2


def test_an_action_error_is_shown_once_and_not_again_after_a_parse_error():
    t = on_observation(acting(), observation(1, action_error="no element there"), 0, 2, T0)
    first = json.loads(only(t).record["messages_json"])[-1]["content"][0]["text"]
    assert "The last action failed: no element there" in first
    t = on_inference(t.state, inference(2, None), T0)
    second = json.loads(only(t).record["messages_json"])[-1]["content"][0]["text"]
    assert "The last action failed" not in second
    assert "could not be parsed" in second


def test_a_backend_that_keeps_failing_aborts_the_episode_with_its_error():
    state = navigating(HARD)
    state = on_observation(state, observation(0), 0, 1, T0).state
    timed_out = "backend error: no answer within 1 s"
    for step in (1, 2, 3):
        failed = {**inference(step, None), "parse_error": timed_out, "raw_text": ""}
        t = on_inference(state, failed, T0 + step)
        state = t.state
    outputs = encoded(t)
    assert outputs[0].record["kind"] == "aborted"  # no reply at all, unlike a model's bad one
    assert outputs[0].record["reason"] == f"parse errors: 3 unparseable replies (last: {timed_out})"


def test_a_backend_error_is_a_field_and_shown_as_no_reply():
    state = navigating(HARD)
    state = on_observation(state, observation(0), 0, 1, T0).state
    for step in (1, 2, 3):
        failed = {
            **inference(step, None),
            "parse_error": None,
            "backend_error": "no answer within 1 s",
            "raw_text": "",
        }
        t = on_inference(state, failed, T0 + step)
        state = t.state
        if step == 1:
            notes = json.loads(only(t).record["messages_json"])[-1]["content"][0]["text"]
            assert "No reply was received for the previous step" in notes
            assert "could not be parsed" not in notes
    outputs = encoded(t)
    assert outputs[0].record["kind"] == "aborted"
    assert outputs[0].record["reason"] == (
        "parse errors: 3 unparseable replies (last: backend error: no answer within 1 s)"
    )
    assert [s["parse_error"] for s in outputs[1].record["steps"]] == [None] * 3


def test_one_unparseable_reply_over_the_budget_ends_the_episode():
    state = navigating(HARD)  # horizon 5: the budget (2) ends it first
    state = on_observation(state, observation(0), 0, 1, T0).state
    for step in (1, 2):
        t = on_inference(state, inference(step, None), T0)
        assert [o.topic for o in t.outputs] == ["ops.infer"]
        state = t.state
    t = on_inference(state, inference(3, None), T0 + 77)
    outputs = encoded(t)
    assert [o.topic for o in outputs] == ["episodes", "trajectories", "curriculum"]
    assert outputs[0].record["kind"] == "finished"
    assert outputs[0].record["reason"] == (
        "parse errors: 3 unparseable replies (last: no <tool_call>...</tool_call> block in the "
        "reply)"
    )
    steps = outputs[1].record["steps"]
    assert [(s["parse_error"] is not None, s["trainable"]) for s in steps] == [(True, False)] * 3


@pytest.mark.parametrize("status", ["navigating", "thinking", "acting"])
def test_a_browser_failure_aborts_in_any_status(status):
    state = {"navigating": navigating, "thinking": thinking, "acting": acting}[status]()
    assert state["status"] == status
    failure = observation(state["step"] + 3, failure="browser crashed: Target closed")
    t = on_observation(state, failure, 0, 5, T0 + 4000)
    outputs = encoded(t)
    assert [o.topic for o in outputs] == ["episodes", "trajectories", "curriculum"]
    assert outputs[0].record["kind"] == "aborted"
    assert outputs[0].record["reason"] == "browser: browser crashed: Target closed"
    assert outputs[1].record["aborted"] is True
    assert t.state["status"] == "ended"


def test_the_deadline_finishes_the_episode():
    state = thinking(rules=Rules(RULES.horizons, deadline_ms=600_000, lease_ms=10**9))
    assert on_timer(state, T0 + 599_999).changed is False
    t = on_timer(state, T0 + 600_000)
    outputs = encoded(t)
    assert outputs[0].record["kind"] == "finished"
    assert outputs[0].record["reason"] == "deadline"
    assert t.state["applied"][-1] == f"{EP}:deadline"
    assert on_timer(t.state, T0 + 600_001).changed is False
    # both passed: the deadline decides
    both = on_timer(thinking(), T0 + 600_000)
    assert both.outputs[0].record["reason"] == "deadline"


@pytest.mark.parametrize(
    ("status", "side"), [("navigating", "browser"), ("thinking", "policy"), ("acting", "browser")]
)
def test_an_expired_lease_aborts_naming_the_silent_side(status, side):
    state = {"navigating": navigating, "thinking": thinking, "acting": acting}[status]()
    lease_ts = state["lease_ts"]
    assert on_timer(state, lease_ts + 59_999).changed is False
    t = on_timer(state, lease_ts + 60_000)
    outputs = encoded(t)
    assert outputs[0].record["kind"] == "aborted"
    assert outputs[0].record["reason"] == f"lease expired: no answer from the {side} side in 60 s"
    assert t.state["applied"][-1] == f"{EP}:lease"


def test_an_operators_abort_ends_the_episode_without_a_second_terminal_event():
    state = thinking()
    abort = {"event_id": "operator:abort:1", "kind": "aborted", "reason": "operator stopped it"}
    t = on_episode_event(state, abort, T0 + 5000)
    outputs = encoded(t)
    assert [o.topic for o in outputs] == ["trajectories", "curriculum"]
    assert outputs[1].record["reason"] == "aborted: operator stopped it"
    assert resend(t.state) == outputs
    # re-delivered (the outputs may have been lost in a crash): the same outputs again
    again = on_episode_event(t.state, abort, T0 + 6000)
    assert (again.changed, again.outputs) == (False, outputs)


# -- the run's marks: purpose, pinned version, phase ----------------------------------------------

EVAL_MARKS = {"purpose": "eval", "pinned_version": 4, "phase": "on_policy"}


def test_the_runs_marks_go_into_every_inference_request_and_the_trajectory():
    state = navigating(**EVAL_MARKS)
    requests = []
    t = on_observation(state, observation(0), 0, 10, T0 + 1000)
    requests.append(only(t).record)
    t = on_inference(t.state, inference(1, CLICK, policy_version=4), T0 + 1500)
    t = on_observation(t.state, observation(1, "about"), 0, 11, T0 + 2000)
    requests.append(only(t).record)
    t = on_inference(t.state, inference(2, ANSWER, policy_version=4), T0 + 2500)
    trajectory = next(o.record for o in encoded(t) if o.topic == "trajectories")
    assert [{k: r[k] for k in EVAL_MARKS} for r in requests] == [EVAL_MARKS] * 2
    assert (trajectory["purpose"], trajectory["phase"]) == ("eval", "on_policy")


def test_an_unmarked_episode_is_a_train_episode_and_so_is_one_opened_before_marks_existed():
    t = on_observation(navigating(), observation(0), 0, 10, T0 + 1000)
    assert {k: only(t).record[k] for k in EVAL_MARKS} == {
        "purpose": "train",
        "pinned_version": None,
        "phase": None,
    }
    old = {k: v for k, v in navigating().items() if k not in EVAL_MARKS}  # a v1-era table row
    t = on_observation(old, observation(0), 0, 10, T0 + 1000)
    assert only(t).record["purpose"] == "train"
    t = on_episode_event(
        t.state,
        {**started(), "event_id": f"{EP}:abort", "kind": "aborted", "reason": "operator"},
        T0 + 1200,
    )
    trajectory = next(o.record for o in encoded(t) if o.topic == "trajectories")
    assert (trajectory["purpose"], trajectory["phase"]) == ("train", None)


def test_a_v1_started_event_decodes_as_a_train_episode():
    catalog = default_catalog()
    v1 = catalog.encode("episode", started(), version=1)
    record = catalog.decode(v1, "episode").record
    assert (record["purpose"], record["pinned_version"], record["phase"]) == ("train", None, None)


def test_the_page_digest_is_the_browsers_stamp_for_a_stored_screenshot():
    """A stored screenshot's observation carries no bytes: the repetition filter's digest is
    the one the browser stamped, and the same page inline gets the same digest."""
    digest = hashlib.sha256(b"page bytes").hexdigest()
    stored = observation(0, screenshot=b"", screenshot_sha256=digest, screenshot_key="k.jpeg")
    inline = observation(0, screenshot=b"page bytes")
    for obs in (stored, inline):
        state = on_observation(navigating(), obs, 0, 10, T0 + 1000).state
        assert state["current"]["sha256"] == digest
