"""Benchmark: asynchronous against synchronous rollouts through the whole pipeline, same run.

Each phase is a `webgym run` of the practice web under a fresh topic prefix (deleted after), on
the same machine, with the same workers and the same workload seed:

- ``async``: the latency-model policy (`agents.policy.workload`: lognormal inference time, median
  1.5 s and sigma 0.7; each episode answers at its drawn step, within the horizon 10/20/30 of
  its difficulty), ``--in-flight`` episodes kept running, a finished one replaced at once;
- ``sync``: the same policy in lock-step (``--sync-batch``): batches of ``--in-flight`` episodes
  step together and the next batch starts when the slowest one ends;
- ``instant``: the pipeline with an instant policy (median 0), for the ceiling;
- ``bare``: the same browser work in a bare Playwright loop with no Kafka: ``--in-flight`` pages
  each opening a task's start page and stepping through the same actions as the latency-model
  policy, with a screenshot after each.

The ideal is :mod:`bench.rollout_sim` over the episodes each mode actually ran (same keys,
difficulties, drawn latencies and lengths), with the browser working at the bare loop's rate (one
slot per core, each operation taking cores / the bare loop's steps per second) and nothing else
costing anything; ``inference_only_*`` is the same with free browser operations. Kafka's added
time per hop is measured by a probe consumer that records, for every event of the step topics,
its arrival time minus its producer timestamp.

Before the first round a warm-up run (``--warmup-episodes`` with the instant policy) warms the
stack; its figures are kept under ``warmup`` and enter no median.

Writes bench/results/rollout.json and rollout.png. Run: `webgym bench rollout` (after `webgym up`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from agents.policy.workload import WorkloadSpec, episode_length
from analytics.stats import TOPICS, RunStats
from bench import log_bytes, rollout_growth
from bench.process_profile import ProcessProfile
from bench.rollout_sim import SimEpisode, simulate
from commands.children import stop_cleanly_on_sigterm
from commands.local_run import RunOptions, run_local
from infra.kafka_config import client_config
from infra.leftovers import remove_prefix
from infra.log_reader import TopicReader, read_topic
from infra.minio_store import build_minio
from infra.producer import build_producer
from infra.provenance import provenance as provenance_now
from infra.provenance import write_result
from infra.settings import Settings
from infra.topic_admin import build_admin, create_topics, delete_topics

RESULTS = Path(__file__).parent / "results" / "rollout.json"
PLOT = Path(__file__).parent / "results" / "rollout.png"
PROBED = ("ops.navigate", "ops.act", "ops.infer", "inferences", "observations", "episodes")


class KafkaProbe:
    """Arrival time minus producer timestamp of every event of the step topics, per topic.

    Runs in a process of its own with a plain consumer that decodes nothing (the producer
    timestamp is the record's Kafka CreateTime), so what it measures is the broker and the
    client library, not the bench process's interpreter, which also serves the practice web.
    """

    def __init__(self, settings: Settings):
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._ready = context.Event()
        self._results = context.Queue()
        topics = [settings.topic(suffix) for suffix in PROBED]
        self._process = context.Process(
            target=_probe,
            args=(settings.bootstrap_servers, topics, self._stop, self._ready, self._results),
            daemon=True,
        )
        self._process.start()
        if not self._ready.wait(60):
            raise RuntimeError("the Kafka probe did not start; is the broker up (`webgym up`)?")
        self._prefix = settings.topic("")

    def close(self) -> dict[str, Any]:
        self._stop.set()
        delays_ms: dict[str, list[float]] = self._results.get(timeout=60)
        self._process.join(timeout=10)
        by_suffix = {topic.removeprefix(self._prefix): d for topic, d in delays_ms.items()}
        every = [d for delays in by_suffix.values() for d in delays]
        return {
            "all": _quantiles(every),
            "by_topic": {suffix: _quantiles(d) for suffix, d in by_suffix.items() if d},
        }


def _probe(bootstrap: str, topics: list[str], stop: Any, ready: Any, results: Any) -> None:
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    from infra.consumer import drain

    consumer = Consumer(
        client_config(
            bootstrap,
            {
                "group.id": f"webgym-probe-{uuid.uuid4().hex[:8]}",  # never commits
                "enable.auto.commit": False,
                "socket.nagle.disable": True,
                "max.partition.fetch.bytes": 16 * 1024 * 1024,
            },
        )
    )
    for attempt in range(40):  # new topics: their leaders take a moment to be elected
        try:
            assigned = [
                TopicPartition(topic, partition, OFFSET_END)
                for topic in topics
                for partition in consumer.list_topics(topic, timeout=10).topics[topic].partitions
            ]
            break
        except (KafkaException, KeyError):
            if attempt == 39:
                raise
            time.sleep(0.5)
    consumer.assign(assigned)
    delays: dict[str, list[float]] = {topic: [] for topic in topics}
    ready.set()
    while not stop.is_set():
        for message in drain(consumer, 500, 0.1):  # consume() would wait for 500
            arrived = time.time() * 1000
            if message.error() is None:
                delays[message.topic()].append(arrived - message.timestamp()[1])
    consumer.close()
    results.put(delays)


def _quantiles(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))], 2)

    return {"n": len(ordered), "p50": at(0.50), "p95": at(0.95), "p99": at(0.99)}


def _phase_settings(
    base: Settings, partitions: int, in_flight: int, storage: str = "inline"
) -> Settings:
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    return base.model_copy(
        update={
            "topic_prefix": prefix,
            "screenshot_storage": storage,
            "artifacts_bucket": f"{prefix}-artifacts",  # a stored phase's screenshots, deleted
            "default_partitions": partitions,
            "practice_web_address": "127.0.0.1:0",
            "browser_act_concurrency": in_flight,
            "browser_navigate_concurrency": in_flight,
            "episode_lease_s": 300.0,
            "episode_deadline_s": 3600.0,
        }
    )


def _utilisation(settings: Settings, wall_s: float, in_flight: int) -> dict[str, Any]:
    """Mean number of operations in progress on each side, from request and result timestamps."""
    ts = {}
    for suffix in ("ops.infer", "inferences", "ops.navigate", "ops.act", "observations"):
        ts[suffix] = {
            (e.record["episode_id"], e.record["step"]): e.record["ts"]
            for e in read_topic(settings, suffix)
            if e.event_type
        }
    policy_s = (
        sum(ts["inferences"][k] - t for k, t in ts["ops.infer"].items() if k in ts["inferences"])
        / 1000
    )
    browser_s = 0.0
    for suffix in ("ops.navigate", "ops.act"):
        browser_s += (
            sum(ts["observations"][k] - t for k, t in ts[suffix].items() if k in ts["observations"])
            / 1000
        )
    return {
        "policy_mean_in_progress": round(policy_s / wall_s, 2),
        "browser_mean_in_progress": round(browser_s / wall_s, 2),
        "policy_utilisation": round(policy_s / wall_s / in_flight, 3),
        "browser_utilisation": round(browser_s / wall_s / in_flight, 3),
    }


def kafka_unloaded(base: Settings, steps_per_s: float, seconds: float = 30.0) -> dict[str, Any]:
    """Kafka's added time per hop with the CPU free: the step topics' traffic (a screenshot-sized
    observation and inference request, small operation and inference events) produced at the
    asynchronous phase's step rate with no browser, processor or policy running, through the
    same producer settings and the same probe. ``steps_per_s`` is the rate it reached (steps
    produced over the time taken), ``target_steps_per_s`` the rate it aimed at."""
    settings = _phase_settings(base, base.default_partitions, 1)
    create_topics(settings)
    try:
        producer = build_producer(settings, client_id="bench-unloaded")
        shot, small = os.urandom(110_000), os.urandom(1_000)
        step_topics = (("ops.act", small), ("observations", shot), ("ops.infer", shot))
        sizes = [(settings.topic(suffix), payload) for suffix, payload in step_topics]
        sizes.append((settings.topic("inferences"), small))
        # Warm up as a running loop is: leaders elected, metadata and producer id known.
        for topic, _ in sizes:
            for partition in range(settings.default_partitions):
                producer.produce(topic, small, partition=partition)
        producer.flush(30)
        probe = KafkaProbe(settings)
        time.sleep(1.0)
        gap_s = 1 / (steps_per_s * len(sizes))
        began = time.monotonic()
        ends = began + seconds
        step = 0
        while time.monotonic() < ends:
            key = f"unloaded-{step % 32:06d}".encode()
            for topic, payload in sizes:
                producer.produce(topic, payload, key=key)
                producer.poll(0)
                time.sleep(gap_s)
            step += 1
        producer.flush(30)
        produced_s = time.monotonic() - began
        time.sleep(1.0)
        return {
            "target_steps_per_s": round(steps_per_s, 3),
            "steps_per_s": round(step / produced_s, 3),  # as produced, measured
            "seconds": round(produced_s, 1),
            **probe.close(),
        }
    finally:
        delete_topics(settings, internal=True)  # the Faust app's changelogs too


def run_phase(
    base: Settings,
    label: str,
    args: argparse.Namespace,
    median_s: float,
    sync_batch: int | None = None,
    browser_workers: int = 1,
    partitions: int | None = None,
    episodes: int | None = None,
    in_flight: int | None = None,
    storage: str = "inline",
    replays: int = 0,
) -> dict[str, Any]:
    """One `webgym run` under a fresh prefix, measured; its topics (and with ``storage`` minio,
    its screenshots) are deleted after. ``replays``: time that many episodes' replays first."""
    in_flight = in_flight or args.in_flight
    settings = _phase_settings(base, partitions or args.partitions, in_flight, storage)
    create_topics(settings)
    try:
        policy_args = [
            "--latency-median", str(median_s), "--latency-sigma", str(args.sigma),
            "--workload-seed", str(args.seed), "--sites-count", str(args.sites),
            "--sites-seed", str(args.seed),
        ]  # fmt: skip
        if sync_batch:
            policy_args += ["--sync-batch", str(sync_batch)]
        options = RunOptions(
            episodes=episodes or args.episodes,
            in_flight=in_flight,
            policy="latency-model",
            policy_args=tuple(policy_args),
            sites=args.sites,
            seed=args.seed,
            run_id=f"{label}{uuid.uuid4().hex[:4]}",
            browser_workers=browser_workers,
            sync_batch=sync_batch,
            stall_timeout_s=600.0,
        )
        probe = KafkaProbe(settings)
        profile = ProcessProfile()
        started = time.monotonic()
        run_local(settings, options, start_stack=False)
        elapsed = time.monotonic() - started
        kafka = probe.close()
        stats = RunStats()
        with TopicReader(settings, TOPICS) as reader:
            for batch in reader.batches_to_end():
                stats.apply_all(batch)
        figures = stats.figures()
        wall = figures["window"]["seconds"]
        ran = [
            SimEpisode(e.record["episode_id"], e.record["task_id"].rsplit("-", 1)[-1])
            for e in sorted(read_topic(settings, "episodes"), key=lambda e: e.record["ts"])
            if e.event_type and e.record["kind"] == "started"
        ]
        after: dict[str, Any] = {}
        if replays:
            ended = sorted(e.key for e in ran)[:replays]
            after["replay"] = rollout_growth.replay_time(settings, ended)
            after["stored"] = rollout_growth.stored_bytes(settings)
        return {
            **after,
            "label": label,
            "episodes": figures["episodes"]["ended"],
            "aborted": figures["episodes"]["aborted"],
            "steps": figures["throughput"]["steps"],
            "wall_s": round(wall, 1),
            "command_s": round(elapsed, 1),
            "steps_per_s": round(figures["throughput"]["steps_per_s"], 3),
            "episodes_per_hour": round(figures["throughput"]["episodes_per_hour"], 1),
            "latency_ms": figures["latency_ms"],
            "kafka_added_ms": kafka,
            "utilisation": _utilisation(settings, wall, in_flight),
            "profile": profile.stop(figures["throughput"]["steps"]),
            "log": log_bytes.measure(
                settings, figures["throughput"]["steps"], figures["throughput"]["steps_per_s"]
            ),
            "browser_workers": browser_workers,
            "partitions": settings.default_partitions,
            "in_flight": in_flight,
            "screenshot_storage": storage,
            "_episodes": ran,
        }
    finally:
        # Its topics (the Faust app's changelogs too), its group and (stored) its screenshots.
        remove_prefix(build_admin(settings), build_minio(settings), settings.topic_prefix)


def ideal(
    ran: list[SimEpisode], args: argparse.Namespace, mode: str, env_s: float, slots: int | None
) -> dict:
    spec = WorkloadSpec(seed=args.seed, median_s=args.median, sigma=args.sigma)
    result = simulate(mode, ran, spec, in_flight=args.in_flight, env_step_s=env_s, env_slots=slots)
    return result.figures()


async def bare_loop(
    base: Settings, args: argparse.Namespace, episodes: list[SimEpisode], session: bool = False
) -> dict:
    """The pipeline's browser work without Kafka: the same pages, actions and screenshots.

    Plain Playwright calls by default; with ``session`` the browser worker's own
    :class:`~agents.browser.session.EpisodeSession` (its URL guard on every request, page
    signals and settling), so the pipeline's own cost can be told from the guard's.
    """
    from playwright.async_api import async_playwright

    from agents.browser.session import EpisodeSession
    from agents.browser.url_policy import UrlPolicy
    from agents.policy.backends import ChatRequest
    from agents.policy.backends.latency_model import LatencyModelBackend
    from infra.chromium import launch_options
    from schemas.prompt.reply import parse_reply
    from sites import generate_sites
    from sites.server import PracticeWebServer
    from sites.tasks import generate_tasks

    sites = generate_sites(seed=args.seed, count=args.sites)
    tasks = generate_tasks(sites, seed=args.seed)
    spec = WorkloadSpec(seed=args.seed, median_s=0.0, sigma=args.sigma)
    policy = LatencyModelBackend({t["task_id"]: t for t in tasks}, spec)
    queue = list(enumerate(episodes))
    op_ms: list[float] = []
    steps = 0
    with PracticeWebServer(sites) as server:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(
                **launch_options(base, [f"--host-resolver-rules={server.host_resolver_rules}"])
            )

            async def worker() -> None:
                nonlocal steps
                while queue:
                    n, episode = queue.pop(0)
                    task = tasks[n % len(tasks)]
                    if not task["task_id"].endswith(episode.difficulty):
                        task = next(t for t in tasks if t["difficulty"] == episode.difficulty)
                    viewport = {"width": 1280, "height": 768}
                    began = time.monotonic()
                    if session:
                        guard = UrlPolicy.for_episode(task["start_url"], [task["website"]])
                        held = await EpisodeSession.open(
                            browser, episode.key, guard, viewport, base.browser_jpeg_quality
                        )
                        await held.navigate(task["start_url"], 30_000)
                        await held.observe(False, "jpeg")
                    else:
                        context = await browser.new_context(viewport=viewport)
                        page = await context.new_page()
                        await page.goto(task["start_url"], wait_until="load")
                        await page.screenshot(type="jpeg", quality=base.browser_jpeg_quality)
                    op_ms.append((time.monotonic() - began) * 1000)
                    length = episode_length(spec, episode.key, episode.difficulty)
                    for step in range(1, length + 1):
                        meta = {"task_id": task["task_id"], "episode_id": episode.key, "step": step}
                        reply = parse_reply(policy.generate([ChatRequest([], meta)])[0].text)
                        steps += 1
                        action = getattr(reply, "action", None) or {}
                        if step == length or action.get("kind") == "answer":
                            break
                        began = time.monotonic()
                        if session:
                            await held.act(action, 30_000)
                            await held.observe(False, "jpeg")
                        elif action.get("kind") == "navigate":
                            await page.goto(action["url"], wait_until="load")
                        elif action.get("kind") == "scroll":
                            amount = action.get("amount") or 500
                            down = action.get("direction") == "down"
                            await page.mouse.wheel(0, amount if down else -amount)
                        if not session:
                            await page.screenshot(type="jpeg", quality=base.browser_jpeg_quality)
                        op_ms.append((time.monotonic() - began) * 1000)
                    await (held.close() if session else context.close())

            profile = ProcessProfile()
            started = time.monotonic()
            await asyncio.gather(*(worker() for _ in range(args.in_flight)))
            wall = time.monotonic() - started
            profiled = profile.stop(steps)
            await browser.close()
    return {
        "episodes": len(episodes),
        "steps": steps,
        "wall_s": round(wall, 1),
        "steps_per_s": round(steps / wall, 3),
        "op_ms": _quantiles(op_ms),
        "profile": profiled,
    }


SCALING = ((1, 8), (2, 8), (4, 8), (1, 16), (1, 32))  # (browser workers, partitions)


def scaling(base: Settings, args: argparse.Namespace, progress: Progress) -> list[dict[str, Any]]:
    """The instant-policy pipeline over browser worker processes and partition counts."""
    rows = []
    for workers, partitions in SCALING:
        with progress.phase(f"scaling: {workers} browser workers, {partitions} partitions"):
            phase = run_phase(
                base, f"scale{workers}w{partitions}p", args, 0.0,
                browser_workers=workers, partitions=partitions,
            )  # fmt: skip
        phase.pop("_episodes")
        rows.append(
            {
                "browser_workers": workers,
                "partitions": partitions,
                "steps_per_s": phase["steps_per_s"],
                "episodes_per_hour": phase["episodes_per_hour"],
                "utilisation": phase["utilisation"],
                "kafka_added_ms": phase["kafka_added_ms"]["all"],
                "pipeline_cpu_s_per_step": phase["profile"]["pipeline_cpu_s_per_step"],
                "log_bytes_per_step": phase["log"]["bytes_per_step"],
            }
        )
    return rows


def growth(base: Settings, args: argparse.Namespace, progress: Progress) -> dict[str, Any]:
    """How cost grows (:mod:`bench.rollout_growth`): the asynchronous pipeline at each of
    ``--growth-in-flight``, then at ``--in-flight`` with screenshots inline and stored."""
    rows = []
    for in_flight in args.growth_in_flight:
        with progress.phase(f"growth: {in_flight} in flight"):
            phase = run_phase(
                base, f"grow{in_flight}", args, args.median, in_flight=in_flight,
                episodes=max(args.growth_episodes, 2 * in_flight),
            )  # fmt: skip
        rows.append(rollout_growth.in_flight_row(phase, in_flight))
    storage = []
    for mode in ("inline", "minio"):
        with progress.phase(f"growth: screenshots {mode}"):
            phase = run_phase(
                base, f"shots{mode}", args, args.median, storage=mode,
                replays=args.growth_replays,
            )  # fmt: skip
        objects, object_bytes = phase["stored"]
        storage.append(
            rollout_growth.storage_row(phase, mode, objects, object_bytes, phase["replay"])
        )
    return {
        "seed": args.seed,
        "in_flight": rows,
        "mb_per_episode_in_flight": rollout_growth.memory_per_episode(rows),
        "screenshots": storage,
    }


def plot(result: dict[str, Any]) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 4.5))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    names, values = [], []
    for key, label in (
        ("sync", "sync (measured)"),
        ("ideal_sync", "sync (ideal)"),
        ("async", "async (measured)"),
        ("ideal_async", "async (ideal)"),
        ("instant", "instant policy"),
        ("bare_session", "bare loop, worker's session"),
        ("bare", "bare Playwright"),
    ):
        if key in result:
            names.append(label)
            values.append(result[key]["steps_per_s"])
    axes.barh(names, values, color="#4c78a8")
    for y, value in enumerate(values):
        axes.text(value, y, f" {value:.2f}", va="center")
    axes.set_xlabel("steps per second")
    cores = result["provenance"]["machine"]["cores"]
    axes.set_title(f"rollouts, {result['in_flight']} episodes in flight ({cores} cores)")
    figure.tight_layout()
    figure.savefig(PLOT, dpi=110)


