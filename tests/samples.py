"""One valid record per event type, shaped as the producers of each will write them."""

from __future__ import annotations

import json
from typing import Any

TS = 1_795_000_000_000
EPISODE = "ep-0001"


# A real WebGym task of three fact groups, for the LLM tools that rewrite and judge tasks.
LASAGNA_RECIPE = {
    "id": "g1",
    "description": "a recipe that meets the criteria",
    "facts": [
        "The recipe is a vegetarian lasagna",
        "The recipe is rated at least 4.5 stars",
        "The recipe has more than 100 reviews",
    ],
}
LASAGNA_TIME = {"id": "g2", "description": "total time", "facts": ["The total time of the recipe"]}
LASAGNA_INGREDIENTS = {
    "id": "g3",
    "description": "first three ingredients",
    "facts": ["ricotta cheese", "lasagna noodles", "fresh spinach"],
}


def lasagna_task(**fields: Any) -> dict[str, Any]:
    """The allrecipes.com vegetarian lasagna task as the tasks topic holds it, fact groups
    ``LASAGNA_RECIPE``, ``LASAGNA_TIME`` and ``LASAGNA_INGREDIENTS``; ``fields`` override."""
    return {
        "event_id": "task:allrecipes-0042",
        "ts": TS,
        "task_id": "allrecipes-0042",
        "task_name": "On allrecipes.com, find a vegetarian lasagna recipe rated at least 4.5 stars "
        "with more than 100 reviews. Report its name, its total time and its first three "
        "ingredients.",
        "website": "allrecipes.com",
        "start_url": "https://www.allrecipes.com/",
        "domain": "food",
        "subdomain": "recipes",
        "difficulty": "hard",
        "evaluator_reference": [LASAGNA_RECIPE, LASAGNA_TIME, LASAGNA_INGREDIENTS],
        "definite_answer": None,
        "split": "train",
        "parent_task_id": None,
        "extra_json": json.dumps({"source": "webgym", "website_id": 17}),
        **fields,
    }


def started_record(episode_id: str, task_id: str, ts: int, **fields: Any) -> dict[str, Any]:
    """The ``started`` event of episode ``episode_id`` (step 0) for ``task_id``; ``fields`` add."""
    return {
        "event_id": f"{episode_id}:started",
        "episode_id": episode_id,
        "step": 0,
        "ts": ts,
        "kind": "started",
        "task_id": task_id,
        **fields,
    }


def step_record(episode_id: str, step: int, name: str, ts: int) -> dict[str, Any]:
    """The fields every event of an episode's step starts with: event id
    ``<episode_id>:<step>:<name>``, the episode, the step and ``ts``."""
    event_id = f"{episode_id}:{step}:{name}"
    return {"event_id": event_id, "episode_id": episode_id, "step": step, "ts": ts}


def v1_inference(**fields: Any) -> dict[str, Any]:
    """An inference event (run-000001, step 1) with only the fields every version of its schema
    has, the first included; ``fields`` add or override."""
    return {
        "event_id": "run-000001:1:inference",
        "episode_id": "run-000001",
        "step": 1,
        "ts": 1,
        "policy_version": 5,
        "request_event_id": "run-000001:1:infer",
        "raw_text": "",
        "latency_ms": 0.0,
        "backend": "local",
        "model": "",
        **fields,
    }


def _action(kind: str = "left_click", **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "x": 500, "y": 250, **fields}


def _steps() -> list[dict[str, Any]]:
    return [
        {
            "step": 1,
            "observation_event_id": f"{EPISODE}:0:observation",
            "inference_event_id": f"{EPISODE}:1:inference",
            "action": _action(),
            "repeated": False,
        },
        {
            "step": 2,
            "observation_event_id": f"{EPISODE}:1:observation",
            "inference_event_id": f"{EPISODE}:2:inference",
            "parse_error": "no <tool_call> block",
            "repeated": True,
        },
    ]


def _trajectory() -> dict[str, Any]:
    return {
        "event_id": f"{EPISODE}:trajectory",
        "episode_id": EPISODE,
        "step": 2,
        "ts": TS,
        "task_id": "shop-17-easy",
        "instruction": "Find the price of the blue kettle.",
        "termination": "answer",
        "aborted": False,
        "final_answer": "$24.99",
        "policy_versions": [3, 4],
        "steps": _steps(),
    }


