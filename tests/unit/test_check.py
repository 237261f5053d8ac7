"""`webgym check`'s invariants on a fake log: each holds on episodes played by the real
orchestrator rules, and each breaks when one record is removed, changed or added."""

from __future__ import annotations

import json
import socket
from collections import Counter
from typing import Any

import pytest
from typer.testing import CliRunner

from analytics.check import INVARIANTS, CheckReport, InvariantFold
from analytics.check_episode import At
from commands import check as check_cli
from commands.main import app
from infra.dead_letters import dead_letter
from infra.log_reader import LoggedEvent, TopicEvent
from schemas.serde import CorruptEventError, EventDecodeError, default_catalog
from streams.filters import is_success
from streams.orchestrator import Rules, on_inference, on_observation, on_started, on_timer

CATALOG = default_catalog()
RUN = "runA"
A, B, C, D = (f"{RUN}-{n:06d}" for n in range(1, 5))
TASK = {
    "task_id": "shop-1-easy",
    "task_name": "Find the price of the blue kettle.",
    "website": "shop.test",
    "difficulty": "easy",
    "start_url": "http://shop.test/",
    "extra_json": '{"source": "practice-web"}',
}
RULES = Rules(horizons={"easy": 10})
CLICK = {"kind": "left_click", "x": 500, "y": 250}
TYPE = {"kind": "type", "text": "kettle"}
EVENT_TYPES = {
    "episodes": "episode",
    "ops.navigate": "navigate_op",
    "ops.infer": "infer_request",
    "ops.act": "act_op",
    "observations": "observation",
    "inferences": "inference",
    "trajectories": "trajectory",
    "trajectories.scored": "scored_trajectory",
    "trajectories.success": "scored_trajectory",
    "dlq": "dead_letter",
}


def answer(text: str) -> dict[str, Any]:
    return {"kind": "answer", "text": text}


