"""Creates and inspects the topics of the table on a broker.

``create_topics`` is idempotent: a topic that exists is left alone, and one whose partition
count differs from the table is reported (Kafka cannot shrink partitions, and growing them
would move episodes between partitions, so we never change it silently).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from infra.kafka_config import client_config
from infra.settings import Settings, SettingsError
from infra.topics import TOPICS, TopicSpec

ADMIN_TIMEOUT_S = 30.0


class BrokerUnreachable(RuntimeError):
    """No broker answered; the message says where we looked and what to do."""


class TopicMissing(LookupError):
    """A named topic does not exist on the cluster."""


class PartitionMismatch(SettingsError):
    """A topic of the table exists with another partition count than this process would use."""


class ReplicationTooHigh(SettingsError):
    """The replication factor asked for needs more brokers than the cluster has."""


@dataclass(frozen=True)
class Replication:
    """How the topics of the table are replicated on one cluster."""

    factor: int
    min_insync: int
    brokers: int


def replication(settings: Settings, admin: AdminClient | None = None) -> Replication:
    """The replication of created topics on the cluster at ``settings.bootstrap_servers``:
    ``settings.replication_factor``, or by default 3 on three or more brokers (else one per
    broker); ``min.insync.replicas`` one less, at least 1 (3 and 2 on a three-node cluster, 1 and
    1 on one node). Raises :class:`ReplicationTooHigh` when the factor exceeds the brokers."""
    admin = admin or build_admin(settings)
    try:
        brokers = len(admin.list_topics(timeout=10).brokers)
    except KafkaException as exc:
        raise _unreachable(settings, exc) from exc
    factor = settings.replication_factor or min(3, brokers)
    if factor > brokers:
        raise ReplicationTooHigh(
            f"replication factor {factor} needs {factor} brokers; the cluster at "
            f"{settings.bootstrap_servers} has {brokers}. Lower WEBGYM_REPLICATION_FACTOR (unset: "
            f"{min(3, brokers)} here), or add brokers (locally: `webgym down`, then "
            f"`webgym up --brokers {factor}`)."
        )
    return Replication(factor, max(1, factor - 1), brokers)


def _unreachable(settings: Settings, exc: Exception) -> BrokerUnreachable:
    detail = str(exc) or "no answer in time"
    return BrokerUnreachable(
        f"no Kafka broker answered at {settings.bootstrap_servers} ({detail}). Start the local "
        "stack with `webgym up`, or set WEBGYM_BOOTSTRAP_SERVERS to your cluster."
    )


@dataclass(frozen=True)
class TopicState:
    spec: TopicSpec
    name: str
    outcome: Literal["created", "exists", "mismatch", "missing"]
    expected_partitions: int
    actual_partitions: int | None


def build_admin(settings: Settings) -> AdminClient:
    return AdminClient(client_config(settings.bootstrap_servers))


def existing_partitions(admin: AdminClient, settings: Settings) -> dict[str, int]:
    """Partition count of every topic on the cluster, by name."""
    try:
        metadata = admin.list_topics(timeout=10)
    except KafkaException as exc:
        raise _unreachable(settings, exc) from exc
    return {name: len(topic.partitions) for name, topic in metadata.topics.items()}


def topic_states(settings: Settings, admin: AdminClient | None = None) -> list[TopicState]:
    """Compare the table with the cluster without changing anything."""
    admin = admin or build_admin(settings)
    present = existing_partitions(admin, settings)
    states = []
    for spec in TOPICS:
        name = spec.name(settings)
        expected = spec.partition_count(settings)
        actual = present.get(name)
        if actual is None:
            outcome = "missing"
        elif actual == expected:
            outcome = "exists"
        else:
            outcome = "mismatch"
        states.append(TopicState(spec, name, outcome, expected, actual))
    return states


def require_partition_counts(
    settings: Settings, admin: AdminClient | None = None, states: list[TopicState] | None = None
) -> None:
    """Refuse to go on when any topic of the table exists with another partition count than the
    table gives it with these settings: a process that places or reads rows by partition would
    otherwise pair an episode's events on different partitions. Missing topics are not checked
    (``create_topics`` makes them with the table's count)."""
    states = states if states is not None else topic_states(settings, admin)
    mismatched = [s for s in states if s.outcome == "mismatch"]
    if not mismatched:
        return
    listed = ", ".join(
        f"{s.name} has {s.actual_partitions} (this process expects {s.expected_partitions})"
        for s in mismatched[:3]
    ) + (f" and {len(mismatched) - 3} more" if len(mismatched) > 3 else "")
    counts = sorted({s.actual_partitions for s in mismatched if s.spec.partitions is None})
    fix = (
        f"set WEBGYM_DEFAULT_PARTITIONS={counts[0]} (the topics' count) to use them as they are"
        if len(counts) == 1
        else "recreate the topics with one count"
    )
    raise PartitionMismatch(
        f"partition counts on {settings.bootstrap_servers} differ from the topic table: {listed}. "
        f"Every process must agree on them: {fix}, or use new topics with another "
        "WEBGYM_TOPIC_PREFIX."
    )


def create_topics(settings: Settings, admin: AdminClient | None = None) -> list[TopicState]:
    """Create every missing topic of the table; report the rest. Safe to run any number of times."""
    admin = admin or build_admin(settings)
    states = topic_states(settings, admin)
    missing = [state for state in states if state.outcome == "missing"]
    if not missing:
        return states
    replicas = replication(settings, admin)
    to_create = [_new_topic(s.spec, s.name, s.expected_partitions, replicas) for s in missing]
    created = _create(admin, to_create)
    return [
        TopicState(s.spec, s.name, "created", s.expected_partitions, s.expected_partitions)
        if s.name in created
        else s
        for s in states
    ]


def _create(admin: AdminClient, topics: list[NewTopic]) -> set[str]:
    """Create ``topics``; returns the names created (one that already exists is not an error)."""
    futures = admin.create_topics(topics, operation_timeout=ADMIN_TIMEOUT_S)
    created = set()
    for name, future in futures.items():
        try:
            future.result(timeout=ADMIN_TIMEOUT_S)
            created.add(name)
        except KafkaException as exc:
            # Another process created it between our look and our create: that is success.
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    return created


def ensure_topic(settings: Settings, spec: TopicSpec, admin: AdminClient | None = None) -> bool:
    """Create one topic outside the table (e.g. a re-scored stream) if missing; True if created."""
    admin = admin or build_admin(settings)
    replicas = replication(settings, admin)
    topic = _new_topic(spec, spec.name(settings), spec.partition_count(settings), replicas)
    return bool(_create(admin, [topic]))


def _new_topic(spec: TopicSpec, name: str, partitions: int, replicas: Replication) -> NewTopic:
    return NewTopic(
        name,
        num_partitions=partitions,
        replication_factor=replicas.factor,
        config={**spec.config(), "min.insync.replicas": str(replicas.min_insync)},
    )


def describe_topics(
    settings: Settings, names: list[str], admin: AdminClient | None = None
) -> dict[str, dict[str, str]]:
    """The broker's effective configuration of each named topic."""
    admin = admin or build_admin(settings)
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in names]
    described = {}
    for resource, future in admin.describe_configs(resources).items():
        try:
            entries = future.result(timeout=ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise TopicMissing(
                    f"topic {resource.name} does not exist on {settings.bootstrap_servers}; "
                    "`webgym topics list` shows the table's topics and which exist, "
                    "`webgym topics create` creates the missing ones"
                ) from exc
            raise
        described[resource.name] = {key: entry.value for key, entry in entries.items()}
    return described


def prefix_topics(settings: Settings, admin: AdminClient | None = None) -> list[str]:
    """Every topic under ``settings.topic_prefix``: the topic table's and the Faust app's own
    (changelogs, repartitions, named ``<prefix>-...``)."""
    admin = admin or build_admin(settings)
    prefix = settings.topic_prefix
    listed = admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
    return sorted(t for t in listed if t.startswith((f"{prefix}.", f"{prefix}-")))


def delete_topics(
    settings: Settings, admin: AdminClient | None = None, *, internal: bool = False
) -> list[str]:
    """Delete the table's topics under ``settings.topic_prefix`` (tests, benchmarks); with
    ``internal``, every topic under the prefix, the Faust app's own too (:func:`prefix_topics`),
    so that a prefix used once leaves nothing behind."""
    admin = admin or build_admin(settings)
    if internal:
        names = prefix_topics(settings, admin)
    else:
        present = existing_partitions(admin, settings)
        names = [spec.name(settings) for spec in TOPICS if spec.name(settings) in present]
    if names:
        for future in admin.delete_topics(names, operation_timeout=ADMIN_TIMEOUT_S).values():
            future.result(timeout=ADMIN_TIMEOUT_S)
    return names


@dataclass(frozen=True)
class ClusterView:
    """The cluster as its brokers describe it: nodes, the controller they report, and the
    partitions whose in-sync replicas are fewer than their replicas (or that have no leader)."""

    cluster_id: str
    brokers: dict[int, str]  # node id -> host:port
    controller: int | None
    partitions: int
    under_replicated: list[str]  # topic[partition]
    offline: list[str]  # topic[partition] with no leader


def view_cluster(settings: Settings, admin: AdminClient | None = None) -> ClusterView:
    admin = admin or build_admin(settings)
    try:
        described = admin.describe_cluster().result(timeout=10)
        metadata = admin.list_topics(timeout=10)
    except (KafkaException, TimeoutError) as exc:  # no broker: the future never completes
        raise _unreachable(settings, exc) from exc
    partitions = [
        (f"{name}[{pid}]", part)
        for name, topic in sorted(metadata.topics.items())
        for pid, part in sorted(topic.partitions.items())
    ]
    return ClusterView(
        cluster_id=described.cluster_id or "",
        brokers={b.id: f"{b.host}:{b.port}" for b in sorted(metadata.brokers.values(), key=str)},
        controller=described.controller.id if described.controller else None,
        partitions=len(partitions),
        under_replicated=[n for n, p in partitions if len(p.isrs) < len(p.replicas)],
        offline=[n for n, p in partitions if p.leader < 0],
    )
