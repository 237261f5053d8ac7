"""The invariants ``ends``, ``steps`` and ``after-end`` of :mod:`analytics.check`, read from an
episode's terminal events and step events (ops, observations, inferences)."""

from __future__ import annotations

from analytics.check_episode import EVENT_NAMES, Copy, Episode, Violation, describe_action


def check_ends(episode: Episode) -> list[Violation]:
    out = []
    name = episode.episode_id
    start, ends = episode.start, episode.once.get("ended", [])
    if start is None:
        at = ends[0].at if ends else episode.first_at
        out.append(Violation("ends", name, "has events but no started event", at))
    elif not ends:
        out.append(Violation("ends", name, "started but never ended (lost)", start.at))
    if len(ends) > 1:
        kinds = ", ".join(f"{c.record['kind']} ({c.record.get('reason')!r}, {c.at})" for c in ends)
        out.append(
            Violation("ends", name, f"{len(ends)} different terminal events: {kinds}", ends[1].at)
        )
    for end in ends:
        if end.record["kind"] == "aborted" and not (end.record.get("reason") or "").strip():
            out.append(Violation("ends", name, "aborted without a reason", end.at))
    return out


def check_steps(episode: Episode) -> list[Violation]:
    out = []
    name = episode.episode_id
    navigate, requests = episode.steps["ops.navigate"], episode.steps["ops.infer"]
    inferences, acts = episode.steps["inferences"], episode.steps["ops.act"]
    observations = episode.steps["observations"]

    def flag(message: str, copy: Copy) -> None:
        out.append(Violation("steps", name, message, copy.at))

    for suffix, first, other in episode.conflicts:
        step = first.record["step"]
        flag(
            f"two different {EVENT_NAMES[suffix]}s for step {step}: {first.event_id} "
            f"({first.at}) and {other.event_id}",
            other,
        )
    for step, copy in navigate.items():
        if step != 0:
            flag(f"navigate op at step {step}: the only navigation is at step 0", copy)
    last_request = max(requests, default=0)
    for step in range(1, last_request + 1):
        if step not in requests:
            later = requests[min(s for s in requests if s > step)]
            flag(f"infer requests skip step {step}: they must be numbered 1, 2, 3...", later)
        elif step < last_request and step not in inferences:
            flag(
                f"infer request {step} has no inference, yet request {step + 1} followed it",
                requests[step],
            )
    for step, copy in requests.items():
        if step < 1:
            flag(f"infer request at step {step}: requests are numbered from 1", copy)
    for step, copy in inferences.items():
        request = requests.get(step)
        if request is None:
            flag(f"inference for step {step} answers no infer request of step {step}", copy)
        elif copy.record["request_event_id"] != request.event_id:
            flag(
                f"inference for step {step} names request {copy.record['request_event_id']!r}, "
                f"not {request.event_id!r} ({request.at})",
                copy,
            )
    for step, copy in acts.items():
        inference = inferences.get(step)
        if inference is None:
            flag(f"act op for step {step} follows no inference of step {step}", copy)
        elif copy.record["inference_event_id"] != inference.event_id:
            flag(
                f"act op for step {step} names inference {copy.record['inference_event_id']!r}, "
                f"not {inference.event_id!r} ({inference.at})",
                copy,
            )
        elif copy.record["action"] != inference.record["action"]:
            flag(
                f"act op for step {step} sends {describe_action(copy.record['action'])}, but "
                f"inference {inference.at} chose {describe_action(inference.record['action'])}",
                copy,
            )
    operations = set(navigate) | set(acts)
    for step, copy in observations.items():
        if copy.record.get("failure"):
            if step > max(operations, default=-1) + 1:
                flag(
                    f"failure observation at step {step}, beyond the step after the last "
                    f"operation ({max(operations, default=None)})",
                    copy,
                )
        elif step not in operations:
            op = "navigate op" if step == 0 else "act op"
            flag(f"observation for step {step} answers no {op} of step {step}", copy)
    end = episode.orchestrator_end
    if end is not None:
        applied = end.record["step"]
        if last_request not in (applied, applied + 1):
            flag(
                f"the terminal event counts {applied} steps, but infer requests run to step "
                f"{last_request} (expected {applied} or {applied + 1})",
                end,
            )
        for step, copy in acts.items():
            if step > applied:
                flag(f"act op for step {step}, beyond the terminal step {applied}", copy)
    return out


def check_after_end(episode: Episode) -> list[Violation]:
    end = episode.end
    if end is None:
        return []
    out = []
    name, end_ts = episode.episode_id, end.ts
    before: dict[str, set[int]] = {}
    for suffix in ("ops.navigate", "ops.infer", "ops.act"):
        before[suffix] = set()
        for step, copy in episode.steps[suffix].items():
            if copy.ts <= end_ts:
                before[suffix].add(step)
                continue
            out.append(
                Violation(
                    "after-end",
                    name,
                    f"{EVENT_NAMES[suffix]} for step {step} produced {copy.ts - end_ts} ms after "
                    f"the terminal event ({end.at})",
                    copy.at,
                )
            )
    operations = before["ops.navigate"] | before["ops.act"]
    for step, copy in episode.steps["inferences"].items():
        if copy.ts > end_ts and step not in before["ops.infer"]:
            message = (
                f"inference for step {step} produced {copy.ts - end_ts} ms after the terminal "
                f"event ({end.at}), answering no request issued before it"
            )
            out.append(Violation("after-end", name, message, copy.at))
    for step, copy in episode.steps["observations"].items():
        if copy.ts <= end_ts:
            continue
        if copy.record.get("failure"):
            answered = step <= max(operations, default=-1) + 1
        else:
            answered = step in operations
        if not answered:
            message = (
                f"observation for step {step} produced {copy.ts - end_ts} ms after the terminal "
                f"event ({end.at}), answering no operation issued before it"
            )
            out.append(Violation("after-end", name, message, copy.at))
    return out

