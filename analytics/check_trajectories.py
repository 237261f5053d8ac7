"""The invariants ``trajectory``, ``duplicates`` and ``success`` of :mod:`analytics.check`, read
from an episode's trajectory, scored trajectory and success against the events they fold."""

from __future__ import annotations

from typing import Any

from analytics.check_episode import (
    EVENT_NAMES,
    TRAJECTORY_TOPICS,
    At,
    Copy,
    Episode,
    Violation,
    describe_action,
    differing_fields,
    short_repr,
)
from schemas.inference import backend_error, parse_error
from streams.filters import reaches_learner


def check_trajectories(episode: Episode, at_index: dict[At, Copy]) -> list[Violation]:
    out = []
    name = episode.episode_id
    end = episode.end
    trajectory = episode.first("trajectories")
    scored = episode.first("trajectories.scored")
    if end is not None:
        for suffix, copy in (("trajectories", trajectory), ("trajectories.scored", scored)):
            if copy is None:
                message = f"ended ({end.record['kind']}) but has nothing on {suffix}"
                out.append(Violation("trajectory", name, message, end.at))
    if trajectory is not None:
        for problem in _trajectory_fold_problems(episode, trajectory.record, at_index):
            out.append(Violation("trajectory", name, f"trajectory: {problem}", trajectory.at))
    if scored is not None:
        if trajectory is not None:
            differ = [
                f
                for f in trajectory.record
                if f != "event_id" and scored.record.get(f) != trajectory.record[f]
            ]
            if differ:
                message = (
                    f"scored trajectory differs from its trajectory ({trajectory.at}) in "
                    f"{', '.join(differ)}"
                )
                out.append(Violation("trajectory", name, message, scored.at))
        else:
            for problem in _trajectory_fold_problems(episode, scored.record, at_index):
                out.append(
                    Violation("trajectory", name, f"scored trajectory: {problem}", scored.at)
                )
    return out


def _trajectory_fold_problems(
    episode: Episode, trajectory: dict[str, Any], at_index: dict[At, Copy]
) -> list[str]:
    """How ``trajectory`` differs from the fold of the episode's events."""
    out = []
    steps = trajectory["steps"]
    numbers = [s["step"] for s in steps]
    if numbers != list(range(1, len(steps) + 1)):
        out.append(f"steps are numbered {numbers}, not 1..{len(steps)}")
    if trajectory["step"] != len(steps):
        out.append(f"says {trajectory['step']} steps but holds {len(steps)}")
    start, end = episode.start, episode.end
    if start is not None:
        if trajectory["task_id"] != start.record["task_id"]:
            out.append(
                f"task {trajectory['task_id']!r}, but the episode started on "
                f"{start.record['task_id']!r}"
            )
        if trajectory["started_ts"] != start.ts:
            out.append(f"started_ts {trajectory['started_ts']}, the started event says {start.ts}")
    if end is not None:
        kind, reason = end.record["kind"], end.record.get("reason") or end.record["kind"]
        if trajectory["aborted"] != (kind == "aborted"):
            out.append(f"aborted={trajectory['aborted']}, but the terminal event is {kind}")
        if trajectory["termination"] != reason:
            out.append(
                f"termination {trajectory['termination']!r}, the terminal event says {reason!r}"
            )
        if trajectory.get("final_answer") != end.record.get("final_answer"):
            out.append(
                f"final answer {trajectory.get('final_answer')!r}, the terminal event says "
                f"{end.record.get('final_answer')!r}"
            )
        if episode.orchestrator_end is not None and end.record["step"] != len(steps):
            out.append(f"{len(steps)} steps, the terminal event counts {end.record['step']}")
    acts = episode.steps["ops.act"]
    observations = episode.steps["observations"]
    seen = 0  # the step of the observation the policy sees: 0, then each act step
    versions = set()
    for number, step in enumerate(steps, start=1):
        where = f"step {number}"
        inference = _pointed_record(
            episode, at_index, "inferences", step.get("inference_event_id"), step, out, where
        )
        if inference is not None:
            record = inference.record
            if record["step"] != number:
                out.append(f"{where}: inference {inference.at} is for step {record['step']}")
            for key, ours, theirs in (
                ("action", step.get("action"), record.get("action")),
                # What each means: before inference v5 a backend error was a prefixed parse error.
                ("parse_error", parse_error(step), parse_error(record)),
                ("backend_error", backend_error(step), backend_error(record)),
                ("policy_version", step.get("policy_version"), record.get("policy_version")),
            ):
                if ours != theirs:
                    out.append(
                        f"{where}: {key} {short_repr(ours)}, inference {inference.at} "
                        f"has {short_repr(theirs)}"
                    )
            _pointed_record(
                episode, at_index, "ops.infer", record.get("request_event_id"), step, out, where
            )
        if step.get("policy_version") is not None:
            versions.add(step["policy_version"])
        expected = observations.get(seen)
        if expected is None:
            out.append(f"{where}: the policy saw observation {seen}, which is not in the log")
        elif step["observation_event_id"] != expected.event_id:
            out.append(
                f"{where}: observation {step['observation_event_id']!r}, but the policy "
                f"saw {expected.event_id!r} ({expected.at})"
            )
        observation = _pointed_record(
            episode, at_index, "observations", step["observation_event_id"], step, out, where
        )
        if observation is not None:
            if observation.record.get("failure"):
                out.append(f"{where}: observation {observation.at} is a failure report")
            for key in ("url", "title", "screenshot_sha256"):
                # "" is the schema's default: a trajectory written before the field existed
                if step.get(key) and step[key] != observation.record.get(key):
                    out.append(
                        f"{where}: {key} {short_repr(step[key])}, observation "
                        f"{observation.at} has {short_repr(observation.record.get(key))}"
                    )
        action = step.get("action")
        act = acts.get(number)
        if act is not None:
            if act.record["action"] != action:
                out.append(
                    f"{where}: action {describe_action(action)}, act op {act.at} sent "
                    f"{describe_action(act.record['action'])}"
                )
            seen = number
        elif action is not None and action["kind"] != "answer" and number < len(steps):
            out.append(
                f"{where}: action {describe_action(action)} was never sent (no act op for step "
                f"{number})"
            )
    if sorted(versions) != sorted(trajectory.get("policy_versions") or []):
        out.append(
            f"policy versions {trajectory.get('policy_versions')}, the steps have "
            f"{sorted(versions)}"
        )
    final = trajectory.get("final_observation_event_id")
    if final is not None:
        last = episode.by_id.get("observations", {}).get(final)
        if last is None or last.record.get("failure"):
            out.append(f"final observation {final!r} is not an observation of the episode")
    return out


