from __future__ import annotations

import time
import uuid

from confluent_kafka.admin import NewTopic

from infra.topic_admin import (
    build_admin,
    create_topics,
    delete_topics,
    describe_topics,
    topic_states,
)
from infra.topics import TOPICS


def test_create_is_idempotent(settings):
    again = create_topics(settings)
    assert {s.outcome for s in again} == {"exists"}
    assert len(again) == len(TOPICS)


def test_created_topics_carry_the_table_settings(settings):
    described = describe_topics(settings, [settings.topic("observations"), settings.topic("tasks")])
    observations = described[settings.topic("observations")]
    assert observations["max.message.bytes"] == str(16 * 1024 * 1024)
    assert observations["cleanup.policy"] == "delete"
    assert described[settings.topic("tasks")]["cleanup.policy"] == "compact"


def test_a_partition_mismatch_is_reported_not_changed(stack_settings):
    settings = stack_settings.model_copy(update={"topic_prefix": f"mm-{uuid.uuid4().hex[:8]}"})
    admin = build_admin(settings)
    wrong = settings.topic("ops.act")
    admin.create_topics([NewTopic(wrong, num_partitions=2, replication_factor=1)])[wrong].result(30)
    states = {s.name: s for s in create_topics(settings)}
    assert states[wrong].outcome == "mismatch"
    assert (states[wrong].actual_partitions, states[wrong].expected_partitions) == (2, 8)
    assert states[settings.topic("ops.navigate")].outcome == "created"
    assert {s.outcome for s in create_topics(settings)} == {"exists", "mismatch"}
    assert wrong in delete_topics(settings)
    deadline = time.monotonic() + 30  # brokers learn of deletions from the controller, soon
    while {s.outcome for s in topic_states(settings)} != {"missing"}:
        assert time.monotonic() < deadline, "deleted topics are still listed"
        time.sleep(0.2)
