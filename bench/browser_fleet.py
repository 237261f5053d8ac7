"""Benchmark: screenshot+click cycles through Kafka against a bare Playwright loop, same run.

Both sides drive 8 practice-web sites (one page each, 1280x768, JPEG quality as configured) with
the same click at a point that starts no navigation, then a screenshot:

- bare: one Chromium, 8 contexts, an asyncio loop per page doing click + screenshot;
- pipeline: a real `webgym worker browser` process, 8 concurrent episodes driven by operation
  events on Kafka: each episode sends its next act operation when its observation arrives.

Reports cycles per second for both, their ratio, and latency percentiles per operation (end to
end as the driver sees it, and the worker's own timings). Needs the local stack (`webgym up`).
Writes bench/results/browser_fleet.json. Run: `.venv/bin/python -m bench.browser_fleet`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

from playwright.async_api import async_playwright
from rich.console import Console

from bench.fleet import WorkerProcess, worker_env
from infra.chromium import launch_options
from infra.consumer import EventConsumer, build_consumer
from infra.dead_letters import DeadLetterRouter
from infra.producer import EventProducer, now_ms
from infra.provenance import write_result
from infra.settings import Settings
from infra.topic_admin import create_topics, delete_topics
from sites import generate_sites
from sites.server import PracticeWebServer

RESULTS = Path(__file__).parent / "results" / "browser_fleet.json"
VIEWPORT = {"width": 1280, "height": 768}
console = Console()

# Finds a point whose element (and its ancestors) reacts to no click: clicking it stays put.
INERT_POINT = """
() => {
  const active = (el) =>
    el.closest('a,button,input,select,textarea,label,summary,[onclick],[role]');
  for (let y = 0.35; y < 0.95; y += 0.05) for (let x = 0.05; x < 0.95; x += 0.05) {
    const el = document.elementFromPoint(x * innerWidth, y * innerHeight);
    if (el && !active(el)) return [Math.round(x * 1000), Math.round(y * 1000)];
  }
  return [5, 995];
}
"""


def percentiles(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {}
    ordered = sorted(samples)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {"p50": at(0.50), "p95": at(0.95), "p99": at(0.99), "n": len(ordered)}


async def inert_points(settings: Settings, rules: str, urls: list[str]) -> list[tuple[int, int]]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            **launch_options(settings, [f"--host-resolver-rules={rules}"])
        )
        page = await browser.new_page(viewport=VIEWPORT)
        points = []
        for url in urls:
            await page.goto(url, wait_until="load")
            points.append(tuple(await page.evaluate(INERT_POINT)))
        await browser.close()
        return points


async def bare_loop(
    settings: Settings, rules: str, urls: list[str], points: list, seconds: float, warmup: float
) -> dict[str, Any]:
    latencies: list[float] = []
    cycles = 0
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            **launch_options(settings, [f"--host-resolver-rules={rules}"])
        )
        pages = []
        for url in urls:
            context = await browser.new_context(viewport=VIEWPORT)
            page = await context.new_page()
            await page.goto(url, wait_until="load")
            pages.append(page)
        start = time.monotonic()
        measure_from, stop_at = start + warmup, start + warmup + seconds

        async def drive(page, point) -> None:
            nonlocal cycles
            x = point[0] / 1000 * (VIEWPORT["width"] - 1)
            y = point[1] / 1000 * (VIEWPORT["height"] - 1)
            while time.monotonic() < stop_at:
                began = time.monotonic()
                await page.mouse.click(x, y)
                await page.screenshot(type="jpeg", quality=settings.browser_jpeg_quality)
                if began >= measure_from:
                    cycles += 1
                    latencies.append((time.monotonic() - began) * 1000)

        await asyncio.gather(*(drive(p, pt) for p, pt in zip(pages, points, strict=True)))
        await browser.close()
    return {"cycles": cycles, "cycle_ms": latencies}


def pipeline_loop(
    settings: Settings, port: int, urls: list[str], points: list, seconds: float, warmup: float
) -> dict[str, Any]:
    settings = settings.model_copy(
        update={"topic_prefix": f"bench-{uuid.uuid4().hex[:8]}", "default_partitions": 8}
    )
    create_topics(settings)
    log_dir = settings.state_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    worker = WorkerProcess.start(
        worker_env(settings, port),
        log_dir,
        f"bench-browser-{uuid.uuid4().hex[:6]}",
        "--concurrency",
        "8",
        "--navigate-concurrency",
        "8",
    )
    producer = EventProducer.connect(settings, client_id="bench-driver", **{"linger.ms": 0})
    consumer = EventConsumer(
        build_consumer(settings, group_id=f"bench-{uuid.uuid4().hex[:8]}", client_id="bench"),
        DeadLetterRouter(settings, producer),
    )
    consumer.subscribe([settings.topic("observations")])
    episodes = [f"bench-{i}-{uuid.uuid4().hex[:6]}" for i in range(len(urls))]
    sent: dict[tuple[str, int], float] = {}
    step_of = {episode: 0 for episode in episodes}
    point_of = dict(zip(episodes, points, strict=True))
    url_of = dict(zip(episodes, urls, strict=True))
    latency: dict[str, list[float]] = {"navigate": [], "act": []}
    worker_timings: dict[str, list[float]] = {}
    failures = []  # failure observations: the browser could not serve an episode

    def send(episode: str, step: int, url: str | None = None) -> None:
        record = {
            "event_id": f"{episode}:{step}:op",
            "episode_id": episode,
            "step": step,
            "ts": now_ms(),
        }
        if url is not None:
            topic, kind = settings.topic("ops.navigate"), "navigate_op"
            record.update(url=url, timeout_ms=30_000, task_id="bench")
        else:
            x, y = point_of[episode]
            topic, kind = settings.topic("ops.act"), "act_op"
            record.update(
                action={"kind": "left_click", "x": x, "y": y},
                inference_event_id=f"{episode}:{step}:inference",
            )
        sent[(episode, step)] = time.monotonic()
        producer.produce(topic, episode, kind, record)
        producer.poll(0)

    try:
        for episode, url in zip(episodes, urls, strict=True):
            send(episode, 0, url)
        producer.flush()
        # Phase 1 measures click cycles; phase 2 (a third as long) measures navigations.
        measure_from = stop_at = navigate_until = None
        kind_sent: dict[tuple[str, int], str] = {}
        cycles = 0
        while navigate_until is None or time.monotonic() < navigate_until:
            event = consumer.poll(0.2)
            if event is None:
                continue
            record = event.record
            if record["failure"] is not None:  # no screenshot, and the episode cannot go on
                if record["episode_id"] in step_of:
                    failures.append(record)
                continue
            episode, step = record["episode_id"], record["step"]
            if episode not in step_of or step != step_of[episode]:
                continue
            now = time.monotonic()
            kind = kind_sent.get((episode, step), "navigate")
            if measure_from is None and all(s > 0 for s in step_of.values()):
                measure_from = now + warmup
                stop_at = measure_from + seconds
                navigate_until = stop_at + seconds / 3
            if measure_from is not None and now >= measure_from:
                latency[kind].append((now - sent[(episode, step)]) * 1000)
                for name, value in record["timings_ms"].items():
                    worker_timings.setdefault(f"{kind}.{name}", []).append(value)
                if kind == "act" and now < stop_at:
                    cycles += 1
            step_of[episode] = step + 1
            navigating = stop_at is not None and now >= stop_at
            kind_sent[(episode, step + 1)] = "navigate" if navigating else "act"
            send(episode, step + 1, url_of[episode] if navigating else None)
    finally:
        worker.stop()
        consumer.close()
        delete_topics(settings)
    return {
        "cycles": cycles,
        "latency_ms": latency,
        "worker_timings_ms": worker_timings,
        "failures": len(failures),
    }


def _merge(runs: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """Sum the rounds of one side: cycles per second overall, percentiles of all samples."""
    merged: dict[str, Any] = {"cycles": sum(run["cycles"] for run in runs)}
    merged["cycles_per_s"] = round(merged["cycles"] / (seconds * len(runs)), 2)
    merged["cycles_per_s_by_round"] = [round(run["cycles"] / seconds, 2) for run in runs]
    for key, value in runs[0].items():
        if isinstance(value, list):
            merged[key] = percentiles([x for run in runs for x in run[key]])
        elif isinstance(value, dict):
            names = {name for run in runs for name in run[key]}
            merged[key] = {
                name: percentiles([x for run in runs for x in run[key].get(name, [])])
                for name in sorted(names)
            }
        elif key != "cycles":
            merged[key] = sum(run[key] for run in runs)
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="measured seconds per side")
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds first")
    parser.add_argument("--pages", type=int, default=8, help="concurrent pages / episodes")
    parser.add_argument(
        "--rounds", type=int, default=3, help="bare/pipeline rounds, alternated against drift"
    )
    args = parser.parse_args()
    settings = Settings()
    sites = generate_sites(seed=0, count=args.pages)
    bare_runs, pipeline_runs = [], []
    with PracticeWebServer(sites) as server:
        urls = [server.base_url(site) for site in sites]
        rules = server.host_resolver_rules
        points = asyncio.run(inert_points(settings, rules, urls))
        for round_number in range(1, args.rounds + 1):
            with console.status(f"round {round_number}: bare Playwright, {args.pages} pages"):
                bare_runs.append(
                    asyncio.run(bare_loop(settings, rules, urls, points, args.seconds, args.warmup))
                )
            with console.status(f"round {round_number}: Kafka pipeline, {args.pages} episodes"):
                pipeline_runs.append(
                    pipeline_loop(settings, server.port, urls, points, args.seconds, args.warmup)
                )
    bare, pipeline = _merge(bare_runs, args.seconds), _merge(pipeline_runs, args.seconds)
    result = {
        "benchmark": "screenshot+click cycles: Kafka pipeline vs bare Playwright (same run)",
        "pages": args.pages,
        "seconds_per_side_per_round": args.seconds,
        "rounds": args.rounds,
        "viewport": VIEWPORT,
        "jpeg_quality": settings.browser_jpeg_quality,
        "bare": bare,
        "pipeline": pipeline,
        "ratio": round(pipeline["cycles_per_s"] / bare["cycles_per_s"], 3),
        "ratio_by_round": [
            round(p / b, 3)
            for p, b in zip(
                pipeline["cycles_per_s_by_round"], bare["cycles_per_s_by_round"], strict=True
            )
        ],
    }
    write_result(RESULTS, result)
    console.print_json(json.dumps(result))


if __name__ == "__main__":
    main()
