"""Charts of :class:`analytics.stats.RunStats` figures as PNG files (``webgym stats --plot``).

Drawn with matplotlib's object API on the Agg canvas (no pyplot, no display, no global state).
Every chart is written even when it has nothing to show yet: it then says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

CHARTS = (
    "success_by_policy_version.png",
    "success_by_difficulty.png",
    "throughput.png",
    "heldout_by_policy_version.png",
)


def write_plots(figures: dict[str, Any], directory: Path) -> list[Path]:
    """Write the :data:`CHARTS` into ``directory`` (created if needed); returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    drawn = [
        _success_chart(figures["success_by"]["policy_version"], "policy version", "v"),
        _success_chart(figures["success_by"]["difficulty"], "difficulty", ""),
        _throughput_chart(figures["timeline"]),
    ]
    paths = []
    for name, figure in zip(CHARTS[:3], drawn, strict=True):
        path = directory / name
        FigureCanvasAgg(figure)
        figure.savefig(path, dpi=100)
        paths.append(path)
    heldout = figures.get("heldout", {}).get("by_policy_version", {})
    rows = [
        {"version": int(v), "heldout_success": row["rate"], "ci_low": row["ci_low"],
         "ci_high": row["ci_high"]}
        for v, row in heldout.items()
        if v.isdigit() and row["judged"]
    ]  # fmt: skip
    paths.append(
        write_learning_curve(rows, directory / CHARTS[3], "held-out success by policy version")
    )
    return paths


def _success_chart(rows: dict[str, dict[str, Any]], by: str, label_prefix: str) -> Figure:
    figure = Figure(figsize=(7, 4), layout="constrained")
    axes = figure.add_subplot()
    axes.set_title(f"success rate by {by}")
    axes.set_ylabel("successes / judged")
    axes.set_ylim(0, 1.1)
    if not rows:
        _nothing(axes, "no judged episodes yet")
        return figure
    labels = [f"{label_prefix}{value}" for value in rows]
    rates = [row["rate"] or 0.0 for row in rows.values()]
    bars = axes.bar(labels, rates, color="#4c72b0")
    for bar, row in zip(bars, rows.values(), strict=True):
        axes.annotate(
            f"{row['successes']}/{row['judged']}",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=9,
        )
    axes.set_xlabel(by)
    return figure


def _throughput_chart(timeline: dict[str, Any]) -> Figure:
    figure = Figure(figsize=(8, 5), layout="constrained")
    steps_axes, ended_axes = figure.subplots(2, 1, sharex=True)
    figure.suptitle("throughput over time")
    if not timeline["steps"]:
        _nothing(steps_axes, "no steps yet")
        return figure
    bucket_s = timeline["bucket_s"]
    minutes = bucket_s >= 60
    scale = 60 if minutes else 1
    x = [index * bucket_s / scale for index in range(len(timeline["steps"]))]
    steps_axes.step(x, [n / bucket_s for n in timeline["steps"]], where="post")
    steps_axes.set_ylabel("steps / s")
    per_minute = [n * 60 / bucket_s for n in timeline["episodes_ended"]]
    ended_axes.step(x, per_minute, where="post", color="#dd8452")
    ended_axes.set_ylabel("episodes ended / min")
    ended_axes.set_xlabel(
        f"{'minutes' if minutes else 'seconds'} since the first event ({bucket_s} s buckets)"
    )
    return figure


def _nothing(axes: Any, text: str) -> None:
    axes.text(0.5, 0.5, text, ha="center", va="center", transform=axes.transAxes)


def write_learning_curve(rows: list[dict[str, Any]], path: Path, title: str = "") -> Path:
    """The learning curve as a PNG: held-out success by policy version (left) and by wall-clock
    seconds since the start (right, where rows have ``wall_s``), each point with its 95%
    interval, coloured by ``phase`` where rows have one. ``rows``: :func:`analytics.evaluation.
    curve` rows (or rows with ``version``/``heldout_success``/``ci_low``/``ci_high``)."""
    figure = Figure(figsize=(10, 4.2), layout="constrained")
    by_version, by_time = figure.subplots(1, 2, sharey=True)
    figure.suptitle(title or "held-out success by policy version")
    points = [_curve_point(row) for row in rows]
    colours = {"warm_start": "#4c72b0", "on_policy": "#dd8452"}
    for axes, x_of, label in (
        (by_version, lambda p: p["version"], "policy version"),
        (by_time, lambda p: p["wall_s"], "wall-clock seconds since the start"),
    ):
        axes.set_ylim(0, 1.05)
        axes.set_xlabel(label)
        shown = [p for p in points if x_of(p) is not None]
        if not shown:
            _nothing(axes, "no evaluated version yet")
            continue
        for phase in dict.fromkeys(p["phase"] for p in shown):
            group = [p for p in shown if p["phase"] == phase]
            axes.errorbar(
                [x_of(p) for p in group],
                [p["success"] for p in group],
                yerr=[
                    [p["success"] - p["ci_low"] for p in group],
                    [p["ci_high"] - p["success"] for p in group],
                ],
                fmt="o-",
                capsize=3,
                color=colours.get(phase or "", "#555555"),
                label=phase or "evaluated",
            )
        axes.legend(loc="lower right", fontsize=8)
    by_version.xaxis.set_major_locator(MaxNLocator(integer=True))
    by_version.set_ylabel("held-out success (95% interval)")
    FigureCanvasAgg(figure)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    return path


def _curve_point(row: dict[str, Any]) -> dict[str, Any]:
    success = row.get("heldout_success", row.get("success"))
    return {
        "version": row.get("version", row.get("policy_version")),
        "wall_s": row.get("wall_s"),
        "phase": row.get("phase"),
        "success": success or 0.0,
        "ci_low": row["ci_low"] if row.get("ci_low") is not None else success or 0.0,
        "ci_high": row["ci_high"] if row.get("ci_high") is not None else success or 0.0,
    }