class Log:
    """A fake log: every record goes through the project's serde (the checker sees what a
    consumer sees) and lands at the next offset of its partition; ``clock`` is the producers'
    clock, 10 ms a tick."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self._next: Counter[tuple[str, int]] = Counter()
        self.clock = 1_795_000_000_000

    def tick(self, ms: int = 10) -> int:
        self.clock += ms
        return self.clock

    def add(
        self, suffix: str, record: dict[str, Any], partition: int = 0, headers=(), raw=None
    ) -> At:
        offset = self._next[(suffix, partition)]
        self._next[(suffix, partition)] += 1
        decoded = None
        if raw is None:
            decoded = CATALOG.decode(CATALOG.encode(EVENT_TYPES[suffix], record)).record
        self.entries.append(
            {
                "at": At(suffix, partition, offset),
                "record": decoded,
                "raw": raw,
                "headers": list(headers),
            }
        )
        return At(suffix, partition, offset)

    def records(self, suffix: str, episode_id: str | None = None) -> list[dict[str, Any]]:
        return [
            e["record"]
            for e in self.entries
            if e["at"].topic == suffix
            and e["record"] is not None
            and (episode_id is None or e["record"].get("episode_id") == episode_id)
        ]

    def one(self, suffix: str, episode_id: str, **match: Any) -> dict[str, Any]:
        found = [
            r
            for r in self.records(suffix, episode_id)
            if all(r.get(k) == v for k, v in match.items())
        ]
        assert len(found) == 1, (suffix, episode_id, match, len(found))
        return found[0]

    def remove(self, suffix: str, episode_id: str, **match: Any) -> None:
        record = self.one(suffix, episode_id, **match)
        self.entries = [e for e in self.entries if e["record"] is not record]

    def check(self, run_id: str | None = None) -> CheckReport:
        """The fold fed as the reader feeds it: TopicEvents of LoggedEvents."""
        fold = InvariantFold(run_id, "webgym")
        events = []
        for entry in self.entries:
            at, record = entry["at"], entry["record"]
            if record is None:
                try:
                    CATALOG.decode(entry["raw"])
                    failure = "decodes after all"
                except EventDecodeError as error:
                    failure = str(error)
                logged = LoggedEvent(
                    at.partition, at.offset, entry["key"], None, {}, [], failure, None
                )
            else:
                key = (record.get("episode_id") or "").encode()
                logged = LoggedEvent(
                    at.partition,
                    at.offset,
                    key,
                    EVENT_TYPES[at.topic],
                    record,
                    entry["headers"],
                )
            events.append(TopicEvent(at.topic, logged))
        fold.apply_all(events)
        return fold.report()


def play(
    log: Log,
    episode_id: str,
    replies: list[dict[str, Any] | None | str],
    reward: float | None = None,
    partition: int = 0,
) -> dict[str, Any]:
    """One episode through the orchestrator's rules, a fake browser and a fake policy.

    Each reply answers the next infer request: an action, None (a reply that does not parse),
    ``"fail"`` (the browser reports the episode lost instead of answering the last action: at
    the step after the last operation, as a rebalance does) or ``"timeout"`` (no answer: the
    lease expires while the policy thinks, and the answer arrives after the end). ``reward``:
    the judge's score (default 1 when the answer is "$24.99"). Returns the last state.
    """
    started = {
        "event_id": f"{episode_id}:started",
        "episode_id": episode_id,
        "step": 0,
        "ts": log.tick(),
        "kind": "started",
        "task_id": TASK["task_id"],
    }
    log.add("episodes", started, partition)
    transition = on_started(None, started, TASK, RULES, log.tick())
    replies = list(replies)
    unanswered = None  # the request the policy answers only after the end
    while True:
        state = transition.state
        outputs = [o for o in transition.outputs if o.topic != "curriculum"]  # not checked
        placed = [(o, log.add(o.topic, o.record, partition)) for o in outputs]
        if state["end"] is not None:
            break
        output, at = placed[-1]
        if output.topic in ("ops.navigate", "ops.act"):
            record = observation(log, output.record)
            seen = log.add("observations", record, partition)
            transition = on_observation(
                state, _decoded(record), seen.partition, seen.offset, log.tick()
            )
            continue
        reply = replies.pop(0)
        if reply == "fail":
            # the browser held the episode at the last act step: it fails at the next one
            record = observation(log, output.record, "rebalanced")
            seen = log.add("observations", record, partition)
            transition = on_observation(
                state, _decoded(record), seen.partition, seen.offset, log.tick()
            )
            continue
        if reply == "timeout":
            unanswered = output.record, at
            transition = on_timer(state, log.tick(RULES.lease_ms + 10))
            continue
        record = inference(log, output.record, at, reply)
        placed_at = log.add("inferences", record, partition)
        transition = on_inference(
            state, _decoded(record), log.tick(), placed_at.partition, placed_at.offset
        )
    if unanswered is not None:
        log.add("inferences", inference(log, *unanswered, CLICK), partition)
    trajectory = next(o.record for o in transition.outputs if o.topic == "trajectories")
    trajectory = _decoded(trajectory, "trajectory")
    if reward is None:
        reward = 1.0 if trajectory["final_answer"] == "$24.99" else 0.0
    scored = scored_event(trajectory, reward)
    log.add("trajectories.scored", scored, partition)
    if is_success(scored):
        log.add("trajectories.success", {**scored, "event_id": f"{episode_id}:success"}, partition)
    return state


def _decoded(record: dict[str, Any], event_type: str | None = None) -> dict[str, Any]:
    if event_type is None:
        event_type = "observation" if "screenshot" in record else "inference"
    return CATALOG.decode(CATALOG.encode(event_type, record)).record


def observation(log: Log, operation: dict[str, Any], failure: str | None = None) -> dict:
    """The browser's answer to an operation: a screenshot of its own per step and action."""
    step = operation["step"]
    return {
        "event_id": f"{operation['episode_id']}:{step}:observation",
        "episode_id": operation["episode_id"],
        "step": step,
        "ts": log.tick(),
        "screenshot": b"" if failure else f"jpeg {operation['episode_id']} {step}".encode(),
        "screenshot_format": "jpeg",
        "width": 0 if failure else 1280,
        "height": 0 if failure else 768,
        "url": f"http://shop.test/page/{step}",
        "title": "" if failure else f"page {step}",
        "action_error": None,
        "set_of_marks": None,
        "timings_ms": {"total": 12.5},
        "failure": failure,
        "page_signals": {},
    }


def inference(log: Log, request: dict[str, Any], at: At, action: dict | None) -> dict:
    return {
        "event_id": f"{request['episode_id']}:{request['step']}:inference",
        "episode_id": request["episode_id"],
        "step": request["step"],
        "ts": log.tick(),
        "policy_version": 3,
        "request_event_id": request["event_id"],
        "raw_text": json.dumps(action),
        "thought": None,
        "action": action,
        "parse_error": None if action else "no <tool_call> block",
        "memory": None,
        "token_ids": [],
        "logprobs": [],
        "latency_ms": 40.0,
        "backend": "fake",
        "model": "fake",
        "request_partition": at.partition,
        "request_offset": at.offset,
    }


