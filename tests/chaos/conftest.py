"""The chaos tier: faults injected into real runs (Kafka, MinIO, Chromium, the workers as child
processes), each run ending with the invariant checker (`webgym check`) on its log.

A test runs :func:`chaos_run` with a fault (a callback that gets the run's progress and its child
processes, kills only processes the run itself started, by pid, and records when it struck).
Every run adds a row to the fault table (fault, episodes in flight, started, ended, lost,
duplicates after deduplication, recovery time), printed at the end of the session and written to
``<state dir>/chaos/<test>.json``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from analytics.stats import read_figures
from commands.check import check_run
from commands.children import Child
from commands.local_run import RunOptions, RunSummary, run_local
from infra.consumer import watermarks
from infra.log_reader import read_topic
from infra.provenance import write_result
from infra.settings import Settings
from tests.e2e.conftest import isolated_settings, run_options

ROWS: list[dict[str, Any]] = []


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/chaos" in str(item.fspath):
            item.add_marker(pytest.mark.chaos)


def pytest_terminal_summary(terminalreporter):
    if not ROWS:
        return
    if os.environ.get("WEBGYM_FAULT_TABLE"):  # a benchmark's run: the table as a result file
        write_result(Path(os.environ["WEBGYM_FAULT_TABLE"]), {"rows": ROWS})
    terminalreporter.section("chaos: fault table")
    header = (
        "fault | in flight | started | ended | lost | duplicates after dedup | aborted | "
        "migrations (pause p50/p99 ms) | recovery s"
    )
    terminalreporter.write_line(header)
    for row in ROWS:
        recovery = "-" if row["recovery_s"] is None else f"{row['recovery_s']:.1f}"
        terminalreporter.write_line(
            f"{row['fault']} | {row['in_flight']} | {row['started']} | {row['ended']} | "
            f"{row['lost']} | {row['duplicates_after_dedup']} | {row['aborted']} | "
            f"{row['migrations']} ({_ms(row['migration_pause_ms']['p50'])}/"
            f"{_ms(row['migration_pause_ms']['p99'])}) | {recovery}"
        )
        for reason, count in row["aborted_reasons"].items():
            terminalreporter.write_line(f"  aborted {count}: {reason}")
        if "memory" in row:
            terminalreporter.write_line(f"  memory: {json.dumps(row['memory'])}")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


@pytest.fixture
def run_settings(stack_settings: Settings) -> Iterator[Settings]:
    with isolated_settings(stack_settings) as settings:
        yield settings


def chaos_options(tag: str, **fields: Any) -> RunOptions:
    """The options of a chaos run, run id ``chaos-<tag>`` and six random hex digits: by default
    16 episodes in flight, the scripted policy with 30% of steps wrong, 10 practice-web sites, and
    failed when no episode ended for 240 s; ``fields`` set the others or override these."""
    defaults = {"in_flight": 16, "error_rate": 0.3, "sites": 10, "stall_timeout_s": 240.0}
    return run_options(f"chaos-{tag}", **{**defaults, **fields})


@dataclass
class Fault:
    """What a test did to a run: the moments (epoch ms) each fault struck."""

    name: str
    struck_ms: list[int] = field(default_factory=list)

    def mark(self) -> None:
        self.struck_ms.append(int(time.time() * 1000))


@dataclass
class ChaosResult:
    summary: RunSummary
    report: Any  # analytics.check.CheckReport
    row: dict[str, Any]


def recovery_s(settings: Settings, run_id: str, struck_ms: list[int]) -> float | None:
    """From the last fault to the first episode end after it, from the log's timestamps."""
    if not struck_ms:
        return None
    last = max(struck_ms)
    ends = [
        e.record["ts"]
        for e in read_topic(settings, "episodes")
        if e.event_type
        and e.record["kind"] != "started"
        and e.record["episode_id"].startswith(f"{run_id}-")
        and e.record["ts"] > last
    ]
    return (min(ends) - last) / 1000 if ends else None


