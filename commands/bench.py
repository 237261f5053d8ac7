"""``webgym bench``: benchmarks, run from a source checkout; results in ``bench/results/``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from commands.errors import user_errors
from infra.settings import SettingsError

bench_app = typer.Typer(help="Benchmarks; results in bench/results/.", no_args_is_help=True)


@bench_app.command("rollout")
@user_errors
def bench_rollout(
    episodes: Annotated[int, typer.Option(min=1, help="episodes of each asynchronous phase")] = 96,
    sync_batches: Annotated[int, typer.Option(min=1, help="synchronous batches to run")] = 2,
    in_flight: Annotated[int, typer.Option(min=1, help="episodes in flight (= batch size)")] = 32,
    median: Annotated[float, typer.Option(min=0.0, help="inference time median, seconds")] = 1.5,
    sigma: Annotated[float, typer.Option(min=0.0, help="inference time lognormal sigma")] = 0.7,
    partitions: Annotated[int, typer.Option(min=1, help="partitions of the episode topics")] = 8,
    sites: Annotated[int, typer.Option(min=1, help="practice-web sites")] = 10,
    seeds: Annotated[
        str, typer.Option(help="workload and practice-web seeds, comma-separated, e.g. 0,7")
    ] = "0,7",
    seed: Annotated[int | None, typer.Option(help="one seed only (the same as --seeds N)")] = None,
    repeat: Annotated[
        int,
        typer.Option(
            min=0,
            help="rounds per seed; the seeds alternate round by round (0: only --growth and "
            "--scaling, written to bench/results/rollout_growth.json and the like)",
        ),
    ] = 3,
    warmup_episodes: Annotated[
        int,
        typer.Option(
            min=0,
            help="episodes of an instant-policy run before the first round, in no figure "
            "(the broker's JIT warms up); 0: none",
        ),
    ] = 32,
    out: Annotated[
        Path | None, typer.Option(help="write the result here, not bench/results/rollout.json")
    ] = None,
    scaling: Annotated[
        bool,
        typer.Option(
            help="also the instant-policy pipeline over 1/2/4 browser workers "
            "and 8/16/32 partitions (several more minutes)"
        ),
    ] = False,
    growth: Annotated[
        bool,
        typer.Option(
            help="also, once: the asynchronous pipeline at 8/16/32/64 episodes in flight, and "
            "with screenshots inline against stored in MinIO (bytes per step, steps/s, replay "
            "time; about 25 minutes more)"
        ),
    ] = False,
) -> None:
    """Asynchronous against synchronous rollouts through the whole pipeline, in one run.

    Each round runs the latency-model policy (lognormal VLM-like inference time, episodes
    answering at a drawn step within their horizon) with --in-flight episodes asynchronously,
    then in lock-step batches, then with an instant policy, then the same browser work in a bare
    Playwright loop, and sets each against a zero-overhead simulation over the same episodes
    (after one warm-up run, --warmup-episodes, that enters no figure);
    every process of the run is profiled from /proc (CPU seconds per step, memory). It runs
    --repeat rounds for each seed, the seeds alternating, and reports every figure's median over
    the rounds and the headline figures' spread. Writes bench/results/rollout.json and
    rollout.png. Needs the local stack (`webgym up`); a round takes about 15 minutes with the
    defaults, and it prints a line per phase with the time left.
    """
    chosen = str(seed) if seed is not None else seeds
    try:
        numbers = [int(s) for s in chosen.split(",") if s.strip()]
    except ValueError:
        numbers = []
    if not numbers:
        raise typer.BadParameter(
            f"{chosen!r} is not a list of seeds; give whole numbers, e.g. --seeds 0,7",
            param_hint="--seeds",
        )
    argv = [
        "--episodes", str(episodes), "--sync-batches", str(sync_batches),
        "--in-flight", str(in_flight), "--median", str(median), "--sigma", str(sigma),
        "--partitions", str(partitions), "--sites", str(sites),
        "--seeds", ",".join(map(str, numbers)), "--repeat", str(repeat),
        "--warmup-episodes", str(warmup_episodes),
    ]  # fmt: skip
    if out is not None:
        argv += ["--out", str(out.resolve())]
    argv += ["--scaling"] if scaling else []
    _run_from_checkout("bench.rollout", argv + (["--growth"] if growth else []))


def _run_from_checkout(module: str, argv: list[str]) -> None:
    """Run a benchmark module of the source checkout (``bench/`` is not an installed package)."""
    checkout = Path(__file__).resolve().parent.parent
    if not (checkout / "bench" / "__init__.py").is_file():
        raise SettingsError(
            f"webgym bench runs from a source checkout (no bench/ next to {checkout}): "
            "clone the repository and run it from there"
        )
    done = subprocess.run([sys.executable, "-m", module, *argv], cwd=checkout, check=False)
    if done.returncode != 0:
        raise typer.Exit(done.returncode)
