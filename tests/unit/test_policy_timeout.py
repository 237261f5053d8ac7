"""The policy worker's inference timeout, without Kafka: a slow backend call is answered with one
error inference per request, its late reply is dropped, and a timed-out call keeps its serving
slot until it returns, so calls cannot pile up on the backend."""

from __future__ import annotations

import json
import threading
import time

import pytest
from typer.testing import CliRunner

from agents.policy.backends import ChatRequest, Generation
from agents.policy.backends.latency_model import LatencyModelBackend
from agents.policy.worker import Pending, PolicyWorker, PolicyWorkerConfig
from agents.policy.workload import WorkloadSpec
from commands.main import app
from infra.settings import Settings
from schemas.prompt.reply import format_reply
from schemas.serde import default_catalog

CLICK = {"kind": "left_click", "x": 10, "y": 20}
REPLY = format_reply(CLICK, thought="click it", memory="m")


class RecordingProducer:
    """Stands in for the worker's producer: each event is checked against its schema and kept."""

    def __init__(self):
        self.catalog = default_catalog()
        self.events: list[dict] = []

    def produce(self, topic, key, event_type, record, on_delivery=None) -> None:
        self.catalog.encode(event_type, record)
        self.events.append(record)

    def poll(self, timeout: float = 0) -> None:
        pass


class HangingBackend:
    """Answers every request with ``REPLY``; a call with an episode whose id starts with
    ``slow`` waits for ``release`` first."""

    def __init__(self, slow: str = "ep-"):
        self.slow = slow
        self.release = threading.Event()
        self.returned = threading.Event()

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        if any(r.metadata["episode_id"].startswith(self.slow) for r in requests):
            self.release.wait()
            self.returned.set()
        return [Generation(REPLY, [], [], 1.0, "hanging") for _ in requests]


def _worker(backend, timeout_s: float = 0.2, concurrency: int = 1) -> PolicyWorker:
    config = PolicyWorkerConfig(
        backend_name="fake", concurrency=concurrency, infer_timeout_s=timeout_s
    )
    worker = PolicyWorker(Settings(), config, lambda weights: backend)
    worker.producer = RecordingProducer()
    return worker


def _batch(*episodes: str, step: int = 1) -> list[Pending]:
    messages = [{"role": "user", "content": [{"type": "text", "text": "what now?"}]}]
    return [
        Pending(
            {
                "event_id": f"{episode}:{step}:infer",
                "episode_id": episode,
                "step": step,
                "task_id": f"{episode}-easy",
                "messages_json": json.dumps(messages),
                "observation_event_ids": [],
            },
            ("webgym.ops.infer", 0),
            offset,
            time.monotonic(),
        )
        for offset, episode in enumerate(episodes)
    ]


