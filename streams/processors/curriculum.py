"""``webgym.curriculum`` -> the task sampler -> ``started`` episodes on ``webgym.episodes``.

One partition, one row: whichever worker holds it keeps every run's episodes in flight, each run
drawing only from its own task sets (``streams.curriculum``). When tasks arrive late (a run's
sets published after its target) or a blocked site's cooldown ends, a timer notices the
shortfall and sends a ``tick`` through the same topic: every change of the row is an input Kafka
can re-deliver, so the idempotency rules of ``streams.curriculum`` cover it too.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from confluent_kafka import KafkaException

from infra.producer import now_ms
from streams import curriculum
from streams.orchestrator import Output

KEY = curriculum.KEY.encode()
log = logging.getLogger(__name__)


def register(streams, interval_s: float = 2.0) -> None:
    async def refresh() -> None:
        """Read new tasks; while the broker is unreachable keep the tasks known (a timer or an
        agent that raised would stop the whole worker) and try again at the next call."""
        try:
            await asyncio.to_thread(streams.catalog.refresh)
        except (KafkaException, RuntimeError) as error:
            log.warning("task catalog not refreshed (will retry): %s", error)

    async def tasks() -> list[dict]:
        if not len(streams.catalog):
            await refresh()
        return streams.catalog.tasks()

    @streams.agent("curriculum", "curriculum", name="sampler")
    async def sampler(record, event):
        if record["kind"] == "target":
            await refresh()
        available = await tasks()
        for name in curriculum.empty_sets(record, available):
            log.warning(
                "run %s draws from task set %r, which holds no task on %s: its episodes start "
                "once tasks of that set are published (`webgym tasks practice-web --seed N`, "
                "`webgym tasks miniwob`, `webgym tasks load FILE`; `webgym tasks sets` lists them)",
                record.get("run_id"),
                name,
                streams.settings.topic("tasks"),
            )
        state, outputs, changed = curriculum.apply(
            streams.sampler.get(KEY), record, available, streams.rules, now_ms()
        )
        if changed:
            streams.sampler[KEY] = state
        await streams.send(outputs)

    @streams.app.timer(interval=interval_s)
    async def top_up():
        state = streams.sampler.get(KEY)
        if state is None or not streams.owned_partitions("curriculum"):
            return
        if curriculum.short_of_target(state, await tasks(), now_ms()):
            tick = {"event_id": f"tick:{uuid.uuid4().hex}", "ts": now_ms(), "kind": "tick"}
            await streams.send([Output("curriculum", "curriculum", KEY.decode(), tick)])

    @streams.app.timer(interval=10.0)
    async def refresh_tasks():
        await refresh()
