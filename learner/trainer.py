"""One model under training: filtered behaviour cloning steps, LoRA or full fine-tuning.

The same code trains the tiny random Qwen-VL model on CPU (float32) and a Qwen3-VL checkpoint on
a GPU (bf16 weights, bf16 autocast, optional gradient checkpointing). Guarantees:
:meth:`Trainer.step` is one optimiser step over all the samples it is given, following their
mean loss; :meth:`Trainer.save` writes what a policy worker serves; :meth:`Trainer.optimizer_state`
/ the ``optimizer_state`` argument carry the optimiser (and float32 master weights,
:class:`MasterWeights`) across a restart, so a resumed learner continues the same optimisation.
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
    # Weights' dtype: "bfloat16" or "float32"; None: bf16 on a GPU, float32 on CPUs (slow at bf16).
    dtype: str | None = None

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
        if config.dtype not in (None, "bfloat16", "float32"):
            raise ValueError(f"dtype must be bfloat16 or float32, not {config.dtype!r}")
        default = torch.bfloat16 if on_gpu else torch.float32  # CPUs are slow at bf16
        self.dtype = getattr(torch, config.dtype) if config.dtype else default
        start = config.model if config.lora or weights is None else str(weights)
        model = AutoModelForImageTextToText.from_pretrained(start, dtype=self.dtype)
        if config.lora:
            # peft: seconds more to import, for LoRA training only
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
        self.masters = MasterWeights(parameters)
        self.optimizer = torch.optim.AdamW(
            self.masters.optimised, lr=config.learning_rate, weight_decay=config.weight_decay
        )
        if optimizer_state is not None:
            state = torch.load(io.BytesIO(optimizer_state), map_location=config.device)
            if "master_weights" in state:
                self.masters.load(state["master_weights"])
                state = state["optimizer"]
            self.optimizer.load_state_dict(state)

    def trainable_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def step(self, samples: list[Sample]) -> float:
        """One optimiser step on ``samples``; returns their mean reply loss before the step.

        One optimiser step over all the samples it is given: each sample's reply loss is
        back-propagated on its own (gradient accumulation, so memory holds one sample's
        activations) and scaled so the step follows the mean loss; the gradient norm is clipped.
        """
        if not samples:
            raise ValueError("an optimiser step needs at least one sample")
        self.optimizer.zero_grad(set_to_none=True)
        self.model.zero_grad(set_to_none=True)
        total = 0.0
        for sample in samples:
            with self._autocast():
                loss = reply_loss(self.model, self.processor, sample)
            (loss / len(samples)).backward()
            self.masters.accumulate_gradients()  # summed in float32, not in bf16
            total += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(self.masters.optimised, self.config.max_grad_norm)
        self.optimizer.step()
        self.masters.copy_to_model()
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
        """Write what a policy worker serves: a LoRA adapter directory (``adapter_config.json``
        + ``adapter_model.safetensors``, which vLLM serves as a LoRA adapter and the local
        backend merges), or a whole checkpoint (safetensors, config and processor files)."""
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(directory, safe_serialization=True)
        if not self.config.lora:
            self.processor.save_pretrained(directory)  # a whole checkpoint a worker can load

    def optimizer_state(self) -> bytes:
        state = self.optimizer.state_dict()
        if self.masters.pairs:  # the published bf16 weights lose what the masters hold
            state = {"optimizer": state, "master_weights": self.masters.state()}
        buffer = io.BytesIO()
        torch.save(state, buffer)
        return buffer.getvalue()

    def _autocast(self) -> Any:
        if self.config.device.startswith("cuda"):
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()


class MasterWeights:
    """float32 master copies of the trainable parameters stored in less precision.

    ``optimised`` is what the optimiser steps, in the order of the parameters given: the
    float32 parameters themselves, and a float32 master for each other one. Gradients are moved
    into the masters' after each backward pass (:meth:`accumulate_gradients`), and the model's
    weights are refreshed from the masters after each step (:meth:`copy_to_model`).

    Trainable weights stored in less than float32 (full fine-tuning in bf16) are optimised as
    float32 *master* copies: the model's bf16 weights are the masters rounded after every step,
    so updates far below a bf16 weight's resolution (lr 1e-5 on weights of about 1e-2, where bf16
    resolves about 1e-4) accumulate instead of being rounded away. The masters travel with the
    optimiser state. LoRA adapters are float32 already (peft keeps them so).
    """

    def __init__(self, parameters: list[torch.nn.Parameter]):
        self.pairs: list[tuple[torch.nn.Parameter, torch.Tensor]] = []
        self.optimised: list[torch.Tensor] = []
        for parameter in parameters:
            if parameter.dtype == torch.float32:
                self.optimised.append(parameter)
                continue
            master = parameter.detach().float().clone().requires_grad_(True)
            self.pairs.append((parameter, master))
            self.optimised.append(master)

    @torch.no_grad()
    def accumulate_gradients(self) -> None:
        for parameter, master in self.pairs:
            if parameter.grad is None:
                continue
            if master.grad is None:
                master.grad = parameter.grad.float()
            else:
                master.grad += parameter.grad.float()
            parameter.grad = None

    @torch.no_grad()
    def copy_to_model(self) -> None:
        for parameter, master in self.pairs:
            parameter.copy_(master)  # rounds to the parameter's dtype

    def state(self) -> list[torch.Tensor]:
        return [master.detach().clone() for _, master in self.pairs]

    @torch.no_grad()
    def load(self, masters: list[torch.Tensor]) -> None:
        if len(masters) != len(self.pairs):
            raise ValueError(f"{len(masters)} master weights saved for {len(self.pairs)}")
        for (_, master), saved in zip(self.pairs, masters, strict=True):
            master.copy_(saved)
        self.copy_to_model()


def _language_model_targets(model: Any) -> list[str]:
    """The attention projections LoRA goes on; Qwen-VL's vision tower names its own differently
    (``attn.qkv``, ``attn.proj``), so these suffixes select the language model only."""
    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    if not present.issuperset(LORA_TARGETS):
        raise ValueError(f"the model lacks some of {', '.join(LORA_TARGETS)} for LoRA adapters")
    return list(LORA_TARGETS)
