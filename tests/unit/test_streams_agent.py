"""``Streams.agent``: the registration every stream processor shares (no broker: Faust's test
context feeds the agent)."""

from __future__ import annotations

import asyncio

from infra.settings import Settings
from streams.app import AGENT_SETS, Streams, wire
from tests.samples import sample


def _streams(tmp_path) -> tuple[Streams, list[Exception]]:
    streams = Streams(Settings(state_dir=tmp_path), ("filter",))
    dead: list[Exception] = []

    async def dead_letter(event, error: Exception) -> None:
        dead.append(error)

    streams.dead_letter = dead_letter  # the dlq topic needs a broker
    return streams, dead


def test_agent_hands_decoded_records_and_dead_letters_poison(tmp_path):
    streams, dead = _streams(tmp_path)
    seen: list[tuple[str, int]] = []

    @streams.agent("trajectories.scored", "scored_trajectory", name="probe", concurrency=3)
    async def probe(record, event):
        """Collects what it is handed."""
        seen.append((record["episode_id"], event.message.offset))

    agent = streams.app.agents["probe"]
    assert agent.concurrency == 3
    assert agent.channel is streams.topics["trajectories.scored"]
    assert "probe" in agent.label and agent.help == "Collects what it is handed."
    scored = sample("scored_trajectory")

    async def feed() -> None:
        async with agent.test_context() as running:
            await running.put(b"not an event")
            await running.put(streams.schemas.encode("scored_trajectory", scored))

    asyncio.run(feed())
    assert [episode_id for episode_id, _ in seen] == [scored["episode_id"]]
    assert len(dead) == 1


def test_processors_keep_their_agent_names(tmp_path):
    streams = Streams(Settings(state_dir=tmp_path), AGENT_SETS)
    wire(streams)
    assert {
        "orchestrator-episodes",
        "orchestrator-observations",
        "orchestrator-inferences",
        "judge",
        "filter",
        "sampler",
    } <= set(streams.app.agents)
    assert streams.app.agents["judge"].concurrency == streams.settings.judge_concurrency