def scored_event(trajectory: dict[str, Any], reward: float) -> dict[str, Any]:
    """As ``streams.judging.scored_event`` writes it (the verifier's score, no block)."""
    return {
        **trajectory,
        "event_id": f"{trajectory['episode_id']}:scored",
        "reward": reward,
        "verdicts": [],
        "judge_name": "practice-web-verifier",
        "judge_version": "1",
        "judge_error": None,
        "blocked": False,
        "block_reason": None,
    }


@pytest.fixture
def log() -> Log:
    """Four episodes of run A: A succeeds after a click, an unparseable reply, typing and the
    right answer; B answers wrongly; C is aborted by a failure observation (the browser lost it
    while the policy thought); D is aborted by the lease timer while the policy thought, and
    the policy's answer arrives after the end."""
    log = Log()
    play(log, A, [CLICK, None, TYPE, answer("$24.99")])
    play(log, B, [CLICK, answer("$3")])
    play(log, C, [CLICK, "fail"])
    play(log, D, [CLICK, "timeout"])
    return log


def found(report: CheckReport) -> set[tuple[str, str | None]]:
    return {(v.invariant, v.episode_id) for v in report.violations}


def assert_breaks(log: Log, invariant: str, episode_id: str, says: str) -> CheckReport:
    """Checks ``log``: ``invariant`` is the only one broken, by ``episode_id`` alone, and the
    first violation's message says ``says``. The report, for more checks."""
    report = log.check()
    assert found(report) == {(invariant, episode_id)}
    assert says in report.violations[0].message, report.violations
    return report


def assert_holds(report: CheckReport) -> None:
    assert report.ok, "\n".join(
        f"{v.invariant} {v.episode_id} {v.at}: {v.message}" for v in report.violations
    )


# -- the clean log ---------------------------------------------------------------------------------


def test_played_episodes_hold_every_invariant(log):
    report = log.check()
    assert_holds(report)
    counts = report.counts
    assert (counts["started"], counts["ended"], counts["finished"], counts["aborted"]) == (
        4,
        4,
        2,
        2,
    )
    assert counts["lost"] == counts["duplicates_raw"] == counts["duplicates_after_dedup"] == 0
    assert (counts["trajectories"], counts["scored"], counts["successes"]) == (4, 4, 1)
    assert report.by_invariant() == {name: 0 for name in INVARIANTS}


def test_the_numbering_the_checks_rely_on(log):
    """Observations skip the step of an unparseable reply; requests run to N or N + 1."""
    assert sorted(r["step"] for r in log.records("observations", A)) == [0, 1, 3]
    assert sorted(r["step"] for r in log.records("ops.infer", A)) == [1, 2, 3, 4]
    assert log.one("episodes", A, kind="finished")["step"] == 4
    assert sorted(r["step"] for r in log.records("ops.infer", C)) == [1, 2]
    assert log.one("episodes", C, kind="aborted")["step"] == 1
    assert log.one("observations", C, step=2)["failure"] == "rebalanced"
    late = log.one("inferences", D, step=2)
    assert late["ts"] > log.one("episodes", D, kind="aborted")["ts"]


def test_another_runs_episodes_are_left_out(log):
    play(log, "runB-000001", [CLICK, answer("$24.99")])
    log.remove("episodes", "runB-000001", kind="finished")  # runB is broken
    assert "ends" in {v.invariant for v in log.check().violations}
    report = log.check(RUN)
    assert_holds(report)
    assert report.counts["started"] == 4
    assert report.runs_seen == [RUN, "runB"]


# -- ends ------------------------------------------------------------------------------------------


def test_an_episode_without_terminal_event_is_lost(log):
    log.remove("episodes", B, kind="finished")
    report = log.check()
    assert ("ends", B) in found(report)
    assert report.counts["lost"] == 1 and report.counts["ended"] == 3
    assert "lost" in next(v.message for v in report.violations if v.invariant == "ends")


def test_an_abort_without_reason_breaks_ends(log):
    log.one("episodes", C, kind="aborted")["reason"] = " "
    assert ("ends", C) in found(log.check())


def test_two_different_terminal_events_break_ends(log):
    end = log.one("episodes", A, kind="finished")
    log.add("episodes", {**end, "event_id": f"{A}:abort", "kind": "aborted", "reason": "operator"})
    report = log.check()
    assert ("ends", A) in found(report)
    assert report.counts["duplicates_after_dedup"] == 1


