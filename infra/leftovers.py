"""What a run under a throwaway topic prefix leaves on the stack, and its removal: by the run
itself when it ends (:func:`remove_prefix`), or by `webgym topics prune` after one was killed.

A benchmark phase (and a test) runs under a prefix of its own, ``bench-1a2b3c4d``, and deletes
what it made when it ends: its topics (the table's and the Faust app's changelogs), and its
buckets. A run that is killed before that leaves them. They change no later run (every run has a
new prefix), but they hold disk, partitions and consumer groups until someone removes them.

A prefix's leftovers are found by name:

- topics ``<prefix>.<suffix>`` (the table) and ``<prefix>-streams...`` (the Faust app's);
- consumer groups ``<prefix>-...`` (the Faust app's group, ``<prefix>-streams``);
- buckets ``<prefix>-...`` (``<prefix>-artifacts``, ``<prefix>-policies``).

Guarantees: only prefixes that start with the caller's ``match`` are touched, never the
settings' own ``topic_prefix``; a prefix with a consumer group that has members (a run is using
it) is reported busy and left whole.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from confluent_kafka import ConsumerGroupState, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from minio import Minio

from infra.minio_store import remove_bucket
from infra.topic_admin import ADMIN_TIMEOUT_S

# What a Faust app's topics and groups (``<prefix>-streams...``) and a prefix's buckets
# (``<prefix>-artifacts``) carry after the prefix.
SUFFIX_MARKERS = ("-streams", "-artifacts", "-policies")

IDLE = (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD)
GONE = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.GROUP_ID_NOT_FOUND)


def prefix_of(name: str) -> str | None:
    """The prefix a topic, group or bucket name was made under, or None when it shows none."""
    if "." in name:
        return name.split(".", 1)[0]
    for marker in SUFFIX_MARKERS:
        at = name.find(marker)
        if at > 0:
            return name[:at]
    return None


@dataclass
class Leftover:
    """What one prefix left: its topics, idle groups and buckets; ``busy`` names its groups
    that have members."""

    prefix: str
    topics: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    buckets: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)


def find_leftovers(
    admin: AdminClient, minio: Minio | None, match: str, keep: str
) -> list[Leftover]:
    """Every prefix that starts with ``match`` (and is not ``keep``, the settings' own), with
    what it left, sorted by prefix. Raises ValueError for an empty ``match``."""
    if not match:
        raise ValueError("give a prefix to match, e.g. bench- (an empty one would match all)")
    found: dict[str, Leftover] = {}

    def of(name: str) -> Leftover | None:
        prefix = prefix_of(name)
        if prefix is None or not prefix.startswith(match) or prefix == keep:
            return None
        return found.setdefault(prefix, Leftover(prefix))

    for topic in admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics:
        if (leftover := of(topic)) is not None:
            leftover.topics.append(topic)
    listed = admin.list_consumer_groups(request_timeout=ADMIN_TIMEOUT_S).result()
    for group in listed.valid:
        if (leftover := of(group.group_id)) is not None:
            idle = group.state in IDLE
            (leftover.groups if idle else leftover.busy).append(group.group_id)
    for bucket in minio.list_buckets() if minio is not None else []:
        if (leftover := of(bucket.name)) is not None:
            leftover.buckets.append(bucket.name)
    for leftover in found.values():
        for names in (leftover.topics, leftover.groups, leftover.buckets, leftover.busy):
            names.sort()
    return [found[prefix] for prefix in sorted(found)]


def remove_prefix(admin: AdminClient, minio: Minio | None, prefix: str) -> Leftover:
    """Everything under ``prefix`` (a run's own, at its end): its topics, buckets and idle
    groups are deleted; a group that still has members is left, and named in the result's
    ``busy``."""
    found = [x for x in find_leftovers(admin, minio, prefix, keep="") if x.prefix == prefix]
    leftover = found[0] if found else Leftover(prefix)
    remove_leftover(admin, minio, dataclasses.replace(leftover, busy=[]))
    return leftover


def remove_leftover(admin: AdminClient, minio: Minio | None, leftover: Leftover) -> None:
    """Delete the leftover's topics, idle groups and buckets (after its topics, so that a group
    has no offsets left to hold). Raises ValueError for a busy one."""
    if leftover.busy:
        raise ValueError(f"{leftover.prefix} is in use by {', '.join(leftover.busy)}")
    if leftover.topics:
        _settle(admin.delete_topics(leftover.topics, operation_timeout=ADMIN_TIMEOUT_S))
    remove_groups(admin, leftover.groups)
    for bucket in leftover.buckets if minio is not None else []:
        remove_bucket(minio, bucket)


def remove_groups(admin: AdminClient, groups: list[str]) -> None:
    """Delete the consumer groups (and their committed offsets); one already gone is no error,
    one with members is (KafkaException)."""
    if groups:
        _settle(admin.delete_consumer_groups(groups, request_timeout=ADMIN_TIMEOUT_S))


def _settle(futures: dict) -> None:
    """Wait for each deletion; one already gone (another prune, the run's own cleanup) is done."""
    for future in futures.values():
        try:
            future.result(timeout=ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            if exc.args[0].code() not in GONE:
                raise
