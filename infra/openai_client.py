"""The one client for OpenAI-compatible chat servers (vLLM, `transformers serve`, hosted APIs).

The policy backend, the LLM judge and the task-set tools all talk to their servers through
:class:`ChatClient` (threads) or :class:`AsyncChatClient` (asyncio); both keep the same contract:
the API key of :func:`resolve_api_key`; a reasoning model's ``<think>...</think>`` stripped
before strict parsing (:func:`strip_reasoning`); at most ``max_attempts`` requests per call, with
transient failures and bad replies retried, and every retry logged as a warning
(:class:`RetryPolicy`); configuration errors raised as they are; otherwise
:class:`NoValidReply`, whose reason names the last failure. Usage::

    from infra.openai_client import ChatClient, ChatEndpoint, json_reply

    llm = ChatClient(ChatEndpoint("http://127.0.0.1:8000/v1", "Qwen/Qwen3-8B"))
    value = llm.ask(messages, validate=lambda text: json_reply(text, {"answer"}))
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import re
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import openai

from infra.json_replies import JSONReplyError, load_json_object, snippet

log = logging.getLogger(__name__)

T = TypeVar("T")

PLACEHOLDER_API_KEY = "not-needed"
# The endpoint refuses us as a client, not this request: every later request fails the same way.
CONFIGURATION_ERRORS = (
    openai.AuthenticationError,
    openai.PermissionDeniedError,
    openai.NotFoundError,
)
TRANSIENT_STATUSES = frozenset({408, 409, 429})  # and every 5xx


class ReplyError(ValueError):
    """One reply is not acceptable (unparseable or invalid); the message says why."""


class NoValidReply(Exception):
    """No acceptable reply: the attempts ran out, or the server refused the request.

    ``reason`` is the whole message; ``problem`` the last failure alone; ``attempts`` how many
    requests were made; ``exhausted`` whether the attempts ran out (else the request was refused).
    """

    def __init__(self, reason: str, attempts: int, problem: str, exhausted: bool):
        super().__init__(reason)
        self.reason = reason
        self.attempts = attempts
        self.problem = problem
        self.exhausted = exhausted


def resolve_api_key(api_key: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The key to send: ``api_key``, else ``OPENAI_API_KEY``, else the placeholder. An empty
    key or the placeholder counts as none given.

    A key given by the caller wins; else the environment's ``OPENAI_API_KEY``; else the
    placeholder ``not-needed`` for keyless local servers. The placeholder given explicitly (an
    old default) counts as no key, so it never hides the environment's key. The openai SDK reads
    ``OPENAI_API_KEY`` only when its ``api_key`` is ``None`` and refuses to start without some
    key, so the clients always hand it the resolved string.
    """
    if api_key and api_key != PLACEHOLDER_API_KEY:
        return api_key
    environment = os.environ if environ is None else environ
    return environment.get("OPENAI_API_KEY") or PLACEHOLDER_API_KEY


# -- replies ---------------------------------------------------------------------------------

_THINK_BLOCK = re.compile(r"\s*<think>.*?</think>\s*", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"\s*<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>\s*", re.IGNORECASE)


def strip_reasoning(text: str) -> str:
    """``text`` without a reasoning model's leading ``<think>...</think>`` block(s).

    A leading ``<think>`` that is never closed (the reply ran out inside its reasoning) leaves
    nothing. A ``</think>`` with no opening tag (the chat template opened the block in the
    prompt) drops everything up to it. Text without reasoning is returned unchanged, so a
    ``<think>`` later in the reply (inside a JSON string, say) is never touched.
    """
    stripped = False
    while block := _THINK_BLOCK.match(text):
        text, stripped = text[block.end() :], True
    if _THINK_OPEN.match(text):
        return ""
    if not stripped and "<think>" not in text.lower():
        close = _THINK_CLOSE.search(text)
        if close is not None:
            return text[close.end() :]
    return text


def json_fields(
    value: Any, where: str, allowed: Collection[str], required: Collection[str] = ()
) -> dict[str, Any]:
    """``value`` if it is a JSON object with no key outside ``allowed`` and every key of
    ``required``; else :class:`ReplyError` naming ``where``."""
    if not isinstance(value, dict):
        raise ReplyError(f"{where} must be a JSON object, got {type(value).__name__}")
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise ReplyError(f"{where} has unknown keys {unknown}; expected {sorted(allowed)}")
    missing = sorted(set(required) - set(value))
    if missing:
        raise ReplyError(f"{where} has no {', '.join(missing)}")
    return value


def json_reply(
    text: str, allowed: Collection[str] | None = None, required: Collection[str] | None = None
) -> dict[str, Any]:
    """The reply's one JSON object, reasoning stripped, parsed strictly
    (:func:`infra.json_replies.load_json_object`); else :class:`ReplyError`.

    With ``allowed``, no other key may appear and every key of ``required`` (default: all of
    ``allowed``) must.
    """
    try:
        reply = load_json_object(strip_reasoning(text))
    except JSONReplyError as exc:
        raise ReplyError(str(exc)) from None
    if allowed is None:
        return reply
    return json_fields(reply, "the reply", allowed, allowed if required is None else required)


