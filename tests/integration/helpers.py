from __future__ import annotations

import time
from collections.abc import Callable

from infra.consumer import ConsumedEvent, EventConsumer


def drain(
    consumer: EventConsumer,
    want: int,
    timeout: float = 30.0,
    where: Callable[[ConsumedEvent], bool] = lambda event: True,
) -> list[ConsumedEvent]:
    """Poll until ``want`` events matching ``where`` arrived or ``timeout`` passed.

    Topics are shared by the tests of a session, so tests select their own events.
    """
    events: list[ConsumedEvent] = []
    deadline = time.monotonic() + timeout
    while len(events) < want and time.monotonic() < deadline:
        event = consumer.poll(0.5)
        if event is not None and where(event):
            events.append(event)
    return events


def of_episode(episode_id: str) -> Callable[[ConsumedEvent], bool]:
    return lambda event: event.record.get("episode_id") == episode_id
