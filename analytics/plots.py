"""Charts of :class:`analytics.stats.RunStats` figures as PNG files (``webgym stats --plot``).

Drawn with matplotlib's object API on the Agg canvas (no pyplot, no display, no global state).
Every chart is written even when it has nothing to show yet: it then says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

CHARTS = (
    "success_by_policy_version.png",
    "success_by_difficulty.png",
    "throughput.png",
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
    for name, figure in zip(CHARTS, drawn, strict=True):
        path = directory / name
        FigureCanvasAgg(figure)
        figure.savefig(path, dpi=100)
        paths.append(path)
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
