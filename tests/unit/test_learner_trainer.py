"""The learner's trainer on the tiny random Qwen-VL model, on CPU: LoRA and full fine-tuning."""

from __future__ import annotations

import io

import pytest
import torch
from PIL import Image

from agents.policy.backends import ChatRequest
from agents.policy.backends.local import LocalBackend
from agents.policy.main import BackendOptions, backend_factory
from agents.policy.tiny_model import build_tiny_vl_model
from learner.samples import Sample
from learner.trainer import Trainer, TrainerConfig
from schemas.prompt.context import Current, build_context
from schemas.prompt.reply import format_reply


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_vl_model(tmp_path_factory.mktemp("models") / "tiny")


def _jpeg(colour) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (320, 192), colour).save(buffer, "JPEG")
    return buffer.getvalue()


def _sample(n: int) -> Sample:
    context = build_context(
        f"Find the price of item {n}.", [], Current(1, f"ep{n}:0:observation", "Home", "http://a/")
    )
    for message in context.messages:
        if isinstance(message["content"], list):
            for part in message["content"]:
                if part["type"] == "image":
                    part.pop("observation_event_id")
                    part["image"] = _jpeg((40 * n % 255, 120, 200))
    reply = format_reply({"kind": "answer", "text": f"${n}"}, f"It says ${n}.", "answer", "done")
    return Sample(f"ep{n}", 1, 0, context.messages, reply)


@pytest.mark.parametrize("lora_rank", [8, 0], ids=["lora", "full"])
def test_steps_lower_the_loss_and_a_saved_version_resumes_exactly(tiny, tmp_path, lora_rank):
    config = TrainerConfig(model=str(tiny), lora_rank=lora_rank, learning_rate=5e-3)
    samples = [_sample(n) for n in range(3)]
    trainer = Trainer(config)
    before = trainer.loss(samples)
    losses = [trainer.step(samples) for _ in range(4)]
    after = trainer.loss(samples)
    assert losses[0] == pytest.approx(before, rel=1e-5)  # a step reports the loss it started at
    assert after < before * 0.99, (before, losses, after)

    saved = tmp_path / "v1"
    trainer.save(saved)
    files = {p.name for p in saved.iterdir()}
    if lora_rank:
        assert {"adapter_config.json", "adapter_model.safetensors"} <= files
    else:
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= files

    resumed = Trainer(config, weights=saved, optimizer_state=trainer.optimizer_state())
    assert resumed.loss(samples) == pytest.approx(after, rel=1e-5)
    # Same weights and optimiser state: the next step is the same step.
    assert resumed.step(samples) == pytest.approx(trainer.step(samples), rel=1e-5)
    for a, b in zip(trainer.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_the_local_backend_serves_a_published_adapter(tiny, tmp_path):
    config = TrainerConfig(model=str(tiny), lora_rank=8, learning_rate=5e-2)
    trainer = Trainer(config)
    for _ in range(3):
        trainer.step([_sample(1)])
    trainer.save(tmp_path / "adapter")
    base = LocalBackend(tiny, max_new_tokens=4)
    # What `webgym worker policy --backend local --model <tiny>` builds for a published adapter.
    tuned = backend_factory(BackendOptions("local", str(tiny), max_new_tokens=4))(
        tmp_path / "adapter"
    )
    assert isinstance(tuned, LocalBackend) and tuned.checkpoint == tiny
    request = ChatRequest([{"role": "user", "content": "Say hi."}])
    assert tuned.model_name == "adapter"
    changed = [
        not torch.equal(a, b)
        for a, b in zip(base.model.parameters(), tuned.model.parameters(), strict=True)
    ]
    assert any(changed)  # the adapter is merged into the weights it generates with
    assert len(tuned.generate([request])[0].token_ids) >= 1


def test_a_step_needs_samples(tiny):
    with pytest.raises(ValueError, match="at least one sample"):
        Trainer(TrainerConfig(model=str(tiny), lora_rank=4)).step([])
