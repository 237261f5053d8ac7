"""The inference event of one request: the backend's reply, parsed strictly, or why none came.

Pure. The id is deterministic (``<episode_id>:<step>:inference``), so a request served twice
gives the same event id and consumers drop the copy.
"""

from __future__ import annotations

from typing import Any

from agents.policy.backends import Generation
from infra.producer import now_ms
from schemas.event_ids import step_event_id
from schemas.prompt.reply import ParsedReply, ParseError, parse_reply


def inference_event(
    request: dict[str, Any],
    generation: Generation | None,
    *,
    policy_version: int | None,
    backend: str,
    request_at: tuple[int, int],
    unanswered: str | None = None,
    backend_error: str | None = None,
) -> dict[str, Any]:
    """The event answering ``request`` (an infer request record) with ``generation``, or with
    none: ``backend_error`` says why the backend gave no reply; ``unanswered`` why the request
    could not be put to it (recorded as its parse error). ``request_at``: the request's
    partition and offset in ``ops.infer``."""
    raw = generation.text if generation else ""
    parsed = parse_reply(raw) if generation else None
    sampling = generation.sampling if generation else None
    return {
        "event_id": step_event_id(request["episode_id"], request["step"], "inference"),
        "episode_id": request["episode_id"],
        "step": request["step"],
        "ts": now_ms(),
        "policy_version": policy_version,
        "request_event_id": request["event_id"],
        "raw_text": raw,
        "thought": parsed.thought if parsed else None,
        "action": parsed.action if isinstance(parsed, ParsedReply) else None,
        "parse_error": unanswered or (parsed.reason if isinstance(parsed, ParseError) else None),
        "backend_error": backend_error,
        "memory": parsed.memory if parsed else None,
        "token_ids": generation.token_ids if generation else [],
        "logprobs": generation.logprobs if generation else [],
        "temperature": sampling.temperature if sampling else None,
        "top_p": sampling.top_p if sampling else None,
        "latency_ms": generation.latency_ms if generation else 0.0,
        "backend": backend,
        "model": generation.model if generation else "",
        # Where the request lies: the learner reads back exactly the context that was seen.
        "request_partition": request_at[0],
        "request_offset": request_at[1],
    }