def test_a_redelivered_terminal_event_is_a_duplicate(log):
    end = log.one("episodes", A, kind="finished")
    log.add("episodes", {**end, "ts": log.tick()})  # a re-sent copy may carry a later ts
    report = log.check()
    assert_holds(report)
    assert report.counts["duplicates_raw"] == 1


def test_events_of_an_episode_never_started_break_ends(log):
    log.remove("episodes", B, kind="started")
    assert ("ends", B) in found(log.check())


# -- steps -----------------------------------------------------------------------------------------


def test_a_gap_in_the_infer_requests_breaks_steps(log):
    log.remove("ops.infer", A, step=2)
    report = log.check()
    assert ("steps", A) in found(report)
    assert any("skip step 2" in v.message for v in report.violations)


def test_an_inference_without_its_request_breaks_steps(log):
    request = log.one("ops.infer", B, step=2)
    stray = inference(log, {**request, "step": 7, "event_id": f"{B}:7:infer"}, At("x", 0, 0), CLICK)
    log.add("inferences", {**stray, "ts": log.one("episodes", B, kind="finished")["ts"] - 1})
    assert found(log.check()) == {("steps", B)}


def test_an_act_op_that_is_not_the_inferences_action_breaks_steps(log):
    log.one("ops.act", A, step=3)["action"]["text"] = "teapot"
    report = log.check()
    assert ("steps", A) in found(report)
    assert any("act op for step 3 sends type" in v.message for v in report.violations)


def test_an_observation_for_a_step_without_operation_breaks_steps(log):
    request = log.one("ops.infer", A, step=2)  # step 2 did not parse: no act op, no screen
    stray = observation(log, request)
    stray["ts"] = log.one("episodes", A, kind="finished")["ts"]  # not after the end
    log.add("observations", stray)
    assert found(log.check()) == {("steps", A)}


def test_a_failure_observation_beyond_the_next_step_breaks_steps(log):
    failure = log.one("observations", C, step=2)
    failure["step"], failure["event_id"] = 5, f"{C}:5:observation"
    assert ("steps", C) in found(log.check())


def test_a_terminal_step_that_does_not_count_the_inferences_breaks_steps(log):
    log.one("episodes", A, kind="finished")["step"] = 2
    report = log.check()
    assert ("steps", A) in found(report) and ("trajectory", A) in found(report)


# -- after-end -------------------------------------------------------------------------------------


def test_a_request_after_the_end_breaks_after_end(log):
    end = log.one("episodes", B, kind="finished")
    request = log.one("ops.infer", B, step=2)
    log.add("ops.infer", {**request, "step": 3, "event_id": f"{B}:3:infer", "ts": end["ts"] + 5})
    report = log.check()
    assert found(report) == {("after-end", B)}
    assert report.violations[0].at == At("ops.infer", 0, len(log.records("ops.infer")) - 1)


def test_the_same_request_before_the_end_is_an_episode_ended_while_thinking(log):
    end = log.one("episodes", B, kind="finished")
    request = log.one("ops.infer", B, step=2)
    log.add("ops.infer", {**request, "step": 3, "event_id": f"{B}:3:infer", "ts": end["ts"]})
    assert_holds(log.check())


def test_an_observation_after_the_end_answering_nothing_breaks_after_end(log):
    end = log.one("episodes", B, kind="finished")
    late = observation(log, {"episode_id": B, "step": 9})
    late["ts"] = end["ts"] + 1000
    at = log.add("observations", late)
    report = log.check()
    assert found(report) == {("after-end", B), ("steps", B)}
    assert {v.at for v in report.violations} == {at}


def test_a_copy_of_an_operation_re_sent_after_the_end_is_a_duplicate(log):
    act = log.one("ops.act", B, step=1)
    log.add("ops.act", {**act, "ts": log.tick()})
    report = log.check()
    assert_holds(report)
    assert report.counts["duplicates_raw"] == 1 and report.counts["reexecuted"] == 0


def test_an_operation_served_twice_is_a_re_execution_not_a_violation(log):
    first = log.one("observations", A, step=1)
    log.add("observations", {**first, "screenshot": b"another frame", "timings_ms": {}})
    report = log.check()
    assert_holds(report)
    assert report.counts["duplicates_raw"] == 1 and report.counts["reexecuted"] == 1