def aborted_reasons(settings: Settings, run_id: str) -> dict[str, int]:
    """Why the run's aborted episodes ended (the end event's reason), with how many each."""
    reasons: dict[str, int] = {}
    for event in read_topic(settings, "episodes"):
        record = event.record
        if (
            event.event_type
            and record["kind"] == "aborted"
            and record["episode_id"].startswith(f"{run_id}-")
        ):
            reason = record.get("reason") or "?"
            reasons[reason] = reasons.get(reason, 0) + 1
    return reasons


def chaos_run(
    settings: Settings,
    options: RunOptions,
    fault: Fault,
    strike: Callable[[RunSummary, dict[str, Child]], None] = lambda *_: None,
    request: pytest.FixtureRequest | None = None,
) -> ChaosResult:
    """Run the loop with ``strike`` called on every progress tick, then check the log."""
    started_ms = int(time.time() * 1000)
    summary = run_local(settings, options, on_progress=strike, start_stack=False)
    report = check_run(settings, run_id=summary.run_id)
    counts = report.counts
    migrations = read_figures(settings, summary.run_id, started_ms - 60_000)["migrations"]
    row = {
        "fault": fault.name,
        "in_flight": options.in_flight,
        "episodes": options.episodes,
        "started": counts["started"],
        "ended": counts["ended"],
        "aborted": counts["aborted"],
        "lost": counts["lost"],
        "duplicates_raw": counts["duplicates_raw"],
        "duplicates_after_dedup": counts["duplicates_after_dedup"],
        "dead_letters": counts["dead_letters"],
        "faults": len(fault.struck_ms),
        "recovery_s": recovery_s(settings, summary.run_id, fault.struck_ms),
        "aborted_reasons": aborted_reasons(settings, summary.run_id),
        "migrations": migrations["count"],
        "migration_pause_ms": {p: migrations["pause_ms"][p] for p in ("p50", "p99")},
        "violations": [str(v) for v in report.violations][:20],
    }
    ROWS.append(row)
    save_row(settings, row, request.node.name if request is not None else fault.name)
    return ChaosResult(summary, report, row)


def partition_watermarks(
    consumer: Consumer, topics: list[str]
) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (low, high) offsets, for every partition of ``topics``."""
    found = {}
    for topic in topics:
        for partition in consumer.list_topics(topic, timeout=10).topics[topic].partitions:
            found[(topic, partition)] = watermarks(consumer, TopicPartition(topic, partition), 10)
    return found


def save_row(settings: Settings, row: dict[str, Any], name: str) -> None:
    """Write (or rewrite, after a test added figures) one row of the fault table."""
    out = settings.state_dir / "chaos"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name.replace(' ', '-')}.json").write_text(json.dumps(row, indent=2) + "\n")


def assert_nothing_lost(result: ChaosResult, episodes: int) -> None:
    """The battery's bar: every episode started ended, none lost, no conflicting copies, and
    every invariant of the checker holds."""
    row = result.row
    assert result.report.ok, "\n".join(row["violations"])
    assert row["started"] == episodes and row["ended"] == episodes, row
    assert row["lost"] == 0 and row["duplicates_after_dedup"] == 0, row


def assert_none_aborted(result: ChaosResult, episodes: int) -> None:
    """The bar for a fault the loop recovers from without losing a page: nothing lost (the
    battery's bar), and no episode aborted. A killed process, a restarted broker or a browser
    worker that joins or leaves (its episodes migrate, their pages rebuilt from the log) is over
    in seconds, against an episode's lease of minutes, so an abort means a worker or a client did
    not come back (a consumer stuck after a broker restart aborted 25 of 32 episodes this way)."""
    assert_nothing_lost(result, episodes)
    assert result.row["aborted"] == 0, result.row["aborted_reasons"]


def command_tree(command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], bool]]:
    """Every command under ``command`` (a click command, e.g. ``typer.main.get_command(app)``)
    as (path of names, is a group), the root first. Groups are asked through the click API, since
    the root builds each command only when it is asked for."""
    group = hasattr(command, "list_commands")
    yield path, group
    if group:
        context = type(command).context_class(command)
        for name in command.list_commands(context):
            yield from command_tree(command.get_command(context, name), (*path, name))
