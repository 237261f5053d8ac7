"""The end-to-end tier: the whole loop as child processes, on the real stack.

Each test gets a topic prefix of its own, so its Faust app (named after the prefix), its
consumer groups and its topics start empty, and are deleted afterwards; likewise its own bucket
of policy versions.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from infra.objects import build_minio, ensure_buckets
from infra.settings import Settings
from infra.topic_admin import build_admin, create_topics, delete_topics


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/e2e" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def run_settings(stack_settings: Settings) -> Iterator[Settings]:
    prefix = f"e2e-{uuid.uuid4().hex[:10]}"
    isolated = stack_settings.model_copy(
        update={
            "topic_prefix": prefix,
            "default_partitions": 4,
            "practice_web_address": "127.0.0.1:0",  # any free port
            "policies_bucket": f"{prefix}-policies",
        }
    )
    create_topics(isolated)
    minio = build_minio(isolated)
    ensure_buckets(minio, isolated)
    yield isolated
    for item in minio.list_objects(isolated.policies_bucket, recursive=True):
        minio.remove_object(isolated.policies_bucket, item.object_name)
    minio.remove_bucket(isolated.policies_bucket)
    delete_topics(isolated)
    admin = build_admin(isolated)
    internal = [t for t in admin.list_topics(timeout=10).topics if t.startswith(f"{prefix}-")]
    if internal:  # the Faust app's changelog topics
        for future in admin.delete_topics(internal).values():
            future.result()
