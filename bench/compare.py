"""Benchmark: rounds of the rollout benchmark under several configurations, same run.

A configuration is a name and the settings it changes (any field of :class:`infra.settings.
Settings`, as ``WEBGYM_<FIELD>`` would set it). Each round of :func:`bench.rollout.one_round`
(the asynchronous, synchronous and instant-policy pipeline, the bare Playwright loop, the unloaded
Kafka run) runs once per configuration, the configurations alternating, their order rotating
round by round (``orders``: each configuration leads a round in turn), so that the machine's
drift falls on all of them alike. For each configuration the result keeps every
round's figures (:func:`figures`) and their median, least and greatest.

    .venv/bin/python -m bench.compare --config "linger 0:streams_linger_ms=0" \\
        --config "linger 2:streams_linger_ms=2" --repeat 3 --out bench/results/streams_linger.json

Run after `webgym up`; about 7 minutes a round with the defaults.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench.rollout import Progress, one_round, spread
from bench.rounds import rotated
from commands.children import stop_cleanly_on_sigterm
from infra.provenance import provenance as provenance_now
from infra.provenance import write_result
from infra.settings import Settings

# The processes of the pipeline whose CPU per step each round reports on its own.
ROLES = ("kafka broker", "faust worker", "browser worker", "policy worker", "playwright driver")


def parse_config(text: str) -> tuple[str, dict[str, str]]:
    """``"name:field=value,field=value"`` -> (name, {field: value}). Raises ValueError naming
    what is wrong: no name, no ``=``, or a field :class:`Settings` does not have."""
    name, sep, assignments = text.partition(":")
    if not sep or not name.strip():
        raise ValueError(f"{text!r} has no name: write NAME:FIELD=VALUE[,FIELD=VALUE]")
    changes: dict[str, str] = {}
    for item in (a for a in assignments.split(",") if a.strip()):
        field, eq, value = item.partition("=")
        field = field.strip().lower()
        if not eq:
            raise ValueError(f"{item!r} in {text!r} is not FIELD=VALUE")
        if field not in Settings.model_fields:
            raise ValueError(f"{field!r} is not a setting (the fields of infra/settings.py)")
        changes[field] = value.strip()
    return name.strip(), changes


def configured(base: Settings, changes: dict[str, str]) -> Settings:
    """``base`` with ``changes`` validated as the environment's values would be."""
    return Settings.model_validate({**base.model_dump(), **changes})


def figures(one: dict[str, Any]) -> dict[str, float | None]:
    """The figures compared, from one round of the rollout benchmark: throughput, ratios, the
    hop's p50/p99 (asynchronous, instant-policy, unloaded), and CPU per step (the pipeline,
    Chromium, and each process of :data:`ROLES`) in the asynchronous phase."""

    def hop(phase: dict[str, Any], q: str) -> float | None:
        return (phase.get("kafka_added_ms") or {}).get("all", {}).get(q)

    profile = one["async"]["profile"]
    by_role = profile.get("by_role", {})
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
        "pipeline_cpu_s_per_step_async": profile["pipeline_cpu_s_per_step"],
        "chromium_cpu_s_per_step_async": profile["chromium_cpu_s_per_step"],
        **{
            f"{role.replace(' ', '_')}_cpu_s_per_step_async": (by_role.get(role) or {}).get(
                "cpu_s_per_step"
            )
            for role in ROLES
        },
    }


PROFILED_PHASES = ("async", "instant", "bare")


