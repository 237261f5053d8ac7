from __future__ import annotations

import time

from infra.consumer import ConsumedEvent, EventConsumer


def drain(consumer: EventConsumer, want: int, timeout: float = 30.0) -> list[ConsumedEvent]:
    """Poll until ``want`` events arrived or ``timeout`` passed; returns what arrived."""
    events: list[ConsumedEvent] = []
    deadline = time.monotonic() + timeout
    while len(events) < want and time.monotonic() < deadline:
        event = consumer.poll(0.5)
        if event is not None:
            events.append(event)
    return events
