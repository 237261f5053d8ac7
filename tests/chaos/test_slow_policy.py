"""A policy that answers slowly: bounded retries, then the episode ends with the reason; no
duplicate inference for one step reaches the log or a trajectory.

The policy is the latency-model backend (scripted steps held for a drawn inference time) behind a
policy worker with a 1 s inference timeout (``--infer-timeout 1``). A call past the timeout is
answered with an error inference per request; the orchestrator asks again on the same screen
until the parse-error budget is spent. The late reply is dropped by the worker (the latency-model
backend is cancelled at the timeout), so each request has exactly one inference.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict

from commands.local_run import RunOptions
from infra.log_reader import read_topic
from infra.settings import Settings
from schemas.inference import no_action_reason
from tests.chaos.conftest import Fault, assert_nothing_lost, chaos_run

IN_FLIGHT = 16
EPISODES = 16
TIMEOUT_S = 1
BUDGET = 2  # unparseable replies an episode survives: the third ends it
SITES, SEED = 10, 5
TIMED_OUT = f"backend error: no answer within {TIMEOUT_S} s"


def _options(tag: str, median_s: float, sigma: float) -> RunOptions:
    return RunOptions(
        episodes=EPISODES,
        in_flight=IN_FLIGHT,
        policy="latency-model",
        policy_args=(
            *("--latency-median", str(median_s), "--latency-sigma", str(sigma)),
            *("--infer-timeout", str(TIMEOUT_S)),
            *("--sites-count", str(SITES), "--sites-seed", str(SEED)),
        ),
        sites=SITES,
        seed=SEED,
        run_id=f"chaos-{tag}{uuid.uuid4().hex[:6]}",
        stall_timeout_s=240.0,
    )


def _mark_at_start(fault: Fault):
    def strike(summary, children):
        if not fault.struck_ms:
            fault.mark()  # the fault is the configuration: in force from the first tick

    return strike


def _of_run(settings: Settings, suffix: str, run_id: str) -> dict[str, dict]:
    """The run's events of one topic, deduplicated on event_id."""
    copies: dict[str, list[dict]] = defaultdict(list)
    for event in read_topic(settings, suffix):
        if event.event_type and event.record["episode_id"].startswith(f"{run_id}-"):
            copies[event.record["event_id"]].append(event.record)
    if suffix == "inferences":
        for event_id, records in copies.items():
            # A late reply after the error answer would be a second inference with this id.
            contents = {(no_action_reason(r), r["raw_text"]) for r in records}
            assert len(contents) == 1, (event_id, records)
    return {event_id: records[0] for event_id, records in copies.items()}


def _one_inference_per_request_and_step(settings: Settings, run_id: str) -> dict[str, dict]:
    inferences = _of_run(settings, "inferences", run_id)
    per_request = Counter(i["request_event_id"] for i in inferences.values())
    assert set(per_request.values()) == {1}, per_request.most_common(3)
    per_step = Counter((i["episode_id"], i["step"]) for i in inferences.values())
    assert set(per_step.values()) == {1}, per_step.most_common(3)
    scored = {}
    for event in read_topic(settings, "trajectories.scored"):
        record = event.record
        if event.event_type and record["episode_id"].startswith(f"{run_id}-"):
            scored[record["episode_id"]] = record
    assert len(scored) == EPISODES
    for trajectory in scored.values():
        steps = trajectory["steps"]
        assert [s["step"] for s in steps] == list(range(1, len(steps) + 1))
        used = [s["inference_event_id"] for s in steps]
        assert len(used) == len(set(used)), trajectory["episode_id"]
        for s in steps:  # the inference a step holds is the one in the log, not a late copy
            inference = inferences[s["inference_event_id"]]
            assert (s["parse_error"], s["backend_error"]) == (
                inference["parse_error"],
                inference["backend_error"],
            )
    return scored


def test_a_policy_slower_than_its_timeout_ends_every_episode_after_bounded_retries(
    run_settings, request
):
    settings = run_settings.model_copy(update={"parse_error_budget": BUDGET})
    fault = Fault(f"slow policy: every inference 30 s, timeout {TIMEOUT_S} s, budget {BUDGET}")
    options = _options("sp", median_s=30.0, sigma=0.1)
    result = chaos_run(settings, options, fault, _mark_at_start(fault), request)
    assert_nothing_lost(result, EPISODES)
    run_id = result.summary.run_id

    scored = _one_inference_per_request_and_step(settings, run_id)
    reason = f"parse errors: {BUDGET + 1} unparseable replies (last: {TIMED_OUT})"
    assert {t["termination"] for t in scored.values()} == {reason}
    assert {t["final_answer"] for t in scored.values()} == {None}
    assert all(t["aborted"] for t in scored.values())  # no reply at all: aborted, not finished
    assert result.row["aborted"] == EPISODES
    for trajectory in scored.values():
        assert [no_action_reason(s) for s in trajectory["steps"]] == [TIMED_OUT] * (BUDGET + 1)
        assert [s["parse_error"] for s in trajectory["steps"]] == [None] * (BUDGET + 1)
    requests = Counter(r["episode_id"] for r in _of_run(settings, "ops.infer", run_id).values())
    assert requests == {episode: BUDGET + 1 for episode in scored}, requests


def test_a_policy_sometimes_slower_than_its_timeout_recovers_on_the_next_try(run_settings, request):
    # Median 50 ms with a heavy tail: about 1 inference in 9 takes over 1 s and is timed out.
    fault = Fault(f"slow policy: 1 in 9 inferences over the {TIMEOUT_S} s timeout")
    options = _options("sm", median_s=0.05, sigma=2.5)
    result = chaos_run(run_settings, options, fault, _mark_at_start(fault), request)
    assert_nothing_lost(result, EPISODES)

    scored = _one_inference_per_request_and_step(run_settings, result.summary.run_id)
    recovered = [
        t
        for t in scored.values()
        if any(no_action_reason(s) == TIMED_OUT for s in t["steps"])
        and t["termination"] == "answer"
    ]
    assert recovered, {t["episode_id"]: t["termination"] for t in scored.values()}
    for trajectory in scored.values():
        for s in trajectory["steps"]:
            assert s["parse_error"] is None, s  # the scripted replies always parse
            assert no_action_reason(s) in (None, TIMED_OUT), s
        if trajectory["termination"].startswith("parse errors"):
            assert trajectory["termination"].endswith(f"(last: {TIMED_OUT})")
