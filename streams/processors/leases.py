"""A timer over the episodes this worker holds: deadlines, leases, and forgetting ended rows.

A timer decision is applied like an input: the row is written, then the outputs are queued, with
no await in between, so no handler can interleave. Kafka cannot re-deliver a timer decision, so
after a restart the first pass re-sends the outputs of every end a timer made (same event ids:
consumers drop the copies): a crash between the row reaching the changelog and the outputs
reaching their topics loses nothing.
"""

from __future__ import annotations

import logging

from infra.producer import now_ms
from schemas.event_ids import is_timer_decision
from streams import orchestrator

log = logging.getLogger(__name__)


def register(streams, ended_kept_ms: int, interval_s: float = 1.0) -> None:
    resent: set[str] = set()  # per process: ends made by a timer whose outputs were re-sent

    @streams.app.timer(interval=interval_s)
    async def leases():
        now = now_ms()
        owned = streams.owned_partitions("episodes")
        for episode_id, state in streams.rows():
            if state is None or streams.partition_of("episodes", episode_id) not in owned:
                continue
            end = state.get("end")
            if end is not None:
                if now - end["ts"] > ended_kept_ms:
                    streams.set_row(episode_id, None)
                elif episode_id not in resent and is_timer_decision(state["applied"][-1]):
                    resent.add(episode_id)
                    await streams.send(orchestrator.resend(state))
                continue
            transition = orchestrator.on_timer(state, now)
            if transition.changed:
                log.info("episode %s: %s", episode_id, transition.state["end"]["reason"])
                resent.add(episode_id)
                streams.set_row(episode_id, transition.state)
                await streams.send(transition.outputs)
