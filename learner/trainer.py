"""One model under training: filtered behaviour cloning steps, LoRA or full fine-tuning.

The same code trains the tiny random Qwen-VL model on CPU (float32) and a Qwen3-VL checkpoint on
a GPU (bf16 weights, bf16 autocast, optional gradient checkpointing). Guarantees:

- :meth:`Trainer.step` is one optimiser step over all the samples it is given: each sample's
  reply loss is back-propagated on its own (gradient accumulation, so memory holds one sample's
  activations) and scaled so the step follows the mean loss; the gradient norm is clipped;
- :meth:`Trainer.save` writes what a policy worker serves: a LoRA adapter directory
  (``adapter_config.json`` + ``adapter_model.safetensors``, which vLLM serves as a LoRA adapter and
  the local backend merges), or a whole checkpoint (safetensors, config and processor files);
- :meth:`Trainer.optimizer_state` / the ``optimizer_state`` argument carry the optimiser across
  a restart, so a resumed learner continues the same optimisation.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

from learner.objective import reply_loss
from learner.samples import Sample

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")  # the language model's attention


@dataclass(frozen=True)
class TrainerConfig:
    model: str  # base checkpoint: a directory or a model id already in the local HF cache
    lora_rank: int = 16  # 0 = full fine-tuning
    lora_alpha: int = 32
    learning_rate: float = 1e-4
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    device: str = "cpu"
    gradient_checkpointing: bool = False

    @property
    def lora(self) -> bool:
        return self.lora_rank > 0


class Trainer:
    def __init__(
        self,
        config: TrainerConfig,
        weights: Path | None = None,
        optimizer_state: bytes | None = None,
    ):
        """Start from the base model (``weights`` None) or from a published version's files."""
        self.config = config
        self.processor = AutoProcessor.from_pretrained(config.model)
        on_gpu = config.device.startswith("cuda")
        self.dtype = torch.bfloat16 if on_gpu else torch.float32  # CPUs are slow at bf16
        start = config.model if config.lora or weights is None else str(weights)
        model = AutoModelForImageTextToText.from_pretrained(start, dtype=self.dtype)
        if config.lora:
            from peft import LoraConfig, PeftModel, get_peft_model

            if weights is not None:
                model = PeftModel.from_pretrained(model, weights, is_trainable=True)
            else:
                lora = LoraConfig(
                    r=config.lora_rank,
                    lora_alpha=config.lora_alpha,
                    lora_dropout=0.0,
                    target_modules=_language_model_targets(model),
                )
                model = get_peft_model(model, lora)
        if config.gradient_checkpointing:
            model.gradient_checkpointing_enable()
            if config.lora:
                model.enable_input_require_grads()
        self.model = model.to(config.device)
        self.model.train()
        parameters = [p for p in self.model.parameters() if p.requires_grad]
        if not parameters:
            raise ValueError(f"{config.model} has no trainable parameters in this configuration")
        self.optimizer = torch.optim.AdamW(
            parameters, lr=config.learning_rate, weight_decay=config.weight_decay
        )
        if optimizer_state is not None:
            self.optimizer.load_state_dict(
                torch.load(io.BytesIO(optimizer_state), map_location=config.device)
            )

    def trainable_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def step(self, samples: list[Sample]) -> float:
        """One optimiser step on ``samples``; returns their mean reply loss before the step."""
        if not samples:
            raise ValueError("an optimiser step needs at least one sample")
        self.optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for sample in samples:
            with self._autocast():
                loss = reply_loss(self.model, self.processor, sample)
            (loss / len(samples)).backward()
            total += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(
            [p for p in self.model.parameters() if p.requires_grad], self.config.max_grad_norm
        )
        self.optimizer.step()
        return total / len(samples)

    @torch.no_grad()
    def loss(self, samples: list[Sample]) -> float:
        """Mean reply loss of ``samples`` under the current weights (no update)."""
        self.model.eval()
        try:
            total = 0.0
            for sample in samples:
                with self._autocast():
                    total += float(reply_loss(self.model, self.processor, sample))
            return total / max(len(samples), 1)
        finally:
            self.model.train()

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(directory, safe_serialization=True)
        if not self.config.lora:
            self.processor.save_pretrained(directory)  # a whole checkpoint a worker can load

    def optimizer_state(self) -> bytes:
        buffer = io.BytesIO()
        torch.save(self.optimizer.state_dict(), buffer)
        return buffer.getvalue()

    def _autocast(self) -> Any:
        if self.config.device.startswith("cuda"):
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()


def _language_model_targets(model: Any) -> list[str]:
    """The attention projections LoRA goes on; Qwen-VL's vision tower names its own differently
    (``attn.qkv``, ``attn.proj``), so these suffixes select the language model only."""
    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    if not present.issuperset(LORA_TARGETS):
        raise ValueError(f"the model lacks some of {', '.join(LORA_TARGETS)} for LoRA adapters")
    return list(LORA_TARGETS)
