"""Benchmark: Kafka's added time per hop with Chromium at a lower CPU priority, same run.

With browsers saturating both cores, a woken broker or client thread waits behind renderers: the
hop's p99 under load is ten to twenty times its unloaded figure. ``WEBGYM_BROWSER_NICE`` starts
every Chromium process under ``nice`` (:func:`infra.chromium.launcher`), as an operator would
give browsers a lower CPU weight. This runs rounds of the rollout benchmark
(:func:`bench.rollout.one_round`: the asynchronous, synchronous and instant-policy pipeline, the
bare Playwright loop, the unloaded Kafka run), the nicenesses alternating round by round, and
keeps for each niceness the median of its rounds: hop p50/p99 (loaded and unloaded), throughput,
the ratios to the ideal and to the bare loop, and the pipeline's and Chromium's CPU per step.

Writes bench/results/browser_nice.json. Run after `webgym up`:
`.venv/bin/python -m bench.browser_nice` (about 7 minutes a round with the defaults).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.rollout import Progress, one_round, spread
from infra.provenance import provenance as provenance_now
from infra.provenance import write_result
from infra.settings import Settings

RESULTS = Path(__file__).parent / "results" / "browser_nice.json"


def figures(one: dict[str, Any]) -> dict[str, float | None]:
    """The figures this benchmark compares, from one round of the rollout benchmark."""

    def hop(phase: dict[str, Any], q: str) -> float | None:
        return (phase.get("kafka_added_ms") or {}).get("all", {}).get(q)

    return {
        "async_steps_per_s": one["async"]["steps_per_s"],
        "instant_steps_per_s": one["instant"]["steps_per_s"],
        "bare_steps_per_s": one["bare"]["steps_per_s"],
        "async_of_ideal": one["ratios"]["async_of_ideal"],
        "instant_of_bare": one["ratios"]["instant_of_bare"],
        "hop_p50_ms_async": hop(one["async"], "p50"),
        "hop_p99_ms_async": hop(one["async"], "p99"),
        "hop_p50_ms_instant": hop(one["instant"], "p50"),
        "hop_p99_ms_instant": hop(one["instant"], "p99"),
        "hop_p50_ms_unloaded": one["kafka_unloaded"]["all"]["p50"],
        "hop_p99_ms_unloaded": one["kafka_unloaded"]["all"]["p99"],
        "pipeline_cpu_s_per_step_async": one["async"]["profile"]["pipeline_cpu_s_per_step"],
        "chromium_cpu_s_per_step_async": one["async"]["profile"]["chromium_cpu_s_per_step"],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nice", default="0,10", help="Chromium nicenesses, comma-separated")
    parser.add_argument("--repeat", type=int, default=2, help="rounds per niceness")
    parser.add_argument("--episodes", type=int, default=48, help="episodes per async phase")
    parser.add_argument("--sync-batches", type=int, default=1)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--unloaded-seconds", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    levels = [int(n) for n in args.nice.split(",") if n.strip()]
    if not levels or any(not 0 <= n <= 19 for n in levels):
        parser.error(f"--nice {args.nice!r}: nicenesses 0 to 19, comma-separated, e.g. 0,10")
    rollout_args = argparse.Namespace(
        episodes=args.episodes,
        sync_batches=args.sync_batches,
        in_flight=args.in_flight,
        median=1.5,
        sigma=0.7,
        partitions=8,
        sites=10,
        seed=args.seed,
        unloaded_seconds=args.unloaded_seconds,
    )
    began = provenance_now()
    progress = Progress(args.repeat * len(levels) * Progress.PHASES_PER_ROUND)
    by_level: dict[int, list[dict[str, float | None]]] = {n: [] for n in levels}
    for r in range(args.repeat):
        for level in levels:
            progress.round = f"round {r + 1}/{args.repeat}, browser nice {level}"
            one = one_round(Settings(browser_nice=level), rollout_args, progress)
            by_level[level].append(figures(one))
    result = {
        "benchmark": "browser_nice",
        "workload": {**vars(rollout_args)},
        "repeats": args.repeat,
        "summary": "per Chromium niceness: each figure's median, least and greatest over its "
        "rounds, and every round's value; the nicenesses alternate round by round on one "
        "machine",
        "by_nice": {
            str(n): spread(rounds, tuple((k,) for k in rounds[0])) for n, rounds in by_level.items()
        },
        "rounds": {str(n): rounds for n, rounds in by_level.items()},
    }
    result = write_result(args.out, result, produced_by=began)
    print(json.dumps(result["by_nice"], indent=2))
    return result


if __name__ == "__main__":
    main()
