"""Model backends: one chat request in, one generation out, whatever serves the model.

Every backend (local `transformers`, in-process vLLM, OpenAI-compatible HTTP, scripted) takes
`ChatRequest`s and returns `Generation`s in the same order, so policy workers and the learner never
depend on which one produced a reply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ChatRequest:
    """OpenAI-style chat messages: `[{"role": ..., "content": ...}]`.

    `content` is a string or a list of parts: `{"type": "text", "text": str}` or
    `{"type": "image", "image": bytes}` (an encoded JPEG or PNG).
    """

    messages: list[dict[str, Any]]
    # What the request is about (task_id, episode_id, step): only scripted policies read it.
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Generation:
    """One reply: its text, its generated token ids (prompt excluded) and their log-probabilities.

    `token_ids` and `logprobs` have the same length; a stop token the model emitted is included
    (its text is not). `latency_ms` is the wall time of the call that produced it.
    """

    text: str
    token_ids: list[int]
    logprobs: list[float]
    latency_ms: float
    model: str
