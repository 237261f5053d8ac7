"""vLLM in-process, for workers with a GPU (`pip install webgym-streams[gpu]`).

One engine per worker; a batch of requests goes to `LLM.chat` in one call (vLLM batches it
continuously). Images travel as data URLs, as with the HTTP backend. Token ids and the
log-probability of each generated token come back with every reply.

New policy versions: a LoRA adapter directory (with `adapter_config.json`) is served by the same
engine through a `LoRARequest` (no reload); full weights replace the engine (slow, but exact).
"""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import Any

from agents.policy.backends import ChatRequest, Generation
from agents.policy.backends.openai_http import to_openai_messages

MAX_IMAGES_PER_PROMPT = 5  # the context window holds 4 past screenshots and the current one


class VLLMBackend:
    def __init__(
        self,
        model: str,
        max_new_tokens: int = 512,
        temperature: float = 0.0,
        max_lora_rank: int = 64,
        engine: Any = None,
        lora: Any = None,
    ):
        from vllm import LLM, SamplingParams

        self.model = model
        self._max_lora_rank = max_lora_rank
        self._engine = engine or LLM(
            model=model,
            limit_mm_per_prompt={"image": MAX_IMAGES_PER_PROMPT},
            enable_lora=True,
            max_lora_rank=max_lora_rank,
        )
        self._lora = lora
        # logprobs=0: the log-probability of each sampled token only.
        self._sampling = SamplingParams(
            temperature=temperature, max_tokens=max_new_tokens, logprobs=0
        )

    def with_weights(self, weights: Path | None) -> VLLMBackend:
        """The backend serving a published version (None: the base model)."""
        if weights is None:
            return self
        if (weights / "adapter_config.json").exists():
            from vllm.lora.request import LoRARequest

            lora = LoRARequest(weights.name, abs(hash(str(weights))) % 2**31 or 1, str(weights))
            return VLLMBackend(self.model, engine=self._engine, lora=lora, **self._options())
        del self._engine  # full weights: a new engine (frees the GPU memory of the old one)
        gc.collect()
        return VLLMBackend(str(weights), **self._options())

    def _options(self) -> dict[str, Any]:
        return {
            "max_new_tokens": self._sampling.max_tokens,
            "temperature": self._sampling.temperature,
            "max_lora_rank": self._max_lora_rank,
        }

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        started = time.perf_counter()
        conversations = [to_openai_messages(request.messages) for request in requests]
        outputs = self._engine.chat(conversations, self._sampling, lora_request=self._lora)
        latency_ms = (time.perf_counter() - started) * 1000
        generations = []
        for output in outputs:
            completion = output.outputs[0]
            token_ids = list(completion.token_ids)
            # No logprobs when the engine was asked for none: an empty list, not a misaligned one.
            steps = completion.logprobs or []
            logprobs = [step[token].logprob for token, step in zip(token_ids, steps, strict=False)]
            generations.append(
                Generation(completion.text, token_ids, logprobs, latency_ms, self.model)
            )
        return generations
