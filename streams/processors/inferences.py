"""``webgym.inferences`` -> the orchestrator: a reply becomes an action, or ends the episode."""

from __future__ import annotations

from infra.producer import now_ms
from streams import orchestrator


def register(streams) -> None:
    @streams.app.agent(streams.topics["inferences"], name="orchestrator-inferences")
    async def inferences(stream):
        async for event in stream.events():
            record = await streams.decode(event, "inference")
            if record is None:
                continue
            episode_id = record["episode_id"]
            transition = orchestrator.on_inference(
                streams.row(episode_id),
                record,
                now_ms(),
                event.message.partition,
                event.message.offset,
            )
            await streams.apply(episode_id, transition, event)
