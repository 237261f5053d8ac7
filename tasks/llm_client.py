"""The OpenAI-compatible chat client that task-set tools share (rubric generation, decomposition).

Guarantees:

- Every reply is checked by a caller-given ``validate`` function; a reply it rejects is never
  returned. Replies are parsed strictly (:func:`parse_json_object`): one JSON object, alone or in
  one ```json fenced block, no duplicate keys, no NaN.
- A rejected reply is retried up to ``max_attempts`` times in all; the retry shows the model its
  own reply and the reason it was rejected, so a retry is not a blind repeat (which, at
  temperature 0, would give the same reply). Transient API failures (connection, timeout,
  408/409/429, 5xx) count against the same budget and are retried after a capped backoff.
- When the attempts run out, :class:`LLMRejected` says why, with the last reason. A request the
  server refuses for this input (another 4xx) is rejected at once. Authentication, permission and
  not-found errors are configuration errors: they are raised, since every later request would
  fail the same way.

Usage::

    from tasks.llm_client import LLMClient, LLMConfig

    llm = LLMClient(LLMConfig(base_url="http://127.0.0.1:8000/v1", model="Qwen/Qwen3-8B"))
    value = llm.ask(messages, validate=my_parser)  # raises LLMRejected after max_attempts
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import openai

from infra.json_replies import JSONReplyError, load_json_object, snippet

log = logging.getLogger(__name__)

T = TypeVar("T")

_BACKOFF_CAP_S = 8.0
# Configuration errors: retrying cannot help and every later request would fail the same way.
_FATAL_API_ERRORS = (
    openai.AuthenticationError,
    openai.PermissionDeniedError,
    openai.NotFoundError,
)


@dataclass(frozen=True)
class LLMConfig:
    """Where the model is and how hard to try; shared by the CLI and the tests."""

    base_url: str
    model: str
    api_key: str = "not-needed"
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
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s}")
        if self.backoff_s < 0:
            raise ValueError(f"backoff_s must be 0 or more, got {self.backoff_s}")


class LLMReplyError(ValueError):
    """One reply is not acceptable (unparseable or invalid); the message says why."""


class LLMRejected(Exception):
    """No acceptable reply within the attempts allowed; ``reason`` is the last problem."""

    def __init__(self, reason: str, attempts: int):
        super().__init__(reason)
        self.reason = reason
        self.attempts = attempts


def _transient(exc: openai.APIError) -> bool:
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return True  # connection errors, timeouts, malformed responses


def retry_message(reason: str) -> str:
    """What the model is told after a rejected reply."""
    return f"Your reply was rejected: {reason}. Reply again with the JSON object only."


class LLMClient:
    """A synchronous chat client with validated, retried replies (see the module docstring)."""

    def __init__(
        self,
        config: LLMConfig,
        openai_client: Any = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.config = config
        # max_retries=0: ask() retries itself, so bad replies and API errors count alike against
        # max_attempts and every retry is logged.
        self._client = openai_client or openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key,
            timeout=config.timeout_s,
            max_retries=0,
        )
        self._sleep = sleep
        # Model requests sent so far (every attempt counts).
        self.calls = 0

    @property
    def name(self) -> str:
        return f"llm:{self.config.model}"

    def ask(self, messages: list[dict[str, Any]], validate: Callable[[str], T]) -> T:
        """The first reply that ``validate`` accepts (it raises :class:`LLMReplyError` otherwise).

        Raises :class:`LLMRejected` after ``max_attempts`` attempts, or at once when the server
        refuses the request for this input.
        """
        conversation = list(messages)
        attempts = self.config.max_attempts
        problem = ""
        for attempt in range(1, attempts + 1):
            text = ""
            try:
                text, finish_reason = self._complete(conversation)
                if finish_reason == "length":
                    raise LLMReplyError(
                        f"reply cut at max_tokens={self.config.max_tokens} "
                        f"(finish_reason 'length'): {snippet(text)}"
                    )
                return validate(text)
            except LLMReplyError as exc:
                problem = f"bad reply: {exc}"
                # Only the latest bad reply is shown back, so the prompt stays bounded.
                conversation = [
                    *messages,
                    {"role": "assistant", "content": text},
                    {"role": "user", "content": retry_message(str(exc))},
                ]
            except _FATAL_API_ERRORS:
                raise
            except openai.APIError as exc:
                problem = f"API error: {type(exc).__name__}: {exc}"
                if not _transient(exc):
                    raise LLMRejected(problem, attempt) from exc
                if attempt < attempts:
                    self._sleep(min(self.config.backoff_s * 2 ** (attempt - 1), _BACKOFF_CAP_S))
            if attempt < attempts:
                log.warning("%s attempt %d/%d failed: %s", self.name, attempt, attempts, problem)
        raise LLMRejected(f"no valid reply after {attempts} attempt(s); last: {problem}", attempts)

    def _complete(self, messages: list[dict[str, Any]]) -> tuple[str, str | None]:
        """The reply's text and finish reason."""
        self.calls += 1
        response = self._client.chat.completions.create(
            model=self.config.model,
            messages=messages,
            max_tokens=self.config.max_tokens,
            temperature=self.config.temperature,
        )
        if not response.choices:
            raise LLMReplyError("the server sent no choices")
        choice = response.choices[0]
        return choice.message.content or "", choice.finish_reason


def as_client(llm: LLMClient | LLMConfig) -> LLMClient:
    return llm if isinstance(llm, LLMClient) else LLMClient(llm)


# -- strict JSON replies ---------------------------------------------------------------------


def parse_json_object(text: str, keys: set[str]) -> dict[str, Any]:
    """The reply's one JSON object, with exactly ``keys``; else :class:`LLMReplyError`."""
    try:
        reply = load_json_object(text)
    except JSONReplyError as exc:
        raise LLMReplyError(str(exc)) from None
    unknown = sorted(set(reply) - keys)
    if unknown:
        raise LLMReplyError(f"unknown keys {unknown}; expected {sorted(keys)}")
    missing = sorted(keys - set(reply))
    if missing:
        raise LLMReplyError(f"{', '.join(missing)} missing from the reply")
    return reply


def mentions(text: str, phrase: str) -> bool:
    """Case-insensitive substring test, whitespace collapsed on both sides."""
    needle = " ".join(phrase.split()).casefold()
    return bool(needle) and needle in " ".join(text.split()).casefold()
