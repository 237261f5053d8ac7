"""The local stack behind ``webgym up | down | status``: Kafka (KRaft: one node, or a cluster of
N with ``--brokers N``) and MinIO on loopback.

``up`` is idempotent: a service it already started and that answers is left alone (a cluster
node that died is started again); it returns only when every service answers its health check
and every node of a cluster is registered. ``down`` signals only the processes whose
pid files ``up`` wrote (and checks the pid was not reused). Nothing here touches processes or
ports it did not create.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from infra.chromium import ChromiumMissing, browsers_weighed, chromium_version
from infra.kafka_config import client_config
from infra.minio_store import build_minio, ensure_buckets
from infra.settings import Settings
from infra.stack.kafka import CLUSTER_DIR, LocalKafka, cluster_size, fetch_jars, kafka_version
from infra.stack.minio import MINIO_VERSION, LocalMinio, build_binary
from infra.stack.process import LocalService, StackError, port_is_free

__all__ = ["StackError", "ServiceStatus", "up", "down", "status"]

Report = Callable[[str], None]


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    state: str  # running / stopped / missing / present
    address: str
    pid: int | None
    since: float | None
    detail: str


def running_brokers(settings: Settings) -> int | None:
    """How many nodes the local Kafka that runs has (None: none of its nodes runs)."""
    if LocalKafka(settings).process.running() is not None:
        return 1
    size = cluster_size(settings)
    if size and any(node.process.running() for node in kafka_nodes(settings, size)):
        return size
    return None


def kafka_nodes(settings: Settings, brokers: int | None = None) -> list[LocalKafka]:
    """The nodes of the local Kafka: ``brokers`` of them, else as many as the one running has,
    else ``settings.local_kafka_brokers``."""
    brokers = brokers or running_brokers(settings) or settings.local_kafka_brokers
    return [LocalKafka(settings, node, brokers) for node in range(1, brokers + 1)]


def _check_shape(settings: Settings, brokers: int) -> None:
    running = running_brokers(settings)
    if running is not None and running != brokers:
        raise StackError(
            f"the local Kafka runs {running} node(s), not {brokers}: stop it with `webgym down`, "
            f"then `webgym up --brokers {brokers}`. Each keeps its own data (the one-node stack "
            f"in {settings.state_dir / 'kafka'}, a cluster in {settings.state_dir / CLUSTER_DIR})."
        )
    formatted = cluster_size(settings)
    if brokers > 1 and formatted not in (None, brokers):
        raise StackError(
            f"the cluster in {settings.state_dir / CLUSTER_DIR} has {formatted} nodes, not "
            f"{brokers}: use `webgym up --brokers {formatted}`, or remove that directory (its "
            "data is lost) to make a new one."
        )


def _wait_registered(settings: Settings, nodes: list[LocalKafka], timeout_s: float = 90) -> None:
    """Every node of a cluster registered with its controllers (so topics get all replicas)."""
    if len(nodes) == 1:
        return
    admin = AdminClient(client_config(",".join(node.address for node in nodes)))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if len(admin.list_topics(timeout=5).brokers) == len(nodes):
                return
        except KafkaException:
            pass
        time.sleep(0.5)
    raise StackError(
        f"not every Kafka node registered within {timeout_s:.0f} s; see the logs in "
        f"{settings.logs_dir}"
    )


def _check_ports(service: LocalService, env_hint: str) -> None:
    for port in service.ports:
        if not port_is_free(service.host, port):
            raise StackError(
                f"port {port} on {service.host} is already taken by a process that `webgym up` "
                f"did not start, so {service.process.name} cannot listen there. Stop that process "
                f"(`ss -ltnp 'sport = :{port}'` shows it), or move ours with {env_hint}."
            )


def up(settings: Settings, report: Report = print, brokers: int | None = None) -> dict[str, float]:
    """Start what is not running, wait until every service answers. Returns seconds per phase.
    ``brokers``: the Kafka nodes (default: as many as run, else ``local_kafka_brokers``)."""
    if brokers is not None:
        _check_shape(settings, brokers)
    nodes = kafka_nodes(settings, brokers)
    minio = LocalMinio(settings)
    kafka_hint = "WEBGYM_BOOTSTRAP_SERVERS and WEBGYM_LOCAL_KAFKA_CONTROLLER_PORT"
    timings: dict[str, float] = {}
    to_start: list[LocalService] = []
    for service, hint in [
        *((node, kafka_hint) for node in nodes),
        (minio, "WEBGYM_MINIO_ENDPOINT"),
    ]:
        running = service.process.running()
        if running is not None:
            report(
                f"{service.process.name} already running (pid {running.pid}) on {running.address}"
            )
            continue
        service.preflight()
        _check_ports(service, hint)
        to_start.append(service)

    if any(node in to_start for node in nodes):
        clock = time.monotonic()
        libs = fetch_jars(settings, report)
        timings["kafka_jars_s"] = time.monotonic() - clock
    if minio in to_start:
        clock = time.monotonic()
        binary = build_binary(settings, report)
        timings["minio_build_s"] = time.monotonic() - clock

    clock = time.monotonic()
    started: list[LocalService] = []
    try:
        for service in to_start:
            service.start(binary if service is minio else libs)
            started.append(service)
        for service in [*nodes, minio]:
            service.wait_healthy()
        _wait_registered(settings, nodes)
    except BaseException:
        for service in started:
            service.process.stop(timeout=10)
        raise
    timings["start_s"] = time.monotonic() - clock
    ensure_buckets(build_minio(settings), settings)
    for service in started:
        report(f"{service.process.name} started on {service.address}, log: {service.process.log}")
    return timings


def down(settings: Settings) -> list[str]:
    """Stop the services ``up`` started (MinIO first, then every Kafka node). Returns their
    names."""
    services: list[LocalService] = [LocalMinio(settings), LocalKafka(settings)]
    size = cluster_size(settings)
    if size:
        services += kafka_nodes(settings, size)
    return [s.process.name for s in services if s.process.stop()]


def active_controller(nodes: list[LocalKafka]) -> int | None:
    """The node id leading the metadata quorum (the active controller), as the running nodes
    last wrote it (the latest epoch wins); None when none runs."""
    states = [
        state
        for node in nodes
        if node.process.running() is not None and (state := node.quorum_state()) is not None
    ]
    return max(states)[1] if states else None


def status(settings: Settings) -> list[ServiceStatus]:
    rows = []
    nodes = kafka_nodes(settings)
    leader = active_controller(nodes)
    kafka = f"Apache Kafka {kafka_version()} (KRaft)"
    for service in [*nodes, LocalMinio(settings)]:
        name = service.process.name
        version = f"MinIO {MINIO_VERSION}" if isinstance(service, LocalMinio) else kafka
        if len(nodes) > 1 and service in nodes:
            role = "active controller" if service.node == leader else "voter"
            version = f"{version}, node {service.node}, {role}"
        running = service.process.running()
        if running is None:
            rows.append(ServiceStatus(name, "stopped", service.address, None, None, version))
            continue
        answering = service.healthy()
        rows.append(
            ServiceStatus(
                name,
                "running" if answering else "not answering",
                running.address,
                running.pid,
                running.started_at,
                f"{version}; log {running.log}",
            )
        )
    try:
        detail = f"{chromium_version(settings)}; browsers: {browsers_weighed(settings)}"
        rows.append(
            ServiceStatus("chromium", "present", str(settings.chromium_path), None, None, detail)
        )
    except ChromiumMissing as exc:
        rows.append(
            ServiceStatus("chromium", "missing", str(settings.chromium_path), None, None, str(exc))
        )
    return rows
