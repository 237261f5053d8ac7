"""OpenAI-compatible chat completions (vLLM's server, `transformers serve`, hosted providers).

Requests go through :class:`infra.openai_client.ChatClient`: its API-key rule and its one retry
policy (transient failures retried up to 3 attempts with capped backoff; a refused request or
exhausted attempts raise, and the worker answers the batch with an error). Every request carries
the backend's temperature and top-p (greedy by default), and every reply records them. Policy
versions on a vLLM server: :class:`LoraAdapters` (loading is idempotent; adapters are never
unloaded).
"""

from __future__ import annotations

import copy
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from agents.policy.backends import ChatRequest, Generation, Sampling
from infra.openai_client import ChatClient, ChatEndpoint, image_part, resolve_api_key
from infra.weights import fetched_version


def to_openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    converted = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            content = [
                image_part(part["image"]) if part["type"] == "image" else part for part in content
            ]
        converted.append({"role": message["role"], "content": content})
    return converted


class OpenAIBackend:
    """Chat completions on an OpenAI-compatible server.

    Images travel as base64 data URLs. Requests of a batch run concurrently (the server batches
    them). Token ids are not part of the OpenAI API and stay empty; log-probabilities are
    returned when the server provides them (vLLM's are of the unmodified distribution). The
    reply text is kept as the model wrote it, reasoning included: it is what the
    log-probabilities score.
    """

    uses_weights = True  # the server's weights: the base model, or the adapter it names

    def __init__(
        self, endpoint: ChatEndpoint, sampling: Sampling | None = None, concurrency: int = 8
    ):
        """Replies drawn with ``sampling`` (default: greedy); the endpoint's own temperature is
        not used."""
        self.model = endpoint.model  # what requests ask the server for
        self.sampling = (sampling or Sampling()).effective
        self._llm = ChatClient(endpoint)
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
        reply = self._llm.complete(
            to_openai_messages(request.messages),
            model=self.model,
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            logprobs=True,
        )
        return Generation(
            text=reply.text,
            token_ids=[],
            logprobs=reply.logprobs,
            latency_ms=(time.perf_counter() - started) * 1000,
            model=reply.model or self.model,
            sampling=self.sampling,
        )


class AdapterLoadError(RuntimeError):
    """The server did not load an adapter; the message says what it answered."""


class LoraAdapters:
    """Loads published LoRA versions into a vLLM OpenAI-compatible server at run time.

    The server runs `vllm serve --enable-lora` with `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`. A
    published LoRA version is loaded through the server's `POST /v1/load_lora_adapter` under a
    name that is the same in every process (:attr:`infra.weights.FetchedVersion.adapter_name`),
    and :meth:`OpenAIBackend.serving` gives the backend that names it as the `model` of its
    requests. Loading is idempotent: an adapter the server already holds under that name
    (another worker, or this one before a restart) counts as loaded. The server reads the
    adapter from the path this worker fetched it to, so it must see this worker's cache
    directory (same host, or a shared volume). Adapters are never unloaded: other workers of the
    same server may still serve an older version.
    """

    def __init__(self, base_url: str, api_key: str | None = None, timeout_s: float = 120.0):
        # vLLM serves its adapter endpoints beside /v1/chat/completions.
        self.url = base_url.rstrip("/") + "/load_lora_adapter"
        self._headers = {"Authorization": f"Bearer {resolve_api_key(api_key)}"}
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
