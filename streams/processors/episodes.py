"""``webgym.episodes`` -> the orchestrator: a started episode opens a row, asks for navigation."""

from __future__ import annotations

from infra.producer import now_ms
from streams import orchestrator


def register(streams) -> None:
    @streams.agent("episodes", "episode", name="orchestrator-episodes")
    async def episodes(episode, event):
        episode_id = episode["episode_id"]
        if episode["kind"] == "started":
            task = await streams.task(episode["task_id"])
            transition = orchestrator.on_started(
                streams.row(episode_id), episode, task, streams.rules, now_ms()
            )
        else:
            transition = orchestrator.on_episode_event(streams.row(episode_id), episode, now_ms())
        await streams.apply(episode_id, transition)
