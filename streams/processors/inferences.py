"""``webgym.inferences`` -> the orchestrator: a reply becomes an action, or ends the episode."""

from __future__ import annotations

from infra.producer import now_ms
from streams import orchestrator


def register(streams) -> None:
    @streams.agent("inferences", "inference", name="orchestrator-inferences")
    async def inferences(inference, event):
        episode_id, message = inference["episode_id"], event.message
        transition = orchestrator.on_inference(
            streams.row(episode_id), inference, now_ms(), message.partition, message.offset
        )
        await streams.apply(episode_id, transition, event)
