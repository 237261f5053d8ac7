"""The vLLM backend's own logic, on a stand-in engine (vLLM needs a GPU; this machine has none).
The real engine path runs on GPU machines; see the README."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import types
import weakref
from dataclasses import dataclass
from pathlib import Path

import pytest

from agents.policy.backends import ChatRequest, Sampling

HI = [ChatRequest([{"role": "user", "content": "hi"}])]


@dataclass
class Logprob:
    logprob: float


@dataclass
class Completion:
    text: str
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]]


@dataclass
class Output:
    outputs: list[Completion]


class StandInEngine:
    def __init__(self, **options):
        self.options = options
        self.calls = []

    def chat(self, conversations, sampling, lora_request=None):
        self.calls.append((conversations, sampling, lora_request))
        return [
            Output([Completion(f"reply {i}", [5, 9], [{5: Logprob(-0.5)}, {9: Logprob(-1.25)}])])
            for i, _ in enumerate(conversations)
        ]


@dataclass(frozen=True)
class StandInLoRA:
    lora_name: str
    lora_int_id: int
    lora_path: str


@pytest.fixture
def fake_vllm(monkeypatch):
    vllm = types.ModuleType("vllm")
    vllm.LLM = StandInEngine
    vllm.SamplingParams = lambda **kw: types.SimpleNamespace(**kw)
    lora = types.ModuleType("vllm.lora.request")
    lora.LoRARequest = StandInLoRA
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.lora", types.ModuleType("vllm.lora"))
    monkeypatch.setitem(sys.modules, "vllm.lora.request", lora)
    return vllm


class OneEngineAtATime:
    """An engine factory that fails if an engine it built is still alive (referenced anywhere)
    when it is asked for the next one, as a GPU that holds one model would."""

    def __init__(self, fail_for: set[str] = frozenset()):
        self.alive: weakref.WeakSet = weakref.WeakSet()
        self.built: list[str] = []
        self.fail_for = set(fail_for)

    def __call__(self, model: str) -> StandInEngine:
        if len(self.alive):
            raise AssertionError(f"building {model} while {len(self.alive)} engine(s) are alive")
        if model in self.fail_for:
            raise MemoryError(f"CUDA out of memory loading {model}")
        engine = StandInEngine(model=model)
        self.alive.add(engine)
        self.built.append(model)
        return engine


def _version(root: Path, name: str, adapter: bool) -> Path:
    """A directory laid out as infra.weights.fetch_weights leaves one."""
    path = root / "policy" / name
    path.mkdir(parents=True)
    (path / ("adapter_config.json" if adapter else "config.json")).write_text("{}")
    return path


def _engine_of(backend):
    return backend._engine._engine


def test_batches_go_to_one_chat_call_with_images_as_data_urls(fake_vllm):
    from agents.policy.backends.vllm_inprocess import VLLMBackend

    backend = VLLMBackend("Qwen/Qwen3-VL-8B-Instruct", max_new_tokens=16)
    image = b"\xff\xd8\xff\xe0jpeg"
    requests = [
        ChatRequest([{"role": "user", "content": [{"type": "image", "image": image}]}]),
        ChatRequest([{"role": "user", "content": "text only"}]),
    ]
    generations = backend.generate(requests)
    calls = _engine_of(backend).calls
    conversations, sampling, lora = calls[0]
    assert len(calls) == 1 and lora is None
    assert conversations[0][0]["content"][0]["image_url"]["url"].startswith(
        "data:image/jpeg;base64,"
    )
    assert (sampling.max_tokens, sampling.logprobs) == (16, 0)
    assert (sampling.temperature, sampling.top_p) == (0.0, 1.0)  # greedy by default
    assert [g.text for g in generations] == ["reply 0", "reply 1"]
    assert generations[0].token_ids == [5, 9]
    assert generations[0].logprobs == [-0.5, -1.25]
    assert generations[0].sampling == Sampling(0.0, 1.0)
    assert _engine_of(backend).options["limit_mm_per_prompt"] == {"image": 5}


def test_sampling_goes_to_the_engine_and_is_recorded(fake_vllm):
    from agents.policy.backends.vllm_inprocess import VLLMBackend

    backend = VLLMBackend("base-model", temperature=0.7, top_p=0.9)
    generation = backend.generate(HI)[0]
    sampling = _engine_of(backend).calls[0][1]
    assert (sampling.temperature, sampling.top_p, sampling.logprobs) == (0.7, 0.9, 0)
    assert generation.sampling == Sampling(0.7, 0.9)


def test_a_greedy_view_draws_greedily_on_the_same_engine(fake_vllm):
    from agents.policy.backends import greedy
    from agents.policy.backends.vllm_inprocess import VLLMBackend

    backend = VLLMBackend("base-model", temperature=0.7, top_p=0.9, max_new_tokens=33)
    generation = greedy(backend).generate(HI)[0]
    sampling = _engine_of(backend).calls[0][1]
    assert (sampling.temperature, sampling.top_p, sampling.max_tokens) == (0.0, 1.0, 33)
    assert generation.sampling == Sampling(0.0, 1.0)
    assert backend.generate(HI)[0].sampling == Sampling(0.7, 0.9)  # the backend itself samples


def test_a_lora_version_reuses_the_engine_under_a_stable_name_and_id(fake_vllm, tmp_path):
    from agents.policy.backends.vllm_inprocess import VLLMBackend

    base = VLLMBackend("base-model")
    adapter = _version(tmp_path, "v3-0123456789abcdef", adapter=True)
    engine = _engine_of(base)
    tuned = base.with_weights(adapter)
    assert _engine_of(tuned) is engine
    tuned.generate(HI)
    assert engine.calls[-1][2] == StandInLoRA("policy-v3-01234567", 3, str(adapter))
    assert tuned.model == "policy-v3-01234567"
    assert _engine_of(base.with_weights(None)) is engine


def test_lora_ids_are_the_same_in_every_interpreter(tmp_path):
    from agents.policy.backends.vllm_inprocess import lora_id

    fetched = tmp_path / "policy" / "v7-0123456789abcdef"
    other = tmp_path / "some-adapter"
    code = "import sys; from agents.policy.backends.vllm_inprocess import lora_id; "
    code += f"print(lora_id(__import__('pathlib').Path({str(other)!r})))"
    ids = set()
    for seed in ("1", "2"):  # str hashes differ between these interpreters
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        ids.add(int(out.stdout))
    assert ids == {lora_id(other)} and 0 < lora_id(other) < 2**31
    assert lora_id(fetched) == 7  # a fetched version: its version number


def test_lora_full_lora_full_swaps_never_hold_two_engines(fake_vllm, tmp_path):
    from agents.policy.backends.vllm_inprocess import EngineUnavailable, VLLMBackend

    factory = OneEngineAtATime()
    # What the worker gets from agents.policy.main: the first backend's bound method, for good.
    swap = VLLMBackend("base-model", engine_factory=factory).with_weights
    lora1 = _version(tmp_path, "v1-" + "1" * 16, adapter=True)
    full2 = _version(tmp_path, "v2-" + "2" * 16, adapter=False)
    lora3 = _version(tmp_path, "v3-" + "3" * 16, adapter=True)
    full4 = _version(tmp_path, "v4-" + "4" * 16, adapter=False)

    served = []
    for weights in (lora1, full2, lora3, full4, lora1, full2):
        backend = swap(weights)
        backend.generate(HI)
        served.append(backend)
        assert len(factory.alive) == 1
    # The base model is built again for an adapter after full weights; each full version once.
    assert factory.built == [
        "base-model",
        str(full2),
        "base-model",
        str(full4),
        "base-model",
        str(full2),
    ]
    assert _engine_of(served[-1]).calls[-1][2] is None
    with pytest.raises(EngineUnavailable, match="was replaced"):
        served[0].generate(HI)  # a LoRA backend on the base engine, which is gone
    del served, backend
    gc.collect()
    assert len(factory.alive) == 1


def test_a_full_swap_that_fails_loads_the_last_good_model_again(fake_vllm, tmp_path):
    from agents.policy.backends.vllm_inprocess import VLLMBackend

    full2 = _version(tmp_path, "v2-" + "2" * 16, adapter=False)
    factory = OneEngineAtATime(fail_for={str(full2)})
    base = VLLMBackend("base-model", engine_factory=factory)
    with pytest.raises(MemoryError):
        base.with_weights(full2)
    assert factory.built == ["base-model", "base-model"]
    assert [g.text for g in base.generate(HI)] == ["reply 0"]  # the base model serves again
    assert len(factory.alive) == 1
