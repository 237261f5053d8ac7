"""What an orchestrator sends a policy worker: an observation, then the request that uses it."""

from __future__ import annotations

import io
import json

from PIL import Image

from agents.policy.context import Current, build_context
from infra.producer import EventProducer, now_ms
from infra.settings import Settings


def jpeg(colour: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (1280, 768), colour).save(buffer, "JPEG", quality=80)
    return buffer.getvalue()


def ask(
    settings: Settings,
    producer: EventProducer,
    episode_id: str,
    step: int = 1,
    task_id: str = "task-1",
    screenshot: bytes | None = None,
) -> str:
    """Produce the observation of step ``step - 1`` and the inference request of ``step``."""
    observation_id = f"{episode_id}:{step - 1}:observation"
    producer.produce(
        settings.topic("observations"),
        episode_id,
        "observation",
        {
            "event_id": observation_id,
            "episode_id": episode_id,
            "step": step - 1,
            "ts": now_ms(),
            "screenshot": screenshot or jpeg((30, 90 + step % 100, 200)),
            "width": 1280,
            "height": 768,
            "url": "http://a.webgym.test/",
            "title": "Home",
        },
    )
    context = build_context(
        "Find the price of the blue kettle.",
        [],
        Current(step, observation_id, "Home", "http://a.webgym.test/"),
    )
    request_id = f"{episode_id}:{step}:infer"
    producer.produce(
        settings.topic("ops.infer"),
        episode_id,
        "infer_request",
        {
            "event_id": request_id,
            "episode_id": episode_id,
            "step": step,
            "ts": now_ms(),
            "task_id": task_id,
            "messages_json": json.dumps(context.messages),
            "observation_event_ids": context.observation_event_ids,
        },
    )
    producer.flush()
    return request_id
