"""The local stack behind ``webgym up | down | status``: Kafka (KRaft) and MinIO on loopback.

``up`` is idempotent: a service it already started and that answers is left alone; it returns
only when both services answer their health check. ``down`` signals only the processes whose
pid files ``up`` wrote (and checks the pid was not reused). Nothing here touches processes or
ports it did not create.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from infra.chromium import ChromiumMissing, chromium_version
from infra.minio_store import build_minio, ensure_buckets
from infra.settings import Settings
from infra.stack.kafka import LocalKafka, fetch_jars, kafka_version
from infra.stack.minio import MINIO_VERSION, LocalMinio, build_binary
from infra.stack.process import StackError, port_is_free

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


def _services(settings: Settings) -> tuple[LocalKafka, LocalMinio]:
    return LocalKafka(settings), LocalMinio(settings)


def _check_ports(service: LocalKafka | LocalMinio, env_hint: str) -> None:
    for port in service.ports:
        if not port_is_free(service.host, port):
            raise StackError(
                f"port {port} on {service.host} is already taken by a process that `webgym up` "
                f"did not start, so {service.process.name} cannot listen there. Stop that process "
                f"(`ss -ltnp 'sport = :{port}'` shows it), or move ours with {env_hint}."
            )


def up(settings: Settings, report: Report = print) -> dict[str, float]:
    """Start what is not running, wait until both services answer. Returns seconds per phase."""
    kafka, minio = _services(settings)
    timings: dict[str, float] = {}
    to_start = []
    for service, hint in (
        (kafka, "WEBGYM_BOOTSTRAP_SERVERS and WEBGYM_LOCAL_KAFKA_CONTROLLER_PORT"),
        (minio, "WEBGYM_MINIO_ENDPOINT"),
    ):
        running = service.process.running()
        if running is not None:
            report(
                f"{service.process.name} already running (pid {running.pid}) on {running.address}"
            )
            continue
        service.preflight()
        _check_ports(service, hint)
        to_start.append(service)

    if kafka in to_start:
        clock = time.monotonic()
        libs = fetch_jars(settings, report)
        timings["kafka_jars_s"] = time.monotonic() - clock
    if minio in to_start:
        clock = time.monotonic()
        binary = build_binary(settings, report)
        timings["minio_build_s"] = time.monotonic() - clock

    clock = time.monotonic()
    started = []
    try:
        if kafka in to_start:
            kafka.start(libs)
            started.append(kafka)
        if minio in to_start:
            minio.start(binary)
            started.append(minio)
        for service in (kafka, minio):
            service.wait_healthy()
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
    """Stop the services ``up`` started (MinIO first, then Kafka). Returns their names."""
    kafka, minio = _services(settings)
    return [s.process.name for s in (minio, kafka) if s.process.stop()]


def status(settings: Settings) -> list[ServiceStatus]:
    rows = []
    kafka, minio = _services(settings)
    versions = {
        "kafka": f"Apache Kafka {kafka_version()} (KRaft)",
        "minio": f"MinIO {MINIO_VERSION}",
    }
    for service in (kafka, minio):
        name = service.process.name
        running = service.process.running()
        if running is None:
            rows.append(ServiceStatus(name, "stopped", service.address, None, None, versions[name]))
            continue
        answering = service.healthy()
        rows.append(
            ServiceStatus(
                name,
                "running" if answering else "not answering",
                running.address,
                running.pid,
                running.started_at,
                f"{versions[name]}; log {running.log}",
            )
        )
    try:
        version = chromium_version(settings)
        rows.append(
            ServiceStatus("chromium", "present", str(settings.chromium_path), None, None, version)
        )
    except ChromiumMissing as exc:
        rows.append(
            ServiceStatus("chromium", "missing", str(settings.chromium_path), None, None, str(exc))
        )
    return rows
