"""Benchmark: the browser worker's session against a bare Playwright loop, and against itself at
another revision, with no Kafka at all.

`webgym bench rollout`'s ``bare`` and ``bare_session`` phases, alone: the same pages, actions
and screenshots (:func:`bench.rollout.bare_loop`, an instant latency-model policy) driven

- ``bare``: by plain Playwright calls;
- ``session``: by :class:`~agents.browser.session.EpisodeSession` of this checkout (its URL
  guard on every request, page signals, settling);
- ``session_against``: by the same class at ``--against`` (a temporary git worktree of that
  revision, removed after), so a change to the session is measured against what it replaced.

Each variant runs in a fresh Python process whose ``PYTHONPATH`` is its checkout (with
``PYTHONSAFEPATH``, so nothing else shadows it; the process reports the file it imported the
session from), round after round, the order rotating each round so each variant runs first in
turn (:func:`bench.rounds.rotated`). Per variant: steps/s, and CPU seconds per step of
Chromium, Playwright's driver and the loop's own Python process, from the run's process
profile; per round, each session variant's steps/s over that round's bare loop (``of_bare``).
Figures outside ``rounds`` are the medians over the rounds, with their least and greatest
values.

Writes bench/results/session_loop.json. Run: ``python -m bench.session_loop --against REV``
(after ``webgym up``; the stack is not used, but its Chromium settings are).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.rounds import rotated
from infra.provenance import CHECKOUT, write_result
from infra.provenance import provenance as provenance_now

RESULTS = Path(__file__).parent / "results" / "session_loop.json"
VARIANTS = ("bare", "session", "session_against")
MARK = "SESSION-LOOP-RESULT "  # the child's result line on stdout


def episodes_of(seed: int, count: int, sites: int) -> list[Any]:
    """The episodes every variant runs: one per task in turn, keyed by seed and number."""
    from bench.rollout_sim import SimEpisode
    from sites import generate_sites
    from sites.tasks import generate_tasks

    tasks = generate_tasks(generate_sites(seed=seed, count=sites), seed=seed)
    return [
        SimEpisode(f"loop-{seed}-{n}", tasks[n % len(tasks)]["difficulty"]) for n in range(count)
    ]


def one(args: argparse.Namespace) -> dict[str, Any]:
    """Run one variant in this process (``bare``, or ``session`` of whatever checkout this
    process imports from) and return its figures."""
    import agents.browser.session as session_module
    from bench.rollout import bare_loop
    from infra.settings import Settings

    loop_args = argparse.Namespace(
        seed=args.seed, sites=args.sites, in_flight=args.in_flight, sigma=args.sigma
    )
    episodes = episodes_of(args.seed, args.episodes, args.sites)
    result = asyncio.run(bare_loop(Settings(), loop_args, episodes, session=args.one != "bare"))
    roles = result["profile"]["by_role"]

    def per_step(role: str) -> float | None:
        return roles[role]["cpu_s_per_step"] if role in roles else None

    return {
        "steps": result["steps"],
        "wall_s": result["wall_s"],
        "steps_per_s": result["steps_per_s"],
        "chromium_cpu_s_per_step": result["profile"]["chromium_cpu_s_per_step"],
        "driver_cpu_s_per_step": per_step("playwright driver"),
        "python_cpu_s_per_step": per_step("bench"),
        "op_ms": result["op_ms"],
        "session_from": session_module.__file__,
    }


@contextlib.contextmanager
def worktree(revision: str) -> Iterator[tuple[Path, str]]:
    """A temporary checkout of ``revision`` and its full commit id; removed on exit."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{revision}^{{commit}}"],
        cwd=CHECKOUT, capture_output=True, text=True,
    )  # fmt: skip
    if commit.returncode != 0:
        raise SystemExit(f"--against {revision!r} is not a commit here: {commit.stderr.strip()}")
    path = Path(tempfile.mkdtemp(prefix="webgym-against-")) / "checkout"
    subprocess.run(
        ["git", "worktree", "add", "--detach", "--quiet", str(path), commit.stdout.strip()],
        cwd=CHECKOUT, check=True,
    )  # fmt: skip
    try:
        yield path, commit.stdout.strip()
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(path)], cwd=CHECKOUT, check=False
        )
        with contextlib.suppress(OSError):
            path.parent.rmdir()


def run_variant(variant: str, checkout: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One variant in a fresh process importing from ``checkout``; its figures."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONSAFEPATH": "1"}
    command = [
        sys.executable, str(Path(__file__).resolve()), "--one", variant.removesuffix("_against"),
        "--episodes", str(args.episodes), "--in-flight", str(args.in_flight),
        "--seed", str(args.seed), "--sites", str(args.sites), "--sigma", str(args.sigma),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARK)]
    if done.returncode != 0 or not lines:
        raise SystemExit(
            f"the {variant} loop failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
        )
    return json.loads(lines[-1].removeprefix(MARK))


FIGURES = (
    "steps_per_s",
    "chromium_cpu_s_per_step",
    "driver_cpu_s_per_step",
    "python_cpu_s_per_step",
)


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per variant, each figure's median over the rounds with its least and greatest values
    (:func:`bench.rollout.spread`); for the session variants also ``of_bare``, their steps/s
    over the same round's bare loop."""
    from bench.rollout import spread  # here, not above: a child imports the other checkout's

    out: dict[str, Any] = {}
    for variant in VARIANTS:
        ran = [
            {
                **r[variant],
                "of_bare": round(r[variant]["steps_per_s"] / r["bare"]["steps_per_s"], 3),
            }
            for r in rounds
            if variant in r
        ]
        names = FIGURES if variant == "bare" else (*FIGURES, "of_bare")
        if ran:
            out[variant] = spread(ran, tuple((name,) for name in names))
    return out


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--against", help="the revision whose session to compare with (default: none)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="rounds of every variant")
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0, help="workload and practice-web seed")
    parser.add_argument("--sites", type=int, default=10)
    parser.add_argument("--sigma", type=float, default=0.7, help="the workload's sigma")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the result file")
    parser.add_argument("--one", choices=("bare", "session"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:  # a child: one variant, its figures on stdout
        print(MARK + json.dumps(one(args)), flush=True)
        return None
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    began = provenance_now()
    variants = list(VARIANTS if args.against else VARIANTS[:2])
    rounds: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        checkouts = {"bare": CHECKOUT, "session": CHECKOUT}
        against = None
        if args.against:
            checkouts["session_against"], against = stack.enter_context(worktree(args.against))
        total = args.repeat * len(variants)
        for n in range(args.repeat):
            order = rotated(variants, n)
            this: dict[str, Any] = {"order": order}
            for variant in order:
                done = n * len(variants) + len(this) - 1
                print(f"[{done + 1}/{total}] round {n + 1}: {variant}", file=sys.stderr, flush=True)
                started = time.monotonic()
                this[variant] = run_variant(variant, checkouts[variant], args)
                print(
                    f"    {this[variant]['steps_per_s']} steps/s "
                    f"({time.monotonic() - started:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
            rounds.append(this)
    result = write_result(
        args.out,
        {
            "benchmark": "session_loop",
            "against": against,
            "episodes": args.episodes,
            "in_flight": args.in_flight,
            "seed": args.seed,
            "repeats": args.repeat,
            "summary": summary(rounds),
            "rounds": rounds,
        },
        produced_by=began,
    )
    print(json.dumps(result["summary"], indent=2))
    return result


if __name__ == "__main__":
    main()
