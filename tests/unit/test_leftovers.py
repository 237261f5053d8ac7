"""What killed runs left under their prefixes: found by name, never the stack's own prefix, never
a prefix that a live group uses; removed whole, and a second removal of the same is no error."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import ConsumerGroupState, KafkaError, KafkaException

from infra import leftovers
from infra.leftovers import Leftover, find_leftovers, prefix_of, remove_leftover


def test_a_name_shows_the_prefix_it_was_made_under():
    assert prefix_of("bench-1a2b3c4d.ops.act") == "bench-1a2b3c4d"
    assert prefix_of("bench-1a2b3c4d-streams-episodes-changelog") == "bench-1a2b3c4d"
    assert prefix_of("bench-1a2b3c4d-streams") == "bench-1a2b3c4d"
    assert prefix_of("bench-1a2b3c4d-artifacts") == "bench-1a2b3c4d"
    assert prefix_of("webgym-browser") is None
    assert prefix_of("__consumer_offsets") is None


class Done:
    def __init__(self, value=None, error=None):
        self.value, self.error = value, error

    def result(self, timeout=None):
        if self.error is not None:
            raise KafkaException(KafkaError(self.error))
        return self.value


class FakeAdmin:
    def __init__(self, topics, groups, gone=()):
        self.topics = topics
        self.groups = groups  # id -> state
        self.gone = set(gone)
        self.deleted: list[str] = []

    def list_topics(self, timeout=None):
        return SimpleNamespace(topics={name: None for name in self.topics})

    def list_consumer_groups(self, request_timeout=None):
        listed = [SimpleNamespace(group_id=g, state=s) for g, s in self.groups.items()]
        return Done(SimpleNamespace(valid=listed))

    def _delete(self, names):
        self.deleted += names
        code = {True: KafkaError.UNKNOWN_TOPIC_OR_PART, False: None}
        return {name: Done(error=code[name in self.gone]) for name in names}

    def delete_topics(self, names, operation_timeout=None):
        return self._delete(names)

    def delete_consumer_groups(self, names, request_timeout=None):
        return self._delete(names)


class FakeMinio:
    def __init__(self, buckets):
        self.buckets = set(buckets)

    def list_buckets(self):
        return [SimpleNamespace(name=name) for name in sorted(self.buckets)]


def admin_with_two_runs_and_the_stack():
    return FakeAdmin(
        topics=[
            "webgym.ops.act", "bench-aa.ops.act", "bench-aa.episodes",
            "bench-aa-streams-episodes-changelog", "bench-bb.ops.act", "test-cc.ops.act",
            "bench.ops.act",
        ],
        groups={
            "bench-aa-streams": ConsumerGroupState.EMPTY,
            "bench-bb-streams": ConsumerGroupState.STABLE,
            "webgym-browser": ConsumerGroupState.STABLE,
        },
    )  # fmt: skip


def test_leftovers_are_found_by_prefix_and_a_live_group_marks_its_prefix_busy():
    admin = admin_with_two_runs_and_the_stack()
    found = find_leftovers(admin, FakeMinio({"bench-aa-artifacts", "webgym-policies"}),
                           "bench-", keep="webgym")  # fmt: skip
    assert found == [
        Leftover("bench-aa", topics=["bench-aa-streams-episodes-changelog", "bench-aa.episodes",
                                     "bench-aa.ops.act"],
                 groups=["bench-aa-streams"], buckets=["bench-aa-artifacts"]),
        Leftover("bench-bb", topics=["bench-bb.ops.act"], busy=["bench-bb-streams"]),
    ]  # fmt: skip
    # The stack's own prefix is never a leftover, whatever the match.
    assert [x.prefix for x in find_leftovers(admin, None, "bench", keep="bench")] == [
        "bench-aa", "bench-bb"
    ]  # fmt: skip
    with pytest.raises(ValueError, match="empty one would match all"):
        find_leftovers(admin, None, "", keep="webgym")


def test_a_leftover_is_removed_whole_and_what_is_already_gone_is_no_error(monkeypatch):
    removed = []
    monkeypatch.setattr(leftovers, "remove_bucket", lambda minio, bucket: removed.append(bucket))
    admin = FakeAdmin([], {}, gone={"bench-aa.ops.act"})
    remove_leftover(admin, object(), Leftover("bench-aa", topics=["bench-aa.ops.act"],
                                               groups=["bench-aa-streams"],
                                               buckets=["bench-aa-artifacts"]))  # fmt: skip
    assert admin.deleted == ["bench-aa.ops.act", "bench-aa-streams"]
    assert removed == ["bench-aa-artifacts"]
    with pytest.raises(ValueError, match="bench-bb is in use by bench-bb-streams"):
        remove_leftover(admin, None, Leftover("bench-bb", busy=["bench-bb-streams"]))


def test_a_deletion_that_fails_otherwise_is_raised():
    admin = FakeAdmin([], {})
    admin._delete = lambda names: {n: Done(error=KafkaError.NON_EMPTY_GROUP) for n in names}
    with pytest.raises(KafkaException):
        remove_leftover(admin, None, Leftover("bench-aa", groups=["bench-aa-streams"]))
