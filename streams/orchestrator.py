"""The orchestrator's rules: how one episode moves from event to event. Pure; no Kafka here.

An episode's state is a JSON-serialisable dict (a row of the Faust ``episodes`` table). Each
``on_*`` function takes the state and one input event and returns a :class:`Transition`: the new
state and the events to emit. Guarantees the stream processor builds on: deterministic (the same
state and input give the same output, with deterministic event ids); idempotent on ``event_id``
(an input already applied changes nothing; the last one's outputs come again, :func:`resend`);
one end per episode (:func:`_end`); an out-of-order observation or inference comes back
``rejected``, to be dead-lettered, and the episode does not change (:func:`_refuse`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from schemas.event_ids import StepKind, episode_event_id, step_event_id
from schemas.inference import backend_error, no_action_reason, parse_error
from schemas.observation import digest_of
from schemas.prompt.context import Current, Step, build_context
from streams.assembler import assemble, next_observation
from tasks.page_setup import task_setup

APPLIED_MEMORY = 200  # input event ids remembered per episode (an episode has ~3 per step)
STEPS_AHEAD_TOLERATED = 2  # further ahead of the episode's step, an answer is out of order


@dataclass(frozen=True)
class Output:
    topic: str  # suffix in the topic table
    event_type: str
    key: str
    record: dict[str, Any]

    def as_list(self) -> list[Any]:
        return [self.topic, self.event_type, self.key, self.record]

    @classmethod
    def from_list(cls, item: list[Any]) -> Output:
        return cls(*item)


@dataclass(frozen=True)
class Rules:
    """What ends an episode, from the settings."""

    horizons: dict[str, int]
    parse_error_budget: int = 3
    deadline_ms: int = 900_000
    lease_ms: int = 120_000
    navigate_timeout_ms: int = 30_000
    act_timeout_ms: int = 10_000

    @classmethod
    def from_settings(cls, settings) -> Rules:
        return cls(
            horizons=dict(settings.horizons),
            parse_error_budget=settings.parse_error_budget,
            deadline_ms=int(settings.episode_deadline_s * 1000),
            lease_ms=int(settings.episode_lease_s * 1000),
        )

    def horizon(self, difficulty: str) -> int:
        return self.horizons.get(difficulty, max(self.horizons.values(), default=10))


@dataclass
class Transition:
    """The new state and the events to emit for one input.

    Deterministic: the same state and input give the same output, with deterministic event ids
    (``<episode>:<step>:navigate|infer|act``, ``<episode>:end``, ``<episode>:trajectory``), so a
    re-delivered input reproduces exactly what downstream consumers already deduplicate.
    """

    state: dict[str, Any] | None
    outputs: list[Output] = field(default_factory=list)
    changed: bool = True  # False: nothing to write to the table
    rejected: str | None = None  # why the input is poison (out of order): dead-letter it

    @classmethod
    def unchanged(cls, state: dict[str, Any] | None) -> Transition:
        return cls(state, [], False)

    @classmethod
    def reject(cls, state: dict[str, Any], reason: str) -> Transition:
        return cls(state, [], False, reason)


# -- inputs ---------------------------------------------------------------------------------------
# The cycle, with step numbers:
#
#     started            -> navigate (step 0)
#     observation s      -> infer request s+1 (context from the policy side's builder)
#     inference s        -> act s | end (answer, horizon, parse-error budget)
#     observation.failure-> end (aborted: the browser side failed)
#     timer              -> end (deadline: finished; lease expired: aborted)


def on_started(
    state: dict[str, Any] | None,
    started: dict[str, Any],
    task: dict[str, Any] | None,
    rules: Rules,
    now_ms: int,
) -> Transition:
    """A ``started`` episode event: open the episode and ask a browser to navigate."""
    event_id = started["event_id"]
    if state is not None:
        return _duplicate(state, event_id)
    episode_id = started["episode_id"]
    if task is None:
        # A start for a task nobody published: end it at once so no slot stays taken.
        state = _new_state(started, {"task_id": started["task_id"]}, rules, now_ms)
        return _end(
            state, event_id, "aborted", f"unknown task {started['task_id']!r}", None, now_ms
        )
    state = _new_state(started, task, rules, now_ms)
    navigate = {
        **_operation_header(episode_id, 0, "navigate", now_ms),
        "url": state["start_url"],
        "timeout_ms": rules.navigate_timeout_ms,
        "allowed_hosts": [state["website"]] if state["website"] else [],
        "task_id": state["task_id"],
        "set_of_marks": state["mode"] == "set_of_marks",
        "setup": state["setup"],
    }
    state["status"] = "navigating"
    return _emit(state, event_id, [Output("ops.navigate", "navigate_op", episode_id, navigate)])


def on_observation(
    state: dict[str, Any] | None,
    observation: dict[str, Any],
    partition: int,
    offset: int,
    now_ms: int,
) -> Transition:
    """The browser's answer to the pending operation: build the next inference request."""
    refused = _refuse(state, observation, _observation_out_of_order)
    if refused is not None:
        return refused
    event_id = observation["event_id"]
    if observation.get("failure"):
        # Whatever we wait for, the browser holding this episode is gone (a revoked partition
        # reports while the policy thinks): the episode cannot go on.
        reason = f"browser: {observation['failure']}"
        return _end(_copy(state), event_id, "aborted", reason, None, now_ms)
    if state["status"] not in ("navigating", "acting") or observation["step"] != state["step"]:
        return Transition.unchanged(state)  # stale: not the observation we wait for
    state = _copy(state)
    current = {
        "step": observation["step"],
        "event_id": event_id,
        "partition": partition,
        "offset": offset,
        "url": observation["url"],
        "title": observation["title"],
        "action_error": observation.get("action_error"),
        "marks": observation.get("set_of_marks"),
        "sha256": digest_of(observation),  # the browser's stamp: no image is hashed here
        "signals": dict(observation.get("page_signals") or {}),
    }
    state["current"] = current
    state["lease_ts"] = now_ms
    if current["signals"].get("done") == "true":
        # The page itself says the task is over (MiniWoB++): nothing more to do on it.
        return _end(state, event_id, "finished", "page done", None, now_ms)
    return _ask_policy(state, event_id, now_ms)


