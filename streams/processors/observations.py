"""``webgym.observations`` -> the orchestrator: what the browser shows becomes the next request."""

from __future__ import annotations

from infra.producer import now_ms
from streams import orchestrator


def register(streams) -> None:
    @streams.app.agent(streams.topics["observations"], name="orchestrator-observations")
    async def observations(stream):
        async for event in stream.events():
            record = await streams.decode(event, "observation")
            if record is None:
                continue
            episode_id = record["episode_id"]
            transition = orchestrator.on_observation(
                streams.row(episode_id),
                record,
                event.message.partition,
                event.message.offset,
                now_ms(),
            )
            await streams.apply(episode_id, transition, event)
