"""A fake synchronous OpenAI client for unit tests of the task-set LLM tools, the recorded
model replies they answer with (``tests/data/llm_replies/``), and the chat completions and API
errors that the LLM judge's tests share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletion

from tasks.llm_client import LLMClient, LLMConfig

REPLIES = Path(__file__).parent / "data" / "llm_replies"
REQUEST = httpx.Request("POST", "http://llm.invalid/v1/chat/completions")


def recorded(name: str) -> str:
    """A recorded reply, e.g. ``recorded("rubric/valid.json")``."""
    return (REPLIES / name).read_text()


def completion(content: str | None, finish_reason: str = "stop") -> ChatCompletion:
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1_795_000_000,
            "model": "fake-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish_reason,
                }
            ],
        }
    )


def assert_rejected(error: type[Exception], reason: str, parse: Callable[[], object]) -> None:
    """``parse()`` raises ``error`` with a message that starts with ``reason``."""
    with pytest.raises(error) as caught:
        parse()
    assert str(caught.value).startswith(reason), str(caught.value)


def status_error(cls: type[openai.APIStatusError], code: int) -> openai.APIStatusError:
    return cls(f"Error code: {code}", response=httpx.Response(code, request=REQUEST), body=None)


Outcome = ChatCompletion | Exception | str


class FakeOpenAI:
    """`OpenAI`'s `chat.completions.create`: answers from a script (the last entry repeats) or
    from a function of the request. A ``str`` outcome is a complete reply with that text."""

    def __init__(self, script: list[Outcome] | Callable[[dict[str, Any]], Outcome]):
        self.script = script if callable(script) else list(script)
        self.requests: list[dict[str, Any]] = []
        self.chat = self
        self.completions = self

    def create(self, **request: Any) -> ChatCompletion:
        self.requests.append(request)
        if callable(self.script):
            outcome = self.script(request)
        else:
            outcome = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(outcome, Exception):
            raise outcome
        return completion(outcome) if isinstance(outcome, str) else outcome


def fake_llm(
    script: list[Outcome] | Callable[[dict[str, Any]], Outcome],
    sleep: Callable[[float], None] = lambda seconds: None,
    **config: Any,
) -> tuple[LLMClient, FakeOpenAI]:
    """An :class:`LLMClient` over a :class:`FakeOpenAI`; ``config`` overrides LLMConfig fields."""
    fake = FakeOpenAI(script)
    settings = {"base_url": "http://llm.invalid/v1", "model": "fake-model", **config}
    return LLMClient(LLMConfig(**settings), fake, sleep=sleep), fake