def on_inference(
    state: dict[str, Any] | None,
    inference: dict[str, Any],
    now_ms: int,
    partition: int = -1,
    offset: int = -1,
) -> Transition:
    """The policy's reply: act on it, or end the episode."""
    refused = _refuse(state, inference, _inference_out_of_order)
    if refused is not None:
        return refused
    event_id = inference["event_id"]
    step = len(state["history"]) + 1
    if state["status"] != "thinking" or inference["step"] != step:
        return Transition.unchanged(state)
    state = _copy(state)
    current = state["current"]
    action = inference.get("action")
    state["history"].append(
        {
            "step": step,
            "observation": current,
            "inference_event_id": event_id,
            "reply": inference["raw_text"],
            "action": action,
            "parse_error": parse_error(inference),
            "backend_error": backend_error(inference),
            "policy_version": inference["policy_version"],
            "inference_at": [partition, offset],
            "request_at": [
                inference.get("request_partition", -1),
                inference.get("request_offset", -1),
            ],
        }
    )
    version = inference["policy_version"]  # None: a backend without learner weights
    if version is not None and version not in state["policy_versions"]:
        state["policy_versions"] = sorted([*state["policy_versions"], version])
    state["policy_version"] = inference["policy_version"]
    state["lease_ts"] = now_ms
    if action is None:
        state["parse_errors"] += 1
        if state["parse_errors"] > state["parse_error_budget"]:
            last = (no_action_reason(inference) or "no action")[:200]
            reason = f"parse errors: {state['parse_errors']} unparseable replies (last: {last})"
            # The model's own bad replies finish the episode (a failure to learn from); a backend
            # that kept failing or timing out gave no reply at all: aborted.
            kind = "aborted" if backend_error(inference) is not None else "finished"
            return _end(state, event_id, kind, reason, None, now_ms)
        if step >= state["horizon"]:
            return _end(state, event_id, "finished", "horizon", None, now_ms)
        return _ask_policy(state, event_id, now_ms)  # same screen, the error shown in the context
    if action["kind"] == "answer":
        return _end(state, event_id, "finished", "answer", action.get("text") or "", now_ms)
    if step >= state["horizon"]:
        return _end(state, event_id, "finished", "horizon", None, now_ms)
    episode_id = state["episode_id"]
    act = {
        **_operation_header(episode_id, step, "act", now_ms),
        "policy_version": inference["policy_version"],
        "action": action,
        "inference_event_id": event_id,
        "timeout_ms": state["act_timeout_ms"],
        "set_of_marks": state.get("mode") == "set_of_marks",
    }
    state["status"] = "acting"
    state["step"] = step
    return _emit(state, event_id, [Output("ops.act", "act_op", episode_id, act)])