def sample(event_type: str) -> dict[str, Any]:
    samples: dict[str, dict[str, Any]] = {
        "task": {
            "event_id": "task:shop-17-easy",
            "ts": TS,
            "task_id": "shop-17-easy",
            "task_name": "Find the price of the blue kettle.",
            "website": "kettles.webgym.test",
            "start_url": "http://kettles.webgym.test/",
            "domain": "shopping",
            "difficulty": "easy",
            "evaluator_reference": [
                {"id": "g1", "description": "price", "facts": ["$24.99"]},
            ],
            "definite_answer": "$24.99",
            "extra_json": '{"source": "practice-web"}',
        },
        "episode": {
            "event_id": f"{EPISODE}:0:started",
            "episode_id": EPISODE,
            "step": 0,
            "ts": TS,
            "kind": "started",
            "task_id": "shop-17-easy",
            "start_url": "http://kettles.webgym.test/",
            "horizon": 10,
        },
        "navigate_op": {
            "event_id": f"{EPISODE}:0:navigate",
            "episode_id": EPISODE,
            "step": 0,
            "ts": TS,
            "url": "http://kettles.webgym.test/",
            "allowed_hosts": ["kettles.webgym.test"],
        },
        "act_op": {
            "event_id": f"{EPISODE}:1:act",
            "episode_id": EPISODE,
            "step": 1,
            "ts": TS,
            "policy_version": 4,
            "action": _action("type", text="blue kettle"),
            "inference_event_id": f"{EPISODE}:1:inference",
        },
        "observation": {
            "event_id": f"{EPISODE}:0:observation",
            "episode_id": EPISODE,
            "step": 0,
            "ts": TS,
            "screenshot": b"\xff\xd8\xff\xe0" + bytes(range(256)) * 4,
            "width": 1280,
            "height": 768,
            "url": "http://kettles.webgym.test/",
            "title": "Kettles & Co",
            "set_of_marks": [
                {
                    "id": "7",
                    "role": "button",
                    "name": "Search",
                    "x": 10,
                    "y": 20,
                    "width": 80,
                    "height": 30,
                }
            ],
            "timings_ms": {"action": 12.5, "screenshot": 31.0},
        },
        "infer_request": {
            "event_id": f"{EPISODE}:1:infer",
            "episode_id": EPISODE,
            "step": 1,
            "ts": TS,
            "policy_version": 4,
            "task_id": "shop-17-easy",
            "messages_json": '[{"role": "user", "content": "..."}]',
            "observation_event_ids": [f"{EPISODE}:0:observation"],
            "memory": "searched for kettles",
        },
        "inference": {
            "event_id": f"{EPISODE}:1:inference",
            "episode_id": EPISODE,
            "step": 1,
            "ts": TS,
            "policy_version": 4,
            "request_event_id": f"{EPISODE}:1:infer",
            "raw_text": "Thought: ...\nAction: click search",
            "thought": "...",
            "action": _action(),
            "memory": "searched for kettles",
            "token_ids": [1, 2, 3],
            "logprobs": [-0.5, -0.25, -0.125],
            "latency_ms": 812.0,
            "backend": "transformers",
            "model": "tiny-qwen-vl",
        },
        "trajectory": _trajectory(),
        "scored_trajectory": {
            **_trajectory(),
            "reward": 1.0,
            "verdicts": [
                {
                    "fact_group_id": "g1",
                    "fact": "$24.99",
                    "satisfied": True,
                    "rationale": "shown on page",
                }
            ],
            "judge_name": "practice-web-verifier",
            "judge_version": "1",
        },
        "policy_version": {
            "event_id": "policy:qwen3-vl-8b:v4",
            "ts": TS,
            "policy_version": 4,
            "policy_name": "qwen3-vl-8b",
            "location": "s3://webgym-policies/policies/qwen3-vl-8b/v4/",
            "manifest_sha256": "ab" * 32,
            "base_model": "Qwen/Qwen3-VL-8B-Instruct",
            "samples_seen": 1024,
        },
        "eval_result": {
            "event_id": "eval-1:v4",
            "ts": TS,
            "kind": "version",
            "eval_id": "eval-1",
            "policy_name": "qwen3-vl-8b",
            "policy_version": 4,
            "task_set": "miniwob/heldout",
            "episode_id": None,
            "task_id": None,
            "success": None,
            "episodes": 50,
            "successes": 31,
            "ci_low": 0.4822,
            "ci_high": 0.7438,
            "by_task": [
                {
                    "task": "click-button",
                    "episodes": 10,
                    "successes": 6,
                    "ci_low": 0.3127,
                    "ci_high": 0.8318,
                }
            ],
            "announced_ts": TS,
            "samples_seen": 800,
        },
        "dead_letter": {
            "event_id": "dlq:webgym.observations:3:42",
            "ts": TS,
            "source_topic": "webgym.observations",
            "source_partition": 3,
            "source_offset": 42,
            "error_class": "CorruptEventError",
            "error_message": "not an Avro single-object encoding",
            "original_key": b"ep-0001",
            "original_value": b"\x00garbage",
        },
        "curriculum": {
            "event_id": "ep-0001:ended",
            "ts": TS,
            "kind": "episode_ended",
            "episode_id": "ep-0001",
            "task_id": "shop-001-easy",
            "website": "hazeloak-shop.webgym.test",
            "reason": "finished: answer",
        },
    }
    return samples[event_type]
