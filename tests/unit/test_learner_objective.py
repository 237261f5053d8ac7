"""The behaviour-cloning objective on the tiny random Qwen-VL model, on CPU."""

from __future__ import annotations

import io

import pytest
import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor

from agents.policy.tiny_model import build_tiny_vl_model
from learner.objective import IGNORE, encode, reply_loss
from learner.samples import Sample
from schemas.prompt.context import Current, build_context
from schemas.prompt.reply import format_reply


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = build_tiny_vl_model(tmp_path_factory.mktemp("models") / "tiny")
    processor = AutoProcessor.from_pretrained(path)
    model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32)
    return model, processor


def _jpeg() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (320, 192), (40, 120, 200)).save(buffer, "JPEG")
    return buffer.getvalue()


def _sample() -> Sample:
    context = build_context(
        "Find the price.", [], Current(1, "ep:0:observation", "Home", "http://a/")
    )
    messages = context.messages
    for message in messages:
        if isinstance(message["content"], list):
            for part in message["content"]:
                if part["type"] == "image":
                    part.pop("observation_event_id")
                    part["image"] = _jpeg()
    reply = format_reply({"kind": "answer", "text": "$15"}, "It says $15.", "answer", "done")
    return Sample("ep", 1, 0, messages, reply)


def test_only_the_reply_tokens_are_labelled(tiny):
    model, processor = tiny
    sample = _sample()
    inputs = encode(processor, sample)
    labelled = inputs["labels"][0] != IGNORE
    reply_ids = processor.tokenizer(sample.reply, add_special_tokens=False)["input_ids"]
    # The reply and the end-of-turn marker (and its newline), nothing of the prompt.
    assert len(reply_ids) <= int(labelled.sum()) <= len(reply_ids) + 3
    first = int(labelled.nonzero()[0])
    assert not labelled[:first].any() and labelled[first:].all()
    assert "pixel_values" in inputs  # the screenshot is part of the context


def test_training_on_the_reply_lowers_its_loss(tiny):
    model, processor = tiny
    model.train()
    sample = _sample()
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-3)
    torch.manual_seed(0)
    losses = []
    for _ in range(8):
        loss = reply_loss(model, processor, sample)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False)), losses
    assert losses[-1] < losses[0] * 0.9, losses
