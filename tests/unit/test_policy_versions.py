"""The policy worker's version follower, with fakes: a failed swap is logged, counted and tried
again with backoff while the last good version serves; a version of another base model, or with
bad weights, is refused for good; errors reading the topic never end the follower; and a swap
never happens under a running backend call."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from agents.policy.backends import Generation
from agents.policy.versions import (
    ServingGate,
    SwapBusy,
    VersionFollower,
    same_base_model,
)
from agents.policy.worker import PolicyWorker, PolicyWorkerConfig
from infra.settings import Settings
from infra.weights import WeightsRejected


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _event(version: int, base: str = "base", name: str = "web") -> dict:
    return {
        "policy_name": name,
        "policy_version": version,
        "base_model": base,
        "location": f"s3://b/policies/{name}/v{version}/",
        "manifest_sha256": "0" * 64,
    }


class Harness:
    """A follower whose fetch fails ``failures`` times per version (then works), serving into
    ``self.serving``."""

    def __init__(self, failures: int = 0, error: Exception | None = None, base: str = "base"):
        self.serving = 0
        self.failures_left: dict[int, int] = {}
        self.failures, self.error = failures, error or OSError("MinIO: connection refused")
        self.fetched: list[int] = []
        self.clock = Clock()
        self.stats: dict = {}
        self.follower = VersionFollower(
            "web", base, self.fetch, self.install, lambda: self.serving, self.stats,
            retry_s=1.0, retry_max_s=4.0, clock=self.clock,
        )  # fmt: skip

    def fetch(self, event: dict) -> Path:
        version = event["policy_version"]
        self.fetched.append(version)
        left = self.failures_left.setdefault(version, self.failures)
        if left:
            self.failures_left[version] = left - 1
            raise self.error
        return Path(f"/weights/v{version}")

    def install(self, path: Path, version: int) -> None:
        self.serving = version


def test_a_failed_swap_is_retried_with_backoff_while_the_last_good_version_serves(caplog):
    h = Harness(failures=3)
    h.follower.offer(_event(1))
    delays = []
    with caplog.at_level(logging.ERROR):
        for _ in range(3):
            h.follower.tick()
            assert h.serving == 0  # still the last good version
            delays.append(h.follower._next_attempt - h.clock.now)
            h.follower.tick()  # too early: nothing happens
            h.clock.now = h.follower._next_attempt
    assert delays == [1.0, 2.0, 4.0]  # doubling, up to retry_max_s
    assert h.stats["swap_failures"] == 3 and "connection refused" in h.stats["last_swap_error"]
    assert sum("could not swap in web v1" in r.message for r in caplog.records) == 3
    h.follower.tick()
    assert h.serving == 1 and h.fetched == [1, 1, 1, 1]
    assert h.stats["versions_refused"] == 0


def test_a_newer_version_replaces_the_one_being_retried_at_once():
    h = Harness(failures=1)
    h.follower.offer(_event(1))
    h.follower.tick()  # v1 fails; retried in 1 s
    h.follower.offer(_event(2))
    h.follower.tick()  # v2 at once (and fails once)
    h.clock.now += 1
    h.follower.tick()
    assert h.fetched == [1, 2, 2] and h.serving == 2
    for old in (_event(1), _event(2), _event(5, name="other")):
        h.follower.offer(old)  # older, served, or another policy's: ignored
    assert h.follower.wanted is None


def test_a_version_of_another_base_model_is_refused_visibly_and_never_fetched(caplog):
    h = Harness(base="Qwen/Qwen3-VL-8B-Instruct")
    with caplog.at_level(logging.ERROR):
        h.follower.offer(_event(1, base="Qwen/Qwen2.5-VL-3B-Instruct"))
        h.follower.tick()
    assert h.fetched == [] and h.serving == 0
    assert h.stats["versions_refused"] == 1
    assert "trained from base model 'Qwen/Qwen2.5-VL-3B-Instruct'" in caplog.text
    h.follower.offer(_event(1, base="Qwen/Qwen2.5-VL-3B-Instruct"))
    assert h.follower.wanted is None  # refused for good


def test_weights_that_fail_verification_are_refused_not_retried():
    h = Harness(failures=1, error=WeightsRejected("config.json has sha256 ..."))
    h.follower.offer(_event(1))
    h.follower.tick()
    h.clock.now += 100
    h.follower.tick()
    assert h.fetched == [1] and h.stats["versions_refused"] == 1
    assert h.stats["swap_failures"] == 0 and h.serving == 0


def test_the_same_base_model_under_two_paths_of_one_directory(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "model")
    assert same_base_model(str(tmp_path / "link"), str(tmp_path / "model"))
    assert same_base_model("Qwen/Qwen3-VL-8B-Instruct", "Qwen/Qwen3-VL-8B-Instruct")
    assert not same_base_model(str(tmp_path / "model"), "tiny-qwen-vl")


class Message:
    def __init__(self, value: bytes):
        self._value = value

    def error(self):
        return None

    def value(self) -> bytes:
        return self._value


class FlakyReader:
    """Yields its messages, then raises on every later poll (a broker gone away)."""

    def __init__(self, messages: list[bytes]):
        self.messages = list(messages)
        self.closed = False

    def poll(self, timeout: float):
        if self.messages:
            return Message(self.messages.pop(0))
        raise RuntimeError("KafkaException: _TRANSPORT")

    def close(self) -> None:
        self.closed = True


def test_errors_reading_the_topic_never_end_the_follower():
    h = Harness()
    opened: list[FlakyReader] = []

    def open_reader() -> FlakyReader:
        if not opened:
            opened.append(None)
            raise RuntimeError("cannot reach the broker")
        opened.append(FlakyReader([b"1", b"2"] if len(opened) == 2 else [b"3"]))
        return opened[-1]

    h.follower._backoff.first_s = 0.01  # the reader's backoff starts from the follower's
    stop = threading.Event()
    decode = lambda value: _event(int(value))  # noqa: E731
    thread = threading.Thread(target=h.follower.follow, args=(stop, open_reader, decode))
    thread.start()
    deadline = time.monotonic() + 10
    while h.serving != 3:
        assert time.monotonic() < deadline and thread.is_alive(), (h.serving, opened)
        time.sleep(0.01)
    stop.set()
    thread.join(5)
    assert not thread.is_alive()
    assert all(reader.closed for reader in opened[1:])


def test_a_swap_waits_for_running_calls_and_holds_new_ones_back():
    gate = ServingGate()
    gate.enter()  # a batch is running
    swapped, entered = threading.Event(), threading.Event()

    def swap() -> None:
        with gate.swap(timeout_s=5):
            swapped.set()
            time.sleep(0.2)

    def call() -> None:
        gate.enter()
        entered.set()
        gate.leave()

    swapper = threading.Thread(target=swap)
    swapper.start()
    time.sleep(0.1)
    assert not swapped.is_set()  # waits for the running batch
    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(0.05)
    gate.leave()
    assert swapped.wait(2)
    assert not entered.is_set()  # a new call waits while the swap runs
    assert entered.wait(2)
    swapper.join(), caller.join()


def test_a_swap_gives_up_when_calls_do_not_finish():
    gate = ServingGate()
    gate.enter()
    with pytest.raises(SwapBusy):
        with gate.swap(timeout_s=0.05):
            pass
    gate.leave()
    gate.enter()  # calls run again after a failed swap
    gate.leave()


class Backend:
    def __init__(self, label: str):
        self.label = label

    def generate(self, requests):
        return [Generation(self.label, [], [], 1.0, self.label) for _ in requests]


def test_a_worker_keeps_serving_its_last_good_version_and_reports_it(tmp_path):
    built: list[Path | None] = []

    def factory(weights: Path | None) -> Backend:
        built.append(weights)
        if weights is not None and weights.name == "v2":
            raise MemoryError("CUDA out of memory")
        return Backend(str(weights))

    worker = PolicyWorker(Settings(), PolicyWorkerConfig(backend_name="fake"), factory)
    assert worker.status()["serving_version"] == 0
    worker._install(tmp_path / "v1", 1)
    with pytest.raises(MemoryError):
        worker._install(tmp_path / "v2", 2)
    assert worker.serving.version == 1 and worker.serving.backend.label.endswith("v1")
    status = worker.status()
    assert (status["serving_version"], status["policy_name"]) == (1, "default")
    assert status["swap_failures"] == 0  # counted by the follower, which catches it
