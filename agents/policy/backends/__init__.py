"""Model backends: one chat request in, one generation out, whatever serves the model.

Every backend (local `transformers`, in-process vLLM, OpenAI-compatible HTTP, scripted) takes
`ChatRequest`s and returns `Generation`s in the same order, so policy workers and the learner never
depend on which one produced a reply.

Every backend class says whether it serves weights (`uses_weights`): the model backends do, and
their replies are attributed to the policy version whose weights they were built with; the
scripted, heuristic and latency-model policies do not, and their replies are attributed to no
version at all, whatever versions are published meanwhile.
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
class Sampling:
    """How a model backend draws reply tokens.

    `temperature` 0 is greedy decoding (the default: evaluation and reproducible runs), where
    `top_p` has no effect; above 0, tokens are drawn at that temperature from the smallest set of
    most likely tokens whose probability reaches `top_p` (1: the whole vocabulary). No top-k.
    """

    temperature: float = 0.0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be >= 0 (0 means greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be within (0, 1] (1 means no cut), got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def effective(self) -> Sampling:
        """What decoding actually does: greedy ignores top_p, so it is recorded as 1."""
        return Sampling(0.0, 1.0) if self.greedy else self


GREEDY = Sampling()


@dataclass(frozen=True)
class Generation:
    """One reply: its text, its generated token ids (prompt excluded) and their log-probabilities.

    `token_ids` and `logprobs` have the same length; a stop token the model emitted is included
    (its text is not). `latency_ms` is the wall time of the call that produced it. `sampling` is
    how the reply was drawn from the model (see :class:`Sampling`); None when no model drew it
    (scripted and other weightless policies).
    """

    text: str
    token_ids: list[int]
    logprobs: list[float]
    latency_ms: float
    model: str
    sampling: Sampling | None = None


def greedy(backend: Any) -> Any:
    """``backend`` drawing greedily (temperature 0), for evaluation, whatever its own sampling;
    the backend itself when it decodes greedily already or draws nothing (a weightless policy,
    whose ``sampling`` is absent or None). A sampling backend must offer
    ``with_sampling(sampling)``: the same model, weights and threads, drawing so."""
    sampling = getattr(backend, "sampling", None)
    if sampling is None or sampling.greedy:
        return backend
    with_sampling = getattr(backend, "with_sampling", None)
    if with_sampling is None:
        raise TypeError(
            f"{type(backend).__name__} samples at temperature {sampling.temperature} and has no "
            "with_sampling(): it cannot serve evaluation requests greedily"
        )
    return with_sampling(GREEDY)
