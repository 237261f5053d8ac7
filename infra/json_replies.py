"""Strict JSON replies from language models: one JSON object, or nothing.

Judges and task generators ask a model for one JSON object. :func:`load_json_object` accepts
the object alone or inside exactly one closed ```json block, and nothing else: empty replies,
prose, text around the object, a second block, duplicate keys, NaN/Infinity and truncated JSON
each raise :class:`JSONReplyError` with a message that says which (truncation is told apart, so
a caller can suggest a larger token limit). Which keys the object must have is the caller's rule.
"""

from __future__ import annotations

import json
import re
from typing import Any

SNIPPET_CHARS = 120
_FENCED = re.compile(r"```(?i:json)?\s*(?P<body>.*?)\s*```", re.DOTALL)


class JSONReplyError(ValueError):
    """The reply is not exactly one JSON object; the message says what is wrong."""


def snippet(text: str) -> str:
    """A short quoted excerpt of a reply, for error messages."""
    text = text.strip()
    return repr(text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS] + "...")


def load_json_object(text: str) -> dict[str, Any]:
    """The reply's one JSON object; see the module docstring for what is refused."""
    document = _json_document(text)
    try:
        reply = json.loads(
            document, object_pairs_hook=_reject_duplicate_keys, parse_constant=_reject_constant
        )
    except json.JSONDecodeError as exc:
        if _unclosed(document):
            raise JSONReplyError(f"reply ends mid-JSON (truncated): {exc}") from None
        if exc.msg == "Extra data":
            raise JSONReplyError(f"reply has text after the JSON object: {exc}") from None
        raise JSONReplyError(f"reply is not valid JSON: {exc}") from None
    if not isinstance(reply, dict):
        raise JSONReplyError(f"reply must be a JSON object, got {type(reply).__name__}")
    return reply


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise JSONReplyError(f"key {key!r} appears twice in one JSON object")
        obj[key] = value
    return obj


def _reject_constant(name: str) -> Any:
    raise JSONReplyError(f"{name} is not valid JSON")


def _json_document(text: str) -> str:
    """The JSON text of a reply: the whole reply, or the body of its only ```json block."""
    stripped = text.strip()
    if not stripped:
        raise JSONReplyError("empty reply")
    if stripped.startswith("{"):
        return stripped
    if stripped.startswith("```"):
        fenced = _FENCED.fullmatch(stripped)
        if fenced is None:
            raise JSONReplyError(
                "reply opens a code fence but is not exactly one closed ```json block "
                f"(truncated?): {snippet(stripped)}"
            )
        body = fenced.group("body")
        if "```" in body:
            raise JSONReplyError("reply has more than one code block; expected one ```json block")
        return body
    if "{" in stripped:
        raise JSONReplyError(
            f"reply has text outside the JSON object; expected the object alone: {snippet(text)}"
        )
    raise JSONReplyError(f"reply is not a JSON object: {snippet(text)}")


def _unclosed(document: str) -> bool:
    """Whether a JSON text stops inside a string or before closing every object and list."""
    depth, in_string, escaped = 0, False, False
    for char in document:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return in_string or depth > 0
