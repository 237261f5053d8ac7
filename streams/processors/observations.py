"""``webgym.observations`` -> the orchestrator: what the browser shows becomes the next request."""

from __future__ import annotations

from infra.producer import now_ms
from streams import orchestrator


def register(streams) -> None:
    @streams.agent("observations", "observation", name="orchestrator-observations")
    async def observations(observation, event):
        episode_id, message = observation["episode_id"], event.message
        transition = orchestrator.on_observation(
            streams.row(episode_id), observation, message.partition, message.offset, now_ms()
        )
        await streams.apply(episode_id, transition, event)
