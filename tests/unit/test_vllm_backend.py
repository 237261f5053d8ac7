"""The vLLM backend's own logic, on a stand-in engine (vLLM needs a GPU; this machine has none).
The real engine path runs on GPU machines; see the README."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest

from agents.policy.backends import ChatRequest


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


@pytest.fixture
def fake_vllm(monkeypatch):
    vllm = types.ModuleType("vllm")
    vllm.LLM = StandInEngine
    vllm.SamplingParams = lambda **kw: types.SimpleNamespace(**kw)
    lora = types.ModuleType("vllm.lora.request")
    lora.LoRARequest = lambda name, number, path: ("lora", name, path)
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.lora", types.ModuleType("vllm.lora"))
    monkeypatch.setitem(sys.modules, "vllm.lora.request", lora)
    return vllm


def test_batches_go_to_one_chat_call_with_images_as_data_urls(fake_vllm):
    from agents.policy.backends.vllm_inprocess import VLLMBackend

    backend = VLLMBackend("Qwen/Qwen3-VL-8B-Instruct", max_new_tokens=16)
    image = b"\xff\xd8\xff\xe0jpeg"
    requests = [
        ChatRequest([{"role": "user", "content": [{"type": "image", "image": image}]}]),
        ChatRequest([{"role": "user", "content": "text only"}]),
    ]
    generations = backend.generate(requests)
    conversations, sampling, lora = backend._engine.calls[0]
    assert len(backend._engine.calls) == 1 and lora is None
    assert conversations[0][0]["content"][0]["image_url"]["url"].startswith(
        "data:image/jpeg;base64,"
    )
    assert (sampling.max_tokens, sampling.logprobs) == (16, 0)
    assert [g.text for g in generations] == ["reply 0", "reply 1"]
    assert generations[0].token_ids == [5, 9]
    assert generations[0].logprobs == [-0.5, -1.25]
    assert backend._engine.options["limit_mm_per_prompt"] == {"image": 5}


def test_a_lora_version_reuses_the_engine(fake_vllm, tmp_path):
    from agents.policy.backends.vllm_inprocess import VLLMBackend

    base = VLLMBackend("base-model")
    adapter = tmp_path / "v3"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    tuned = base.with_weights(adapter)
    assert tuned._engine is base._engine
    tuned.generate([ChatRequest([{"role": "user", "content": "hi"}])])
    assert base._engine.calls[-1][2] == ("lora", "v3", str(adapter))
    assert base.with_weights(None) is base


def test_full_weights_get_a_new_engine(fake_vllm, tmp_path):
    from agents.policy.backends.vllm_inprocess import VLLMBackend

    full = tmp_path / "v4"
    full.mkdir()
    replaced = VLLMBackend("base-model").with_weights(full)
    assert replaced._engine.options["model"] == str(full)
