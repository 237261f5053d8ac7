"""A policy worker with the latency-model backend on the real broker: one slow draw delays no
other episode (asynchronous), and a lock-step batch is answered together (synchronous)."""

from __future__ import annotations

import time
import uuid

from agents.policy.backends.latency_model import LatencyModelBackend
from agents.policy.main import BackendOptions, serving_shape
from agents.policy.worker import PolicyWorker, PolicyWorkerConfig
from agents.policy.workload import WorkloadSpec, inference_latency_s
from bench.fleet import ask
from tests.integration.test_policy_worker import _inferences, running

TASK_ID = "x-001-hard"  # its difficulty is in its id; hard episodes answer late, not at step 1


def _worker(settings, backend: LatencyModelBackend) -> PolicyWorker:
    options = BackendOptions("latency-model", sync_batch=backend.sync_batch)
    batch_size, concurrency = serving_shape(options, None, None)
    config = PolicyWorkerConfig(
        backend_name="latency-model",
        group_id=f"latency-test-{uuid.uuid4().hex[:8]}",
        client_id=f"latency-test-{uuid.uuid4().hex[:6]}",
        batch_size=batch_size,
        concurrency=concurrency,
    )
    return PolicyWorker(settings, config, lambda weights: backend)


def test_async_each_episode_is_answered_after_its_own_draw(settings, producer, make_consumer):
    spec = WorkloadSpec(seed=5, median_s=0.5, sigma=1.0)
    backend = LatencyModelBackend({}, spec)
    run_id = f"lat-{uuid.uuid4().hex[:8]}"
    episodes = [f"{run_id}-{n:06d}" for n in range(12)]
    with running(_worker(settings, backend)):
        time.sleep(3)  # let the worker join its group before the clock starts
        asked_ms = time.time() * 1000
        for episode in episodes:
            ask(settings, producer, episode, task_id=TASK_ID)
        inferences = _inferences(settings, make_consumer, episodes)
    assert set(inferences) == set(episodes)
    draws = {e: inference_latency_s(spec, e, 1) for e in episodes}
    for episode, event in inferences.items():
        assert event["parse_error"] is None
        # Step 1 answers only for an episode drawn that short (a few percent of hard ones).
        answers_now = backend.length(TASK_ID, episode) == 1
        assert (event["action"]["kind"] == "answer") == answers_now
        assert event["latency_ms"] == draws[episode] * 1000
        assert event["ts"] >= asked_ms + draws[episode] * 1000 - 5
    # Answered in the order of their draws wherever draws differ clearly: no head-of-line wait.
    by_draw = sorted(episodes, key=draws.get)
    for fast, slow in zip(by_draw, by_draw[1:], strict=False):
        if draws[slow] - draws[fast] > 0.5:
            assert inferences[fast]["ts"] < inferences[slow]["ts"]


def test_sync_a_batch_is_answered_together_after_its_last_request(
    settings, producer, make_consumer
):
    spec = WorkloadSpec(seed=6, median_s=0.2, sigma=0.5)
    backend = LatencyModelBackend({}, spec, sync_batch=3, sync_timeout_s=30)
    run_id = f"lockstep-{uuid.uuid4().hex[:8]}"
    episodes = [f"{run_id}-{n:06d}" for n in range(3)]
    with running(_worker(settings, backend)):
        for episode in episodes[:2]:
            ask(settings, producer, episode, task_id=TASK_ID)
        time.sleep(2)
        last_asked_ms = time.time() * 1000
        ask(settings, producer, episodes[2], task_id=TASK_ID)
        inferences = _inferences(settings, make_consumer, episodes)
    assert set(inferences) == set(episodes)
    slowest_ms = max(inference_latency_s(spec, e, 1) for e in episodes) * 1000
    answered = [event["ts"] for event in inferences.values()]
    assert min(answered) >= last_asked_ms + slowest_ms - 5
    assert max(answered) - min(answered) < 500
