"""A timer over the episodes this worker holds: deadlines, leases, and forgetting ended rows.

Timer decisions are not inputs Kafka can re-deliver, so their outputs are sent and acknowledged
before the row changes: a crash in between repeats the same decision (same event ids) later.
"""

from __future__ import annotations

import logging

from infra.producer import now_ms
from streams import orchestrator

log = logging.getLogger(__name__)


def register(streams, ended_kept_ms: int, interval_s: float = 1.0) -> None:
    @streams.app.timer(interval=interval_s)
    async def leases():
        now = now_ms()
        for episode_id, state in streams.rows():
            if state is None or not streams.owns("episodes", episode_id):
                continue
            end = state.get("end")
            if end is not None:
                if now - end["ts"] > ended_kept_ms:
                    streams.set_row(episode_id, None)
                continue
            transition = orchestrator.on_timer(state, now)
            if transition.changed:
                log.info("episode %s: %s", episode_id, transition.state["end"]["reason"])
                await streams.send(transition.outputs, wait=True)
                streams.set_row(episode_id, transition.state)
