"""One valid record per event type, shaped as the producers of each will write them."""

from __future__ import annotations

from typing import Any

TS = 1_795_000_000_000
EPISODE = "ep-0001"


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
