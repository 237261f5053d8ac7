"""`webgym stats`: success, throughput, latency, repetition, parse errors, policy lag and dead
letters of a run, computed from the log by a consumer that attaches without joining anyone.

Reads the topics of :data:`analytics.stats.TOPICS` under a fresh, never-committing group, from
offset 0 or from ``--since`` (tasks and policy versions always from offset 0: they describe, not
happen), folds them into :class:`analytics.stats.RunStats` and shows the figures; ``--follow``
keeps reading and refreshing until Ctrl-C. Nothing in the running system changes. Imports here
stay light: ``commands.main`` imports this module at start-up.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.live import Live

from analytics.errors import AnalyticsError
from analytics.prometheus import serve_metrics
from analytics.stats import REFERENCE_TOPICS, TOPICS, RunStats
from analytics.stats_table import render
from analytics.times import HELP as TIME_HELP
from analytics.times import parse_since as _parse_time
from commands.options import RunFilter
from infra.log_reader import TopicReader, require_topics
from infra.settings import load_settings

SINCE_HELP = f"start at this time instead of offset 0: {TIME_HELP}"


def parse_since(text: str, now_ms: int | None = None) -> int:
    """``--since`` as epoch ms (:func:`analytics.times.parse_since`; a future time is refused)."""
    now_s = time.time() if now_ms is None else now_ms / 1000
    return _parse_time(text, now_s, past=True)


def stats(
    since: Annotated[str | None, typer.Option(help=SINCE_HELP)] = None,
    run: RunFilter = None,
    follow: Annotated[
        bool, typer.Option("--follow", help="keep reading and refresh the table until Ctrl-C")
    ] = False,
    refresh: Annotated[
        float, typer.Option(min=0.1, help="with --follow: seconds between refreshes")
    ] = 1.0,
    metrics_port: Annotated[
        int | None,
        typer.Option(min=1, max=65535, help="with --follow: serve Prometheus metrics on this port"),
    ] = None,
    metrics_host: Annotated[
        str, typer.Option(help="address the metrics server binds (0.0.0.0: every interface)")
    ] = "127.0.0.1",
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="also write every figure to this JSON file (at the end)"),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            help="also write PNG charts to this directory: success rate by policy version and "
            "by difficulty, throughput over time"
        ),
    ] = None,
) -> None:
    """Statistics of runs, computed from the log: success by domain, difficulty, site and policy
    version; episodes per hour and steps per second; latency percentiles per operation type and
    per hop; repetition and parse-error rates; policy lag; dead letters.

    Attaches a fresh consumer that never commits, so it can run at any time next to a live run.
    Reads from offset 0 (or --since) to the end of the log as it is now, prints the tables and
    exits; with --follow it keeps reading and refreshing until Ctrl-C (and --json / --plot are
    written then). Definitions are in the table and in `analytics/stats.py`.
    """

    since_ms = parse_since(since) if since is not None else None
    if metrics_port is not None and not follow:
        raise AnalyticsError(
            "--metrics-port serves live metrics while following the log: add --follow"
        )

    settings = _settings()
    require_topics(settings, TOPICS)
    console, status_console = Console(), Console(stderr=True)
    run_stats = RunStats(run_id=run)
    # Reference topics (tasks, policy versions) are read whole even with --since.
    reader = TopicReader(settings, TOPICS, since_ms, from_start=REFERENCE_TOPICS)
    try:
        with status_console.status("reading the log...") as status:
            read = 0
            for batch in reader.batches_to_end():
                run_stats.apply_all(batch)
                read += len(batch)
                status.update(f"reading the log: {read:,} of {reader.total:,} events")
        if not follow:
            _refuse_unknown_run(run_stats, run)
            figures = run_stats.figures()
            _show(console, figures, since, settings.topic_prefix)
        else:
            figures = _follow(console, reader, run_stats, refresh, metrics_port, metrics_host)
    finally:
        reader.close()
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(figures, indent=2) + "\n")
        console.print(f"figures written to {json_path}")
    if plot is not None:
        from analytics.plots import write_plots  # matplotlib: only for a plot

        paths = write_plots(figures, plot)
        console.print(f"charts written to {plot}: {', '.join(p.name for p in paths)}")


def _follow(
    console: Any,
    reader: TopicReader,
    run_stats: Any,
    refresh: float,
    metrics_port: int | None,
    metrics_host: str,
) -> dict[str, Any]:

    collector = server = None
    if metrics_port is not None:
        collector, server = serve_metrics(metrics_port, metrics_host)
        console.print(f"Prometheus metrics on http://{metrics_host}:{metrics_port}/metrics")
    stop: list[bool] = []
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    figures = run_stats.figures()
    try:
        with Live(render(figures), console=console, auto_refresh=False) as live:
            shown_at = 0.0
            while not stop:
                run_stats.apply_all(reader.poll(min(0.5, refresh)))
                if time.monotonic() - shown_at >= refresh:
                    figures = run_stats.figures()
                    live.update(render(figures), refresh=True)
                    if collector is not None:
                        collector.update(figures, reader.caught_up())
                    shown_at = time.monotonic()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        if server is not None:
            server.shutdown()
    return run_stats.figures()


def _show(console: Any, figures: dict[str, Any], since: str | None, prefix: str) -> None:

    if figures["window"]["first_ts"] is None:
        where = f"since {since}" if since else "from offset 0"
        console.print(
            f"[yellow]no episode events[/] in the {prefix}.* topics {where}; start a run with "
            "`webgym run`, or check WEBGYM_TOPIC_PREFIX"
        )
        return
    console.print(render(figures))


def _refuse_unknown_run(run_stats: Any, run: str | None) -> None:
    if run is None or run in run_stats.run_ids:
        return
    seen = sorted(run_stats.runs_seen)
    listed = ", ".join(seen[-10:]) if seen else "none"
    raise AnalyticsError(
        f"run {run!r} has no episode events in the log read; runs there: {listed}"
        " (add --follow to wait for it)"
    )


def _settings() -> Any:

    return load_settings()
