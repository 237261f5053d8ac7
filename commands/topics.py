"""``webgym topics``: the Kafka topics of the topic table."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Column, Table

from commands.errors import console, errors, user_errors
from infra.settings import load_settings
from infra.topic_admin import (
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
