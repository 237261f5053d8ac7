"""Watermarks asked again while a partition's leadership settles (a topic created a moment ago)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from infra.consumer import watermarks


class FlakyConsumer:
    """Answers ``errors`` in turn, then the watermarks."""

    def __init__(self, errors: list[int]) -> None:
        self.errors = list(errors)
        self.calls = 0

    def get_watermark_offsets(self, partition: TopicPartition, timeout: float) -> tuple[int, int]:
        self.calls += 1
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return (0, 7)


def test_not_leader_is_asked_again() -> None:
    consumer = FlakyConsumer([KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE])
    assert watermarks(consumer, TopicPartition("t", 0), 5) == (0, 7)
    assert consumer.calls == 3


def test_other_errors_are_raised_at_once() -> None:
    consumer = FlakyConsumer([KafkaError.TOPIC_AUTHORIZATION_FAILED])
    with pytest.raises(KafkaException):
        watermarks(consumer, TopicPartition("t", 0), 5)
    assert consumer.calls == 1


def test_settling_that_never_ends_is_raised_after_the_timeout() -> None:
    consumer = FlakyConsumer([KafkaError.NOT_LEADER_FOR_PARTITION] * 1000)
    with pytest.raises(KafkaException) as raised:
        watermarks(consumer, TopicPartition("t", 0), 0.5)
    assert raised.value.args[0].code() == KafkaError.NOT_LEADER_FOR_PARTITION
    assert 2 <= consumer.calls < 10
