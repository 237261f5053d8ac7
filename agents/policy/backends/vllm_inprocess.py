"""vLLM in-process, for workers with a GPU (`pip install webgym-streams[gpu]`).

One engine per worker (:class:`VLLMEngine`); a batch of requests goes to `LLM.chat` in one call
(vLLM batches it continuously). Images travel as data URLs, as with the HTTP backend. Token ids
and the log-probability of each generated token come back with every reply (vLLM reports raw
log-probabilities, before temperature and top-p, by default). Replies are drawn with the
backend's temperature and top-p (greedy by default) and record them. New policy versions
(:meth:`VLLMBackend.with_weights`): at most one engine is alive, a failed replacement leaves the
last good version serving, and a backend whose engine model was replaced refuses to generate.
"""

from __future__ import annotations

import copy
import gc
import hashlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.policy.backends import ChatRequest, Generation, Sampling
from agents.policy.backends.openai_http import to_openai_messages
from infra.weights import fetched_version

log = logging.getLogger(__name__)

MAX_IMAGES_PER_PROMPT = 5  # the context window holds 4 past screenshots and the current one

EngineFactory = Callable[[str], Any]  # a model id or directory -> an engine with `LLM.chat`


def vllm_engine_factory(max_lora_rank: int = 64) -> EngineFactory:
    """Builds real `vllm.LLM` engines, LoRA enabled."""

    def build(model: str) -> Any:
        from vllm import LLM  # vllm: installed on a GPU machine only (the gpu extra)

        return LLM(
            model=model,
            limit_mm_per_prompt={"image": MAX_IMAGES_PER_PROMPT},
            enable_lora=True,
            max_lora_rank=max_lora_rank,
        )

    return build


class EngineUnavailable(RuntimeError):
    """The engine no longer holds the model a backend was built for (or holds none)."""


class VLLMEngine:
    """The worker's one engine, holding one model (the base, or a version's full weights)."""

    def __init__(self, base_model: str, factory: EngineFactory):
        self.base_model = base_model
        self._factory = factory
        self._engine: Any = None
        self.model: str | None = None
        self.load(base_model)

    def load(self, model: str) -> None:
        """Hold ``model``; a different one replaces the current engine (see the module)."""
        if self.model == model and self._engine is not None:
            return
        previous = self.model
        self._release()
        try:
            self._engine = self._factory(model)
        except BaseException:
            if previous is not None:
                log.error("could not load %s; loading %s again", model, previous)
                try:
                    self._engine = self._factory(previous)
                    self.model = previous
                except Exception:  # noqa: BLE001 - the first error is the one to raise
                    log.exception("could not load %s again either: no engine now", previous)
            raise
        self.model = model

    def chat(self, model: str, conversations: list, sampling: Any, lora: Any) -> list:
        if self._engine is None or self.model != model:
            raise EngineUnavailable(
                f"the engine holds {self.model or 'no model'}, not {model}: "
                "this backend's version was replaced"
            )
        return self._engine.chat(conversations, sampling, lora_request=lora)

    def _release(self) -> None:
        engine, self._engine, self.model = self._engine, None, None
        if engine is None:
            return
        # vLLM's engine core runs in its own process: stop it, then drop the last reference.
        core = getattr(getattr(engine, "llm_engine", None), "engine_core", None)
        if callable(getattr(core, "shutdown", None)):
            core.shutdown()
        del engine, core
        gc.collect()
        _empty_gpu_cache()


def _empty_gpu_cache() -> None:
    try:
        import torch  # seconds to import: only once an engine was dropped, not at module load
    except ImportError:
        return
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def lora_id(weights: Path) -> int:
    """A LoRA request id that is the same in every process: the version number of a fetched
    version (unique per policy, versions only go up), else a digest of the directory's path."""
    version = fetched_version(weights)
    if version is not None and version.version > 0:
        return version.version
    digest = hashlib.sha256(str(Path(weights).resolve()).encode()).digest()
    return int.from_bytes(digest[:4], "big") % (2**31 - 1) + 1


class VLLMBackend:
    uses_weights = True

    def __init__(
        self,
        model: str,
        max_new_tokens: int = 512,
        temperature: float = 0.0,
        max_lora_rank: int = 64,
        top_p: float = 1.0,
        engine_factory: EngineFactory | None = None,
    ):
        """The backend of the base ``model``, on a new engine (``engine_factory``: how engines
        are built; default: `vllm.LLM`)."""
        self.model = model
        self._max_new_tokens = max_new_tokens
        self.sampling = Sampling(temperature, top_p).effective
        self._params = self._sampling_params(self.sampling)
        self._engine = VLLMEngine(model, engine_factory or vllm_engine_factory(max_lora_rank))
        self._engine_model = model
        self._lora: Any = None

    def _sampling_params(self, sampling: Sampling) -> Any:
        from vllm import SamplingParams  # vllm: installed on a GPU machine only

        # logprobs=0: the log-probability of each sampled token only.
        return SamplingParams(
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=self._max_new_tokens,
            logprobs=0,
        )

    def with_sampling(self, sampling: Sampling) -> VLLMBackend:
        """The same engine, model and adapter, drawing replies with ``sampling``."""
        other = copy.copy(self)
        other.sampling = sampling.effective
        other._params = self._sampling_params(other.sampling)
        return other

    def with_weights(self, weights: Path | None) -> VLLMBackend:
        """The backend serving a published version (None: the base model), on this worker's
        engine; any backend of the worker may be asked, any number of times, in any order.

        A LoRA adapter directory (with `adapter_config.json`) is served by the engine holding the
        base model through a `LoRARequest`, whose name and integer id are derived from the
        fetched version (:func:`infra.weights.fetched_version`), so they are the same in every
        process; full weights replace the engine's model. Guarantees of a replacement:

        - at most one engine is alive: the old one is shut down and released (with its GPU
          memory) before the new one is built;
        - if the new one cannot be built, the old model is loaded again before the error is
          raised, so the worker goes on serving the last good version;
        - a backend whose engine model was replaced refuses to generate rather than answer with
          another model's weights. The worker swaps versions only while no backend call runs.
        """
        base = self._engine.base_model
        if weights is None:
            self._engine.load(base)
            return self._view(base, None, base)
        if (weights / "adapter_config.json").exists():
            from vllm.lora.request import LoRARequest  # vllm: on a GPU machine only

            self._engine.load(base)  # adapters are trained on the base model
            version = fetched_version(weights)
            name = version.adapter_name if version is not None else weights.name
            return self._view(base, LoRARequest(name, lora_id(weights), str(weights)), name)
        self._engine.load(str(weights))
        return self._view(str(weights), None, str(weights))

    def _view(self, engine_model: str, lora: Any, name: str) -> VLLMBackend:
        """This backend's settings and engine, serving ``engine_model`` with ``lora``."""
        view = copy.copy(self)
        view._engine_model, view._lora, view.model = engine_model, lora, name
        return view

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        started = time.perf_counter()
        conversations = [to_openai_messages(request.messages) for request in requests]
        outputs = self._engine.chat(self._engine_model, conversations, self._params, self._lora)
        latency_ms = (time.perf_counter() - started) * 1000
        generations = []
        for output in outputs:
            completion = output.outputs[0]
            token_ids = list(completion.token_ids)
            # No logprobs when the engine was asked for none: an empty list, not a misaligned one.
            steps = completion.logprobs or []
            logprobs = [step[token].logprob for token, step in zip(token_ids, steps, strict=False)]
            generations.append(
                Generation(
                    completion.text, token_ids, logprobs, latency_ms, self.model, self.sampling
                )
            )
        return generations
