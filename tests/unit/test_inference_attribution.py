"""Honest attribution, per backend: an inference names the policy version whose weights produced
it, with the temperature and top-p it was drawn with; a backend without weights (scripted,
heuristic, latency-model) names no version, even after the worker swapped one in, and the views
that group success by version credit its episodes to none."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agents.policy.main import BackendOptions, backend_factory
from agents.policy.tiny_model import build_tiny_vl_model
from agents.policy.worker import Pending, PolicyWorker, PolicyWorkerConfig
from analytics.dashboard import _by_version
from analytics.episodes import EpisodeFold
from analytics.stats import RunStats
from infra.settings import Settings
from schemas.serde import default_catalog
from streams.assembler import assemble
from tests.unit.test_vllm_backend import fake_vllm  # noqa: F401 - a fixture
from tests.vllm_server_standin import StandInVLLMServer, serving


class RecordingProducer:
    """Stands in for the worker's producer: each event is encoded with its schema and kept."""

    def __init__(self):
        self.catalog = default_catalog()
        self.events: list[dict] = []

    def produce(self, topic, key, event_type, record, on_delivery=None) -> None:
        decoded = self.catalog.decode(self.catalog.encode(event_type, record)).record
        self.events.append(decoded)

    def poll(self, timeout: float = 0) -> None:
        pass


def _worker(factory, backend_name: str) -> PolicyWorker:
    worker = PolicyWorker(Settings(), PolicyWorkerConfig(backend_name=backend_name), factory)
    worker.producer = RecordingProducer()
    return worker


def _ask(worker: PolicyWorker, episode: str = "run-000001", **marks) -> dict:
    messages = [{"role": "user", "content": [{"type": "text", "text": "Click the button."}]}]
    record = {
        "event_id": f"{episode}:1:infer",
        "episode_id": episode,
        "step": 1,
        "task_id": "site-0-task-0-easy",
        "messages_json": json.dumps(messages),
        "observation_event_ids": [],
        **marks,
    }
    worker._serve([Pending(record, ("webgym.ops.infer", 0), 0, time.monotonic())])
    return worker.producer.events[-1]


def _fetched(root: Path, version: int, adapter: bool) -> Path:
    """A directory laid out as infra.weights.fetch_weights leaves one."""
    path = root / "weights" / "web" / f"v{version}-{str(version) * 16}"
    path.mkdir(parents=True)
    (path / ("adapter_config.json" if adapter else "config.json")).write_text("{}")
    return path


@pytest.mark.parametrize(
    "options",
    [
        BackendOptions("scripted", sites_count=1),
        BackendOptions("heuristic"),
        BackendOptions("latency-model", sites_count=1, latency_median_s=0.001),
    ],
    ids=lambda options: options.backend,
)
def test_a_backend_without_weights_names_no_version_even_after_a_swap(options, tmp_path):
    worker = _worker(backend_factory(options), options.backend)
    assert worker.status()["serving_version"] is None
    before = _ask(worker, "run-000001")
    worker._install(_fetched(tmp_path, 4, adapter=True), 4)  # as if the follower swapped v4 in
    after = _ask(worker, "run-000002")
    for event in (before, after):
        assert event["policy_version"] is None
        assert (event["temperature"], event["top_p"]) == (None, None)
        assert event["backend"] == options.backend
    assert worker.status()["serving_version"] is None


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_tiny_vl_model(tmp_path_factory.mktemp("models") / "tiny")


def test_the_local_backend_names_its_version_and_sampling(tiny, tmp_path):
    options = BackendOptions("local", model=str(tiny), max_new_tokens=3, temperature=0.7, top_p=0.9)
    worker = _worker(backend_factory(options), "local")
    base = _ask(worker, "run-000001")
    assert base["policy_version"] == 0  # the base model, before any version
    assert (base["temperature"], base["top_p"]) == pytest.approx((0.7, 0.9))
    assert 0 < len(base["token_ids"]) == len(base["logprobs"])
    held_out = _ask(worker, "run-000009", purpose="eval")  # evaluation: greedy on the same model
    assert (held_out["policy_version"], held_out["temperature"], held_out["top_p"]) == (0, 0, 1)
    full = build_tiny_vl_model(tmp_path / "weights" / "web" / ("v2-" + "2" * 16), seed=1)
    worker._install(full, 2)
    assert _ask(worker, "run-000002")["policy_version"] == 2
    assert worker.status()["serving_version"] == 2


