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


def _link_problem(copy: Copy, answered: Copy | None, link: str, what: str) -> str | None:
    """What is wrong with the link from ``copy`` to ``answered``, the event of the same step that
    it answers (a ``what``) and names in its ``<link>_event_id``; ``None`` when the link holds."""
    step = copy.record["step"]
    if answered is None:
        return f"answers no {what} of step {step}"
    named = copy.record[f"{link}_event_id"]
    if named != answered.event_id:
        return f"names {link} {named!r}, not {answered.event_id!r} ({answered.at})"
    return None


def check_steps(episode: Episode) -> list[Violation]:
    """The ``steps`` invariant. How steps are numbered (``streams.orchestrator``,
    ``agents.browser.worker``, ``agents.policy.worker``); the checks follow from it:

    - ``started`` (step 0) -> one navigate op, step 0 -> observation 0;
    - an observation -> infer request k, k = inferences applied so far + 1: requests are numbered
      1, 2, 3... without a gap; the inference answering request k has step k and names the
      request (``request_event_id``); request k + 1 exists only once inference k was applied;
    - inference k -> act op k (the same action, ``inference_event_id`` naming it) ->
      observation k; or, when the reply did not parse, request k + 1 on the same screen (no act
      op, no observation k); or the end. So observation steps are 0 and the act steps; a
      *failure* observation (the browser side lost the episode) may also stand at the step after
      the last operation;
    - the orchestrator's terminal event (event id ``<episode>:end``) has step N = inferences
      applied; the trajectory has N steps numbered 1..N, step k recording inference k and the
      observation the policy saw (observation j, j the last act step before k, or 0); the
      requests run to N, or to N + 1 when a timer or a failure observation ended the episode
      while the policy was thinking.
    """
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
        problem = _link_problem(copy, requests.get(step), "request", "infer request")
        if problem:
            flag(f"inference for step {step} {problem}", copy)
    for step, copy in acts.items():
        inference = inferences.get(step)
        problem = _link_problem(copy, inference, "inference", "inference")
        if problem:
            flag(f"act op for step {step} {problem}", copy)
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
    """The ``after-end`` invariant ("nothing after the end").

    Kafka orders records within a partition only, and an episode's events lie on several topics,
    so the comparison uses the producer's ``ts`` in each record: the moment its writer decided
    it. Operations and terminal events are both written by the orchestrator (one clock; after a
    rebalance, the clocks of its hosts are assumed to agree better than the time between an
    episode's last operation and its end); a re-sent copy keeps its original ``ts``, and only the
    first copy of each event is compared, so redelivery is never mistaken for new work. An
    operation whose ``ts`` is after the terminal event's is a violation. Observations and
    inferences are answers written by other processes that may not have seen the end yet: one
    produced after the end is allowed when it answers an operation issued at or before the end
    (an operation of its step; for a failure observation, also the step after the last
    operation), and a violation otherwise.
    """
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
