"""Benchmark: what one record costs the Kafka broker, to take in and to hand to each reader.

Windows of ``--seconds``, alternating over the configurations, ``--repeat`` times each, after one
``--warmup`` window that enters no figure (the broker's JIT):

- ``idle``: no client at all; the broker's own background work;
- ``<size> B, <n> readers``: a producer with the workers' settings
  (:func:`infra.producer.build_producer`: idempotent, acks=all, linger 1 ms) writes ``--rate``
  records a second of ``size`` bytes to a topic of 8 partitions, keys spread as episodes spread,
  while ``n`` consumers with the workers' settings (:func:`infra.consumer.build_consumer`, each a
  group of its own, as the Faust worker, the policy worker and the rollout benchmark's probe
  each read the observations) follow it. Sizes: ``--sizes`` (1,000 B: an operation or an
  inference; 70,000 B: an observation with its JPEG screenshot); readers: ``--readers``.

Each window's figure is the broker's CPU time over it (from ``/proc``, every ``kafka.Kafka``
process of the machine) as a share of one core. From the medians, per size:

- ``take_ms``: the broker's CPU per record written, with no reader, above ``idle``;
- ``hand_ms``: its extra CPU per record for each reader added, between consecutive reader
  counts (``"0-1"``: the first reader; ``"1-3"``: each of two more).

So a workload that writes ``w`` records a second, each read by ``k`` readers, costs the broker
about ``idle + w * (take_ms + hand_ms["0-1"] + (k - 1) * hand_ms["1-3"])`` ms a second; set
against a record's size, its count is what costs (the README's Performance section sets these
against a rollout step's records).

Writes bench/results/broker_cost.json. Run after `webgym up`:
``.venv/bin/python -m bench.broker_cost`` (about 10 minutes with the defaults).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from bench.rollout import Progress, spread
from infra.consumer import build_consumer, drain
from infra.leftovers import remove_prefix
from infra.processes import all_stats, command_line
from infra.producer import build_producer
from infra.provenance import provenance, write_result
from infra.settings import Settings
from infra.topic_admin import build_admin

RESULTS = Path(__file__).parent / "results" / "broker_cost.json"
PARTITIONS = 8
KEYS = 64  # episodes in flight, about: the records spread over the partitions as theirs do


def broker_cpu_s() -> float:
    """CPU seconds so far of every Kafka broker process on this machine (``kafka.Kafka``)."""
    stats = all_stats()
    brokers = [pid for pid in stats if "kafka.Kafka" in command_line(pid)]
    if not brokers:
        raise SystemExit("no Kafka broker runs on this machine; start the stack: `webgym up`")
    return sum(stats[pid].cpu_s for pid in brokers)


def configurations(sizes: list[int], readers: list[int]) -> list[tuple[int, int]]:
    """``(size, readers)`` of every loaded window, in the order a round runs them; ``(0, 0)``
    first: the idle window."""
    return [(0, 0)] + [(size, n) for size in sizes for n in readers]


def label(size: int, readers: int) -> str:
    return "idle" if size == 0 else f"{size} B, {readers} readers"


def fit(summary: dict[str, dict[str, Any]], sizes: list[int], readers: list[int], rate: float):
    """Per size, from the windows' median shares of a core: ``take_ms``, the broker's CPU per
    record written with no reader, above idle (None without a reader-less window); ``hand_ms``,
    for each pair of consecutive reader counts ``"a-b"``, its CPU per record for each reader
    added between them (``"0-1"``: the first reader; ``"1-3"``: each of two more)."""
    idle = summary["idle"]["median"]
    counts = sorted(set(readers))
    out: dict[str, Any] = {}
    for size in sizes:
        share = {n: summary[label(size, n)]["median"] for n in counts}
        out[str(size)] = {
            "take_ms": round((share[0] - idle) / rate * 1000, 3) if 0 in share else None,
            "hand_ms": {
                f"{a}-{b}": round((share[b] - share[a]) / ((b - a) * rate) * 1000, 3)
                for a, b in itertools.pairwise(counts)
            },
        }
    return out


class Readers:
    """``n`` consumers following ``topic`` (``<prefix>.<name>``) from its end, each in a group of
    its own (``<prefix>.reader-<hex>``, which :func:`infra.leftovers.remove_prefix` finds with the
    topic), in threads; ``close`` stops them and returns how many records each received."""

    def __init__(self, settings: Settings, topic: str, n: int):
        self._stop = threading.Event()
        self.received = [0] * n
        self._threads = [
            threading.Thread(target=self._follow, args=(settings, topic, i), daemon=True)
            for i in range(n)
        ]
        self._ready = threading.Barrier(n + 1) if n else None
        for thread in self._threads:
            thread.start()
        if self._ready is not None:
            try:
                self._ready.wait(60)
            except threading.BrokenBarrierError:
                self.close()
                raise SystemExit(
                    f"the readers were given no partition of {topic} within 60 s; is the broker "
                    "up and answering (`webgym status`)?"
                ) from None

    def _follow(self, settings: Settings, topic: str, index: int) -> None:
        consumer = build_consumer(
            settings,
            group_id=f"{topic.split('.')[0]}.reader-{uuid.uuid4().hex[:8]}",
            client_id="webgym-broker-cost",
            # Committing every few seconds, as the workers do, is part of what a reader costs.
            **{"auto.offset.reset": "latest", "enable.auto.commit": True},
        )
        consumer.subscribe([topic])
        waited = False
        try:
            while not self._stop.is_set():
                for message in drain(consumer, 500, 0.2):
                    if message.error() is None:
                        self.received[index] += 1
                if not waited and consumer.assignment():
                    waited = True
                    with contextlib.suppress(threading.BrokenBarrierError):
                        self._ready.wait(60)
        finally:
            consumer.close()

    def close(self, written: int = 0, timeout_s: float = 10.0) -> list[int]:
        """Stop, once every reader has received ``written`` records (or ``timeout_s`` passed)."""
        deadline = time.monotonic() + timeout_s
        while min(self.received, default=written) < written and time.monotonic() < deadline:
            time.sleep(0.05)
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        return self.received


def _write(producer: Producer, topic: str, size: int, rate: float, seconds: float) -> int:
    """Write ``rate`` records a second of ``size`` bytes for ``seconds``; the count written."""
    payload = os.urandom(size)
    started, written = time.monotonic(), 0
    while (now := time.monotonic()) - started < seconds:
        producer.produce(topic, payload, key=str(written % KEYS).encode())
        producer.poll(0)
        written += 1
        time.sleep(max(0.0, started + written / rate - now))
    producer.flush(30)
    return written


def window(
    settings: Settings,
    topic: str,
    size: int,
    readers: int,
    rate: float,
    seconds: float,
    cpu: Callable[[], float] = broker_cpu_s,
) -> dict[str, Any]:
    """One window: the broker's CPU share of a core while ``readers`` follow ``rate`` records a
    second of ``size`` bytes (``size`` 0: no client at all)."""
    if size == 0:
        before, began = cpu(), time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - began
        return {"config": "idle", "cores": round((cpu() - before) / elapsed, 4), "written": 0}
    # Made first: an idempotent producer asks the broker for its id as it starts, not per record.
    producer = build_producer(settings, client_id="webgym-broker-cost")
    following, written = Readers(settings, topic, readers), 0
    try:
        time.sleep(1.0)  # past the readers' first fetches and the producer's start
        before, began = cpu(), time.monotonic()
        written = _write(producer, topic, size, rate, seconds)
        elapsed = time.monotonic() - began
        used = cpu() - before
    finally:
        received = following.close(written)
    return {
        "config": label(size, readers),
        "cores": round(used / elapsed, 4),
        "written": written,
        "received": received,
        "records_per_s": round(written / elapsed, 1),
    }


def summary(windows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per configuration: its share of a core, median, least and greatest over its windows."""
    found: dict[str, Any] = {}
    for config in dict.fromkeys(w["config"] for w in windows):
        mine = [{"cores": w["cores"]} for w in windows if w["config"] == config]
        found[config] = spread(mine, [("cores",)])["cores"]
    return found


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="windows of each configuration")
    parser.add_argument("--seconds", type=float, default=25.0, help="length of each window")
    parser.add_argument("--rate", type=float, default=60.0, help="records written a second")
    parser.add_argument("--sizes", default="1000,70000", help="record sizes, bytes")
    parser.add_argument("--readers", default="0,1,3", help="reader counts")
    parser.add_argument(
        "--warmup", type=float, default=30.0, help="seconds of traffic first, in no figure"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the result")
    args = parser.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
        readers = [int(n) for n in args.readers.split(",")]
    except ValueError:
        parser.error("--sizes and --readers are comma-separated whole numbers, e.g. 1000,70000")
    if args.repeat < 1 or args.seconds <= 0 or args.rate <= 0 or min(sizes) < 1 or min(readers) < 0:
        parser.error("--repeat, --seconds, --rate and every size must be above 0; readers >= 0")
    began = provenance(["bench/broker_cost.py", *(sys.argv[1:] if argv is None else argv)])
    settings = Settings()
    broker_cpu_s()  # a clear error before anything is created when no broker runs
    # The run's prefix names its topic and its readers' groups: all go at its end, and a killed
    # run's with `webgym topics prune`.
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    topic = f"{prefix}.broker-cost"
    admin = build_admin(settings)
    admin.create_topics([NewTopic(topic, PARTITIONS, settings.replication_factor or 1)])[
        topic
    ].result(30)
    plan = configurations(sizes, readers)
    progress = Progress(1 + args.repeat * len(plan))
    windows: list[dict[str, Any]] = []
    try:
        progress.round = "warm-up"
        with progress.phase(label(max(sizes), max(readers))):
            window(settings, topic, max(sizes), max(readers), args.rate, args.warmup)
        for n in range(args.repeat):
            progress.round = f"round {n + 1}/{args.repeat}"
            for size, count in plan:
                with progress.phase(label(size, count)):
                    windows.append(
                        {"round": n + 1}
                        | window(settings, topic, size, count, args.rate, args.seconds)
                    )
    finally:
        remove_prefix(admin, None, prefix)  # the readers have closed: their groups are empty
    found = summary(windows)
    result = {
        "benchmark": "broker_cost",
        "repeats": args.repeat,
        "seconds": args.seconds,
        "rate": args.rate,
        "sizes": sizes,
        "readers": readers,
        "summary": found,
        "per_record": fit(found, sizes, readers, args.rate),
        "windows": windows,
    }
    return write_result(args.out, result, produced_by=began)


if __name__ == "__main__":
    written = main()
    for config, figures in written["summary"].items():
        print(f"{config:24s} {figures['median']:.4f} of a core ({figures['min']}-{figures['max']})")
    for size, costs in written["per_record"].items():
        handed = ", ".join(f"{pair} readers {ms} ms" for pair, ms in costs["hand_ms"].items())
        print(
            f"{size} B a record: taken {costs['take_ms']} ms; handed, each reader added: {handed}"
        )
