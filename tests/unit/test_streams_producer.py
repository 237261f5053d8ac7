"""The stream processors' producer: a flush waits until every queued record is with the client."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from faust.transport.producer import ProducerBuffer

from infra.settings import Settings
from streams.app import AGENT_SETS, build_app
from streams.producer import DrainingBuffer, HandOverFailed, IdempotentProducer

HAND_OVER_S = 0.3  # longer than Faust's 100 ms: the client waits for a partition's last batch


class SlowChannel:
    """A topic whose client takes ``HAND_OVER_S`` to accept each record, as when the
    partition's previous batch is still on its way to the broker."""

    def __init__(self) -> None:
        self.published: list[int] = []

    async def publish_message(self, fut, wait: bool = False) -> None:
        await asyncio.sleep(HAND_OVER_S)
        self.published.append(fut.number)


def _queued(buffer_type: type[ProducerBuffer], records: int) -> tuple[list[int], list[int]]:
    """Put ``records`` records, flush once; what was published by the time the flush returned,
    and in the end."""

    async def scenario() -> tuple[list[int], list[int]]:
        buffer = buffer_type()
        buffer.app = SimpleNamespace(conf=SimpleNamespace(producer_threaded=False))
        channel = SlowChannel()
        await buffer.start()
        try:
            for number in range(records):
                buffer.put(SimpleNamespace(number=number, message=SimpleNamespace(channel=channel)))
            await buffer.flush()
            at_flush = list(channel.published)
            await asyncio.sleep(HAND_OVER_S * (records + 1))
            return at_flush, channel.published
        finally:
            await buffer.stop()

    return asyncio.run(scenario())


def test_a_flush_returns_only_when_every_queued_record_is_with_the_client():
    at_flush, published = _queued(DrainingBuffer, 4)
    assert at_flush == [0, 1, 2, 3]
    assert published == [0, 1, 2, 3]


def test_fausts_own_buffer_returns_from_a_flush_with_records_still_queued():
    """Why DrainingBuffer exists: if this fails, Faust's flush waits now, and ours can go."""
    at_flush, published = _queued(ProducerBuffer, 4)
    assert len(at_flush) < 4
    assert published == [0, 1, 2, 3]


def test_a_stopping_buffer_hands_over_what_is_left_itself():
    async def scenario() -> list[int]:
        buffer = DrainingBuffer()
        buffer.app = SimpleNamespace(conf=SimpleNamespace(producer_threaded=False))
        channel = SlowChannel()
        await buffer.start()
        for number in range(3):
            buffer.put(SimpleNamespace(number=number, message=SimpleNamespace(channel=channel)))
        await buffer.stop()  # stops the sending task; its on_stop flushes
        return channel.published

    assert sorted(asyncio.run(scenario())) == [0, 1, 2]


def test_the_apps_producer_queues_in_a_draining_buffer():
    async def built() -> object:
        app = build_app(Settings(), AGENT_SETS)
        producer = app.producer
        assert isinstance(producer, IdempotentProducer)
        return producer.buffer

    buffer = asyncio.run(built())
    assert isinstance(buffer, DrainingBuffer)
    assert buffer.app is not None


def test_records_put_during_a_flush_do_not_hold_it_up():
    """A busy worker queues records all the time: its flush (so its commit) still returns."""

    async def scenario() -> tuple[list[int], int]:
        buffer = DrainingBuffer()
        buffer.app = SimpleNamespace(conf=SimpleNamespace(producer_threaded=False))
        channel = SlowChannel()
        await buffer.start()
        numbers = iter(range(1000))

        def put_one() -> None:
            number = next(numbers)
            buffer.put(SimpleNamespace(number=number, message=SimpleNamespace(channel=channel)))

        async def keep_putting() -> None:
            while True:
                put_one()
                await asyncio.sleep(HAND_OVER_S / 3)  # faster than they are handed over

        put_one()
        put_one()
        putting = asyncio.create_task(keep_putting())
        try:
            await asyncio.wait_for(buffer.flush(), timeout=HAND_OVER_S * 10)
            return list(channel.published), buffer.unsent
        finally:
            putting.cancel()
            await buffer.stop()

    at_flush, still_unsent = asyncio.run(scenario())
    assert at_flush[:2] == [0, 1]
    assert still_unsent > 0  # the flush returned while later records were still queued


class RefusingChannel:
    async def publish_message(self, fut, wait: bool = False) -> None:
        raise ValueError("record too large")


def test_a_record_the_client_refused_fails_every_later_flush():
    """The record is lost and Faust's sending task has crashed: no commit may follow."""

    async def scenario() -> list[str]:
        buffer = DrainingBuffer()
        buffer.app = SimpleNamespace(conf=SimpleNamespace(producer_threaded=False))
        await buffer.start()
        buffer.put(SimpleNamespace(number=0, message=SimpleNamespace(channel=RefusingChannel())))
        failures = []
        for flushing in (buffer.flush, buffer.flush, buffer.stop):  # stopping flushes too
            try:
                await asyncio.wait_for(flushing(), timeout=5)
            except HandOverFailed as exc:
                failures.append(str(exc))
        return failures

    failures = asyncio.run(scenario())
    assert len(failures) == 3
    assert "record too large" in failures[0] and "restart this worker" in failures[0]
