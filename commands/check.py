"""`webgym check`: the invariants of a run, verified on the log after the fact.

Reads every topic of :data:`analytics.check.TOPICS` from offset 0 of each partition to its end as
it is when the check starts, with a fresh reader that never commits (nothing of the running system
changes), folds the records into :class:`analytics.check.InvariantFold` and shows the counts and
the violations. Exit 0 when every invariant holds, 1 otherwise; 1 with what to do next when Kafka
cannot be reached or the topics do not exist. :func:`check_run` is the same check as a library
call (tests end with it). Imports here stay light: ``commands.main`` imports this module at
start-up.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from analytics.check import INVARIANTS, TOPICS, InvariantFold
from analytics.errors import AnalyticsError
from commands.options import RunFilter
from infra.log_reader import TopicReader, require_topics
from infra.settings import load_settings

if TYPE_CHECKING:
    from analytics.check import CheckReport
    from infra.settings import Settings

LABELS = {
    "started": "episodes started",
    "ended": "episodes ended",
    "finished": "  finished",
    "aborted": "  aborted",
    "lost": "episodes lost (started, never ended)",
    "duplicates_raw": "duplicates (copies dropped)",
    "reexecuted": "  of which re-executed (same event id, new content)",
    "duplicates_after_dedup": "duplicates after deduplication",
    "dead_letters": "dead letters",
    "undecodable": "records that do not decode",
    "trajectories": "trajectories",
    "scored": "scored trajectories",
    "successes": "successes",
    "records": "records of the run read",
}
SHOWN = 50  # violations printed; --json has them all


def check(
    run: RunFilter = None,
    json_path: Annotated[
        Path | None,
        typer.Option(
            "--json", help="also write the report (counts and every violation) to this JSON file"
        ),
    ] = None,
) -> None:
    """Verify the invariants of the rollout loop on the log, after a run: every started episode
    ended exactly once (an aborted one with a reason); step numbers are contiguous; nothing was
    produced for an episode after its end; each trajectory and scored trajectory equals the fold
    of its steps; no start, trajectory or success appears twice with different content; every
    success is a scored trajectory with reward 1; every dead letter names its source (topic,
    partition, offset) and error class.

    Reads every episode topic and the dead-letter topic of the deployment named by
    WEBGYM_TOPIC_PREFIX from offset 0 to the end, with a fresh consumer that never commits, then
    prints the counts (started, ended, aborted, lost, duplicates before and after
    deduplication, dead letters, trajectories, successes) and each violation with its episode,
    invariant and the record's topic, partition and offset. Run it when the run has finished:
    episodes still in flight count as lost. Exit code 0: every invariant holds; 1: violations
    (or no Kafka, or no topics). Definitions are in `analytics/check.py`.
    """

    settings = _settings()
    console, status_console = Console(), Console(stderr=True)
    with Progress(
        TextColumn("reading the log"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=status_console,
        transient=True,
    ) as bar:
        task = bar.add_task("read", total=None)
        report = check_run(
            settings, run, lambda read, total: bar.update(task, completed=read, total=total)
        )
    _show(console, report, settings.topic_prefix)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report.as_dict(), indent=2) + "\n")
        console.print(f"report written to {json_path}")
    if not report.ok:
        raise typer.Exit(1)


def check_run(
    settings: Settings,
    run_id: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    idle_limit_s: float = 30.0,
) -> CheckReport:
    """Read the deployment's topics from offset 0 to their end now and check every invariant.

    ``run_id`` restricts the check to that run's episodes (an AnalyticsError when the log has
    none); ``progress(read, total)`` is called as records arrive. Raises BrokerUnreachable when
    no broker answers, TopicMissing when topics are missing and LogStalled when the log stops
    delivering for ``idle_limit_s`` before its end; each says what to do next.
    """

    require_topics(settings, TOPICS)
    fold = InvariantFold(run_id, settings.topic_prefix)
    with TopicReader(settings, TOPICS) as reader:
        read = 0
        for batch in reader.batches_to_end(idle_limit_s):
            fold.apply_all(batch)
            read += len(batch)
            if progress is not None:
                progress(read, max(reader.total, read))
    if run_id is not None and run_id not in fold.runs_seen:
        seen = sorted(fold.runs_seen)
        listed = ", ".join(seen[-10:]) if seen else "none"
        raise AnalyticsError(
            f"run {run_id!r} has no episode events in the {settings.topic_prefix}.* topics; "
            f"runs there: {listed}"
        )
    return fold.report()


def _show(console: Any, report: CheckReport, prefix: str) -> None:

    scope = f"run {report.run_id}" if report.run_id else f"every run in {prefix}.*"
    if report.run_id is None and report.counts["records"] == 0:
        console.print(
            f"[yellow]no episode events[/] in the {prefix}.* topics: nothing to check. Check "
            "WEBGYM_TOPIC_PREFIX, or start a run with `webgym run`"
        )
    counts = Table(title=f"webgym check: {scope}", title_justify="left")
    counts.add_column("count")
    counts.add_column("", justify="right")
    for key, label in LABELS.items():
        counts.add_row(label, str(report.counts[key]))
    console.print(counts)
    found = report.by_invariant()
    invariants = Table(title="invariants", title_justify="left")
    invariants.add_column("invariant")
    invariants.add_column("holds")
    invariants.add_column("what it says")
    for name, text in INVARIANTS.items():
        holds = "[green]yes[/]" if not found[name] else f"[red]no: {found[name]}[/]"
        invariants.add_row(name, holds, text)
    console.print(invariants)
    if report.ok:
        console.print(f"[green]all invariants hold[/] ({scope})")
        return
    console.print(f"[red]{len(report.violations)} violation(s)[/] ({scope}):")
    for violation in report.violations[:SHOWN]:
        where = str(violation.at) if violation.at is not None else "-"
        console.print(
            f"  [bold]{violation.invariant}[/]  {escape(violation.episode_id or '-')}  "
            f"{escape(where)}  {escape(violation.message)}",
            highlight=False,
        )
    if len(report.violations) > SHOWN:
        console.print(f"  ... and {len(report.violations) - SHOWN} more (write them all: --json)")
    console.print(
        "Next: `webgym replay EPISODE_ID` shows an episode step by step; the coordinates name "
        "the record that breaks the invariant (topic\\[partition]@offset)."
    )


def _settings() -> Any:

    return load_settings()
