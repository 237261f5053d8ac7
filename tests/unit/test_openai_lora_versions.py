"""The OpenAI-compatible backend pointed at a vLLM server: each new LoRA version is loaded through
`POST /v1/load_lora_adapter` and named as the `model` of the requests that follow; sampling goes
with every request. Against a stand-in server (tests/vllm_server_standin.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.policy.backends import ChatRequest, Sampling
from agents.policy.main import BackendOptions, backend_factory
from infra.weights import WeightsRejected
from tests.vllm_server_standin import StandInVLLMServer, serving

HI = [ChatRequest([{"role": "user", "content": "hi"}])]


def _fetched(root: Path, version: int, adapter: bool = True) -> Path:
    """A directory laid out as infra.weights.fetch_weights leaves one."""
    path = root / "weights" / "web" / f"v{version}-{str(version) * 16}"
    path.mkdir(parents=True)
    (path / ("adapter_config.json" if adapter else "config.json")).write_text("{}")
    return path


@pytest.fixture
def server():
    stand_in = StandInVLLMServer("Qwen/Qwen3-VL-8B-Instruct")
    with serving(stand_in) as url:
        yield stand_in, url


def _factory(url: str, **sampling):
    options = BackendOptions(
        "openai", model="Qwen/Qwen3-VL-8B-Instruct", base_url=url, max_new_tokens=16, **sampling
    )
    return backend_factory(options)


def test_each_lora_version_is_loaded_then_named_in_requests(server, tmp_path):
    stand_in, url = server
    factory = _factory(url)
    base = factory(None)
    assert base.generate(HI)[0].model == "Qwen/Qwen3-VL-8B-Instruct"
    assert stand_in.loads == []  # the base model needs no adapter

    served = []
    for version in (1, 2):
        weights = _fetched(tmp_path, version)
        backend = factory(weights)
        generation = backend.generate(HI)[0]
        name = f"web-v{version}-{str(version) * 8}"
        assert stand_in.loads[-1] == {"lora_name": name, "lora_path": str(weights.resolve())}
        assert stand_in.chats[-1]["model"] == name and generation.model == name
        assert generation.text.endswith(f"({name})") and generation.logprobs == [-0.25, -1.5]
        served.append(backend)
    assert len(stand_in.loads) == 2
    assert served[0].generate(HI)[0].model == "web-v1-11111111"  # older versions stay loaded


def test_an_adapter_the_server_already_holds_counts_as_loaded(server, tmp_path):
    stand_in, url = server
    weights = _fetched(tmp_path, 3)
    _factory(url)(weights)
    again = _factory(url)(weights)  # another worker, or this one after a restart
    assert [load["lora_name"] for load in stand_in.loads] == ["web-v3-33333333"] * 2
    assert again.generate(HI)[0].model == "web-v3-33333333"


def test_sampling_is_sent_with_every_request_and_recorded(server, tmp_path):
    stand_in, url = server
    generation = _factory(url, temperature=0.8, top_p=0.95)(None).generate(HI)[0]
    assert (stand_in.chats[-1]["temperature"], stand_in.chats[-1]["top_p"]) == (0.8, 0.95)
    assert generation.sampling == Sampling(0.8, 0.95)
    greedy = _factory(url)(None).generate(HI)[0]
    assert (stand_in.chats[-1]["temperature"], stand_in.chats[-1]["top_p"]) == (0.0, 1.0)
    assert greedy.sampling == Sampling(0.0, 1.0)


def test_full_weights_are_refused_and_a_failed_load_raises(tmp_path):
    stand_in = StandInVLLMServer("base")
    with serving(stand_in) as url:
        factory = backend_factory(BackendOptions("openai", model="base", base_url=url))
        with pytest.raises(WeightsRejected, match="full weights"):
            factory(_fetched(tmp_path, 4, adapter=False))
    with pytest.raises(RuntimeError, match="cannot reach"):
        factory(_fetched(tmp_path, 5))  # the server is gone: a swap failure, tried again later