# The prefix of the fields in which a trajectory step keeps the coordinates of the record it
# holds from each topic: ``<prefix>_partition`` and ``<prefix>_offset``.
_COORDINATES_PREFIX = {
    "inferences": "inference",
    "ops.infer": "request",
    "observations": "observation",
}


def _pointed_record(
    episode: Episode,
    at_index: dict[At, Copy],
    suffix: str,
    event_id: str | None,
    step: dict[str, Any],
    problems: list[str],
    where: str,
) -> Copy | None:
    """The record of ``suffix`` that trajectory ``step`` points at: the one at the coordinates
    the step keeps for it, when it has them (any copy there must carry the event id), else the
    first copy of the event id."""
    what = EVENT_NAMES[suffix]
    prefix = _COORDINATES_PREFIX[suffix]
    partition = step.get(f"{prefix}_partition", -1)
    offset = step.get(f"{prefix}_offset", -1)
    if event_id is None:
        problems.append(f"{where}: names no {what}")
        return None
    if partition is not None and offset is not None and partition >= 0 and offset >= 0:
        at = At(suffix, partition, offset)
        copy = at_index.get(at)
        if copy is None:
            problems.append(f"{where}: {what} {event_id!r} points at {at}, which is not in the log")
        elif copy.event_id != event_id:
            problems.append(
                f"{where}: {what} {event_id!r} points at {at}, which holds {copy.event_id!r}"
            )
            return None
        return copy
    copy = episode.by_id.get(suffix, {}).get(event_id)
    if copy is None:
        problems.append(f"{where}: {what} {event_id!r} is not in the log")
    return copy


def check_duplicates(episode: Episode) -> list[Violation]:
    out = []
    for name in ("started", *TRAJECTORY_TOPICS):
        versions = episode.once.get(name) or []
        if len(versions) > 1:
            first = versions[0]
            for other in versions[1:]:
                differ = differing_fields(first.record, other.record)
                what = "started event" if name == "started" else f"record on {name}"
                message = (
                    f"a second, different {what} (the first is {first.at}; they differ in "
                    f"{', '.join(differ) or 'event_id'})"
                )
                out.append(Violation("duplicates", episode.episode_id, message, other.at))
    return out


def check_success(episode: Episode) -> list[Violation]:
    name = episode.episode_id
    success, scored = episode.first("trajectories.success"), episode.first("trajectories.scored")
    if success is None:
        if scored is not None and reaches_learner(scored.record):
            message = "its scored trajectory passes the success filter, but it is not a success"
            return [Violation("success", name, message, scored.at)]
        return []
    if scored is None:
        return [Violation("success", name, "a success without a scored trajectory", success.at)]
    out = []
    differ = differing_fields(scored.record, success.record)
    if differ:
        message = f"differs from its scored trajectory ({scored.at}) in {', '.join(differ)}"
        out.append(Violation("success", name, message, success.at))
    if not reaches_learner(scored.record):
        record = scored.record
        message = (
            f"its scored trajectory ({scored.at}) is no success: reward {record['reward']}, "
            f"aborted={record['aborted']}, judge error {record.get('judge_error')!r}, "
            f"blocked={record.get('blocked')}"
        )
        out.append(Violation("success", name, message, success.at))
    return out
