"""The trajectory assembler: an ended episode's state in, one ``trajectory`` event out.

The trajectory is the fold of the episode's steps: for every inference the orchestrator applied,
in step order, the observation the policy saw (event id and its exact place in
``webgym.observations``: partition and offset, so replay, judges and the learner can fetch the
screenshot), the inference event, the action or the parse error, the policy version (None for
a step of a backend that uses no weights). Pure and deterministic: the same state gives the same
event (id ``<episode_id>:trajectory``). ``policy_versions`` lists the versions whose weights
acted in the episode; steps without a version add none.

Repetition filter (the paper's): a step whose screenshot equals the next one (its action left
the screen unchanged) is marked ``repeated``. A step is ``trainable`` when its reply parsed into
an action and it is not repeated; the learner trains on trainable steps only.
"""

from __future__ import annotations

from typing import Any

from schemas.event_ids import episode_event_id


def assemble(state: dict[str, Any]) -> dict[str, Any]:
    episode_id = state["episode_id"]
    end = state["end"] or {}
    steps = []
    for index, entry in enumerate(state["history"]):
        observation = entry["observation"]
        after = next_observation(state, index)
        repeated = after is not None and after["sha256"] == observation["sha256"]
        steps.append(
            {
                "step": entry["step"],
                "observation_event_id": observation["event_id"],
                "inference_event_id": entry["inference_event_id"],
                "action": entry["action"],
                "parse_error": entry["parse_error"],
                "backend_error": entry.get("backend_error"),  # states kept before inference v5
                "repeated": repeated,
                "observation_partition": observation["partition"],
                "observation_offset": observation["offset"],
                "url": observation["url"],
                "title": observation["title"],
                "screenshot_sha256": observation["sha256"],
                "policy_version": entry["policy_version"],
                "trainable": entry["action"] is not None and not repeated,
                "inference_partition": entry.get("inference_at", [-1, -1])[0],
                "inference_offset": entry.get("inference_at", [-1, -1])[1],
                "request_partition": entry.get("request_at", [-1, -1])[0],
                "request_offset": entry.get("request_at", [-1, -1])[1],
            }
        )
    current = state.get("current") or {}
    return {
        "event_id": episode_event_id(episode_id, "trajectory"),
        "episode_id": episode_id,
        "step": len(steps),
        "ts": end.get("ts", state["started_ts"]),
        "task_id": state["task_id"],
        "instruction": state.get("instruction", ""),
        "termination": end.get("reason", ""),
        "aborted": end.get("kind") == "aborted",
        "final_answer": end.get("final_answer"),
        "policy_versions": [v for v in state.get("policy_versions", []) if v is not None],
        "website": state.get("website", ""),
        "difficulty": state.get("difficulty", ""),
        "horizon": state.get("horizon") or 0,
        "started_ts": state["started_ts"],
        "final_url": current.get("url", ""),
        "final_observation_event_id": current.get("event_id"),
        "final_page_signals": current.get("signals") or {},
        "steps": steps,
        # An episode opened before runs were marked is a training episode.
        "purpose": state.get("purpose") or "train",
        "phase": state.get("phase"),
    }


def next_observation(state: dict[str, Any], index: int) -> dict[str, Any] | None:
    """The observation that followed the action of history step ``index`` (None: none yet)."""
    history = state["history"]
    if history[index]["action"] is None:
        return None  # nothing ran
    if index + 1 < len(history):
        return history[index + 1]["observation"]
    current = state["current"]
    if current is not None and current["event_id"] != history[index]["observation"]["event_id"]:
        return current
    return None
