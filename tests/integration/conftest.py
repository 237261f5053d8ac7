"""One session-scoped stack for every integration test.

By default the fixture (``stack_settings``, in ``tests/conftest.py``) brings up the project's
local stack (`webgym up`, idempotent). To run the
tests against an existing cluster instead, set WEBGYM_TEST_EXISTING_STACK=1 together with the
usual WEBGYM_BOOTSTRAP_SERVERS / WEBGYM_MINIO_* settings. Each session writes to topics under a
fresh prefix, so runs never see each other's records.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from infra.consumer import EventConsumer, build_consumer
from infra.dead_letters import DeadLetterRouter
from infra.producer import EventProducer
from infra.settings import Settings
from infra.topic_admin import create_topics, delete_topics


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def settings(stack_settings: Settings) -> Iterator[Settings]:
    """The stack's settings with a topic prefix of this test session's own, topics created."""
    isolated = stack_settings.model_copy(
        update={"topic_prefix": f"test-{uuid.uuid4().hex[:10]}", "default_partitions": 3}
    )
    create_topics(isolated)
    yield isolated
    delete_topics(isolated)


@pytest.fixture
def producer(settings: Settings) -> EventProducer:
    producer = EventProducer.connect(settings, client_id="webgym-tests")
    yield producer
    producer.flush()


@pytest.fixture
def make_consumer(settings: Settings, producer: EventProducer):
    """Factory of EventConsumers; each is closed at the end of the test."""
    made: list[EventConsumer] = []

    def make(group_id: str, topics: list[str]) -> EventConsumer:
        consumer = EventConsumer(
            build_consumer(settings, group_id=group_id, client_id=f"test-{group_id}"),
            DeadLetterRouter(settings, producer),
        )
        consumer.subscribe(topics)
        made.append(consumer)
        return consumer

    yield make
    for consumer in made:
        try:
            consumer.close()
        except RuntimeError:
            pass  # closed by the test itself