def test_the_openai_backend_names_the_version_of_the_adapter_it_asked_for(tmp_path):
    stand_in = StandInVLLMServer("base")
    with serving(stand_in) as url:
        options = BackendOptions("openai", model="base", base_url=url)
        worker = _worker(backend_factory(options), "openai")
        assert _ask(worker, "run-000001")["policy_version"] == 0
        worker._install(_fetched(tmp_path, 3, adapter=True), 3)
        event = _ask(worker, "run-000002")
    assert (event["policy_version"], event["model"]) == (3, "web-v3-33333333")
    assert (event["temperature"], event["top_p"]) == (0.0, 1.0)  # greedy by default


@pytest.mark.usefixtures("fake_vllm")
def test_the_vllm_backend_names_its_version(tmp_path):
    worker = _worker(backend_factory(BackendOptions("vllm", model="base")), "vllm")
    assert _ask(worker, "run-000001")["policy_version"] == 0
    worker._install(_fetched(tmp_path, 5, adapter=True), 5)
    assert _ask(worker, "run-000002")["policy_version"] == 5


def _inference(episode: str, version: int | None) -> dict:
    return {
        "event_id": f"{episode}:1:inference",
        "episode_id": episode,
        "step": 1,
        "ts": 1_000,
        "policy_version": version,
        "parse_error": None,
        "latency_ms": 1.0,
        "action": {"kind": "answer"},
    }


def _scored(episode: str, versions: list[int]) -> dict:
    return {
        "event_id": f"{episode}:scored",
        "episode_id": episode,
        "step": 1,
        "ts": 2_000,
        "task_id": "t",
        "website": "w",
        "difficulty": "easy",
        "reward": 1.0,
        "started_ts": 100,
        "steps": [{"step": 1, "repeated": False}],
        "policy_versions": versions,
    }


def test_views_credit_a_weightless_episode_to_no_version():
    stats, fold = RunStats(), EpisodeFold()
    for episode, version in (("run-000001", None), ("run-000002", 3)):
        versions = [] if version is None else [version]
        for suffix, record in (
            ("episodes", {"event_id": f"{episode}:start", "episode_id": episode, "ts": 100,
                          "kind": "started", "task_id": "t"}),
            ("inferences", _inference(episode, version)),
            ("trajectories.scored", _scored(episode, versions)),
            ("trajectories.success", {**_scored(episode, versions), "event_id": f"{episode}:ok"}),
        ):  # fmt: skip
            stats.apply(suffix, record)
            fold.apply(suffix, record)
    figures = stats.figures()
    assert figures["success_by"]["policy_version"] == {
        "3": {"judged": 1, "successes": 1, "rate": 1.0},
        "-": {"judged": 1, "successes": 1, "rate": 1.0},
    }
    assert figures["policy_lag"]["by_policy_version"] == {"3": 1}
    assert figures["policy_lag"]["without_version"] == 1
    by_version = _by_version(list(fold.episodes.values()))
    assert [row["version"] for row in by_version] == [3]


def test_a_trajectory_lists_only_versions_whose_weights_acted():
    state = {
        "episode_id": "run-000001",
        "task_id": "t",
        "started_ts": 0,
        "end": {"kind": "finished", "reason": "answer", "ts": 5},
        "history": [],
        "policy_versions": [None],  # what the orchestrator folds from a weightless inference
    }
    trajectory = assemble(state)
    assert trajectory["policy_versions"] == []
    default_catalog().encode("trajectory", trajectory)
