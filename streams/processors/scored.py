"""``webgym.trajectories.scored`` -> the success stream, and blocked-site notices to the sampler."""

from __future__ import annotations

from infra.producer import now_ms
from schemas.event_ids import episode_event_id
from streams.filters import reaches_learner
from streams.orchestrator import Output


def register(streams) -> None:
    cooldown_ms = int(streams.settings.blocked_site_cooldown_s * 1000)

    @streams.agent("trajectories.scored", "scored_trajectory", name="filter")
    async def scored(record, event):
        episode_id = record["episode_id"]
        outputs = []
        if reaches_learner(record):
            success = {**record, "event_id": episode_event_id(episode_id, "success")}
            outputs.append(Output("trajectories.success", "scored_trajectory", episode_id, success))
        if record.get("blocked") and record.get("website"):
            notice = {
                "event_id": episode_event_id(episode_id, "site_blocked"),
                "ts": now_ms(),
                "kind": "site_blocked",
                "episode_id": episode_id,
                "task_id": record["task_id"],
                "website": record["website"],
                "until_ts": record["ts"] + cooldown_ms,
                "reason": record.get("block_reason"),
            }
            outputs.append(Output("curriculum", "curriculum", "sampler", notice))
        await streams.send(outputs)