def retry_message(reason: str) -> str:
    """What the model is told after a rejected reply."""
    return f"Your reply was rejected: {reason}. Reply again with the JSON object only."


def image_part(image: bytes) -> dict[str, Any]:
    """A message part carrying a PNG or JPEG screenshot as a base64 data URL."""
    mime = "image/png" if image.startswith(b"\x89PNG") else "image/jpeg"
    url = f"data:{mime};base64,{base64.b64encode(image).decode()}"
    return {"type": "image_url", "image_url": {"url": url}}


@dataclass(frozen=True)
class Reply:
    """One chat completion: its text as sent (reasoning included), why it stopped, the model
    that answered, and the chosen tokens' log-probabilities when the server gave them."""

    text: str
    finish_reason: str | None
    model: str
    logprobs: list[float]


def _reply(response: Any) -> Reply:
    if not response.choices:
        raise ReplyError("the server sent no choices")
    choice = response.choices[0]
    logprobs = getattr(choice, "logprobs", None)
    return Reply(
        text=choice.message.content or "",
        finish_reason=choice.finish_reason,
        model=getattr(response, "model", None) or "",
        logprobs=[token.logprob for token in (logprobs.content or [])] if logprobs else [],
    )


# -- the retry policy ------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try (the SDK's own retries are switched off):

    - At most ``max_attempts`` requests per call (default 3); every request counts, whatever
      failed.
    - Transient API failures are retried: connection errors, timeouts, malformed responses and
      the HTTP statuses 408, 409, 429 and 5xx. Before attempt ``n + 1`` the client waits
      ``backoff_s * 2 ** (n - 1)`` seconds (default 0.5 s, doubling), capped at 8 s.
    - A bad reply (:meth:`~ChatClient.ask` only: the caller's ``validate`` raised
      :class:`ReplyError`, the reply was cut at ``max_tokens``, or the server sent no choices)
      is retried at once, and the retry shows the model its own reply and the reason it was
      rejected, so it is not a blind repeat (which at temperature 0 would give the same reply).
    - Another 4xx means the server refuses this input: :class:`NoValidReply` at once, no retry.
    - Authentication (401), permission (403) and not-found (404) errors are configuration errors
      (:data:`CONFIGURATION_ERRORS`): raised as they are, since every later request would fail
      too.
    - When the attempts run out: :class:`NoValidReply`, whose reason names the last failure.

    Every retry is logged as a warning.
    """

    max_attempts: int = 3
    backoff_s: float = 0.5
    backoff_cap_s: float = 8.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if self.backoff_s < 0:
            raise ValueError(f"backoff_s must be 0 or more, got {self.backoff_s}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait after transient failure of attempt number ``attempt`` (from 1)."""
        return min(self.backoff_s * 2 ** (attempt - 1), self.backoff_cap_s)


def is_transient(exc: openai.APIError) -> bool:
    """Whether retrying ``exc`` later may succeed (:class:`RetryPolicy`)."""
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in TRANSIENT_STATUSES or exc.status_code >= 500
    return True  # connection errors, timeouts, malformed responses


@dataclass
class _Call:
    """One call's way through its attempts."""

    messages: list[dict[str, Any]]  # the caller's
    validate: Callable[[str], Any] | None  # None: any reply will do (complete)
    about: str
    params: dict[str, Any]
    attempt: int = 0
    reply: Reply | None = None  # the latest attempt's, once it came
    conversation: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.conversation = list(self.messages)


@dataclass(frozen=True)
class ChatEndpoint:
    """Where the model is and how hard to try: one value shared by the policy backend, the judge,
    the task-set tools and their tests. Refuses a bad value when built, not at the first request.
    ``api_key``: see :func:`resolve_api_key`."""

    base_url: str
    model: str
    api_key: str | None = None
    max_tokens: int = 512
    timeout_s: float = 120.0
    temperature: float = 0.0
    max_attempts: int = 3
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
        _ = self.retry  # refuses a bad max_attempts or backoff_s

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(max_attempts=self.max_attempts, backoff_s=self.backoff_s)


