"""``webgym up|down|status|smoke``: the local stack (Kafka and MinIO) and its end-to-end check."""

from __future__ import annotations

import datetime
import time

import typer
from rich.table import Table

from commands.errors import console, user_errors
from infra import stack
from infra.settings import load_settings
from infra.topic_admin import BrokerUnreachable, create_topics, view_cluster


def _since(timestamp: float | None) -> str:
    if timestamp is None:
        return "-"
    started = datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")
    return f"{started} ({int(time.time() - timestamp)} s ago)"


@user_errors
def up(
    topics: bool = typer.Option(True, help="also create the topics of the table"),
    brokers: int | None = typer.Option(
        None,
        min=1,
        max=9,
        help="Kafka nodes to run: 3 makes a replicated KRaft cluster on loopback, node N on "
        "ports 10 * (N - 1) above node 1 (default: as many as run, else "
        "WEBGYM_LOCAL_KAFKA_BROKERS, 1)",
        show_default=False,
    ),
) -> None:
    """Start the local stack (Kafka KRaft node + MinIO on loopback) and wait until both answer.

    Safe to run again: what already runs is left alone (a cluster node that stopped is started
    again). The first run fetches Kafka with Maven and builds MinIO with Go into the cache dir (a
    few minutes); later runs take seconds. On a cluster of three, topics get 3 replicas and
    min.insync.replicas 2, so one node may be lost without losing an acknowledged write.
    """
    settings = load_settings()
    started = time.monotonic()
    with console.status("starting the local stack...") as spinner:
        timings = stack.up(
            settings,
            report=lambda line: (spinner.update(line), console.print(line)),
            brokers=brokers,
        )
        if topics:
            spinner.update("creating topics...")
            states = create_topics(settings)
    created = [s.name for s in states if s.outcome == "created"] if topics else []
    console.print(
        f"[green]stack up[/] in {time.monotonic() - started:.1f}s "
        f"(kafka {settings.bootstrap_servers}, minio {settings.minio_endpoint}); "
        f"logs in {settings.logs_dir}"
    )
    if created:
        console.print(f"created {len(created)} topics")
    nodes = stack.kafka_nodes(settings)
    if len(nodes) > 1:
        listed = ",".join(node.address for node in nodes)
        console.print(
            f"{len(nodes)} Kafka nodes: {listed}. Give clients all of them, so that they start "
            f"while a node is down: WEBGYM_BOOTSTRAP_SERVERS={listed}",
            highlight=False,
        )
    if timings.get("minio_build_s", 0) > 1 or timings.get("kafka_jars_s", 0) > 1:
        console.print(f"first-time set-up: {', '.join(f'{k} {v:.0f}' for k, v in timings.items())}")
    console.print("stop it with `webgym down`")


@user_errors
def down() -> None:
    """Stop the processes `webgym up` started (and only those). Data stays in the state dir."""
    settings = load_settings()
    stopped = stack.down(settings)
    console.print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")


@user_errors
def status() -> None:
    """What the local stack runs, where, and since when."""
    settings = load_settings()
    table = Table("service", "state", "address", "pid", "since", "detail")
    for row in stack.status(settings):
        colour = {"running": "green", "present": "green"}.get(row.state, "red")
        table.add_row(
            row.name,
            f"[{colour}]{row.state}[/]",
            row.address,
            str(row.pid or "-"),
            _since(row.since),
            row.detail,
        )
    console.print(table)
    try:
        cluster = view_cluster(settings)
    except BrokerUnreachable:
        console.print(f"[red]no Kafka broker answers at {settings.bootstrap_servers}[/]")
    else:
        nodes = ", ".join(f"{node} {address}" for node, address in cluster.brokers.items())
        colour = "red" if cluster.under_replicated or cluster.offline else "green"
        console.print(
            f"cluster {cluster.cluster_id}: {len(cluster.brokers)} broker(s) ({nodes}); "
            f"controller as the brokers report it: {cluster.controller}; "
            f"[{colour}]{len(cluster.under_replicated)} of {cluster.partitions} partitions "
            f"under-replicated, {len(cluster.offline)} offline[/]",
            highlight=False,
        )
        for name in cluster.under_replicated[:10]:
            console.print(f"  under-replicated: {name}", highlight=False)
    console.print(f"state dir {settings.state_dir}, cache dir {settings.cache_dir}")


@user_errors
def smoke() -> None:
    """Check the local stack end to end in seconds, without the loop.

    A Chromium screenshot of a local page, carried as an observation event through Kafka and a
    consumer group, and stored in MinIO; any mismatch fails with a non-zero exit.
    """
    from commands.smoke import run_smoke  # Playwright: only for the smoke test, not for up/down

    settings = load_settings()
    with console.status("starting the local stack...") as spinner:
        stack.up(settings, report=spinner.update)
        spinner.update("creating topics...")
        create_topics(settings)
        result = run_smoke(settings, progress=spinner.update)
    console.print(
        f"[green]ok[/] episode {result.episode_id}: screenshot {result.screenshot_bytes} bytes "
        f"of '{result.title}', Kafka round trip {result.kafka_round_trip_s * 1000:.0f} ms, "
        f"stored at {result.minio_object}"
    )
