"""`webgym topics prune` on the real broker and object store: what a killed run left under its
prefix (table topics, a Faust changelog, a consumer group with offsets, a bucket with objects)
goes; a prefix a live group uses stays whole until that group is gone; the stack's own prefix is
never touched; a second prune finds nothing more to do."""

from __future__ import annotations

import subprocess
import sys
import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic

from commands.children import settings_env
from infra.consumer import build_consumer
from infra.leftovers import Leftover, remove_prefix
from infra.minio_store import build_minio, put_bytes
from infra.settings import Settings
from infra.topic_admin import build_admin, create_topics, prefix_topics
from infra.topics import TOPICS

WEBGYM = [sys.executable, "-m", "commands.main"]


def prune(settings: Settings, match: str) -> str:
    done = subprocess.run(
        [*WEBGYM, "topics", "prune", "--match", match],
        env={**settings_env(settings), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def a_killed_run(stack: Settings, prefix: str) -> Settings:
    """Topics, a changelog, a group with a committed offset and a bucket, as a run leaves them."""
    run = stack.model_copy(update={"topic_prefix": prefix, "default_partitions": 1,
                                   "artifacts_bucket": f"{prefix}-artifacts"})  # fmt: skip
    create_topics(run)
    admin = build_admin(run)
    changelog = f"{prefix}-streams-episodes-changelog"
    admin.create_topics([NewTopic(changelog, 1, 1)])[changelog].result(timeout=30)
    minio = build_minio(run)
    minio.make_bucket(run.artifacts_bucket)
    put_bytes(minio, run.artifacts_bucket, "screens/a.jpg", b"jpeg", "image/jpeg")
    return run


def joined(settings: Settings, group: str, topic: str) -> Consumer:
    """A member of ``group`` that has its partitions (the group is live) and committed once."""
    consumer = build_consumer(settings, group, f"{group}-member")
    consumer.subscribe([topic])
    for _ in range(60):
        consumer.poll(0.5)
        if consumer.assignment():
            break
    assert consumer.assignment(), f"{group} got no partitions"
    consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    return consumer


def groups_of(admin) -> set[str]:
    return {group.group_id for group in admin.list_consumer_groups().result().valid}


def test_prune_removes_a_killed_runs_leftovers_and_leaves_a_live_one(stack_settings):
    match = f"prunetest-{uuid.uuid4().hex[:8]}-"
    dead = a_killed_run(stack_settings, f"{match}dead")
    live = a_killed_run(stack_settings, f"{match}live")
    joined(dead, f"{dead.topic_prefix}-streams", f"{dead.topic_prefix}.episodes").close()
    member = joined(live, f"{live.topic_prefix}-streams", f"{live.topic_prefix}.episodes")
    admin, minio = build_admin(stack_settings), build_minio(stack_settings)
    own_before = prefix_topics(stack_settings, admin)
    live_topics = prefix_topics(live, admin)
    assert len(live_topics) == len(TOPICS) + 1  # the table's and the changelog
    assert f"{dead.topic_prefix}-streams" in groups_of(admin)
    try:
        shown = prune(stack_settings, match)
        assert "removed" in shown and "in use" in shown
        assert prefix_topics(dead, admin) == []
        assert not minio.bucket_exists(dead.artifacts_bucket)
        assert f"{dead.topic_prefix}-streams" not in groups_of(admin)
        # The live run keeps everything: its topics, its group, its bucket.
        assert prefix_topics(live, admin) == live_topics
        assert f"{live.topic_prefix}-streams" in groups_of(admin)
        assert minio.bucket_exists(live.artifacts_bucket)
        assert prefix_topics(stack_settings, admin) == own_before
    finally:
        member.close()
    # The tenth prune behaves like the first: once the live run has gone, its leftovers go too,
    # and a prune after that finds nothing.
    shown = prune(stack_settings, match)
    assert "removed" in shown and "in use" not in shown
    assert prefix_topics(live, admin) == [] and not minio.bucket_exists(live.artifacts_bucket)
    assert f"{live.topic_prefix}-streams" not in groups_of(admin)
    assert "nothing left under prefixes starting with" in prune(stack_settings, match)
    assert prefix_topics(stack_settings, admin) == own_before


def test_a_run_that_ends_removes_everything_under_its_prefix(stack_settings):
    """What a benchmark phase and the e2e fixture call at their end: topics, the Faust group
    (idle after its workers stopped) and the prefix's buckets all go; none of another prefix."""
    match = f"prunetest-{uuid.uuid4().hex[:8]}-"
    ended, other = a_killed_run(stack_settings, f"{match}a"), a_killed_run(stack_settings, match)
    joined(ended, f"{ended.topic_prefix}-streams", f"{ended.topic_prefix}.episodes").close()
    admin, minio = build_admin(stack_settings), build_minio(stack_settings)
    others = prefix_topics(other, admin)
    removed = remove_prefix(admin, minio, ended.topic_prefix)
    assert removed.groups == [f"{ended.topic_prefix}-streams"] and not removed.busy
    assert prefix_topics(ended, admin) == [] and not minio.bucket_exists(ended.artifacts_bucket)
    assert f"{ended.topic_prefix}-streams" not in groups_of(admin)
    assert prefix_topics(other, admin) == others and minio.bucket_exists(other.artifacts_bucket)
    remove_prefix(admin, minio, other.topic_prefix)
    assert remove_prefix(admin, minio, ended.topic_prefix) == Leftover(ended.topic_prefix)
