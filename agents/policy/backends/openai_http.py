"""OpenAI-compatible chat completions (vLLM's server, `transformers serve`, hosted providers).

Images travel as base64 data URLs. Requests of a batch run concurrently (the server batches
them). Token ids are not part of the OpenAI API and stay empty; log-probabilities are returned
when the server provides them.
"""

from __future__ import annotations

import base64
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from openai import OpenAI

from agents.policy.backends import ChatRequest, Generation


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
    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "not-needed",
        max_tokens: int = 512,
        temperature: float = 0.0,
        concurrency: int = 8,
        timeout_s: float = 120.0,
    ):
        self.model = model
        self._client = OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=2)
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="openai")

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        return list(self._pool.map(self._one, requests))

    def _one(self, request: ChatRequest) -> Generation:
        started = time.perf_counter()
        response = self._client.chat.completions.create(
            model=self.model,
            messages=to_openai_messages(request.messages),
            max_tokens=self._max_tokens,
            temperature=self._temperature,
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
        )
