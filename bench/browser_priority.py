"""Benchmark: Kafka's added time per hop with Chromium at a lower CPU priority, same run.

With browsers saturating both cores, a woken broker or client thread waits behind renderers: the
hop's p99 under load is ten to twenty times its unloaded figure. An operator has two ways to give
the browsers less: ``WEBGYM_BROWSER_NICE`` starts every Chromium process under ``nice``, and
``WEBGYM_BROWSER_CPU_WEIGHT`` puts them all in one cgroup of that CPU weight
(:func:`infra.chromium.launcher`, :mod:`infra.cpu_group`). This runs rounds of the rollout
benchmark (:func:`bench.rollout.one_round`: the asynchronous, synchronous and instant-policy
pipeline, the bare Playwright loop, the unloaded Kafka run), the configurations alternating
in an order rotated each round, and keeps for each the median of its rounds: hop p50/p99
(loaded and unloaded), throughput, the ratios to the ideal and to the bare loop, and the
pipeline's and Chromium's CPU per step.

Writes bench/results/browser_priority.json. Run after `webgym up` (as root for the weights):
`.venv/bin/python -m bench.browser_priority` (about 7 minutes a round with the defaults).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.compare import add_workload_options, compare, workload_of
from commands.children import stop_cleanly_on_sigterm
from infra.cpu_group import CpuGroupUnavailable, browsers_group
from infra.settings import Settings

RESULTS = Path(__file__).parent / "results" / "browser_priority.json"


def configurations(nice: str, weights: str) -> dict[str, Settings]:
    """Each niceness (no group), then each cgroup weight (niceness 0), by name: ``nice 10``,
    ``cpu.weight 50``. Raises ValueError naming a value out of range."""
    configs: dict[str, Settings] = {}
    for text in (n for n in nice.split(",") if n.strip()):
        if not 0 <= int(text) <= 19:
            raise ValueError(f"--nice: {text} is not a niceness 0 to 19")
        configs[f"nice {int(text)}"] = Settings(browser_nice=int(text), browser_cpu_weight=0)
    for text in (w for w in weights.split(",") if w.strip()):
        if not 1 <= int(text) <= 10000:
            raise ValueError(f"--weights: {text} is not a cgroup CPU weight 1 to 10000")
        configs[f"cpu.weight {int(text)}"] = Settings(browser_cpu_weight=int(text))
    return configs


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nice", default="0,10", help="Chromium nicenesses, comma-separated")
    parser.add_argument(
        "--weights", default="50", help="cgroup CPU weights of all browsers, comma-separated"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    add_workload_options(parser)
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
    stop_cleanly_on_sigterm()  # a killed run deletes its phase's topics, as Ctrl-C does
    summary = (
        "per browser configuration (a niceness, or one cgroup of that CPU weight for all "
        "browsers): each figure's median, least and greatest over its rounds, and every round's "
        "value; the configurations alternate on one machine, their order rotating each round "
        "(`orders`)"
    )
    return compare("browser_priority", configs, workload_of(args), args.repeat, args.out, summary)


if __name__ == "__main__":
    main()
