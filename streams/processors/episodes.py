"""``webgym.episodes`` -> the orchestrator: a started episode opens a row, asks for navigation."""

from __future__ import annotations

from infra.producer import now_ms
from streams import orchestrator


def register(streams) -> None:
    @streams.app.agent(streams.topics["episodes"], name="orchestrator-episodes")
    async def episodes(stream):
        async for event in stream.events():
            record = await streams.decode(event, "episode")
            if record is None:
                continue
            episode_id = record["episode_id"]
            if record["kind"] == "started":
                task = await streams.task(record["task_id"])
                transition = orchestrator.on_started(
                    streams.row(episode_id), record, task, streams.rules, now_ms()
                )
            else:
                transition = orchestrator.on_episode_event(
                    streams.row(episode_id), record, now_ms()
                )
            await streams.apply(episode_id, transition)
