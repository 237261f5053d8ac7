"""The filtered behaviour-cloning objective: cross-entropy on the reply tokens only.

REINFORCE with a 0/1 reward, trained on positives only (the paper's recipe), is exactly this:
the log-likelihood of the reply the policy gave, given exactly the context it saw, for steps of
successful trajectories. The prompt (system prompt, task, earlier rounds, screenshots) is
encoded with the same chat template and processor the policy's local backend uses, and its
tokens are masked out of the loss (label -100); the reply is followed by the template's
end-of-turn token, so the model also learns where to stop.
"""

from __future__ import annotations

import io
from typing import Any

import torch
from PIL import Image

from learner.samples import Sample

IGNORE = -100


def _template_messages(messages: list[dict[str, Any]]) -> tuple[list[dict], list[Image.Image]]:
    """Messages for the chat template (image parts without bytes) and the images, in order."""
    converted, images = [], []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            parts = []
            for part in content:
                if part.get("type") == "image":
                    images.append(Image.open(io.BytesIO(part["image"])).convert("RGB"))
                    part = {"type": "image"}
                parts.append(part)
            content = parts
        converted.append({**message, "content": content})
    return converted, images


def encode(processor: Any, sample: Sample) -> dict[str, torch.Tensor]:
    """Model inputs for one sample, with ``labels`` set on the reply tokens only."""
    messages, images = _template_messages(sample.messages)
    prompt = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    full = processor.apply_chat_template(
        [*messages, {"role": "assistant", "content": sample.reply}], tokenize=False
    )
    if not full.startswith(prompt):
        raise ValueError("the chat template does not extend the prompt with the reply")
    images = images or None
    prompt_ids = processor(text=[prompt], images=images, return_tensors="pt")["input_ids"]
    inputs = processor(text=[full], images=images, return_tensors="pt")
    labels = inputs["input_ids"].clone()
    labels[:, : prompt_ids.shape[1]] = IGNORE
    if (labels != IGNORE).sum() == 0:
        raise ValueError(f"sample {sample.episode_id}:{sample.step} has no reply tokens")
    inputs["labels"] = labels
    return dict(inputs)


def reply_loss(model: Any, processor: Any, sample: Sample) -> torch.Tensor:
    """Mean cross-entropy of the reply tokens of ``sample`` under ``model``."""
    inputs = {k: v.to(model.device) for k, v in encode(processor, sample).items()}
    return model(**inputs).loss
