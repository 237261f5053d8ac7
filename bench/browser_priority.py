"""Benchmark: Kafka's added time per hop with Chromium at a lower CPU priority, same run.

With browsers saturating both cores, a woken broker or client thread waits behind renderers: the
hop's p99 under load is ten to twenty times its unloaded figure. An operator has two ways to give
the browsers less: ``WEBGYM_BROWSER_NICE`` starts every Chromium process under ``nice``, and
``WEBGYM_BROWSER_CPU_WEIGHT`` puts them all in one cgroup of that CPU weight
(:func:`infra.chromium.launcher`, :mod:`infra.cpu_group`). This runs rounds of the rollout
benchmark (:func:`bench.rollout.one_round`: the asynchronous, synchronous and instant-policy
pipeline, the bare Playwright loop, the unloaded Kafka run), the configurations alternating
round by round, and keeps for each the median of its rounds: hop p50/p99 (loaded and unloaded),
throughput, the ratios to the ideal and to the bare loop, and the pipeline's and Chromium's CPU
per step.

Writes bench/results/browser_priority.json. Run after `webgym up` (as root for the weights):
`.venv/bin/python -m bench.browser_priority` (about 7 minutes a round with the defaults).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.rollout import Progress, one_round, spread
from infra.cpu_group import CpuGroupUnavailable, browsers_group
from infra.provenance import provenance as provenance_now
from infra.provenance import write_result
from infra.settings import Settings

RESULTS = Path(__file__).parent / "results" / "browser_priority.json"


def configurations(nice: str, weights: str) -> dict[str, Settings]:
    """Each niceness (no group), then each cgroup weight (niceness 0), by name: ``nice 10``,
    ``cpu.weight 50``. Raises ValueError naming a value out of range."""
    configs: dict[str, Settings] = {}
    for text in (n for n in nice.split(",") if n.strip()):
        if not 0 <= int(text) <= 19:
            raise ValueError(f"--nice: {text} is not a niceness 0 to 19")
        configs[f"nice {int(text)}"] = Settings(browser_nice=int(text))
    for text in (w for w in weights.split(",") if w.strip()):
        if not 1 <= int(text) <= 10000:
            raise ValueError(f"--weights: {text} is not a cgroup CPU weight 1 to 10000")
        configs[f"cpu.weight {int(text)}"] = Settings(browser_cpu_weight=int(text))
    return configs


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
    parser.add_argument(
        "--weights", default="50", help="cgroup CPU weights of all browsers, comma-separated"
    )
    parser.add_argument("--repeat", type=int, default=2, help="rounds per configuration")
    parser.add_argument("--episodes", type=int, default=48, help="episodes per async phase")
    parser.add_argument("--sync-batches", type=int, default=1)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--unloaded-seconds", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    try:
        configs = configurations(args.nice, args.weights)
    except ValueError as exc:
        parser.error(f"{exc}, comma-separated, e.g. --nice 0,10 --weights 50")
    if not configs:
        parser.error("nothing to compare: give --nice or --weights")
    for name, settings in configs.items():
        if settings.browser_cpu_weight:
            try:
                browsers_group(settings.browser_cpu_weight)
            except CpuGroupUnavailable as exc:
                parser.error(f"{name}: {exc}")
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
    progress = Progress(args.repeat * len(configs) * Progress.PHASES_PER_ROUND)
    by_config: dict[str, list[dict[str, float | None]]] = {name: [] for name in configs}
    for r in range(args.repeat):
        for name, settings in configs.items():
            progress.round = f"round {r + 1}/{args.repeat}, browsers at {name}"
            one = one_round(settings, rollout_args, progress)
            by_config[name].append(figures(one))
    result = {
        "benchmark": "browser_priority",
        "workload": {**vars(rollout_args)},
        "repeats": args.repeat,
        "summary": "per browser configuration (a niceness, or one cgroup of that CPU weight for "
        "all browsers): each figure's median, least and greatest over its rounds, and every "
        "round's value; the configurations alternate round by round on one machine",
        "by_config": {
            name: spread(rounds, tuple((k,) for k in rounds[0]))
            for name, rounds in by_config.items()
        },
        "rounds": by_config,
    }
    result = write_result(args.out, result, produced_by=began)
    print(json.dumps(result["by_config"], indent=2))
    return result


if __name__ == "__main__":
    main()
