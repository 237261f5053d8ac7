"""OpenAI-compatible chat completions (vLLM's server, `transformers serve`, hosted providers).

Images travel as base64 data URLs. Requests of a batch run concurrently (the server batches
them). Token ids are not part of the OpenAI API and stay empty; log-probabilities are returned
when the server provides them (vLLM's are of the unmodified distribution). Every request carries
the backend's temperature and top-p (greedy by default), and every reply records them.

Policy versions on a vLLM server (`vllm serve --enable-lora` with
`VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`): :class:`LoraAdapters` loads a published LoRA version
through the server's `POST /v1/load_lora_adapter` under a name that is the same in every process
(:attr:`infra.weights.FetchedVersion.adapter_name`), and :meth:`OpenAIBackend.serving` gives the
backend that names it as the `model` of its requests. Loading is idempotent: an adapter the
server already holds under that name (another worker, or this one before a restart) counts as
loaded. The server reads the adapter from the path this worker fetched it to, so it must see this
worker's cache directory (same host, or a shared volume). Adapters are never unloaded: other
workers of the same server may still serve an older version.
"""

from __future__ import annotations

import base64
import copy
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from openai import OpenAI

from agents.policy.backends import ChatRequest, Generation, Sampling
from infra.weights import fetched_version


def _mime(image: bytes) -> str:
    return "image/png" if image.startswith(b"\x89PNG") else "image/jpeg"


def to_openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    converted = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            parts = []
            for part in content:
                if part["type"] == "image":
                    encoded = base64.b64encode(part["image"]).decode()
                    url = f"data:{_mime(part['image'])};base64,{encoded}"
                    parts.append({"type": "image_url", "image_url": {"url": url}})
                else:
                    parts.append(part)
            content = parts
        converted.append({"role": message["role"], "content": content})
    return converted


class OpenAIBackend:
    uses_weights = True  # the server's weights: the base model, or the adapter it names

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "not-needed",
        max_tokens: int = 512,
        temperature: float = 0.0,
        concurrency: int = 8,
        timeout_s: float = 120.0,
        top_p: float = 1.0,
    ):
        self.model = model  # what requests ask the server for
        self.sampling = Sampling(temperature, top_p).effective
        self._client = OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=2)
        self._max_tokens = max_tokens
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="openai")

    def with_sampling(self, sampling: Sampling) -> OpenAIBackend:
        """The same client, model and threads, drawing replies with ``sampling``."""
        other = copy.copy(self)
        other.sampling = sampling.effective
        return other

    def serving(self, model: str) -> OpenAIBackend:
        """The same client, sampling and threads, asking the server for ``model`` (a loaded
        adapter's name) instead."""
        other = copy.copy(self)
        other.model = model
        return other

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        return list(self._pool.map(self._one, requests))

    def _one(self, request: ChatRequest) -> Generation:
        started = time.perf_counter()
        response = self._client.chat.completions.create(
            model=self.model,
            messages=to_openai_messages(request.messages),
            max_tokens=self._max_tokens,
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            logprobs=True,
        )
        choice = response.choices[0]
        logprobs = [t.logprob for t in (choice.logprobs.content or [])] if choice.logprobs else []
        return Generation(
            text=choice.message.content or "",
            token_ids=[],
            logprobs=logprobs,
            latency_ms=(time.perf_counter() - started) * 1000,
            model=response.model or self.model,
            sampling=self.sampling,
        )


class AdapterLoadError(RuntimeError):
    """The server did not load an adapter; the message says what it answered."""


class LoraAdapters:
    """Loads published LoRA versions into a vLLM OpenAI-compatible server at run time."""

    def __init__(self, base_url: str, api_key: str = "not-needed", timeout_s: float = 120.0):
        # vLLM serves its adapter endpoints beside /v1/chat/completions.
        self.url = base_url.rstrip("/") + "/load_lora_adapter"
        self._headers = {"Authorization": f"Bearer {api_key}"}
        self._timeout_s = timeout_s

    def load(self, weights: Path) -> str:
        """Load the adapter in ``weights`` (a fetched version) and return the name to ask for."""
        version = fetched_version(weights)
        name = version.adapter_name if version is not None else Path(weights).name
        body = {"lora_name": name, "lora_path": str(Path(weights).resolve())}
        try:
            reply = httpx.post(self.url, json=body, headers=self._headers, timeout=self._timeout_s)
        except httpx.HTTPError as exc:
            raise AdapterLoadError(f"cannot reach {self.url}: {exc}") from exc
        if reply.status_code == 200 or (
            reply.status_code == 400 and "already been loaded" in reply.text
        ):
            return name
        raise AdapterLoadError(
            f"{self.url} answered {reply.status_code} to loading {name}: {reply.text[:300]}. "
            "Serve with `vllm serve MODEL --enable-lora --max-lora-rank R` and "
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True in its environment."
        )