# -- trajectory ------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["trajectories", "trajectories.scored"])
def test_an_ended_episode_without_its_trajectory_breaks_trajectory(log, suffix):
    log.remove(suffix, B)  # B has no success
    assert_breaks(log, "trajectory", B, f"nothing on {suffix}")


def change_both(log: Log, episode_id: str, change) -> None:
    for suffix in ("trajectories", "trajectories.scored", "trajectories.success"):
        for record in log.records(suffix, episode_id):
            change(record)


@pytest.mark.parametrize(
    "change, says",
    [
        (lambda t: t["steps"][2]["action"].update(text="teapot"), "step 3: action"),
        (lambda t: t["steps"][1].update(parse_error=None), "step 2: parse_error"),
        (lambda t: t["steps"][2].update(observation_event_id=f"{A}:0:observation"), "step 3"),
        (lambda t: t["steps"][0].update(observation_offset=1), "points at observations[0]@1"),
        (lambda t: t["steps"][3].update(screenshot_sha256="0" * 64), "screenshot_sha256"),
        (lambda t: t.update(final_answer="$25"), "final answer '$25'"),
        (lambda t: t.update(termination="horizon"), "termination 'horizon'"),
        (lambda t: t.update(steps=t["steps"][:3], step=3), "3 steps, the terminal event"),
        (lambda t: t.update(policy_versions=[2, 3]), "policy versions"),
    ],
    ids=[
        "action",
        "parse error",
        "observation",
        "coordinates",
        "screenshot",
        "answer",
        "termination",
        "a step missing",
        "policy versions",
    ],
)
def test_a_trajectory_unlike_the_fold_of_its_steps_breaks_trajectory(log, change, says):
    change_both(log, A, change)
    report = log.check()
    assert found(report) == {("trajectory", A)}
    assert any(says in v.message for v in report.violations), report.violations
    assert {v.at.topic for v in report.violations} == {"trajectories"}


def test_a_scored_trajectory_unlike_its_trajectory_breaks_trajectory(log):
    log.one("trajectories.scored", B)["final_url"] = "http://elsewhere.test/"
    assert_breaks(log, "trajectory", B, "differs from its trajectory")


def test_a_scored_trajectory_alone_is_checked_against_the_fold(log):
    log.remove("trajectories", B)
    log.one("trajectories.scored", B)["steps"][0]["action"]["x"] = 1
    messages = [v.message for v in log.check().violations]
    assert any(m.startswith("scored trajectory: step 1: action") for m in messages)


# -- duplicates ------------------------------------------------------------------------------------


def test_identical_redeliveries_are_counted_and_dropped(log):
    for suffix in ("trajectories", "trajectories.scored", "trajectories.success", "episodes"):
        for record in log.records(suffix, A):
            log.add(suffix, {**record, "ts": record["ts"] + 1})
    report = log.check()
    assert_holds(report)
    assert report.counts["duplicates_raw"] == 5
    assert report.counts["duplicates_after_dedup"] == 0


@pytest.mark.parametrize("suffix", ["trajectories", "trajectories.scored", "trajectories.success"])
def test_a_second_different_record_breaks_duplicates(log, suffix):
    first = log.one(suffix, A)
    at = log.add(suffix, {**first, "policy_versions": [3, 4]})
    report = assert_breaks(log, "duplicates", A, "policy_versions")
    assert report.violations[0].at == at
    assert report.counts["duplicates_after_dedup"] == 1


def test_a_second_different_start_breaks_duplicates(log):
    started = log.one("episodes", B, kind="started")
    log.add("episodes", {**started, "task_id": "shop-2-hard"})
    assert ("duplicates", B) in found(log.check())


# -- success ---------------------------------------------------------------------------------------


def test_a_success_that_is_no_success_breaks_success(log):
    scored = log.one("trajectories.scored", B)
    log.add("trajectories.success", {**scored, "event_id": f"{B}:success"})
    assert_breaks(log, "success", B, "reward 0.0")


def test_a_success_unlike_its_scored_trajectory_breaks_success(log):
    log.one("trajectories.success", A)["judge_version"] = "2"
    assert_breaks(log, "success", A, "judge_version")


def test_a_success_that_never_reached_the_success_stream_breaks_success(log):
    log.remove("trajectories.success", A)
    assert found(log.check()) == {("success", A)}


def test_a_success_without_scored_trajectory_breaks_success(log):
    log.remove("trajectories.scored", A)
    assert found(log.check()) == {("success", A), ("trajectory", A)}


