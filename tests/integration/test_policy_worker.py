"""Policy workers on the real broker and MinIO: local tiny model, OpenAI-compatible server,
hot-reloaded versions."""

from __future__ import annotations

import json
import threading
import time
import uuid
from contextlib import contextmanager

from agents.policy.backends.local import LocalBackend
from agents.policy.backends.openai_http import OpenAIBackend
from agents.policy.main import BackendOptions, backend_factory
from agents.policy.tiny_model import build_tiny_vl_model
from agents.policy.worker import PolicyWorker, PolicyWorkerConfig
from bench.fleet import ask, jpeg
from infra.minio_store import build_minio, put_bytes
from infra.openai_client import ChatEndpoint
from infra.screenshot_store import ScreenshotStore
from infra.weights import publish_weights, version_prefix
from sites import generate_sites
from sites.tasks import generate_tasks
from tests.integration.helpers import drain
from tests.integration.model_servers import (  # noqa: F401
    openai_server_fixture,
    tiny_model_fixture,
)


@contextmanager
def running(worker: PolicyWorker):
    stop = threading.Event()
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            worker.run(stop)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not errors, errors


def _worker(settings, factory, backend_name: str, policy_name: str = "default") -> PolicyWorker:
    config = PolicyWorkerConfig(
        backend_name=backend_name,
        policy_name=policy_name,
        group_id=f"policy-test-{uuid.uuid4().hex[:8]}",
        client_id=f"policy-test-{uuid.uuid4().hex[:6]}",
        batch_size=4,
    )
    return PolicyWorker(settings, config, factory)


def _inferences(settings, make_consumer, episodes: list[str], timeout: float = 120) -> dict:
    consumer = make_consumer(f"inf-{uuid.uuid4().hex[:8]}", [settings.topic("inferences")])
    wanted = set(episodes)
    events = drain(
        consumer, len(episodes), timeout, where=lambda e: e.record["episode_id"] in wanted
    )
    return {e.record["episode_id"]: e.record for e in events}


