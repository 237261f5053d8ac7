"""Corrupt bytes on a topic end in the dead-letter topic, and consumption goes on."""

from __future__ import annotations

import uuid

from infra.dead_letters import (
    HEADER_ERROR,
    HEADER_ERROR_CLASS,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_TOPIC,
)
from schemas.serde import MARKER
from tests.integration.helpers import drain, of_episode
from tests.samples import sample


def test_poison_records_go_to_the_dlq_with_their_coordinates(settings, producer, make_consumer):
    topic = settings.topic("observations")
    episode_id = f"ep-{uuid.uuid4().hex[:8]}"
    good = [{**sample("observation"), "episode_id": episode_id, "step": step} for step in (0, 1)]
    garbage = b"\x00\x01 definitely not avro"
    unknown_fingerprint = MARKER + bytes.fromhex("deadbeefdeadbeef") + b"\x02\x04"

    producer.produce(topic, episode_id, "observation", good[0])
    producer.produce_raw(topic, episode_id, garbage, None)
    producer.produce_raw(topic, episode_id, unknown_fingerprint, None)
    producer.produce(topic, episode_id, "observation", good[1])
    producer.flush()

    consumer = make_consumer(f"g-{uuid.uuid4().hex[:8]}", [topic])
    events = drain(consumer, 2, where=of_episode(episode_id))
    assert [e.record["step"] for e in events] == [0, 1]
    assert events[1].offset == events[0].offset + 3
    assert consumer.dead_lettered == 2
    consumer.commit()

    dlq = make_consumer(f"dlq-{uuid.uuid4().hex[:8]}", [settings.topic("dlq")])
    letters = drain(dlq, 2, where=lambda e: e.key == episode_id.encode())
    assert len(letters) == 2
    first, second = letters
    assert [letter.record["source_offset"] for letter in letters] == [
        events[0].offset + 1,
        events[0].offset + 2,
    ]
    assert first.record["original_value"] == garbage
    assert first.record["error_class"] == "CorruptEventError"
    assert second.record["original_value"] == unknown_fingerprint
    assert second.record["error_class"] == "UnknownSchemaError"
    assert "deadbeefdeadbeef" in second.record["error_message"]
    assert first.key == episode_id.encode()  # the original key, so DLQ order follows the source
    headers = dict(first.headers)
    assert headers[HEADER_TOPIC] == topic.encode()
    assert headers[HEADER_PARTITION] == str(events[0].partition).encode()
    assert headers[HEADER_OFFSET] == str(events[0].offset + 1).encode()
    assert headers[HEADER_ERROR_CLASS] == b"CorruptEventError"
    assert b"single-object" in headers[HEADER_ERROR]