# -- dead letters ----------------------------------------------------------------------------------


def poison(log: Log, episode_id: str, routed: bool = True, headers: bool = True) -> At:
    """Bytes that do not decode on ``observations``, and (if routed) their dead letter."""
    value = b"\x00not an event"
    at = log.add("observations", {}, raw=value)
    log.entries[-1]["key"] = episode_id.encode()
    if routed:
        record, header_list = dead_letter(
            "webgym.observations",
            at.partition,
            at.offset,
            episode_id.encode(),
            value,
            CorruptEventError("not an Avro single-object encoding"),
        )
        log.add("dlq", record, headers=header_list if headers else ())
    return at


def test_a_dead_lettered_poison_record_is_fine(log):
    poison(log, A)
    report = log.check(RUN)
    assert_holds(report)
    assert (report.counts["dead_letters"], report.counts["undecodable"]) == (1, 1)


def test_a_poison_record_without_dead_letter_breaks_dead_letters(log):
    at = poison(log, A, routed=False)
    report = log.check()
    assert found(report) == {("dead-letters", A)}
    assert report.violations[0].at == at


def test_a_dead_letter_without_its_headers_breaks_dead_letters(log):
    poison(log, A, headers=False)
    assert_breaks(log, "dead-letters", A, "header webgym.source.topic is missing")


@pytest.mark.parametrize(
    "change, says",
    [
        ({"source_offset": 999}, "but that partition ends at offset"),
        ({"source_topic": ""}, "names no source topic"),
        ({"source_topic": "other.observations"}, "is not a webgym.* topic"),
        ({"source_partition": -1}, "name no record"),
        ({"error_class": ""}, "names no error class"),
    ],
)
def test_a_dead_letter_without_its_source_breaks_dead_letters(log, change, says):
    poison(log, A)
    log.one("dlq", None).update(change)
    messages = [v.message for v in log.check().violations if v.invariant == "dead-letters"]
    assert any(says in m for m in messages), messages


def test_a_dead_lettered_record_is_left_out_of_the_checks(log):
    """A consumer rejected it (an out-of-order step): it is not part of the episode."""
    request = log.one("ops.infer", B, step=2)
    stray = inference(log, {**request, "step": 7, "event_id": f"{B}:7:infer"}, At("x", 0, 0), CLICK)
    stray["ts"] = log.one("episodes", B, kind="finished")["ts"] - 1
    at = log.add("inferences", stray)
    assert found(log.check()) == {("steps", B)}
    record, headers = dead_letter(
        "webgym.inferences", at.partition, at.offset, B.encode(), b"...", ValueError("step 7")
    )
    log.add("dlq", record, headers=headers)
    assert_holds(log.check())


# -- the command -----------------------------------------------------------------------------------

runner = CliRunner()


def test_help_names_the_invariants_and_the_exit_codes():
    result = runner.invoke(app, ["check", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for words in ("exactly", "contiguous", "reward", "dead", "--run", "--json", "Exit"):
        assert words in result.output


def test_the_command_exits_0_when_every_invariant_holds(log, monkeypatch, tmp_path):
    monkeypatch.setattr(check_cli, "check_run", lambda settings, run, progress: log.check(run))
    result = runner.invoke(
        app, ["check", "--run", RUN, "--json", str(tmp_path / "r.json")], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert "all invariants hold" in result.output and "episodes started" in result.output
    written = json.loads((tmp_path / "r.json").read_text())
    assert written["ok"] is True and written["counts"]["started"] == 4


def test_the_command_exits_1_naming_each_violation(log, monkeypatch, tmp_path):
    log.remove("episodes", B, kind="finished")
    monkeypatch.setattr(check_cli, "check_run", lambda settings, run, progress: log.check(run))
    result = runner.invoke(
        app, ["check", "--json", str(tmp_path / "r.json")], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 1
    assert f"ends  {B}  episodes[0]@" in result.output
    written = json.loads((tmp_path / "r.json").read_text())
    assert written["ok"] is False and written["counts"]["lost"] == 1
    violation = written["violations"][0]
    assert violation["invariant"] == "ends" and violation["episode_id"] == B
    assert violation["at"]["topic"] == "episodes"


def test_no_broker_says_what_to_do(monkeypatch):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("WEBGYM_BOOTSTRAP_SERVERS", f"127.0.0.1:{port}")
    result = runner.invoke(app, ["check"])
    assert result.exit_code == 1
    assert "no Kafka broker answered" in result.output and "webgym up" in result.output
