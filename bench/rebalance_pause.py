"""Benchmark: how long the loop stalls when a worker joins mid-run.

Under a fresh topic prefix (deleted afterwards) it runs the whole loop with the scripted policy,
8 episodes in flight, and mid-run starts a second Faust worker (aiokafka: the classic, eager
protocol, where every member stops while the group rebalances), later a second browser worker
(the consumer group protocol, KIP-848: only the partitions the newcomer takes move), then a
third; observations per second are reported with 1, 2 and 3 browser workers. For each
join it reads the log and reports the longest gap between consecutive records of the stream
that group produces (Faust: the orchestrator's operations; browsers: observations) in the 40 s
after the join, against the longest gap in the 20 s before it; and the run's terminations
(episodes on partitions that move migrate to their new owner, which rebuilds their pages from
the log; the run's migrations and their pause are reported too). The machine is CPU-bound: the
figure to watch is the stall, not the gain.

Writes bench/results/rebalance_pause.json. Run: `.venv/bin/python -m bench.rebalance_pause`
(after `webgym up`).
"""

from __future__ import annotations

import argparse
import statistics
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from analytics.stats import percentile
from commands.children import WORKER_CLI, faust_argv
from commands.local_run import LocalLoop, RunFollower, RunOptions, send_target
from infra.log_reader import read_topic
from infra.producer import now_ms
from infra.provenance import write_result
from infra.settings import Settings
from infra.topic_admin import create_topics, delete_topics
from streams.targets import send_stop

RESULTS = Path(__file__).parent / "results" / "rebalance_pause.json"
WINDOW_MS = 40_000  # after a join: the newcomer starts, joins, and the group settles
BEFORE_MS = 20_000  # before it: the loop at its pace (the start is longer ago)


def _gaps(timestamps: list[int], start: int, end: int) -> float:
    inside = sorted(t for t in timestamps if start <= t < end)
    return max((b - a for a, b in zip(inside, inside[1:], strict=False)), default=float("nan"))


def _rate(timestamps: list[int], start: int, end: int) -> float:
    inside = [t for t in timestamps if start <= t < end]
    return len(inside) * 1000 / (end - start) if end > start else float("nan")


def _one_run(settings: Settings, episodes: int, repetition: int) -> dict[str, Any]:
    options = RunOptions(
        episodes=episodes,
        in_flight=8,
        sites=5,
        error_rate=0.0,
        run_id=f"rebal{repetition}{uuid.uuid4().hex[:4]}",
        stall_timeout_s=300,
    )
    joins: dict[str, int] = {}
    with LocalLoop(settings, options, print, start_stack=False) as loop:
        follower = RunFollower(loop.settings, loop.run_id, now_ms() - 1000)
        loop.on_exit(follower.close)
        loop.on_exit(lambda: send_stop(loop.settings, loop.run_id))
        send_target(loop.settings, loop.run_id, options.in_flight, options, episodes)
        for summary in follower.until_done(episodes, 300, f"logs in {loop.log_dir}"):
            if summary.ended >= episodes // 4 and "faust" not in joins:
                joins["faust"] = now_ms()
                print(f"{summary.ended} ended: a second faust worker joins")
                loop.start_child("stream processors 2", faust_argv(), log_name="streams-2")
            if summary.ended >= episodes // 2 and "browser" not in joins:
                joins["browser"] = now_ms()
                print(f"{summary.ended} ended: a second browser worker joins")
                loop.start_child("browser worker 2", [*WORKER_CLI, "browser"])
            if summary.ended >= 3 * episodes // 4 and "browser 3" not in joins:
                joins["browser 3"] = now_ms()
                print(f"{summary.ended} ended: a third browser worker joins")
                loop.start_child("browser worker 3", [*WORKER_CLI, "browser"])
            loop.check()
        terminations = dict(follower.summary.terminations)
        wall_s = follower.summary.wall_s
    ops = [
        e.timestamp_ms
        for suffix in ("ops.navigate", "ops.act", "ops.infer")
        for e in read_topic(settings, suffix)
        if e.timestamp_ms and e.record.get("episode_id", "").startswith(options.run_id)
    ]
    mine = [
        e
        for e in read_topic(settings, "observations")
        if e.timestamp_ms and e.record.get("episode_id", "").startswith(options.run_id)
    ]
    observations = [e.timestamp_ms for e in mine]
    pauses = [
        e.record["timings_ms"]["migration_pause"]
        for e in mine
        if "migration_pause" in (e.record.get("timings_ms") or {})
    ]
    aborted = Counter(
        e.record["reason"]
        for e in read_topic(settings, "episodes")
        if e.record.get("kind") == "aborted" and e.record["episode_id"].startswith(options.run_id)
    )
    streams = {"faust": ops, "browser": observations}
    rows = {}
    for group in ("faust", "browser"):
        at = joins[group]
        rows[group] = {
            "longest_gap_before_ms": _gaps(streams[group], at - BEFORE_MS, at),
            "longest_gap_after_ms": _gaps(streams[group], at, at + WINDOW_MS),
        }
    # Observations per second with 1, 2 and 3 browser workers (from each join to the next).
    edges = [min(observations), joins["browser"], joins["browser 3"], max(observations) + 1]
    per_s = {
        f"{n}_browser_workers": _rate(observations, start, end)
        for n, (start, end) in enumerate(zip(edges, edges[1:], strict=False), 1)
    }
    return {
        "joins": rows,
        "terminations": terminations,
        "aborted_reasons": dict(aborted),
        "migrations": {
            "count": len(pauses),
            "pause_ms": {"p50": percentile(pauses, 50), "p99": percentile(pauses, 99)},
        },
        "observations_per_s": per_s,
        "wall_s": wall_s,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=64, help="episodes per run")
    parser.add_argument("--repeat", type=int, default=2, help="runs")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    base = Settings()
    runs = []
    for repetition in range(args.repeat):
        prefix = f"bench-rebal-{uuid.uuid4().hex[:8]}"
        settings = base.model_copy(
            update={
                "topic_prefix": prefix,
                "default_partitions": 8,
                "practice_web_address": "127.0.0.1:0",
            }
        )
        create_topics(settings)
        try:
            runs.append(_one_run(settings, args.episodes, repetition))
        finally:
            delete_topics(settings, internal=True)
        print(runs[-1])

    def median(group: str, key: str) -> float:
        return statistics.median(run["joins"][group][key] for run in runs)

    def spread(group: str, key: str) -> list[float]:
        values = [run["joins"][group][key] for run in runs]
        return [min(values), max(values)]

    summary: dict[str, Any] = {
        group: {
            key: {"median": median(group, key), "range": spread(group, key)}
            for key in ("longest_gap_before_ms", "longest_gap_after_ms")
        }
        for group in ("faust", "browser")
    }
    summary["aborted"] = [sum(run["aborted_reasons"].values()) for run in runs]
    summary["migrations"] = [run["migrations"] for run in runs]
    summary["observations_per_s"] = {
        phase: statistics.median(run["observations_per_s"][phase] for run in runs)
        for phase in runs[0]["observations_per_s"]
    }
    result = {
        "group_protocol": base.group_protocol,  # WEBGYM_GROUP_PROTOCOL of the workers
        "episodes": args.episodes,
        "in_flight": 8,
        "repeats": args.repeat,
        "window_ms": {"before": BEFORE_MS, "after": WINDOW_MS},
        "summary": summary,
        "runs": runs,
    }
    write_result(args.out, result)
    print(summary)
    return result


if __name__ == "__main__":
    main()
