"""``webgym rescore``: re-run a judge over stored trajectories into a new scored stream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from analytics.errors import AnalyticsError
from analytics.rescore import output_suffix
from analytics.rescore import rescore as run_rescore
from analytics.times import parse_since
from infra.settings import load_settings
from streams.judging import Judging


def rescore(
    into: Annotated[
        str, typer.Option(help="name of the new stream: webgym.trajectories.rescored.<into>")
    ],
    judge: Annotated[
        str,
        typer.Option(
            help="auto (each task's own judge, as the stream does), verifier (practice web), "
            "miniwob (page reward) or llm (the rubric judge for every task)"
        ),
    ] = "auto",
    judge_base_url: Annotated[
        str | None,
        typer.Option(help="llm: OpenAI-compatible endpoint (else WEBGYM_JUDGE_BASE_URL)"),
    ] = None,
    judge_model: Annotated[
        str | None, typer.Option(help="llm: model name (else WEBGYM_JUDGE_MODEL)")
    ] = None,
    judge_max_tokens: Annotated[
        int | None, typer.Option(min=1, help="llm: reply length limit")
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="only trajectories scored since: ISO time or 10m, 2h, 1d")
    ] = None,
    run: Annotated[str | None, typer.Option(help="only episodes of this run id")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="trajectories judged at once")] = 8,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="also write the comparison to this JSON file")
    ] = None,
) -> None:
    """Re-judge stored trajectories (another judge model, an updated rubric) into a new stream.

    Reads webgym.trajectories.scored and the current task set without joining any group, writes
    webgym.trajectories.rescored.<into>, and prints how many rewards and per-fact verdicts
    changed against the original scores. The running system is not touched; running it again
    with the same --into resumes (episodes already re-scored are skipped).
    """

    output_suffix(into)  # bad input fails before anything is read or written
    since_ms = parse_since(since)
    settings = load_settings()
    updates = {
        "judge_base_url": judge_base_url,
        "judge_model": judge_model,
        "judge_max_tokens": judge_max_tokens,
    }
    settings = settings.model_copy(update={k: v for k, v in updates.items() if v is not None})
    only = None if judge == "auto" else judge
    if only == "llm" and not (settings.judge_base_url and settings.judge_model):
        raise AnalyticsError(
            "--judge llm needs --judge-base-url and --judge-model (or WEBGYM_JUDGE_BASE_URL and "
            "WEBGYM_JUDGE_MODEL)"
        )
    try:
        judging = Judging(settings, only=only)
    except ValueError as exc:
        raise AnalyticsError(str(exc)) from exc
    console = Console()
    with Progress(
        TextColumn("[bold]re-scoring"), BarColumn(), MofNCompleteColumn(), console=console
    ) as progress:
        bar = progress.add_task("rescore", total=None)

        def on_progress(done: int, total: int) -> None:
            progress.update(bar, completed=done, total=total)

        comparison = run_rescore(settings, judging, into, since_ms, run, concurrency, on_progress)
    table = Table("figure", "value", title=f"{settings.topic('trajectories.rescored.' + into)}")
    table.add_row("re-scored", str(comparison.rescored))
    table.add_row("skipped (already re-scored)", str(comparison.skipped))
    table.add_row(f"skipped (--judge {judge} does not apply)", str(comparison.not_applicable))
    table.add_row("judges before", ", ".join(sorted(comparison.old_judges)) or "-")
    table.add_row("judges now", ", ".join(sorted(comparison.new_judges)) or "-")
    table.add_row("rewards changed", str(comparison.rewards_changed))
    table.add_row("  new successes", str(comparison.became_success))
    table.add_row("  successes lost", str(comparison.lost_success))
    table.add_row("per-fact verdicts changed", str(comparison.verdicts_changed))
    table.add_row("judge errors", str(comparison.judge_errors))
    console.print(table)
    console.print(f"{len(comparison.changed_episodes)} episodes changed verdict")
    changed = sorted(comparison.reward_changed_episodes)
    if changed:
        more = f" and {len(changed) - 20} more" if len(changed) > 20 else ""
        shown = ", ".join(changed[:20]) + more
        console.print(f"reward changed: {shown}", highlight=False)
    if json_out is not None:
        json_out.write_text(json.dumps(comparison.figures(), indent=2) + "\n")
