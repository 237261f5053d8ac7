"""How the policy worker serves evaluation: greedy whatever its sampling settings, and a pinned
version by exactly that version's weights or an error naming it. Fakes only: no Kafka, no MinIO."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest

from agents.policy.backends import Generation, Sampling, greedy
from agents.policy.versions import PinnedUnavailable, PinnedVersions
from agents.policy.worker import Pending, PolicyWorker, PolicyWorkerConfig
from infra.settings import Settings
from tests.unit.test_inference_attribution import RecordingProducer

EXPLORING = Sampling(0.8, 0.9)


class SamplingBackend:
    """A model backend that names the weights it was built from and the sampling it drew with."""

    def __init__(self, weights: Path | None):
        self.label = weights.name if weights else "base"
        self.sampling = EXPLORING

    def with_sampling(self, sampling: Sampling) -> SamplingBackend:
        other = copy.copy(self)
        other.sampling = sampling.effective
        return other

    def generate(self, requests):
        reply = Generation("no idea", [1], [-0.5], 1.0, self.label, self.sampling)
        return [reply for _ in requests]


def announcement(version: int) -> dict:
    return {"policy_name": "default", "policy_version": version, "base_model": "base"}


class Storage:
    """Stands in for fetch_weights: a directory per version, or a failure for some."""

    def __init__(self, root: Path, failing: set[int] = frozenset()):
        self.root, self.failing, self.fetched = root, failing, []

    def fetch(self, event: dict) -> Path:
        version = event["policy_version"]
        self.fetched.append(version)
        if version in self.failing:
            raise ConnectionError("object storage unreachable")
        path = self.root / f"v{version}"
        path.mkdir(parents=True, exist_ok=True)
        return path


@pytest.fixture
def worker(tmp_path) -> PolicyWorker:
    worker = PolicyWorker(Settings(), PolicyWorkerConfig(backend_name="fake"), SamplingBackend)
    worker.producer = RecordingProducer()
    worker.storage = Storage(tmp_path, failing={6})
    worker.pinned = PinnedVersions(
        "default", "base", worker.storage.fetch, worker._build_pinned, capacity=2,
        announce_wait_s=0.2,
    )  # fmt: skip
    for version in (1, 2, 3, 6):
        worker.pinned.announced(announcement(version))
    return worker


def request(n: int, **marks) -> Pending:
    messages = [{"role": "user", "content": [{"type": "text", "text": "Click the button."}]}]
    record = {
        "event_id": f"run-{n:06d}:1:infer",
        "episode_id": f"run-{n:06d}",
        "step": 1,
        "task_id": "t",
        "messages_json": json.dumps(messages),
        "observation_event_ids": [],
        **marks,
    }
    return Pending(record, ("webgym.ops.infer", 0), n, time.monotonic())


def serve(worker: PolicyWorker, *requests: Pending) -> dict[str, dict]:
    """The inference of each request, by episode."""
    worker._serve(list(requests))
    return {event["episode_id"]: event for event in worker.producer.events}


def drawn(event: dict) -> tuple:
    return (event["policy_version"], event["model"], event["temperature"], event["top_p"])


def test_eval_requests_are_greedy_whatever_the_workers_sampling(worker):
    events = serve(worker, request(1), request(2, purpose="eval"), request(3, purpose="train"))
    assert drawn(events["run-000001"]) == pytest.approx((0, "base", 0.8, 0.9))
    assert drawn(events["run-000002"]) == (0, "base", 0.0, 1.0)
    assert drawn(events["run-000003"]) == pytest.approx((0, "base", 0.8, 0.9))


def test_a_pinned_request_is_served_by_that_versions_weights_and_names_it(worker):
    worker._install(Path("followed-v2"), 2)  # the follower serves v2
    events = serve(
        worker,
        request(1, pinned_version=3, purpose="eval"),
        request(2),
        request(3, pinned_version=2),
        request(4, pinned_version=0),
    )
    assert drawn(events["run-000001"]) == (3, "v3", 0.0, 1.0)
    assert drawn(events["run-000002"])[:2] == (2, "followed-v2")  # the followed version
    assert drawn(events["run-000003"])[:2] == (2, "followed-v2")  # pinned to the followed one
    assert drawn(events["run-000004"])[:2] == (0, "base")  # the base model
    assert worker.storage.fetched == [3]
    assert worker.status()["serving_version"] == 2  # pins never move the followed version


@pytest.mark.parametrize(
    ("version", "why"), [(5, "never announced"), (6, "ConnectionError: object storage")]
)
def test_a_pinned_version_that_cannot_be_loaded_is_an_error_naming_it(worker, version, why):
    event = serve(worker, request(1, pinned_version=version, purpose="eval"))["run-000001"]
    assert event["policy_version"] is None  # no version served it
    assert event["parse_error"] is None
    assert f"default v{version}" in event["backend_error"] and why in event["backend_error"]
    assert event["raw_text"] == "" and event["action"] is None
    assert worker.status()["pinned_unavailable"] == 1
    # not remembered: once it can be loaded, it is served
    worker.storage.failing.clear()
    worker.pinned.announced(announcement(version))
    assert serve(worker, request(2, pinned_version=version))["run-000002"]["policy_version"] == (
        version
    )


def test_pinned_backends_are_cached_by_version_up_to_the_capacity(worker):
    for n, version in enumerate((1, 2, 1, 3, 1), start=1):
        assert serve(worker, request(n, pinned_version=version))[f"run-{n:06d}"]["model"] == (
            f"v{version}"
        )
    assert worker.storage.fetched == [1, 2, 3]  # v1 stayed, as the most recently used
    assert worker.pinned.cached() == [3, 1]


def test_a_pinned_version_of_another_base_model_is_refused(tmp_path):
    storage = Storage(tmp_path)
    pinned = PinnedVersions("default", "base", storage.fetch, SamplingBackend)
    pinned.announced({**announcement(4), "base_model": "other"})
    pinned.announced({**announcement(4), "policy_name": "another-policy"})  # not ours: ignored
    with pytest.raises(PinnedUnavailable, match="default v4 was trained from 'other'"):
        pinned.backend(4)
    assert storage.fetched == []


def test_greedy_leaves_greedy_and_weightless_backends_alone_and_refuses_unknown_ones():
    class Weightless:
        uses_weights = False

    class Stubborn:
        sampling = EXPLORING

    weightless, sampled = Weightless(), SamplingBackend(None)
    assert greedy(weightless) is weightless
    assert greedy(greedy(sampled)).sampling == Sampling(0.0, 1.0)
    with pytest.raises(TypeError, match="with_sampling"):
        greedy(Stubborn())


def test_a_pinned_version_announced_while_its_request_waits_is_served(tmp_path):
    """A worker that has just started may read an announcement after a request pins it."""
    import threading

    storage = Storage(tmp_path)
    pinned = PinnedVersions("default", "base", storage.fetch, SamplingBackend, announce_wait_s=10)
    threading.Timer(0.3, lambda: pinned.announced(announcement(7))).start()
    assert pinned.backend(7) is not None
    assert storage.fetched == [7]


def test_a_swap_that_meets_another_waits_for_it_instead_of_failing():
    """A just-started worker installs the followed version while a pinned version is built."""
    import threading
    import time

    from agents.policy.versions import ServingGate, SwapBusy

    gate, order = ServingGate(), []

    def first() -> None:
        with gate.swap(5):
            order.append("first in")
            time.sleep(0.3)
            order.append("first out")

    thread = threading.Thread(target=first)
    thread.start()
    time.sleep(0.1)
    with gate.swap(5):
        order.append("second")
    thread.join()
    assert order == ["first in", "first out", "second"]
    failed: list[BaseException] = []

    def too_late() -> None:
        try:
            with gate.swap(0.1):
                pass
        except SwapBusy as exc:
            failed.append(exc)

    with gate.swap(5):  # a swap held too long makes the next one fail, naming why
        other = threading.Thread(target=too_late)
        other.start()
        other.join()
    assert len(failed) == 1 and "another swap" in str(failed[0])