def on_episode_event(
    state: dict[str, Any] | None, event: dict[str, Any], now_ms: int
) -> Transition:
    """A terminal event some other writer produced (an operator's abort): end here too.

    Our own terminal events come back this way as well; they find the episode ended already.
    """
    if state is None:
        return Transition.unchanged(state)
    if state["end"] is not None:
        # A re-delivered abort that ended the episode re-sends its trajectory and notice.
        return _duplicate(state, event["event_id"])
    state = _copy(state)
    reason = event.get("reason") or event["kind"]
    transition = _end(
        state, event["event_id"], event["kind"], reason, event.get("final_answer"), now_ms
    )
    # The terminal event exists already; only the trajectory and the sampler notice are new.
    transition.outputs = [o for o in transition.outputs if o.topic != "episodes"]
    transition.state["outbox"] = [o.as_list() for o in transition.outputs]
    return transition


def on_timer(state: dict[str, Any], now_ms: int) -> Transition:
    """Deadline and lease checks; the input id names the decision, so a repeat is a no-op."""
    if state["end"] is not None:
        return Transition.unchanged(state)
    if now_ms >= state["deadline_ts"]:
        return _end(
            _copy(state),
            episode_event_id(state["episode_id"], "deadline"),
            "finished",
            "deadline",
            None,
            now_ms,
        )
    if now_ms - state["lease_ts"] >= state["lease_ms"]:
        side = {"thinking": "policy"}.get(state["status"], "browser")
        reason = f"lease expired: no answer from the {side} side in {state['lease_ms'] // 1000} s"
        lease = episode_event_id(state["episode_id"], "lease")
        return _end(_copy(state), lease, "aborted", reason, None, now_ms)
    return Transition.unchanged(state)


def resend(state: dict[str, Any]) -> list[Output]:
    """The outputs of the last input applied.

    Idempotent on ``event_id``: an input already applied changes nothing. If it is the *last*
    input applied, its outputs are returned again: after a crash the table may hold the new
    state while the outputs were lost, and re-sending them is the repair.
    """
    return [Output.from_list(item) for item in state.get("outbox", [])]


# -- helpers --------------------------------------------------------------------------------------


def _new_state(
    started: dict[str, Any], task: dict[str, Any], rules: Rules, now_ms: int
) -> dict[str, Any]:
    difficulty = task.get("difficulty", "")
    horizon = started.get("horizon") or rules.horizon(difficulty)
    start_url = started.get("start_url") or task.get("start_url", "")
    website = task.get("website") or urlsplit(start_url).hostname or ""
    try:
        extra = json.loads(task.get("extra_json") or "{}")
    except json.JSONDecodeError:
        extra = {}
    return {
        "mode": "set_of_marks" if extra.get("mode") == "set_of_marks" else "coordinate",
        "setup": task_setup(extra),  # with the instance's seed, if the task names one
        "episode_id": started["episode_id"],
        "task_id": started["task_id"],
        "instruction": task.get("task_name", ""),
        "website": website,
        "difficulty": difficulty,
        "start_url": start_url,
        "horizon": horizon,
        "started_ts": started["ts"],
        "deadline_ts": started["ts"] + rules.deadline_ms,
        "lease_ts": now_ms,
        "lease_ms": rules.lease_ms,
        "parse_error_budget": rules.parse_error_budget,
        "act_timeout_ms": rules.act_timeout_ms,
        "status": "starting",
        "step": 0,
        "current": None,
        "history": [],
        "parse_errors": 0,
        "policy_version": None,
        "policy_versions": [],
        # The run's marks, carried into every inference request and the trajectory: an eval
        # episode stays marked end to end, so the filter and the learner can refuse it.
        "purpose": started.get("purpose") or "train",
        "pinned_version": started.get("pinned_version"),
        "phase": started.get("phase"),
        "applied": [],
        "outbox": [],
        "end": None,
    }


