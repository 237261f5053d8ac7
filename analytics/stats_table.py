"""The figures of :class:`analytics.stats.RunStats` as rich tables (``webgym stats``'s screen).

Pure presentation: :func:`render` takes the JSON-friendly ``figures()`` dict and returns one
renderable (printed once, or refreshed by ``rich.live.Live`` under ``--follow``).
"""

from __future__ import annotations

import datetime
from typing import Any

from rich.console import Group
from rich.table import Table

GROUP_TITLES = {
    "domain": "domain",
    "difficulty": "difficulty",
    "site": "site",
    "policy_version": "policy version",
}
LATENCY_TITLES = {
    "operations": "operation (request -> result)",
    "hops": "hop (producer ts -> producer ts)",
    "service": "inside the worker",
}


def render(figures: dict[str, Any], caught_up: bool = True) -> Group:
    """Overview, success by group, latency, and dead letters (when there are any)."""
    parts: list[Any] = [overview_table(figures, caught_up)]
    if figures["episodes"]["judged"]:
        parts.append(success_table(figures))
    if figures["heldout"]["judged"]:
        parts.append(heldout_table(figures))
    if any(figures["latency_ms"].values()):
        parts.append(latency_table(figures))
    if figures["dead_letters"]["total"]:
        parts.append(dead_letter_table(figures))
    return Group(*parts)


