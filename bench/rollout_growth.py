"""How the rollout pipeline's cost grows: the figures `webgym bench rollout --growth` adds.

Two tables, each from phases of the same run (:func:`bench.rollout.growth` runs them):

- ``in_flight``: the asynchronous pipeline (latency-model policy) at 8, 16, 32 and 64 episodes
  in flight, screenshots inline: steps/s, episodes/h, memory of the browser side and of the
  workers (proportional and resident), and bytes written to the log per step.
  ``mb_per_episode_in_flight`` is the least squares slope of memory over episodes in flight,
  so what every run costs anyway (the broker, an idle browser) is not charged to an episode.
- ``screenshots``: the same pipeline at one in-flight count with screenshots inline and stored
  in MinIO (``WEBGYM_SCREENSHOT_STORAGE``): steps/s, bytes per step in the log and in the object
  store, and the time a replay of one episode takes from each.

The functions here only read and fold figures; nothing here starts a process.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable
from typing import Any

from analytics.replay import load_replay
from infra.minio_store import build_minio
from infra.screenshot_store import PREFIX
from infra.settings import Settings

# Memory roles (bench.process_profile.role_of): what the browser side and the workers hold.
BROWSER_ROLES = ("chromium", "playwright driver", "browser worker")
WORKER_ROLES = ("policy worker", "faust worker", "bench")


def _memory(profile: dict[str, Any], roles: tuple[str, ...], measure: str) -> float:
    """Peak MB of the roles (each role's peak over the phase), summed: ``rss_mb`` resident,
    ``pss_mb`` proportional (shared pages split among their sharers)."""
    return round(
        sum(
            figures.get(measure) or 0.0
            for role, figures in profile.get("by_role", {}).items()
            if role.startswith(roles)
        ),
        1,
    )


def in_flight_row(phase: dict[str, Any], in_flight: int) -> dict[str, Any]:
    """One row of the in-flight table from a :func:`bench.rollout.run_phase` result."""
    profile = phase["profile"]
    return {
        "in_flight": in_flight,
        **_common(phase),
        "episodes_per_hour": phase["episodes_per_hour"],
        "browser_rss_mb": _memory(profile, BROWSER_ROLES, "rss_mb"),
        "workers_rss_mb": _memory(profile, WORKER_ROLES, "rss_mb"),
        "browser_pss_mb": _memory(profile, BROWSER_ROLES, "pss_mb"),
        "workers_pss_mb": _memory(profile, WORKER_ROLES, "pss_mb"),
        "chromium_cpu_s_per_step": profile["chromium_cpu_s_per_step"],
        "log_mb_per_hour": phase["log"]["mb_per_hour"],
        "kafka_added_ms": phase["kafka_added_ms"]["all"],
    }


def _common(phase: dict[str, Any]) -> dict[str, Any]:
    """What every row gives of its phase: its episodes, rate, own CPU and log bytes."""
    return {
        "episodes": phase["episodes"],
        "aborted": phase["aborted"],
        "steps_per_s": phase["steps_per_s"],
        "pipeline_cpu_s_per_step": phase["profile"]["pipeline_cpu_s_per_step"],
        "log_bytes_per_step": phase["log"]["bytes_per_step"],
        "log_gb_per_million_steps": phase["log"]["gb_per_million_steps"],
    }


def slope(points: Iterable[tuple[float, float]]) -> float | None:
    """The least-squares slope of y over x; None for fewer than two distinct x."""
    points = list(points)
    xs = [x for x, _ in points]
    if len(set(xs)) < 2:
        return None
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(y for _, y in points)
    numerator = sum((x - mean_x) * (y - mean_y) for x, y in points)
    return numerator / sum((x - mean_x) ** 2 for x in xs)


def memory_per_episode(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """MB each further episode in flight costs (slopes over rows): ``browser`` and ``workers``
    proportional (PSS, what the machine holds), ``browser_rss`` and ``workers_rss`` resident
    (shared pages counted once per process: an overstatement for Chromium)."""
    out = {}
    for side in ("browser", "workers"):
        for measure, name in (("pss", side), ("rss", f"{side}_rss")):
            value = slope((row["in_flight"], row[f"{side}_{measure}_mb"]) for row in rows)
            out[name] = None if value is None else round(value, 1)
    return out


def replay_time(settings: Settings, episode_ids: list[str]) -> dict[str, Any]:
    """Seconds :func:`analytics.replay.load_replay` takes for each episode (screenshots and
    all, as `webgym replay` reads them), and whether every frame had its screenshot."""
    seconds, frames, without = [], 0, 0
    for episode_id in episode_ids:
        began = time.perf_counter()
        replay = load_replay(settings, episode_id)
        seconds.append(time.perf_counter() - began)
        for step in replay.steps:
            frames += 1
            without += step.frame is None or not step.frame.screenshot
    return {
        "episodes": len(seconds),
        "frames": frames,
        "frames_without_screenshot": without,
        "s_per_episode_p50": round(statistics.median(seconds), 3) if seconds else None,
        "s_per_episode_max": round(max(seconds), 3) if seconds else None,
    }


def stored_bytes(settings: Settings) -> tuple[int, int]:
    """Objects and bytes under ``screenshots/`` in the artifacts bucket (0, 0: none)."""
    client = build_minio(settings)
    if not client.bucket_exists(settings.artifacts_bucket):
        return 0, 0
    sizes = [
        item.size or 0
        for item in client.list_objects(settings.artifacts_bucket, PREFIX, recursive=True)
    ]
    return len(sizes), sum(sizes)


def storage_row(
    phase: dict[str, Any], storage: str, objects: int, object_bytes: int, replay: dict[str, Any]
) -> dict[str, Any]:
    """One row of the screenshots table: inline or stored, from a phase and what it left."""
    steps = phase["steps"] or 1
    log = phase["log"]
    return {
        "storage": storage,
        **_common(phase),
        "observations_log_bytes_per_step": log["by_topic_bytes_per_step"].get("observations", 0),
        "objects": objects,
        "object_bytes_per_step": round(object_bytes / steps),
        "replay": replay,
    }