def warm_up(base: Settings, args: argparse.Namespace, progress: Progress) -> dict[str, Any] | None:
    """``args.warmup_episodes`` episodes with the instant policy before the first round, so that
    no round pays for a cold stack: after `webgym up` the broker's JIT compiles through the first
    minutes (its CPU per step was about 1.7 times a warm one's in the first phase of a run). Its
    figures are kept apart, in ``warmup``, and enter no median. None when there are none."""
    if not args.warmup_episodes:
        return None
    progress.round = "warm-up"
    with progress.phase("instant policy"):
        phase = run_phase(base, "warmup", args, 0.0, episodes=args.warmup_episodes)
    return {
        "episodes": phase["episodes"],
        "steps": phase["steps"],
        "steps_per_s": phase["steps_per_s"],
        "pipeline_cpu_s_per_step": phase["profile"]["pipeline_cpu_s_per_step"],
        "broker_cpu_s_per_step": phase["profile"]["by_role"]
        .get("kafka broker", {})
        .get("cpu_s_per_step"),
    }


def one_round(base: Settings, args: argparse.Namespace, progress: Progress) -> dict[str, Any]:
    """Every phase once, for ``args.seed``: the asynchronous, synchronous and instant-policy
    pipeline, the bare loops over the instant phase's episodes, Kafka unloaded, the ideal."""
    result: dict[str, Any] = {"seed": args.seed}
    with progress.phase("async"):
        result["async"] = run_phase(base, "async", args, args.median)
    with progress.phase("sync"):
        result["sync"] = run_phase(
            base, "sync", args, args.median, sync_batch=args.in_flight,
            episodes=args.sync_batches * args.in_flight,
        )  # fmt: skip
    with progress.phase("instant"):
        result["instant"] = run_phase(base, "instant", args, 0.0)
    with progress.phase("bare"):
        result["bare"] = asyncio.run(bare_loop(base, args, result["instant"]["_episodes"]))
    with progress.phase("bare_session"):
        result["bare_session"] = asyncio.run(
            bare_loop(base, args, result["instant"]["_episodes"], session=True)
        )
    with progress.phase("kafka_unloaded"):
        result["kafka_unloaded"] = kafka_unloaded(
            base, result["async"]["steps_per_s"], args.unloaded_seconds
        )
    # The zero-overhead ideal: the browser does its work at the bare loop's rate (one slot per
    # core, each operation taking cores / bare steps per second), nothing else costs anything.
    slots = os.cpu_count() or 1
    env_s = slots / result["bare"]["steps_per_s"]
    result["ideal_model"] = {"env_slots": slots, "env_step_s": round(env_s, 4)}
    for mode in ("async", "sync"):
        ran = result[mode].pop("_episodes")
        result[mode]["episodes_run"] = len(ran)
        result[f"ideal_{mode}"] = ideal(ran, args, mode, env_s, slots)
        result[f"inference_only_{mode}"] = ideal(ran, args, mode, 0.0, None)
    result["instant"].pop("_episodes")

    def ratio(a: float, b: float, digits: int = 3) -> float:
        return round(a / b, digits)

    steps = {key: phase["steps_per_s"] for key, phase in result.items() if isinstance(phase, dict)
             and "steps_per_s" in phase}  # fmt: skip
    result["ratios"] = {
        "async_over_sync": ratio(steps["async"], steps["sync"], 2),
        "ideal_async_over_sync": ratio(steps["ideal_async"], steps["ideal_sync"], 2),
        "inference_only_async_over_sync": ratio(
            steps["inference_only_async"], steps["inference_only_sync"], 2
        ),
        "async_of_ideal": ratio(steps["async"], steps["ideal_async"]),
        "instant_of_bare": ratio(steps["instant"], steps["bare"]),
        "instant_of_bare_session": ratio(steps["instant"], steps["bare_session"]),
    }
    return result


