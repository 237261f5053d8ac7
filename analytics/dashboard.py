"""The live dashboard: a web page over the log, like the paper's task monitor.

:class:`DashboardState` folds events (pure, idempotent through :class:`EpisodeFold`) into what the
page shows: episodes in flight with their state (waiting, navigating, thinking, acting, judging),
totals, success over time and by policy version, throughput, and the recent trajectories. A
:class:`TopicReader` thread feeds it from Kafka; :func:`build_app` serves the page, ``/api/state``
(the snapshot as JSON) and ``/replay/<episode_id>`` (the replay viewer). It only reads from
Kafka: a fresh reader that never commits, so attaching or closing it changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from importlib import resources
from typing import Any

from aiohttp import web

from analytics.episodes import STATES, TOPICS, EpisodeFold, EpisodeView
from analytics.errors import AnalyticsError
from analytics.rates import rates
from analytics.replay import render_replay_html
from analytics.stats import wilson_interval
from infra.log_reader import TopicReader
from infra.settings import Settings

log = logging.getLogger(__name__)

CURVE_POINTS = 300
RECENT = 20


class DashboardState:
    def __init__(self) -> None:
        self.fold = EpisodeFold()
        self.events = 0
        self.dead_letters = 0
        self.caught_up = False
        self._lock = threading.Lock()

    def apply(self, suffix: str, record: dict[str, Any]) -> None:
        with self._lock:
            self.events += 1
            if suffix == "dlq":
                self.dead_letters += 1
            else:
                self.fold.apply(suffix, record)

    def snapshot(self, now_ms: int | None = None) -> dict[str, Any]:
        """Everything the page shows, JSON-friendly."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            views = [v for v in self.fold.episodes.values() if v.started_ts is not None]
            return {
                "now_ms": now_ms,
                "events": self.events,
                "caught_up": self.caught_up,
                "dead_letters": self.dead_letters,
                "totals": _totals(views),
                "states": _states(views),
                "in_flight": [_row(v, now_ms) for v in _in_flight(views)],
                "success_curve": _success_curve(views),
                "by_policy_version": _by_version([v for v in views if v.purpose == "train"]),
                "heldout_by_policy_version": _by_version(
                    [v for v in views if v.purpose != "train"]
                ),
                "throughput": _throughput(views),
                "recent": [_row(v, now_ms) for v in _recent(views)],
            }


def _totals(views: list[EpisodeView]) -> dict[str, Any]:
    judged = [v for v in views if v.state == "judged"]
    successes = sum(1 for v in judged if v.success)
    return {
        "started": len(views),
        "ended": sum(1 for v in views if v.ended),
        "aborted": sum(1 for v in views if v.end_kind == "aborted"),
        "judged": len(judged),
        "successes": successes,
        "success_rate": successes / len(judged) if judged else None,
        "steps": sum(v.steps for v in views),
    }


def _states(views: list[EpisodeView]) -> dict[str, int]:
    counts = Counter(v.state for v in views)
    return {state: counts.get(state, 0) for state in STATES}


def _in_flight(views: list[EpisodeView]) -> list[EpisodeView]:
    return sorted((v for v in views if not v.ended), key=lambda v: v.started_ts or 0)


def _recent(views: list[EpisodeView]) -> list[EpisodeView]:
    judged = [v for v in views if v.state == "judged"]
    return sorted(judged, key=lambda v: v.judged_ts or 0, reverse=True)[:RECENT]


def _row(view: EpisodeView, now_ms: int) -> dict[str, Any]:
    row = view.summary()
    end = view.ended_ts or now_ms
    row["elapsed_s"] = round((end - (view.started_ts or end)) / 1000, 1)
    row["replay"] = f"/replay/{view.episode_id}"
    return row


def _success_curve(views: list[EpisodeView]) -> list[list[float]]:
    """(judged time in ms, success rate of every episode judged up to then)."""
    judged = sorted((v for v in views if v.state == "judged"), key=lambda v: v.judged_ts or 0)
    points, successes = [], 0
    for n, view in enumerate(judged, start=1):
        successes += view.success
        points.append([view.judged_ts or 0, successes / n])
    stride = max(1, len(points) // CURVE_POINTS)
    return points[::stride] if stride > 1 else points


def _by_version(views: list[EpisodeView]) -> list[dict[str, Any]]:
    """Success per policy version with its 95% interval (an episode counts for the newest
    version that acted in it; one where only backends without weights acted counts for none).
    The snapshot shows training episodes and held-out evaluation episodes apart: the latter,
    by version, are the learning curve."""
    judged: Counter = Counter()
    successes: Counter = Counter()
    for view in views:
        if view.state != "judged" or not view.policy_versions:
            continue
        version = max(view.policy_versions)
        judged[version] += 1
        successes[version] += view.success
    rows = []
    for v in sorted(judged):
        low, high = wilson_interval(successes[v], judged[v]) or (0.0, 1.0)
        rows.append(
            {"version": v, "judged": judged[v], "successes": successes[v],
             "success_rate": successes[v] / judged[v], "ci_low": low, "ci_high": high}
        )  # fmt: skip
    return rows


def _throughput(views: list[EpisodeView]) -> dict[str, Any]:
    """Episodes ended per minute (the last 30 minutes that had any, labelled HH:MM UTC) and the
    rates over the runs' windows, with their definitions (``analytics.rates``)."""
    ended = sorted(v.ended_ts for v in views if v.ended_ts is not None)
    per_minute = Counter(ts // 60_000 for ts in ended)
    minutes = sorted(per_minute)[-30:]
    return {
        "ended_per_minute": [[m * 60_000, per_minute[m]] for m in minutes],
        **rates(views),
    }


class LogFeeder:
    """Feeds a :class:`DashboardState` from Kafka on a daemon thread until stopped."""

    def __init__(self, settings: Settings, state: DashboardState, since_ms: int | None = None):
        self._reader = TopicReader(settings, [*TOPICS, "dlq"], since_ms=since_ms)
        self._state = state
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dashboard-feeder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for item in self._reader.poll(0.5):
                    if item.event.event_type is not None:
                        self._state.apply(item.suffix, item.event.record)
                if not self._state.caught_up and self._reader.caught_up():
                    self._state.caught_up = True
        finally:
            self._reader.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def page_html() -> str:
    return resources.files("analytics").joinpath("dashboard.html").read_text()


def build_app(settings: Settings, state: DashboardState) -> web.Application:
    async def index(request: web.Request) -> web.Response:
        return web.Response(text=page_html(), content_type="text/html")

    async def api_state(request: web.Request) -> web.Response:
        return web.json_response(state.snapshot())

    async def replay(request: web.Request) -> web.Response:
        episode_id = request.match_info["episode_id"]
        try:
            html = await asyncio.to_thread(render_replay_html, settings, episode_id)
        except AnalyticsError as exc:
            raise web.HTTPNotFound(text=str(exc)) from exc
        return web.Response(text=html, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", index)
    app.router.add_get("/api/state", api_state)
    app.router.add_get("/replay/{episode_id}", replay)
    return app
