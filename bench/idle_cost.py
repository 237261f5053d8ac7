"""Benchmark: the pipeline's fixed cost, the CPU its processes take with nothing to do.

Two kinds of window, alternating, ``--repeat`` times each, ``--seconds`` long:

- ``stack``: the local stack alone (the Kafka broker and MinIO), no worker running;
- ``workers``: the workers of ``webgym run`` up and idle (a browser worker with its Chromium, a
  policy worker with the latency-model backend, a Faust worker), no episode in flight.

Each window is profiled as the rollout benchmark profiles a phase (:mod:`bench.process_profile`),
so the roles are those of ``rollout.json``. The result gives, per role, the CPU it took as a share
of one core: the median, least and greatest over the windows of its kind. A share ``c`` of a core
is ``c / r`` CPU seconds a step at ``r`` steps a second: what the pipeline pays per step whatever
a step does, and why its CPU per step falls as more episodes run (``growth`` in
``rollout_growth.json``).

Writes bench/results/idle_cost.json. Run after `webgym up`:
``.venv/bin/python -m bench.idle_cost`` (about 6 minutes with the defaults).
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bench.process_profile import NOT_PIPELINE, ProcessProfile
from bench.rollout import Progress, spread
from commands.local_run import LocalLoop, RunOptions
from infra.provenance import provenance, write_result
from infra.settings import Settings
from infra.topic_admin import delete_topics

RESULTS = Path(__file__).parent / "results" / "idle_cost.json"
KINDS = ("stack", "workers")


def shares(profile: dict[str, Any]) -> dict[str, Any]:
    """One window's figures from its profile: each role's CPU as a share of one core, and the
    pipeline's (every role but Chromium's and the measuring's, as ``rollout.json`` counts it)."""
    wall = profile["wall_s"]
    roles = {
        role: round(figures["cpu_s"] / wall, 4) if wall > 0 else 0.0
        for role, figures in profile["by_role"].items()
    }
    pipeline = sum(share for role, share in roles.items() if not role.startswith(NOT_PIPELINE))
    return {
        "wall_s": wall,
        "pipeline_cores": round(pipeline, 4),
        "cores": roles,
    }


def summary(windows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per kind of window: the pipeline's and each role's share of a core, as the median, least
    and greatest over the windows of that kind (a role missing from a window counts 0 there)."""
    out: dict[str, Any] = {}
    for kind in KINDS:
        mine = [w for w in windows if w["kind"] == kind]
        if not mine:
            continue
        roles = sorted({role for w in mine for role in w["cores"]})
        filled = [{**w, "cores": {r: w["cores"].get(r, 0.0) for r in roles}} for w in mine]
        paths = [("pipeline_cores",)] + [("cores", role) for role in roles]
        found = spread(filled, paths)
        out[kind] = {
            "windows": len(mine),
            "pipeline_cores": found["pipeline_cores"],
            "cores": {role: found[f"cores.{role}"] for role in roles},
        }
    return out


def _window(kind: str, base: Settings, seconds: float, settle_s: float) -> dict[str, Any]:
    if kind == "stack":
        profile = ProcessProfile()
        time.sleep(seconds)
        return {"kind": kind, **shares(profile.stop(0))}
    prefix = f"bench-idle-{uuid.uuid4().hex[:8]}"
    settings = base.model_copy(
        update={"topic_prefix": prefix, "practice_web_address": "127.0.0.1:0"}
    )
    options = RunOptions(episodes=0, policy="latency-model", sites=10, run_id=prefix)
    try:
        with LocalLoop(settings, options, start_stack=False):
            time.sleep(settle_s)  # past the workers' start: recovery, first fetches, JIT
            profile = ProcessProfile()
            time.sleep(seconds)
            return {"kind": kind, **shares(profile.stop(0))}
    finally:
        delete_topics(settings, internal=True)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="windows of each kind")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each window")
    parser.add_argument(
        "--settle", type=float, default=15.0, help="seconds between the workers' start and a window"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the result")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.seconds <= 0:
        parser.error("--repeat must be at least 1 and --seconds above 0")
    began = provenance(["bench/idle_cost.py", *(sys.argv[1:] if argv is None else argv)])
    base = Settings()
    progress = Progress(2 * args.repeat)
    windows = []
    for n in range(args.repeat):
        progress.round = f"window {n + 1}/{args.repeat}"
        for kind in KINDS:
            with progress.phase(kind):
                windows.append(_window(kind, base, args.seconds, args.settle))
    result = {
        "benchmark": "idle_cost",
        "repeats": args.repeat,
        "seconds": args.seconds,
        "summary": summary(windows),
        "windows": windows,
    }
    return write_result(args.out, result, produced_by=began)


if __name__ == "__main__":
    written = main()
    for kind, figures in written["summary"].items():
        print(f"{kind}: pipeline {figures['pipeline_cores']['median']:.4f} of a core")
        for role, spread_ in figures["cores"].items():
            print(f"  {role:22s} {spread_['median']:.4f} ({spread_['min']}-{spread_['max']})")