def episode_marks(state: dict[str, Any]) -> dict[str, Any]:
    """The run's marks of an episode (purpose, pinned version, phase); an episode opened before
    marks existed is a training episode served by whatever version the worker follows."""
    return {
        "purpose": state.get("purpose") or "train",
        "pinned_version": state.get("pinned_version"),
        "phase": state.get("phase"),
    }


def _copy(state: dict[str, Any]) -> dict[str, Any]:
    """A row to change: table rows are replaced, never mutated in place (the memory store keeps
    the object). Copy on write: transitions assign the row's fields anew and only append to
    ``history``, so the row and its history list are copied, the rest is shared."""
    return {**state, "history": list(state["history"])}


def _duplicate(state: dict[str, Any], event_id: str) -> Transition:
    if state["applied"] and state["applied"][-1] == event_id:
        return Transition(state, resend(state), changed=False)
    return Transition.unchanged(state)


def _operation_header(episode_id: str, step: int, kind: StepKind, now_ms: int) -> dict[str, Any]:
    """The fields every operation the orchestrator sends starts with."""
    return {
        "event_id": step_event_id(episode_id, step, kind),
        "episode_id": episode_id,
        "step": step,
        "ts": now_ms,
    }


def _refuse(
    state: dict[str, Any] | None,
    answer: dict[str, Any],
    out_of_order: Callable[[dict[str, Any], dict[str, Any]], str | None],
) -> Transition | None:
    """What to do with an observation or inference the episode cannot apply, or None to apply
    it: not ours (yet: an episode this table never opened), a duplicate, out of order
    (poison), or after the end.

    Out of order is poison: an observation or inference whose step the episode never asked for
    (beyond its horizon, more than ``STEPS_AHEAD_TOLERATED`` ahead of its step, or behind it and
    not the event applied for that step) comes back ``rejected`` and the stream processor
    dead-letters it; the episode does not change. A record a little ahead is only ignored, as
    stale: a row restored after a crash may lag the outputs it had already sent, and their
    answers come early. A failure observation is always taken (it aborts the episode), whatever
    its step. Once ended, every input is ignored.
    """
    if state is None:
        return Transition.unchanged(None)
    event_id = answer["event_id"]
    if event_id in state["applied"]:
        return _duplicate(state, event_id)
    wrong = out_of_order(state, answer)
    if wrong is not None:
        return Transition.reject(state, wrong)
    if state["end"] is not None:
        return _duplicate(state, event_id)
    return None


def _observation_out_of_order(state: dict[str, Any], observation: dict[str, Any]) -> str | None:
    """Why ``observation`` answers no operation the episode issued or will issue, or None.

    Operations go out at step 0 (navigate) and at act steps below the horizon, one at a time, and
    the episode's step is that of its last operation or request. A failure observation is never
    out of order: whatever step it names, the browser side lost the episode.
    """
    if observation.get("failure"):
        return None
    step, at, horizon = observation["step"], state["step"], state["horizon"]
    if step < 0 or step > horizon or step > at + STEPS_AHEAD_TOLERATED:
        return (
            f"out-of-order observation: step {step}, but episode {state['episode_id']} is at "
            f"step {at} (horizon {horizon}); no operation of that step was issued"
        )
    if step < at and not _seen(state, observation["event_id"]):
        return (
            f"out-of-order observation: step {step} is behind episode {state['episode_id']} "
            f"(at step {at}) and is not the observation it applied for that step"
        )
    return None


def _inference_out_of_order(state: dict[str, Any], inference: dict[str, Any]) -> str | None:
    """Why ``inference`` answers no request the episode issued or will issue, or None.

    Requests are numbered 1, 2, 3... up to the horizon, the next one only once the inference of
    the last was applied; an applied inference is kept in the history under its step.
    """
    step, horizon = inference["step"], state["horizon"]
    expected = len(state["history"]) + 1
    if step < 1 or step > horizon or step > expected + STEPS_AHEAD_TOLERATED:
        return (
            f"out-of-order inference: step {step}, but episode {state['episode_id']} awaits "
            f"step {expected} (horizon {horizon}); no request of that step was issued"
        )
    if (
        step < expected
        and state["history"][step - 1]["inference_event_id"] != inference["event_id"]
    ):
        return (
            f"out-of-order inference: step {step} is behind episode {state['episode_id']} "
            f"(awaiting step {expected}) and is not the inference it applied for that step"
        )
    return None


