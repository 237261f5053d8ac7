"""Helpers for browser-worker tests: drive episodes by events (the worker processes themselves
are :mod:`bench.fleet`'s, shared with the benchmarks)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from infra.consumer import ConsumedEvent, EventConsumer
from infra.producer import EventProducer, now_ms
from infra.settings import Settings


@dataclass
class Episodes:
    """Produces operations and collects what comes back, per episode.

    ``observations`` holds what the browser showed, by step; ``failures`` every failure
    observation (``failure`` set: the browser could not serve the episode) in arrival order,
    duplicates included, so tests can count them; ``episode_events`` every ``episodes`` event
    (browser workers write none: the orchestrator is their one writer).
    """

    settings: Settings
    producer: EventProducer
    results: EventConsumer
    observations: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    failures: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    episode_events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def navigate(self, episode_id: str, url: str, timeout_ms: int = 15_000, **fields: Any) -> None:
        record = {
            "event_id": f"{episode_id}:0:navigate",
            "episode_id": episode_id,
            "step": 0,
            "ts": now_ms(),
            "url": url,
            "timeout_ms": timeout_ms,
            "task_id": f"task-of-{episode_id}",
            **fields,
        }
        self.producer.produce(
            self.settings.topic("ops.navigate"), episode_id, "navigate_op", record
        )
        self.producer.flush()

    def act(self, episode_id: str, step: int, action: dict[str, Any], **fields: Any) -> None:
        record = {
            "event_id": f"{episode_id}:{step}:act",
            "episode_id": episode_id,
            "step": step,
            "ts": now_ms(),
            "action": action,
            "inference_event_id": f"{episode_id}:{step}:inference",
            "timeout_ms": 10_000,
            **fields,
        }
        self.producer.produce(self.settings.topic("ops.act"), episode_id, "act_op", record)
        self.producer.flush()

    def collect(self, until, timeout: float = 60.0) -> None:
        """Consume results until ``until(self)`` is true; fail after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not until(self):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out; observations {_summary(self.observations)}, "
                    f"failures {_failures(self.failures)}"
                )
            event: ConsumedEvent | None = self.results.poll(0.5)
            if event is None:
                continue
            record = event.record
            if event.event_type == "episode":
                self.episode_events.setdefault(record["episode_id"], []).append(record)
            elif record["failure"] is not None:
                self.failures.setdefault(record["episode_id"], []).append(record)
            else:
                self.observations.setdefault(record["episode_id"], {})[record["step"]] = record

    def drain(self, seconds: float) -> None:
        """Keep consuming for ``seconds``: what a worker sends late (a duplicate) is seen too."""
        deadline = time.monotonic() + seconds
        self.collect(lambda s: time.monotonic() > deadline, timeout=seconds + 5)

    def observation(self, episode_id: str, step: int, timeout: float = 60.0) -> dict[str, Any]:
        self.collect(lambda s: step in s.observations.get(episode_id, {}), timeout)
        return self.observations[episode_id][step]


def _summary(observations: dict[str, dict[int, dict[str, Any]]]) -> dict[str, list[int]]:
    return {episode: sorted(steps) for episode, steps in observations.items()}


def _failures(failures: dict[str, list[dict[str, Any]]]) -> dict[str, list[tuple[int, str]]]:
    return {
        episode: [(f["step"], f["failure"]) for f in found] for episode, found in failures.items()
    }