# The figures whose spread over the rounds is reported beside their median.
HEADLINE = (
    ("ratios", "async_of_ideal"),
    ("ratios", "instant_of_bare"),
    ("ratios", "instant_of_bare_session"),
    ("ratios", "async_over_sync"),
    ("async", "steps_per_s"),
    ("instant", "steps_per_s"),
    ("bare", "steps_per_s"),
    ("async", "kafka_added_ms", "all", "p50"),
    ("async", "kafka_added_ms", "all", "p99"),
    ("kafka_unloaded", "all", "p50"),
    ("kafka_unloaded", "all", "p99"),
    ("async", "profile", "pipeline_cpu_s_per_step"),
    ("async", "log", "bytes_per_step"),
    ("instant", "profile", "pipeline_cpu_s_per_step"),
    ("instant", "profile", "chromium_cpu_s_per_step"),
    ("bare", "profile", "chromium_cpu_s_per_step"),
)


def median_tree(trees: list[Any]) -> Any:
    """The rounds folded into one: every number the median of that number over the rounds
    (where every round has it), dicts folded key by key, anything else the first round's."""
    first = trees[0]
    if isinstance(first, dict):
        keys = [k for k in first if all(isinstance(t, dict) and k in t for t in trees)]
        return {k: median_tree([t[k] for t in trees]) for k in keys}
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        if all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in trees):
            middle = statistics.median(trees)
            return round(middle, 4) if isinstance(middle, float) else middle
    return first


