"""Every client puts an episode's events in the same partition number, on every topic.

The browser and policy workers write with confluent-kafka, the Faust app with aiokafka, and the
orchestrator's table places rows itself; co-partitioning holds only if all three agree.
"""

from __future__ import annotations

import uuid

from aiokafka.partitioner import DefaultPartitioner

from streams.app import KeyPartitionedTable


def test_confluent_aiokafka_and_the_episode_table_agree_on_partitions(settings, producer):
    keys = [f"ep-{uuid.uuid4().hex[:12]}" for _ in range(60)]
    landed: dict[str, int] = {}

    def delivered(error, message):
        assert error is None
        landed[message.key().decode()] = message.partition()

    for key in keys:
        producer.produce_raw(
            settings.topic("trajectories.scored"), key, b"x", None, on_delivery=delivered
        )
    producer.flush()

    count = settings.default_partitions
    partitions = list(range(count))
    aiokafka = {key: DefaultPartitioner()(key.encode(), partitions, partitions) for key in keys}
    table = KeyPartitionedTable.__new__(KeyPartitionedTable)
    table.partitions = count
    rows = {key: table.partition_for_key(key.encode()) for key in keys}
    assert landed == aiokafka == rows
    assert len(set(landed.values())) == count  # the keys spread over every partition
