"""Benchmark: inference events per second and latency of a policy worker with the tiny local
model, 8 requests in flight (8 episodes, each asking again as soon as it is answered).

Requests carry a real context (system prompt, task, a 1280x768 JPEG screenshot) built by the
context builder. Needs the local stack (`webgym up`). Writes bench/results/policy_worker.json.
Run: `.venv/bin/python -m bench.policy_worker`.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
import uuid
from pathlib import Path

from rich.console import Console

from agents.policy.backends.local import LocalBackend
from agents.policy.tiny_model import build_tiny_vl_model
from agents.policy.worker import PolicyWorker, PolicyWorkerConfig
from bench.browser_fleet import percentiles
from bench.fleet import ask, jpeg
from infra.consumer import EventConsumer, build_consumer
from infra.dead_letters import DeadLetterRouter
from infra.producer import EventProducer
from infra.provenance import write_result
from infra.settings import Settings
from infra.topic_admin import create_topics, delete_topics

RESULTS = Path(__file__).parent / "results" / "policy_worker.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    args = parser.parse_args()
    settings = Settings().model_copy(update={"topic_prefix": f"bench-{uuid.uuid4().hex[:8]}"})
    create_topics(settings)
    screenshot = jpeg((40, 120, 200))
    with tempfile.TemporaryDirectory() as scratch:
        model = build_tiny_vl_model(Path(scratch) / "tiny")
        config = PolicyWorkerConfig(
            backend_name="local",
            group_id=f"bench-policy-{uuid.uuid4().hex[:6]}",
            batch_size=args.in_flight,
        )
        worker = PolicyWorker(
            settings, config, lambda w: LocalBackend(w or model, max_new_tokens=args.max_new_tokens)
        )
        stop = threading.Event()
        thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
        thread.start()
        producer = EventProducer.connect(settings, client_id="bench", **{"linger.ms": 0})
        consumer = EventConsumer(
            build_consumer(settings, group_id=f"bench-{uuid.uuid4().hex[:6]}", client_id="bench"),
            DeadLetterRouter(settings, producer),
        )
        consumer.subscribe([settings.topic("inferences")])
        sent: dict[str, float] = {}

        def send(episode: str, step: int) -> None:
            ask(settings, producer, episode, step, task_id="bench", screenshot=screenshot)
            sent[f"{episode}:{step}"] = time.monotonic()

        episodes = [f"bench-{i}" for i in range(args.in_flight)]
        for episode in episodes:
            send(episode, 1)
        warm_until = time.monotonic() + 10  # model load and first batches are not measured
        stop_at = warm_until + args.seconds
        latencies, model_latencies, count = [], [], 0
        at_warm: dict[str, int] | None = None  # the worker's counters when measuring began
        while time.monotonic() < stop_at:
            event = consumer.poll(0.2)
            if event is None:
                continue
            record = event.record
            now = time.monotonic()
            if now >= warm_until:
                at_warm = at_warm or dict(worker.stats)
                count += 1
                latencies.append((now - sent[f"{record['episode_id']}:{record['step']}"]) * 1000)
                model_latencies.append(record["latency_ms"])
            send(record["episode_id"], record["step"] + 1)
        calls = worker.stats["backend_calls"] - (at_warm or {}).get("backend_calls", 0)
        answered = worker.stats["inferences"] - (at_warm or {}).get("inferences", 0)
        stop.set()
        thread.join(timeout=60)
        consumer.close()
    delete_topics(settings)
    result = {
        "benchmark": "policy worker, tiny local Qwen-VL model on CPU",
        "in_flight": args.in_flight,
        "batch_size": args.in_flight,
        "max_new_tokens": args.max_new_tokens,
        "seconds": args.seconds,
        "inferences_per_s": round(count / args.seconds, 2),
        "latency_ms": percentiles(latencies),
        "backend_batch_ms": percentiles(model_latencies),
        # the worker's own counters over the measured window
        "backend_calls": calls,
        "mean_batch": round(answered / calls, 2) if calls else None,
    }
    write_result(RESULTS, result)
    Console().print_json(json.dumps(result))


if __name__ == "__main__":
    main()