def spread(rounds: list[dict[str, Any]], paths=HEADLINE) -> dict[str, dict[str, Any]]:
    """For each headline figure: its median, least and greatest value over the rounds, and
    every round's value in order."""
    found = {}
    for path in paths:
        values = []
        for one in rounds:
            value: Any = one
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            values.append(value)
        numbers = [v for v in values if isinstance(v, (int, float))]
        if numbers:
            found[".".join(path)] = {
                "median": round(statistics.median(numbers), 4),
                "min": min(numbers),
                "max": max(numbers),
                "rounds": values,
            }
    return found


class Progress:
    """One line per phase on stderr: which round and phase, how long it took, the time left."""

    PHASES_PER_ROUND = 6

    def __init__(self, phases: int):
        self.total = phases
        self.done = 0
        self.round = ""
        self.started = time.monotonic()

    @contextlib.contextmanager
    def phase(self, name: str):
        began = time.monotonic()
        print(f"[{self.round}] {name}...", file=sys.stderr, flush=True)
        yield
        self.done += 1
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done * (self.total - self.done)
        print(
            f"[{self.round}] {name} done in {time.monotonic() - began:.0f} s "
            f"({self.done}/{self.total} phases, {elapsed / 60:.1f} min so far, "
            f"about {left / 60:.0f} min left)",
            file=sys.stderr,
            flush=True,
        )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=96, help="episodes per asynchronous phase")
    parser.add_argument("--sync-batches", type=int, default=2, help="synchronous batches")
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--median", type=float, default=1.5, help="inference median, seconds")
    parser.add_argument("--sigma", type=float, default=0.7, help="inference lognormal sigma")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--sites", type=int, default=10)
    parser.add_argument(
        "--seeds", default="0,7", help="workload and practice-web seeds, comma-separated"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="rounds per seed; seeds alternate round by round"
    )
    parser.add_argument(
        "--warmup-episodes",
        type=int,
        default=32,
        help="episodes of an instant-policy run before the first round, left out of every "
        "figure (the broker's JIT compiles in it); 0: none",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="the result file")
    parser.add_argument(
        "--unloaded-seconds", type=float, default=30.0, help="length of the unloaded Kafka run"
    )
    parser.add_argument(
        "--growth",
        action="store_true",
        help="also, once (first seed): the asynchronous pipeline at each --growth-in-flight, "
        "and at --in-flight with screenshots inline and stored in MinIO (replay time of each)",
    )
    parser.add_argument(
        "--growth-in-flight",
        type=lambda text: [int(n) for n in text.split(",") if n.strip()],
        default=[8, 16, 32, 64],
        help="episodes in flight of the growth table, comma-separated",
    )
    parser.add_argument(
        "--growth-episodes",
        type=int,
        default=64,
        help="episodes per growth phase (at least twice the episodes in flight)",
    )
    parser.add_argument(
        "--growth-replays", type=int, default=8, help="episodes replayed per screenshots phase"
    )
    parser.add_argument(
        "--scaling",
        action="store_true",
        help="also: instant policy over 1/2/4 browser workers and 8/16/32 partitions",
    )
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if args.repeat < 0 or (args.repeat == 0 and not (args.growth or args.scaling)):
        parser.error("--repeat 0 runs no rounds, only --growth and/or --scaling: give one")
    if args.warmup_episodes < 0:
        parser.error("--warmup-episodes is a count of episodes: 0 or more")
    if args.repeat == 0 and args.out == RESULTS:  # rollout.json keeps the rounds of record
        extras = [name for name in ("growth", "scaling") if getattr(args, name)]
        args.out = RESULTS.with_name(f"rollout_{'_'.join(extras)}.json")
    stop_cleanly_on_sigterm()  # a killed run deletes its phase's topics, as Ctrl-C does
    base = Settings()
    began = provenance_now()
    extra_phases = (len(args.growth_in_flight) + 2 if args.growth else 0) + (
        len(SCALING) if args.scaling else 0
    )
    extra_phases += 1 if args.warmup_episodes else 0
    progress = Progress(args.repeat * len(seeds) * Progress.PHASES_PER_ROUND + extra_phases)
    warmup = warm_up(base, argparse.Namespace(**{**vars(args), "seed": seeds[0]}), progress)
    rounds = []
    for _ in range(args.repeat):
        for seed in seeds:
            progress.round = f"round {len(rounds) + 1}/{args.repeat * len(seeds)}, seed {seed}"
            rounds.append(
                one_round(base, argparse.Namespace(**{**vars(args), "seed": seed}), progress)
            )
    result: dict[str, Any] = {
        "benchmark": "rollout",
        "in_flight": args.in_flight,
        "repeats": args.repeat,
        "seeds": seeds,
        "workload": {
            "median_s": args.median,
            "sigma": args.sigma,
            "episodes": args.episodes,
            "sync_batches": args.sync_batches,
            "horizons": {"easy": 10, "medium": 20, "hard": 30},
        },  # fmt: skip
        "summary": "every figure outside `rounds` is the median over the rounds; `spread` "
        "gives the headline figures' least and greatest values",
        **(
            median_tree([{k: v for k, v in r.items() if k != "seed"} for r in rounds])
            if rounds
            else {}
        ),
        "spread": spread(rounds),
        "rounds": rounds,
        "warmup": warmup,
    }
    if args.growth:
        progress.round = f"growth, seed {seeds[0]}"
        result["growth"] = growth(
            base, argparse.Namespace(**{**vars(args), "seed": seeds[0]}), progress
        )
    if args.scaling:
        args.seed = seeds[0]
        progress.round = f"scaling, seed {seeds[0]}"
        result["scaling"] = scaling(base, args, progress)
    result = write_result(args.out, result, produced_by=began)
    if args.out == RESULTS:
        plot(result)
    extras = {name: result[name] for name in ("growth", "scaling") if name in result}
    print(json.dumps(result["spread"] if rounds else extras, indent=2))
    return result


if __name__ == "__main__":
    main()
