"""The task-set tools' settings for the one OpenAI-compatible client (rubrics, decomposition).

:class:`LLMClient` is :class:`infra.openai_client.ChatClient` built from an :class:`LLMConfig`;
the guarantees are that module's:

- Every reply is checked by a caller-given ``validate`` function; a reply it rejects is never
  returned. Replies are parsed strictly (:func:`~infra.openai_client.json_reply`): a reasoning
  model's ``<think>`` block dropped, then one JSON object, alone or in one ```json fenced block,
  no duplicate keys, no NaN.
- The one retry policy of :mod:`infra.openai_client`; :class:`LLMRejected` says why, with the
  last reason. The API key: ``api_key`` when given, else ``OPENAI_API_KEY``, else none (a
  placeholder).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infra.openai_client import (
    PLACEHOLDER_API_KEY,
    ChatClient,
    NoValidReply,
    ReplyError,
    RetryPolicy,
    json_reply,
)

# The names the task tools and their tests know these by.
LLMReplyError = ReplyError
LLMRejected = NoValidReply
# parse_json_object(text, keys): the reply's one JSON object with exactly ``keys``.
parse_json_object = json_reply


@dataclass(frozen=True)
class LLMConfig:
    """Where the model is and how hard to try; shared by the CLI and the tests."""

    base_url: str
    model: str
    api_key: str | None = PLACEHOLDER_API_KEY  # the placeholder or None: OPENAI_API_KEY, if set
    max_tokens: int = 512
    max_attempts: int = 3
    timeout_s: float = 120.0
    temperature: float = 0.0
    backoff_s: float = 0.5

    def __post_init__(self) -> None:
        if not self.base_url:
            raise ValueError("base_url is empty: give the server's /v1 URL (--llm-base-url)")
        if not self.model:
            raise ValueError("model is empty: give the served model's name (--llm-model)")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s}")
        _ = self.retry  # refuses a bad max_attempts or backoff_s here, not at the first request

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(max_attempts=self.max_attempts, backoff_s=self.backoff_s)


class LLMClient(ChatClient):
    """A :class:`~infra.openai_client.ChatClient` built from an :class:`LLMConfig`;
    ``openai_client`` replaces the SDK client (tests).

    Retries (:class:`~infra.openai_client.RetryPolicy`): up to ``max_attempts`` requests; a
    rejected reply is retried showing the model its reply and the reason; transient API failures
    are retried after a capped backoff; another 4xx rejects at once; authentication, permission
    and not-found errors are raised. Usage::

        from tasks.llm_client import LLMClient, LLMConfig

        llm = LLMClient(LLMConfig(base_url="http://127.0.0.1:8000/v1", model="Qwen/Qwen3-8B"))
        value = llm.ask(messages, validate=my_parser)  # raises LLMRejected after max_attempts
    """

    def __init__(
        self,
        config: LLMConfig,
        openai_client: Any = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ):
        super().__init__(
            config.base_url,
            config.model,
            api_key=config.api_key,
            timeout_s=config.timeout_s,
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            retry=config.retry,
            client=openai_client,
            sleep=sleep,
        )
        self.config = config


def as_client(llm: LLMClient | LLMConfig) -> LLMClient:
    return llm if isinstance(llm, LLMClient) else LLMClient(llm)


def mentions(text: str, phrase: str) -> bool:
    """Case-insensitive substring test, whitespace collapsed on both sides."""
    needle = " ".join(phrase.split()).casefold()
    return bool(needle) and needle in " ".join(text.split()).casefold()