def _seen(state: dict[str, Any], observation_event_id: str) -> bool:
    """Whether the episode applied this observation (the applied ids are a bounded window)."""
    if observation_event_id in state["applied"]:
        return True
    current = state.get("current") or {}
    return current.get("event_id") == observation_event_id or any(
        h["observation"]["event_id"] == observation_event_id for h in state["history"]
    )


def _emit(state: dict[str, Any], event_id: str, outputs: list[Output]) -> Transition:
    state["applied"] = [*state["applied"], event_id][-APPLIED_MEMORY:]
    state["outbox"] = [o.as_list() for o in outputs]
    return Transition(state, outputs)


def _ask_policy(state: dict[str, Any], event_id: str, now_ms: int) -> Transition:
    step = len(state["history"]) + 1
    if step > state["horizon"]:
        return _end(state, event_id, "finished", "horizon", None, now_ms)
    current = state["current"]
    history = [
        Step(
            step=h["step"],
            observation_event_id=h["observation"]["event_id"],
            title=h["observation"]["title"],
            url=h["observation"]["url"],
            reply=h["reply"],
            action=h["action"],
            # Rows written before inference v5 carry a backend error in parse_error.
            parse_error=parse_error(h),
            backend_error=backend_error(h),
            page_changed=_page_changed(state, index),
            marks=h["observation"].get("marks"),
        )
        for index, h in enumerate(state["history"])
    ]
    last = state["history"][-1] if state["history"] else None
    repeated_error = last is not None and last["action"] is None  # no action ran: no new error
    instruction = state["instruction"]
    utterance = (current.get("signals") or {}).get("utterance")
    if utterance:
        instruction += f"\nThe page says: {utterance}"
    context = build_context(
        instruction,
        history,
        Current(
            step=step,
            observation_event_id=current["event_id"],
            title=current["title"],
            url=current["url"],
            action_error=None if repeated_error else current["action_error"],
            marks=current.get("marks"),
        ),
        mode=state.get("mode", "coordinate"),
    )
    episode_id = state["episode_id"]
    request = {
        **_operation_header(episode_id, step, "infer", now_ms),
        "policy_version": state["policy_version"],
        "task_id": state["task_id"],
        "mode": context.mode,
        "messages_json": json.dumps(context.messages),
        "observation_event_ids": context.observation_event_ids,
        "memory": context.memory,
        "deadline_ts": state["deadline_ts"],
        **episode_marks(state),
    }
    state["status"] = "thinking"
    state["step"] = step
    return _emit(state, event_id, [Output("ops.infer", "infer_request", episode_id, request)])


def _page_changed(state: dict[str, Any], index: int) -> bool:
    """Did the screen change after the action of history step ``index``?"""
    after = next_observation(state, index)
    return after is None or after["sha256"] != state["history"][index]["observation"]["sha256"]


def _end(
    state: dict[str, Any],
    event_id: str,
    kind: str,
    reason: str,
    final_answer: str | None,
    now_ms: int,
) -> Transition:
    """End the episode: one end per episode, so the end emits exactly one terminal ``episode``
    event, one trajectory and one ``curriculum`` notice for the sampler."""
    episode_id = state["episode_id"]
    state["status"] = "ended"
    state["end"] = {"kind": kind, "reason": reason, "final_answer": final_answer, "ts": now_ms}
    terminal = {
        "event_id": episode_event_id(episode_id, "end"),
        "episode_id": episode_id,
        "step": len(state["history"]),
        "ts": now_ms,
        "policy_version": state["policy_version"],
        "kind": kind,
        "task_id": state["task_id"],
        "start_url": state.get("start_url"),
        "horizon": state.get("horizon"),
        "reason": reason,
        "final_answer": final_answer,
    }
    ended = {
        "event_id": episode_event_id(episode_id, "ended"),
        "ts": now_ms,
        "kind": "episode_ended",
        "episode_id": episode_id,
        "task_id": state["task_id"],
        "website": state.get("website"),
        "reason": f"{kind}: {reason}",
    }
    outputs = [Output("episodes", "episode", episode_id, terminal)]
    if state.get("instruction") is not None and "history" in state:
        outputs.append(Output("trajectories", "trajectory", episode_id, assemble(state)))
    outputs.append(Output("curriculum", "curriculum", "sampler", ended))
    return _emit(state, event_id, outputs)