def profiles(one: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """Each profiled phase's CPU by role in one round: processes, CPU seconds per step and, of
    its CPU seconds, those used after processes' last samples. Kept per round so that one
    round's outlier can be traced to a process afterwards."""
    kept = ("processes", "cpu_s_per_step", "exited_cpu_s")
    return {
        phase: {
            role: {k: row[k] for k in kept if k in row}
            for role, row in one[phase]["profile"].get("by_role", {}).items()
        }
        for phase in PROFILED_PHASES
        if phase in one and "profile" in one[phase]
    }


def rollout_args(**overrides: Any) -> argparse.Namespace:
    """The rollout benchmark's workload: its defaults for one round, with ``overrides``."""
    defaults = {
        "episodes": 48,
        "sync_batches": 1,
        "in_flight": 32,
        "median": 1.5,
        "sigma": 0.7,
        "partitions": 8,
        "sites": 10,
        "seed": 0,
        "unloaded_seconds": 10.0,
    }
    return argparse.Namespace(**{**defaults, **overrides})


def compare(
    benchmark: str,
    configs: dict[str, Settings],
    workload: argparse.Namespace,
    repeat: int,
    out: Path,
    summary: str,
) -> dict[str, Any]:
    """``repeat`` rounds of each configuration, alternating in an order rotated each round
    (:func:`bench.rounds.rotated`); writes ``out`` with provenance and returns the result
    (``by_config``: each figure's median, least, greatest and rounds; ``orders``: each round's
    order; ``profiles``: each round's CPU by role and phase, :func:`profiles`)."""
    began = provenance_now()
    progress = Progress(repeat * len(configs) * Progress.PHASES_PER_ROUND)
    by_config: dict[str, list[dict[str, float | None]]] = {name: [] for name in configs}
    profiled: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    orders: list[list[str]] = []
    for r in range(repeat):
        orders.append(rotated(list(configs), r))
        for name in orders[-1]:
            progress.round = f"round {r + 1}/{repeat}, {name}"
            one = one_round(configs[name], workload, progress)
            by_config[name].append(figures(one))
            profiled[name].append(profiles(one))
    result = {
        "benchmark": benchmark,
        "workload": {**vars(workload)},
        "repeats": repeat,
        "summary": summary,
        "by_config": {
            name: spread(rounds, tuple((k,) for k in rounds[0]))
            for name, rounds in by_config.items()
        },
        "rounds": by_config,
        "orders": orders,
        "profiles": profiled,
    }
    result = write_result(out, result, produced_by=began)
    print(json.dumps(result["by_config"], indent=2))
    return result


def add_workload_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeat", type=int, default=2, help="rounds per configuration")
    parser.add_argument("--episodes", type=int, default=48, help="episodes per async phase")
    parser.add_argument("--sync-batches", type=int, default=1)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--unloaded-seconds", type=float, default=10.0)


def workload_of(args: argparse.Namespace) -> argparse.Namespace:
    return rollout_args(
        episodes=args.episodes,
        sync_batches=args.sync_batches,
        in_flight=args.in_flight,
        seed=args.seed,
        unloaded_seconds=args.unloaded_seconds,
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME:FIELD=VALUE[,FIELD=VALUE]",
        help="a configuration: its name, then the settings it changes (give two or more)",
    )
    parser.add_argument("--out", type=Path, required=True, help="the result file")
    add_workload_options(parser)
    args = parser.parse_args(argv)
    if len(args.config) < 2:
        parser.error('compare what? give --config twice or more, e.g. --config "a:" '
                     '--config "linger 2:streams_linger_ms=2"')  # fmt: skip
    stop_cleanly_on_sigterm()  # a killed run deletes its phase's topics, as Ctrl-C does
    base = Settings()
    configs: dict[str, Settings] = {}
    for text in args.config:
        try:
            name, changes = parse_config(text)
            configs[name] = configured(base, changes)
        except ValidationError as exc:
            error = exc.errors()[0]
            parser.error(f"--config {text!r}: {error['loc'][0]}: {error['msg']}")
        except ValueError as exc:
            parser.error(f"--config {text!r}: {exc}")
    if len(configs) < len(args.config):
        parser.error("two --config have the same name")
    summary = (
        "per configuration (settings changed from the defaults: "
        + "; ".join(args.config)
        + "): each figure's median, least and greatest over its rounds, and every round's "
        "value; the configurations alternate on one machine, their order rotating each round "
        "(`orders`)"
    )
    return compare("compare", configs, workload_of(args), args.repeat, args.out, summary)


if __name__ == "__main__":
    main()