def _wait_until(condition, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def test_a_call_within_the_timeout_is_answered_with_its_reply():
    worker = _worker(HangingBackend(slow="none"))
    worker._serve(_batch("ep-a", "ep-b"))
    events = worker.producer.events
    assert [e["action"] for e in events] == [CLICK, CLICK]
    assert [e["parse_error"] for e in events] == [None, None]
    assert worker.stats["timeouts"] == 0
    assert (worker.stats["inferences"], worker.stats["backend_calls"]) == (2, 1)  # one batch


def test_a_call_past_the_timeout_gets_one_error_per_request_and_its_late_reply_is_dropped():
    backend = HangingBackend()
    worker = _worker(backend, timeout_s=0.2)
    started = time.monotonic()
    worker._serve(_batch("ep-a", "ep-b"))
    assert 0.2 <= time.monotonic() - started < 2.0  # the batch did not wait for the backend
    events = list(worker.producer.events)
    assert [e["request_event_id"] for e in events] == ["ep-a:1:infer", "ep-b:1:infer"]
    for event in events:
        assert event["action"] is None
        assert (event["parse_error"], event["backend_error"]) == (None, "no answer within 0.2 s")
    assert (worker.stats["timeouts"], worker.stats["late_replies_dropped"]) == (1, 0)
    assert len(worker._abandoned) == 1

    backend.release.set()  # the reply comes, late
    _wait_until(lambda: not worker._abandoned)
    assert backend.returned.is_set()
    assert worker.producer.events == events  # nothing more: one inference per request
    assert worker.stats["late_replies_dropped"] == 1


def test_a_cancellable_backend_stops_at_the_timeout():
    # A 30 s inference, cancelled at 0.2 s: its thread ends at once instead of sleeping on.
    backend = LatencyModelBackend({}, WorkloadSpec(median_s=30.0, sigma=0.1))
    worker = _worker(backend, timeout_s=0.2)
    worker._serve(_batch("slow-000001"))
    [event] = worker.producer.events
    assert (event["parse_error"], event["backend_error"]) == (None, "no answer within 0.2 s")
    _wait_until(lambda: not worker._abandoned, timeout_s=2.0)
    assert worker.producer.events == [event]


def test_other_batches_are_served_while_a_timed_out_call_still_runs():
    backend = HangingBackend(slow="ep-slow")
    worker = _worker(backend, timeout_s=0.1, concurrency=2)
    worker._serve(_batch("ep-slow"))
    assert len(worker._abandoned) == 1
    assert worker._slot_free(serving=0)  # one slot of two is held: the other still serves
    assert not worker._slot_free(serving=1)
    worker._serve(_batch("ep-next"))
    assert [e["backend_error"] for e in worker.producer.events] == [
        "no answer within 0.1 s",
        None,
    ]
    backend.release.set()
    _wait_until(lambda: not worker._abandoned)
    assert len(worker.producer.events) == 2


def test_timed_out_calls_hold_their_slots_until_the_backend_returns():
    backend = HangingBackend()
    worker = _worker(backend, timeout_s=0.05, concurrency=2)
    for n in range(2):
        worker._serve(_batch(f"ep-{n}"))
    assert len(worker._abandoned) == 2
    assert not worker._slot_free(serving=0)  # the run loop starts no new batch now
    backend.release.set()
    _wait_until(lambda: not worker._abandoned)
    assert worker._slot_free(serving=1)
    assert worker.stats["late_replies_dropped"] == 2
    assert len(worker.producer.events) == 2


class ShortBackend:
    """A broken backend: one reply, whatever the number of requests."""

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        return [Generation(REPLY, [], [], 1.0, "short")]


class FailingBackend:
    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        raise RuntimeError("out of memory")


@pytest.mark.parametrize(
    ("backend", "error"),
    [
        (ShortBackend(), "RuntimeError: 1 replies to 3 requests"),
        (FailingBackend(), "RuntimeError: out of memory"),
    ],
)
def test_a_failing_backend_gets_exactly_one_error_per_request(backend, error):
    worker = _worker(backend)
    worker._serve(_batch("ep-a", "ep-b", "ep-c"))
    events = worker.producer.events
    assert sorted(e["request_event_id"] for e in events) == [
        "ep-a:1:infer",
        "ep-b:1:infer",
        "ep-c:1:infer",
    ]
    assert {(e["parse_error"], e["backend_error"]) for e in events} == {(None, error)}


def test_the_timeout_comes_from_the_settings_unless_given():
    config = PolicyWorkerConfig(backend_name="fake")
    worker = PolicyWorker(Settings(policy_infer_timeout_s=7.5), config, lambda w: HangingBackend())
    assert worker.infer_timeout_s == 7.5
    default = Settings()
    # The default leaves room for the retry before the orchestrator's lease aborts the episode.
    assert default.policy_infer_timeout_s < default.episode_lease_s


def test_the_cli_refuses_a_timeout_that_is_not_positive():
    result = CliRunner().invoke(app, ["worker", "policy", "--infer-timeout", "0"])
    assert result.exit_code != 0
    assert "--infer-timeout" in result.output
