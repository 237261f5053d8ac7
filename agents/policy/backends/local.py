"""A local `transformers` backend: any Qwen-VL checkpoint directory, batched, on CPU or one GPU.

Guarantees:

- `generate` returns one `Generation` per request, in request order.
- Greedy (temperature 0) is deterministic: the same requests give the same tokens.
- Sampling (temperature > 0, optionally top-p) is reproducible: call number n of a backend built
  with `seed` draws from `seed + n`, without touching the caller's global torch RNG.
- Thread-safe: calls are serialised by a lock, so `asyncio.to_thread(backend.generate, ...)`
  from several tasks is fine.
"""

from __future__ import annotations

import copy
import io
import threading
import time
from pathlib import Path
from typing import Any

import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor, GenerationConfig

from agents.policy.backends import ChatRequest, Generation, Sampling


class LocalBackend:
    """Loads a processor and model from `checkpoint` and generates replies in batches.

    A LoRA adapter (a directory with `adapter_config.json`, as the learner publishes) is applied
    to the checkpoint and merged into it, so it generates at the base model's speed.
    """

    uses_weights = True

    def __init__(
        self,
        checkpoint: Path,
        device: str = "cpu",
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        seed: int = 0,
        adapter: Path | None = None,
        top_p: float = 1.0,
    ) -> None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        self.sampling = Sampling(temperature, top_p).effective
        self.checkpoint = Path(checkpoint)
        self.model_name = (adapter or self.checkpoint).name
        self.device = device
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.seed = seed
        self._calls = 0
        self._lock = threading.Lock()
        self.processor = AutoProcessor.from_pretrained(self.checkpoint)
        self.processor.tokenizer.padding_side = "left"  # prompts end where generation starts
        self.model = AutoModelForImageTextToText.from_pretrained(
            self.checkpoint,
            dtype=torch.float32 if device == "cpu" else "auto",  # CPUs are slow at bf16
        ).to(device)
        if adapter is not None:
            from peft import PeftModel  # peft: seconds more to import, for adapters only

            self.model = PeftModel.from_pretrained(self.model, adapter).merge_and_unload()
        self.model.eval()
        eos = self.model.generation_config.eos_token_id
        self._eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])

    def with_sampling(self, sampling: Sampling) -> LocalBackend:
        """The same model (and lock: one call at a time on it), drawing replies with
        ``sampling``."""
        other = copy.copy(self)
        other.sampling = sampling.effective
        other.temperature = other.sampling.temperature
        return other

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        """Generate one reply per request (one padded batch); see the module guarantees.

        No top-k: a checkpoint's own sampling defaults are switched off, so `temperature` and
        `top_p` alone say how tokens were drawn (every `Generation` carries them).
        `logprobs[i]` is the log-probability of `token_ids[i]` under the model's unmodified
        distribution (temperature 1, no top-k/top-p), whatever temperature and top-p drew it, as
        vLLM reports raw log-probabilities.
        """
        if not requests:
            return []
        with self._lock:
            start = time.perf_counter()
            inputs = self._encode(requests)
            with torch.random.fork_rng(devices=self._rng_devices()):
                torch.manual_seed(self.seed + self._calls)
                self._calls += 1
                with torch.inference_mode():
                    out = self.model.generate(**inputs, generation_config=self._generation_config())
            latency_ms = (time.perf_counter() - start) * 1000.0
        prompt_len = inputs["input_ids"].shape[1]
        new_tokens = out.sequences[:, prompt_len:]
        # (batch, steps, vocab) raw logits -> log-probability of each chosen token, on the device.
        logprobs = torch.stack(out.logits, dim=1).float().log_softmax(dim=-1)
        chosen = logprobs.gather(-1, new_tokens.unsqueeze(-1)).squeeze(-1).cpu()
        new_tokens = new_tokens.cpu()
        return [
            self._generation(row.tolist(), row_logprobs.tolist(), latency_ms)
            for row, row_logprobs in zip(new_tokens, chosen, strict=True)
        ]

    def _encode(self, requests: list[ChatRequest]) -> dict[str, Any]:
        texts, images = [], []
        for request in requests:
            messages = []
            for message in request.messages:
                content = message["content"]
                if not isinstance(content, str):
                    parts = []
                    for part in content:
                        if part.get("type") == "image":
                            images.append(_decode_image(part["image"]))
                            part = {"type": "image"}  # the processor gets the pixels separately
                        parts.append(part)
                    content = parts
                messages.append({**message, "content": content})
            texts.append(
                self.processor.apply_chat_template(
                    messages, tokenize=False, add_generation_prompt=True
                )
            )
        inputs = self.processor(
            text=texts, images=images or None, padding=True, return_tensors="pt"
        )
        return inputs.to(self.device)

    def _generation_config(self) -> GenerationConfig:
        config = GenerationConfig.from_dict(self.model.generation_config.to_dict())
        config.update(
            max_new_tokens=self.max_new_tokens,
            return_dict_in_generate=True,
            output_logits=True,  # raw logits, before temperature and filtering
        )
        if self.sampling.greedy:
            config.update(do_sample=False, temperature=None, top_k=None, top_p=None)
        else:
            # Only our temperature and top-p: a checkpoint's own top-k default is switched off.
            config.update(
                do_sample=True,
                temperature=self.sampling.temperature,
                top_k=0,
                top_p=self.sampling.top_p,
            )
        return config

    def _generation(self, ids: list[int], logprobs: list[float], latency_ms: float) -> Generation:
        # Rows that stopped early are padded after their stop token: cut after the first one.
        end = next((i + 1 for i, t in enumerate(ids) if t in self._eos_ids), len(ids))
        ids, logprobs = ids[:end], logprobs[:end]
        text = self.processor.tokenizer.decode(ids, skip_special_tokens=True)
        return Generation(text, ids, logprobs, latency_ms, self.model_name, self.sampling)

    def _rng_devices(self) -> list[int]:
        if self.device.startswith("cuda"):
            return [torch.device(self.device).index or 0]
        return []


def _decode_image(image: bytes | Image.Image) -> Image.Image:
    if isinstance(image, Image.Image):
        return image.convert("RGB")
    return Image.open(io.BytesIO(image)).convert("RGB")