def overview_table(figures: dict[str, Any], caught_up: bool = True) -> Table:
    runs = figures["run_ids"]
    if figures["run_id"]:
        title = f"run {figures['run_id']}"
    elif len(runs) == 1:
        title = f"run {runs[0]}"
    else:
        title = f"{len(runs)} runs" if runs else "no episodes in the log yet"
    if not caught_up:
        title += " (still reading the log...)"
    table = Table(title=title, title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("definition", style="dim")
    episodes, throughput = figures["episodes"], figures["throughput"]
    steps, lag = figures["steps"], figures["policy_lag"]
    window, migrations = figures["window"], figures["migrations"]
    runs_seen = throughput["runs"]
    rows = [
        ("events", _window(window), "first to last producer ts of the events read"),
        (
            "rate window",
            f"{throughput['window_s']:,.1f} s"
            + (f" ({len(runs_seen)} runs)" if len(runs_seen) > 1 else ""),
            throughput["definitions"]["window"],
        ),
        ("episodes started", episodes["started"], ""),
        (
            "episodes ended",
            f"{episodes['ended']} ({episodes['finished']} finished, {episodes['aborted']} aborted)",
            f"{episodes['in_flight']} in flight",
        ),
        ("judged", episodes["judged"], "training episodes with a scored trajectory in the log"),
        (
            "successes",
            f"{episodes['successes']} ({_pct(episodes['success_rate'])})",
            "on trajectories.success / judged",
        ),
        ("judge errors", episodes["judge_errors"], ""),
        ("blocked", episodes["blocked"], "bot wall or captcha seen"),
        ("episodes per hour", _num(throughput["episodes_per_hour"], 0), "ended x 3600 / window"),
        ("steps per second", _num(throughput["steps_per_s"], 2), "steps / window"),
        ("steps", steps["steps"], throughput["definitions"]["step"]),
        (
            "parse errors",
            f"{steps['parse_errors']} ({_pct(steps['parse_error_rate'])})",
            "unparseable replies / steps",
        ),
        (
            "repeated steps",
            f"{steps['repeated_steps']} ({_pct(steps['repetition_rate'])})",
            f"screen unchanged, of {steps['trajectory_steps']} judged trajectory steps",
        ),
        (
            "policy lag",
            f"mean {_num(lag['mean'], 2)}, max {_num(lag['max'], 0)}",
            f"versions behind the newest announced; {_pct(lag['behind_rate'])} of inferences "
            f"behind; announced {_versions(lag['announced_versions'])}",
        ),
        (
            "migrations",
            f"{migrations['count']} (pause p50 {_ms(migrations['pause_ms']['p50'])} ms, "
            f"p99 {_ms(migrations['pause_ms']['p99'])} ms)"
            if migrations["count"]
            else "0",
            "episodes taken over by another browser worker, rebuilt from the log",
        ),
        (
            "dead letters",
            figures["dead_letters"]["total"],
            "records on the dlq topic",
        ),
    ]
    undecodable = sum(figures["undecodable"].values())
    if undecodable:
        topics = ", ".join(f"{t} {n}" for t, n in figures["undecodable"].items())
        rows.append(("undecodable records", undecodable, topics))
    for reason, count in episodes["terminations"].items():
        rows.append((f"ended by {reason or '?'}", count, ""))
    if len(runs_seen) > 1:  # each run's own window and rates, never the span across runs
        for run in runs_seen:
            rows.append(
                (
                    f"run {run['run_id']}",
                    f"{run['seconds']:,.1f} s: {_num(run['steps_per_s'], 2)} steps/s, "
                    f"{_num(run['episodes_per_hour'], 0)} episodes/h",
                    f"{run['steps']} steps, {run['episodes_ended']} ended in its window",
                )
            )
    for name, value, definition in rows:
        table.add_row(name, str(value), definition)
    return table


def _table(title: str, left: tuple[str, ...], right: tuple[str, ...]) -> Table:
    """A table titled ``title``: the ``left`` columns, then the right-aligned ``right`` ones."""
    table = Table(title=title, title_justify="left")
    for name in left:
        table.add_column(name)
    for name in right:
        table.add_column(name, justify="right")
    return table


def success_table(figures: dict[str, Any]) -> Table:
    table = _table("success by", ("by", "group"), ("judged", "successes", "rate"))
    for group, rows in figures["success_by"].items():
        for index, (value, row) in enumerate(rows.items()):
            table.add_row(
                GROUP_TITLES[group] if index == 0 else "",
                value,
                str(row["judged"]),
                str(row["successes"]),
                _pct(row["rate"]),
            )
        table.add_section()
    return table


def heldout_table(figures: dict[str, Any]) -> Table:
    """Evaluation episodes only (never trained on): the learning curve, one row per version."""
    heldout = figures["heldout"]
    table = _table(
        "held-out (eval) success by policy version",
        ("policy version",),
        ("judged", "successes", "rate", "95% interval (Wilson)"),
    )
    rows = [*heldout["by_policy_version"].items(), ("all", heldout)]
    for index, (version, row) in enumerate(rows):
        if index == len(rows) - 1:
            table.add_section()
        interval = f"{_pct(row['ci_low'])} - {_pct(row['ci_high'])}"
        table.add_row(
            version, str(row["judged"]), str(row["successes"]), _pct(row["rate"]), interval
        )
    return table


def latency_table(figures: dict[str, Any]) -> Table:
    table = _table(
        "latency (ms; nearest-rank percentiles)",
        ("measured", "name"),
        ("n", "p50", "p95", "p99", "max"),
    )
    for kind, rows in figures["latency_ms"].items():
        for index, (name, row) in enumerate(rows.items()):
            label = f"{name} ({row['who']})" if "who" in row else name
            table.add_row(
                LATENCY_TITLES[kind] if index == 0 else "",
                label,
                str(row["n"]),
                *(_ms(row[column]) for column in ("p50", "p95", "p99", "max")),
            )
        if rows:
            table.add_section()
    return table


def dead_letter_table(figures: dict[str, Any]) -> Table:
    table = _table("dead letters", ("by", "value"), ("records",))
    for by, key in (("source topic", "by_source_topic"), ("error class", "by_error_class")):
        for index, (value, count) in enumerate(figures["dead_letters"][key].items()):
            table.add_row(by if index == 0 else "", value, str(count))
        table.add_section()
    return table


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 10 else f"{value:.2f}"


def _versions(versions: list[int]) -> str:
    if not versions:
        return "none"
    if len(versions) > 4:
        return f"v{versions[0]}..v{versions[-1]}"
    return ", ".join(f"v{v}" for v in versions)


def _window(window: dict[str, Any]) -> str:
    if window["first_ts"] is None:
        return "-"
    first = datetime.datetime.fromtimestamp(window["first_ts"] / 1000)
    last = datetime.datetime.fromtimestamp(window["last_ts"] / 1000)
    fmt = "%H:%M:%S" if first.date() == last.date() else "%Y-%m-%d %H:%M:%S"
    return f"{first:%Y-%m-%d %H:%M:%S} - {last.strftime(fmt)} ({window['seconds']:,.1f} s)"