def test_local_tiny_model_serves_requests_from_kafka(settings, producer, make_consumer, tiny_model):
    factory = lambda weights: LocalBackend(weights or tiny_model, max_new_tokens=8)  # noqa: E731
    episodes = [f"pol-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    with running(_worker(settings, factory, "local")):
        requests = {episode: ask(settings, producer, episode) for episode in episodes}
        inferences = _inferences(settings, make_consumer, episodes)
    assert set(inferences) == set(episodes)
    for episode, event in inferences.items():
        assert event["event_id"] == f"{episode}:1:inference"
        assert event["request_event_id"] == requests[episode]
        assert event["policy_version"] == 0
        assert event["backend"] == "local"
        assert 0 < len(event["token_ids"]) == len(event["logprobs"]) <= 8
        assert all(lp <= 0 for lp in event["logprobs"])
        # A random tiny model does not write the format: the error is recorded, never guessed.
        assert (event["action"] is None) == (event["parse_error"] is not None)


def test_a_new_version_is_served_and_a_bad_checksum_refused(
    settings, producer, make_consumer, tiny_model, tmp_path
):
    factory = lambda weights: LocalBackend(weights or tiny_model, max_new_tokens=4)  # noqa: E731
    name = f"tiny-{uuid.uuid4().hex[:6]}"
    version_one = build_tiny_vl_model(tmp_path / "v1", seed=1)
    client = build_minio(settings)
    with running(_worker(settings, factory, "local", policy_name=name)) as worker:
        publish_weights(client, settings, producer, name, 1, version_one, "tiny-qwen-vl")
        deadline = time.monotonic() + 90
        while worker.serving.version != 1:
            assert time.monotonic() < deadline, "version 1 was never picked up"
            time.sleep(0.2)
        first = f"ver-{uuid.uuid4().hex[:8]}"
        ask(settings, producer, first)
        assert _inferences(settings, make_consumer, [first])[first]["policy_version"] == 1

        publish_weights(client, settings, producer, name, 2, version_one, "tiny-qwen-vl")
        put_bytes(
            client,
            settings.policies_bucket,
            version_prefix(name, 2) + "config.json",
            b"{}",
            "application/json",
        )
        deadline = time.monotonic() + 90
        while worker.stats["versions_refused"] < 1:
            assert time.monotonic() < deadline, (
                "the tampered version was neither served nor refused"
            )
            time.sleep(0.2)
        second = f"ver-{uuid.uuid4().hex[:8]}"
        ask(settings, producer, second)
        assert _inferences(settings, make_consumer, [second])[second]["policy_version"] == 1
        assert worker.serving.version == 1


def test_openai_compatible_backend_serves_requests_from_kafka(
    settings, producer, make_consumer, tiny_model, openai_server
):
    backend = OpenAIBackend(ChatEndpoint(openai_server, str(tiny_model), max_tokens=8))
    episodes = [f"oai-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    with running(_worker(settings, lambda weights: backend, "openai")):
        for episode in episodes:
            ask(settings, producer, episode)
        inferences = _inferences(settings, make_consumer, episodes)
    assert set(inferences) == set(episodes)
    for event in inferences.values():
        assert event["backend"] == "openai"
        assert event["raw_text"]  # the model's real (random) reply, through HTTP
        assert event["latency_ms"] > 0
        assert (event["action"] is None) == (event["parse_error"] is not None)


def test_scripted_policy_serves_ground_truth_actions(settings, producer, make_consumer):
    factory = backend_factory(BackendOptions("scripted", sites_count=2))
    task = generate_tasks(generate_sites(count=2))[0]
    episode = f"scr-{uuid.uuid4().hex[:8]}"
    with running(_worker(settings, factory, "scripted")):
        ask(settings, producer, episode, task_id=task["task_id"])
        event = _inferences(settings, make_consumer, [episode])[episode]
    assert event["parse_error"] is None
    first_page = json.loads(task["extra_json"])["solution_urls"][0]
    assert event["action"]["kind"] == "navigate"
    assert event["action"]["url"].endswith(first_page)
    assert event["memory"].startswith("opened 0 of")


def test_a_screenshot_consumed_before_a_restart_is_read_back_from_the_log(
    settings, producer, make_consumer
):
    factory = backend_factory(BackendOptions("scripted", sites_count=2))
    task = generate_tasks(generate_sites(count=2))[0]
    episode = f"back-{uuid.uuid4().hex[:8]}"
    first = _worker(settings, factory, "scripted")
    with running(first):
        ask(settings, producer, episode, task_id=task["task_id"])
        assert _inferences(settings, make_consumer, [episode])[episode]["backend_error"] is None
        time.sleep(1.5)  # the worker commits what it consumed every 500 ms
    # The request comes again (a re-sent copy), to a worker of the same group that resumes past
    # the screenshot: it is not in its cache, so it is read back from the log.
    second = PolicyWorker(settings, first.config, factory)
    with running(second):
        ask(settings, producer, episode, task_id=task["task_id"], observed=False)
        consumer = make_consumer(f"inf-{uuid.uuid4().hex[:8]}", [settings.topic("inferences")])
        both = drain(consumer, 2, 120, where=lambda e: e.record["episode_id"] == episode)
    event = both[1].record  # the second worker's answer
    assert event["backend_error"] is None, event["backend_error"]
    assert event["action"]["kind"] == "navigate"
    assert second.backfill.found == 1


def test_a_stored_screenshot_reaches_the_backend_from_minio(settings, producer, make_consumer):
    """An observation that keeps its screenshot in MinIO (key and digest in the event): the
    worker reads the bytes from there and the backend sees them as it sees inline ones."""
    factory = backend_factory(BackendOptions("scripted", sites_count=2))
    scripted = factory(None)
    shown: list[bytes] = []
    generate = scripted.generate

    def recording(requests):  # the real backend; what it was given is noted
        shown.extend(
            part["image"]
            for request in requests
            if request.metadata.get("episode_id") == episode  # not earlier tests' requests
            for message in request.messages
            if isinstance(message["content"], list)
            for part in message["content"]
            if part["type"] == "image"
        )
        return generate(requests)

    scripted.generate = recording
    task = generate_tasks(generate_sites(count=2))[0]
    image = jpeg((uuid.uuid4().int % 255, 40, 90))
    key = ScreenshotStore(settings).put(image, "jpeg")
    episode = f"stored-{uuid.uuid4().hex[:8]}"
    worker = _worker(settings, lambda weights: scripted, "scripted")
    with running(worker):
        ask(
            settings,
            producer,
            episode,
            task_id=task["task_id"],
            screenshot=image,
            screenshot_key=key,
        )
        event = _inferences(settings, make_consumer, [episode])[episode]
    assert event["backend_error"] is None, event["backend_error"]
    assert shown == [image]
    assert (worker.stored.fetched, worker.stored.failed) == (1, 0)
