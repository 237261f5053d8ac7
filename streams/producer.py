"""The stream processors' Kafka producer: idempotent, and a flush that waits for every record.

Faust commits a worker's input offsets only after ``producer.flush()`` (at least once). Faust's own
buffer of queued records (table changelogs and ``send_soon`` outputs) gives up a flush after
100 ms in which no record was handed to the client, and does not count the record being handed
over at that moment. Under load a hand-over waits for the partition's previous batch to be
delivered, so the flush returned with records still queued, the offsets were committed, and a
worker killed just then lost those records: a table row whose input was committed, for example.
:class:`DrainingBuffer` returns from a flush only when every record put before it is with the
client, whose own flush then waits for delivery.
"""

from __future__ import annotations

import asyncio
from typing import Any

from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.transport.producer import ProducerBuffer
from faust.types import FutureMessage

# How often a waiting flush looks again at a buffer that is stopping (whose sending task ends).
_RECHECK_S = 1.0


class HandOverFailed(RuntimeError):
    """A queued record was refused by the Kafka client: committing now could lose an input."""


class DrainingBuffer(ProducerBuffer):
    """Faust's buffer of queued records, whose ``flush`` returns only when every record put
    before it has been handed to the Kafka client (its ``publish_message`` returned or raised).

    It waits as long as that takes: a flush that returned early would let the caller commit
    offsets whose outputs are not yet written. Records put after the flush began do not hold it
    up, so a busy worker still commits. Once the buffer is stopping, the flush hands the
    remaining records over itself (Faust's sending task no longer does) and returns when none is
    left. A record the client refused (``publish_message`` raised) is lost, and Faust's sending
    task has crashed: every flush after it raises :class:`HandOverFailed`, so no commit follows.
    Not for Faust's threaded producer (``producer_threaded``), which queues elsewhere.
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        self.put_total = 0
        self.handed_total = 0  # in the order put: one task hands them over, first in first out
        self.failure: BaseException | None = None
        self._handed_over = asyncio.Event()

    @property
    def unsent(self) -> int:
        return self.put_total - self.handed_total

    def put(self, fut: FutureMessage) -> None:
        self.put_total += 1
        super().put(fut)

    async def _send_pending(self, fut: FutureMessage) -> None:
        try:
            await super()._send_pending(fut)
        except Exception as exc:
            self.failure = exc
            raise
        finally:
            self.handed_total += 1
            self._handed_over.set()

    async def flush(self) -> None:
        target = self.put_total
        while self.handed_total < target or (self.should_stop and self.unsent):
            self._raise_if_failed()
            if self.should_stop and not self.pending.empty():
                await self._send_pending(self.pending.get_nowait())
                continue
            self._handed_over.clear()
            try:
                await asyncio.wait_for(self._handed_over.wait(), timeout=_RECHECK_S)
            except TimeoutError:
                pass
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self.failure is not None:
            raise HandOverFailed(
                f"a queued record could not be handed to the Kafka client ({self.failure!r}); "
                "it is lost, so no input offset may be committed: restart this worker"
            ) from self.failure


class IdempotentProducer(faust_aiokafka.Producer):
    """Faust's producer with the project's rules: idempotent, acks from every in-sync replica,
    and a :class:`DrainingBuffer`."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if self.app.conf.producer_threaded:
            raise ValueError("the stream processors' producer is not threaded")
        self.buffer = DrainingBuffer(loop=self.loop, beacon=self.beacon)
        self.buffer.app = self.app

    def _settings_extra(self) -> dict[str, Any]:
        return {**super()._settings_extra(), "acks": "all", "enable_idempotence": True}
