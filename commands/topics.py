"""``webgym topics``: the Kafka topics of the topic table."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Column, Table

from commands.errors import console, errors, user_errors
from infra.leftovers import find_leftovers, remove_leftover
from infra.minio_store import build_minio
from infra.settings import load_settings
from infra.topic_admin import (
    build_admin,
    create_topics,
    describe_topics,
    topic_states,
)
from infra.topics import MIB, TOPICS

topics_app = typer.Typer(help="The Kafka topics of the topic table.", no_args_is_help=True)


@topics_app.command("create")
@user_errors
def topics_create() -> None:
    """Create every topic of the table that is missing. Idempotent; reports partition mismatches."""
    settings = load_settings()
    states = create_topics(settings)
    mismatched = [s for s in states if s.outcome == "mismatch"]
    for state in states:
        console.print(f"{state.outcome:>8}  {state.name}")
    if mismatched:
        for state in mismatched:
            errors.print(
                f"[yellow]warning:[/] {state.name} has {state.actual_partitions} partitions, the "
                f"table says {state.expected_partitions}. Episode-keyed topics must share one "
                "count; recreate the topic or set WEBGYM_DEFAULT_PARTITIONS to match."
            )
        raise typer.Exit(2)


@topics_app.command("list")
@user_errors
def topics_list() -> None:
    """The topic table, and whether each topic exists on the cluster."""
    settings = load_settings()
    table = Table("key", "parts", "retention", "cleanup", "max msg", "cluster")
    table.columns.insert(0, Column("topic", no_wrap=True))
    for state in topic_states(settings):
        spec = state.spec
        retention = "forever" if spec.retention_ms < 0 else f"{spec.retention_ms // 86_400_000} d"
        on_cluster = {
            "exists": "[green]yes[/]",
            "missing": "[red]missing[/]",
            "mismatch": f"[yellow]{state.actual_partitions} partitions[/]",
        }[state.outcome]
        table.add_row(
            state.name,
            spec.key,
            str(state.expected_partitions),
            retention,
            spec.cleanup_policy,
            f"{spec.max_message_bytes / MIB:g} MiB",
            on_cluster,
        )
    console.print(table)


@topics_app.command("describe")
@user_errors
def topics_describe(
    names: Annotated[
        list[str] | None,
        typer.Argument(help="topic names (default: every topic of the table)"),
    ] = None,
) -> None:
    """The broker's effective settings of the topics (partitions, retention, cleanup, size)."""
    settings = load_settings()
    names = names or [spec.name(settings) for spec in TOPICS]
    shown = ("cleanup.policy", "retention.ms", "max.message.bytes", "min.insync.replicas")
    partitions = {s.name: s.actual_partitions for s in topic_states(settings)}
    table = Table("topic", "partitions", *shown)
    for name, config in describe_topics(settings, names).items():
        table.add_row(
            name, str(partitions.get(name, "?")), *(config.get(key, "-") for key in shown)
        )
    console.print(table)


@topics_app.command("prune")
@user_errors
def topics_prune(
    match: Annotated[
        str,
        typer.Option(
            help="remove what prefixes starting with this left (never WEBGYM_TOPIC_PREFIX)"
        ),
    ] = "bench-",
    dry_run: Annotated[bool, typer.Option(help="only show what would be removed")] = False,
) -> None:
    """Remove what killed benchmark runs left: the topics, idle consumer groups and buckets of
    every prefix that starts with --match (benchmarks run under ``bench-<hex>`` and remove their
    own when they end). A prefix whose group has members is in use and left whole."""
    if not match.strip():
        raise typer.BadParameter(
            "an empty prefix would match every run's; give one, e.g. --match bench-",
            param_hint="--match",
        )
    settings = load_settings()
    admin = build_admin(settings)
    minio = build_minio(settings)
    leftovers = find_leftovers(admin, minio, match.strip(), keep=settings.topic_prefix)
    table = Table("prefix", "topics", "groups", "buckets", "")
    for leftover in leftovers:
        if leftover.busy:
            outcome = f"[yellow]in use[/] by {', '.join(leftover.busy)}: left"
        elif dry_run:
            outcome = "would remove"
        else:
            remove_leftover(admin, minio, leftover)
            outcome = "[green]removed[/]"
        table.add_row(
            leftover.prefix,
            str(len(leftover.topics)),
            str(len(leftover.groups)),
            ", ".join(leftover.buckets) or "-",
            outcome,
        )
    if leftovers:
        console.print(table)
    else:
        console.print(f"nothing left under prefixes starting with {match.strip()!r}")
