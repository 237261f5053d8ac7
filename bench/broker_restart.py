"""Benchmark: do group consumers resume after the local broker restarts?

One process runs a producer (20 records a second, keyed over 16 keys, into a fresh 8-partition
topic) and one consumer per client configuration under test, each in its own group, all
configured as the policy worker's consumer is (``build_consumer`` with the worker group's
protocol, offsets stored by hand, auto-commit); they differ only in the rebootstrap trigger
(``metadata.recovery.rebootstrap.trigger.ms``): librdkafka's default (5 minutes) against the
project's (:data:`infra.kafka_config.REBOOTSTRAP_AFTER_MS`). Each round stops the broker by its
pid file (as `webgym down` does), waits 5 s, starts it again (`webgym up`), and times, for each
consumer, how long after the broker answers its first record comes (not resumed within
``--wait-s``: stuck), and whether the consumer's statistics (every second) showed it knowing no
broker at all during the round (the state a stuck consumer was found in). Every round uses the
same restart for every consumer, so the sides are paired. ``--burners`` busy loops keep the cores
saturated, standing in for Chromium: the stuck case showed up in a loaded CI run.

Writes bench/results/broker_restart.json. Run: `.venv/bin/python -m bench.broker_restart`
(after `webgym up`; it restarts that broker, so run it alone).
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import statistics
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from infra import stack
from infra.consumer import build_consumer, co_partitioned_group
from infra.kafka_config import KAFKA_LOGGER, REBOOTSTRAP_AFTER_MS, client_config
from infra.provenance import write_result
from infra.settings import Settings
from infra.stack.kafka import LocalKafka

RESULTS = Path(__file__).parent / "results" / "broker_restart.json"
LIBRDKAFKA_DEFAULT_MS = 300_000
STATS_INTERVAL_MS = 1_000  # how often each consumer reports the brokers it knows
SIDES = {"librdkafka_default": LIBRDKAFKA_DEFAULT_MS, "project": REBOOTSTRAP_AFTER_MS}


def _burn(stop: Any) -> None:
    while not stop.is_set():
        pass


class Side:
    """One consumer under test and the moment its last record came."""

    def __init__(self, settings: Settings, topic: str, name: str, trigger_ms: int):
        self.name = name
        self.last = 0.0
        self.brokerless = False  # a statistics report since the round began named no broker
        self.consumer: Consumer = build_consumer(
            settings,
            group_id=f"bench-restart-{name}-{topic}",
            client_id=f"bench-restart-{name}",
            **co_partitioned_group(settings),
            **{"enable.auto.offset.store": False, "enable.auto.commit": True},
            **{"auto.commit.interval.ms": 500},
            **{"metadata.recovery.rebootstrap.trigger.ms": trigger_ms},
            **{"statistics.interval.ms": STATS_INTERVAL_MS, "stats_cb": self._statistics},
        )
        self.consumer.subscribe([topic])

    def _statistics(self, report: str) -> None:
        brokers = json.loads(report).get("brokers", {}).values()
        if not any(b.get("source") not in ("logical", "internal") for b in brokers):
            self.brokerless = True

    def poll(self) -> None:
        message = self.consumer.poll(0.02)
        if message is not None and not message.error():
            self.last = time.monotonic()
            self.consumer.store_offsets(message)


def _produce(settings: Settings, topic: str, stop: threading.Event) -> None:
    producer = Producer(client_config(settings.bootstrap_servers, {"linger.ms": 0}))
    i = 0
    while not stop.is_set():
        producer.produce(topic, str(i).encode(), key=str(i % 16).encode())
        producer.poll(0)
        i += 1
        time.sleep(0.05)
    producer.flush(5)


def _serve(sides: list[Side], seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for side in sides:
            side.poll()


def run(rounds: int, burners: int, wait_s: float) -> dict[str, Any]:
    settings = Settings()
    topic = f"bench-restart-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(client_config(settings.bootstrap_servers))
    for future in admin.create_topics([NewTopic(topic, 8, 1)]).values():
        future.result()
    stop_burn = multiprocessing.Event()
    burning = [multiprocessing.Process(target=_burn, args=(stop_burn,)) for _ in range(burners)]
    stop = threading.Event()
    producing = threading.Thread(target=_produce, args=(settings, topic, stop), daemon=True)
    sides = [Side(settings, topic, name, ms) for name, ms in SIDES.items()]
    broker = LocalKafka(settings)
    rows: list[dict[str, Any]] = []
    try:
        for process in burning:
            process.start()
        producing.start()
        _serve(sides, 15)  # every side joined and consuming
        for number in range(rounds):
            for side in sides:
                side.brokerless = False
            if not broker.process.stop():
                raise SystemExit("the local broker is not running: start it with `webgym up`")
            _serve(sides, 5)
            stack.up(settings, report=lambda line: None)
            answered = time.monotonic()
            while time.monotonic() - answered < wait_s and any(
                side.last <= answered for side in sides
            ):
                _serve(sides, 0.1)
            row = {
                side.name: {
                    "resume_s": round(side.last - answered, 2) if side.last > answered else None,
                    "lost_every_broker": side.brokerless,
                }
                for side in sides
            }
            rows.append(row)
            print(f"round {number + 1}/{rounds}: seconds to the first record {row}", flush=True)
            _serve(sides, 5)
    finally:
        stop.set()
        stop_burn.set()
        for process in burning:
            process.join()
        for side in sides:
            side.consumer.close()
        admin.delete_topics([topic])
    summary = {}
    for side in sides:
        mine = [row[side.name] for row in rows]
        resumed = [r["resume_s"] for r in mine if r["resume_s"] is not None]
        summary[side.name] = {
            "rebootstrap_trigger_ms": SIDES[side.name],
            "rounds": len(rows),
            "lost_every_broker": sum(r["lost_every_broker"] for r in mine),
            "stuck": len(rows) - len(resumed),
            "resume_s_median": statistics.median(resumed) if resumed else None,
            "resume_s_max": max(resumed, default=None),
        }
    return {"rounds": rows, "summary": summary, "burners": burners, "wait_s": wait_s}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.broker_restart",
        description="Restart the local broker repeatedly; time how soon group consumers with "
        "librdkafka's and the project's rebootstrap trigger consume again. Restarts the broker "
        "of `webgym up`: run it alone.",
    )
    parser.add_argument("--rounds", type=int, default=12, help="broker restarts (default 12)")
    parser.add_argument(
        "--burners", type=int, default=2, help="busy loops saturating the cores (default 2)"
    )
    parser.add_argument(
        "--wait-s",
        type=float,
        default=90.0,
        help="how long a consumer may take to resume before its round counts it stuck",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="result file")
    args = parser.parse_args(argv)
    # librdkafka's warnings while the broker is away (partitions whose leader it cannot find)
    # are what this benchmark causes; the rounds' lines say what happened.
    logging.getLogger(KAFKA_LOGGER).setLevel(logging.ERROR)
    result = run(args.rounds, args.burners, args.wait_s)
    write_result(args.out, result)
    print(f"wrote {args.out}: {result['summary']}")


if __name__ == "__main__":
    main()