class _Chat:
    """What both clients share: the endpoint, the request, the checks of a reply and the retry
    decisions. ``client`` replaces the SDK client (tests); ``sleep`` the pause between attempts.
    """

    _sdk: Any  # the SDK client class
    _default_sleep: Callable[[float], Any]

    def __init__(
        self,
        endpoint: ChatEndpoint,
        client: Any = None,
        *,
        sleep: Callable[[float], Any] | None = None,
    ):
        self.endpoint = endpoint
        self.model = endpoint.model
        self.retry = endpoint.retry
        # Model requests sent so far (every attempt counts).
        self.calls = 0
        # max_retries=0: the client retries itself, so that bad replies and API errors count
        # alike against max_attempts and every retry is logged.
        self._client = client or self._sdk(
            base_url=endpoint.base_url,
            api_key=resolve_api_key(endpoint.api_key),
            timeout=endpoint.timeout_s,
            max_retries=0,
        )
        self._sleep = sleep or type(self)._default_sleep

    @property
    def name(self) -> str:
        return f"llm:{self.model}"

    def _next_request(self, call: _Call) -> dict[str, Any]:
        call.attempt += 1
        call.reply = None
        self.calls += 1
        return {
            "model": self.model,
            "max_tokens": self.endpoint.max_tokens,
            "temperature": self.endpoint.temperature,
            **call.params,
            "messages": call.conversation,
        }

    @staticmethod
    def _accept(call: _Call, response: Any, request: dict[str, Any]) -> Any:
        call.reply = reply = _reply(response)
        if call.validate is None:
            return reply
        if reply.finish_reason == "length":
            raise ReplyError(
                f"reply cut at max_tokens={request['max_tokens']} (finish_reason 'length'): "
                f"{snippet(reply.text)}"
            )
        return call.validate(strip_reasoning(reply.text))

    def _after_failure(self, exc: ReplyError | openai.APIError, call: _Call) -> float:
        """The pause before the next attempt; raises when there is to be none. After an API
        error the request is sent again as it was; after a bad reply (:meth:`ask`) the model is
        shown its reply and the reason, only the latest, so the prompt stays bounded."""
        attempt = call.attempt
        if isinstance(exc, CONFIGURATION_ERRORS):
            raise exc
        if isinstance(exc, ReplyError):
            problem, pause = f"bad reply: {exc}", 0.0
        else:
            problem = f"API error: {type(exc).__name__}: {exc}"
            if not is_transient(exc):
                raise NoValidReply(problem, attempt, problem, exhausted=False) from exc
            pause = self.retry.delay(attempt)
        if attempt >= self.retry.max_attempts:
            reason = f"no valid reply after {attempt} attempt(s); last: {problem}"
            raise NoValidReply(reason, attempt, problem, exhausted=True) from exc
        log.warning(
            "%s attempt %d/%d failed%s: %s; retrying in %.1fs",
            self.name,
            attempt,
            self.retry.max_attempts,
            f" ({call.about})" if call.about else "",
            problem,
            pause,
        )
        if call.validate is not None and isinstance(exc, ReplyError):
            shown = strip_reasoning(call.reply.text) if call.reply else ""
            call.conversation = [
                *call.messages,
                {"role": "assistant", "content": shown},
                {"role": "user", "content": retry_message(str(exc))},
            ]
        return pause


class ChatClient(_Chat):
    """A synchronous client with the retry policy of :class:`RetryPolicy`; safe to share
    between threads (the SDK client is)."""

    _sdk = openai.OpenAI
    _default_sleep = staticmethod(time.sleep)

    def complete(self, messages: list[dict[str, Any]], *, about: str = "", **params: Any) -> Reply:
        """One reply, whatever its text; ``params`` override the request's defaults."""
        return self._attempts(_Call(messages, None, about, params))

    def ask(
        self,
        messages: list[dict[str, Any]],
        validate: Callable[[str], T],
        *,
        about: str = "",
        **params: Any,
    ) -> T:
        """``validate(text)`` of the first reply it accepts (reasoning stripped by
        :func:`strip_reasoning`, which :func:`json_reply` applies too); it raises
        :class:`ReplyError` to reject one. ``about`` names the work in log lines."""
        return self._attempts(_Call(messages, validate, about, params))

    def _attempts(self, call: _Call) -> Any:
        while True:
            request = self._next_request(call)
            try:
                return self._accept(call, self._client.chat.completions.create(**request), request)
            except (ReplyError, openai.APIError) as exc:
                pause = self._after_failure(exc, call)
            if pause:
                self._sleep(pause)


class AsyncChatClient(_Chat):
    """The asyncio twin of :class:`ChatClient`: one event loop keeps many slow calls in flight."""

    _sdk = openai.AsyncOpenAI
    _default_sleep = staticmethod(asyncio.sleep)

    async def complete(
        self, messages: list[dict[str, Any]], *, about: str = "", **params: Any
    ) -> Reply:
        """As :meth:`ChatClient.complete`."""
        return await self._attempts(_Call(messages, None, about, params))

    async def ask(
        self,
        messages: list[dict[str, Any]],
        validate: Callable[[str], T],
        *,
        about: str = "",
        **params: Any,
    ) -> T:
        """As :meth:`ChatClient.ask`."""
        return await self._attempts(_Call(messages, validate, about, params))

    async def _attempts(self, call: _Call) -> Any:
        while True:
            request = self._next_request(call)
            try:
                response = await self._client.chat.completions.create(**request)
                return self._accept(call, response, request)
            except (ReplyError, openai.APIError) as exc:
                pause = self._after_failure(exc, call)
            if pause:
                await self._sleep(pause)
