"""The workers' consumer groups on the real broker: the consumer group protocol (KIP-848) with the
server-side range assignor keeps co-partitioning and moves only what a joining member takes."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from confluent_kafka import Consumer, TopicPartition

from infra.consumer import build_consumer, co_partitioned_group

TOPICS = ("ops.navigate", "ops.act", "episodes")  # a browser worker's


class Member:
    """One group member, polled on its own thread, recording what its callbacks saw."""

    def __init__(self, consumer: Consumer, topics: list[str]):
        self.consumer = consumer
        self.held: set[tuple[str, int]] = set()
        self.revoked: list[set[tuple[str, int]]] = []
        self._stop = threading.Event()
        consumer.subscribe(topics, on_assign=self._assign, on_revoke=self._revoke)
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _assign(self, consumer, partitions: list[TopicPartition]) -> None:
        self.held |= {(tp.topic, tp.partition) for tp in partitions}

    def _revoke(self, consumer, partitions: list[TopicPartition]) -> None:
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self.revoked.append(gone)
        self.held -= gone

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(0.1)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.consumer.close()


@contextmanager
def member(settings, group: str, name: str) -> Iterator[Member]:
    consumer = build_consumer(settings, group, name, **co_partitioned_group(settings))
    joined = Member(consumer, [settings.topic(t) for t in TOPICS])
    try:
        yield joined
    finally:
        joined.close()


def _wait(condition, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the group did not settle"
        time.sleep(0.2)


def _numbers(held: set[tuple[str, int]], topic: str) -> set[int]:
    return {p for t, p in held if t == topic}


def test_a_joining_member_takes_only_its_share_and_partitions_stay_co_partitioned(settings):
    assert settings.group_protocol == "consumer"
    group = f"test-workers-{uuid.uuid4().hex[:8]}"
    everything = {
        (settings.topic(t), p) for t in TOPICS for p in range(settings.default_partitions)
    }
    with member(settings, group, "first") as first:
        _wait(lambda: first.held == everything)
        with member(settings, group, "second") as second:
            _wait(lambda: second.held and first.held | second.held == everything)
            assert not first.held & second.held
            # Only what the second member took was revoked from the first, once.
            assert first.revoked == [second.held]
            for held in (first.held, second.held):  # the same numbers of every topic
                numbers = [_numbers(held, settings.topic(t)) for t in TOPICS]
                assert numbers[0] and all(n == numbers[0] for n in numbers)
            kept = set(first.held)
        # The second member leaves: its partitions come back, nothing more is revoked.
        _wait(lambda: first.held == everything)
        assert first.revoked == [everything - kept]
