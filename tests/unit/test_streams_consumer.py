"""The stream processors' Kafka consumer: how long its fetches may wait at the broker."""

from __future__ import annotations

import asyncio

from infra.settings import Settings
from streams.app import AGENT_SETS, FETCH_MAX_WAIT_MS, build_app


def test_the_worker_consumer_fetches_wait_at_most_fetch_max_wait_ms():
    """Faust builds its consumer with a 1.5 s fetch wait; a table recovery's offset requests
    queued behind it on the broker's connection (see streams.app)."""

    async def built_wait() -> int:
        app = build_app(Settings(), AGENT_SETS)
        consumer = app.consumer._new_consumer_thread()._create_worker_consumer(app.transport)
        try:
            return consumer._fetch_max_wait_ms
        finally:
            await consumer.stop()

    assert FETCH_MAX_WAIT_MS < 1500
    assert asyncio.run(built_wait()) == FETCH_MAX_WAIT_MS
