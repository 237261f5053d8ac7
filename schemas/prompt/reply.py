"""Strict parsing of a policy reply: Thought, Action, one ``<tool_call>`` and Memory.

The reply format is the Qwen-VL computer-use convention the paper's agent uses::

    Thought: the search box is at the top.
    Action: click the search box.
    <tool_call>
    {"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [500, 120]}}
    </tool_call>
    Memory: looking for kettles; nothing found yet.

Guarantees: :func:`parse_reply` never raises; it returns a :class:`ParsedReply` whose ``action``
is a dict in the shape of the ``Action`` Avro record, or a :class:`ParseError` that says why.
A reply that does not parse is never turned into some other action.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

TOOL_NAME = "computer_use"
ACTIONS = (
    "left_click",
    "double_click",
    "type",
    "key",
    "scroll",
    "wait",
    "go_back",
    "navigate",
    "answer",
)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_FIELD = (
    r"^[ \t]*{name}[ \t]*:[ \t]*(.*?)(?=^[ \t]*(?:Thought|Action|Memory)[ \t]*:|<tool_call>|\Z)"
)
_THOUGHT = re.compile(_FIELD.format(name="Thought"), re.DOTALL | re.MULTILINE)
_ACTION = re.compile(_FIELD.format(name="Action"), re.DOTALL | re.MULTILINE)
_MEMORY = re.compile(_FIELD.format(name="Memory"), re.DOTALL | re.MULTILINE)
MAX_WAIT_S = 10.0
DIRECTIONS = ("up", "down", "left", "right")


@dataclass(frozen=True)
class ParsedReply:
    action: dict[str, Any]
    thought: str | None
    action_text: str | None
    memory: str | None


@dataclass(frozen=True)
class ParseError:
    reason: str
    thought: str | None = None
    memory: str | None = None


class _Invalid(ValueError):
    pass


def _field(pattern: re.Pattern[str], text: str) -> str | None:
    match = pattern.search(text)
    if match is None:
        return None
    value = match.group(1).strip()
    return value or None


def _coordinate(arguments: dict[str, Any], required: bool) -> dict[str, int]:
    if "coordinate" not in arguments:
        if required:
            raise _Invalid("needs 'coordinate' [x, y] (0-1000) or 'element_id'")
        return {}
    value = arguments["coordinate"]
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    ):
        raise _Invalid(f"'coordinate' must be [x, y] numbers, got {value!r}")
    x, y = (round(v) for v in value)
    if not (0 <= x <= 1000 and 0 <= y <= 1000):
        raise _Invalid(f"'coordinate' {value!r} is outside 0-1000")
    return {"x": x, "y": y}


def _target(arguments: dict[str, Any], required: bool) -> dict[str, Any]:
    if "element_id" in arguments:
        element = arguments["element_id"]
        if not isinstance(element, str | int) or isinstance(element, bool) or str(element) == "":
            raise _Invalid(f"'element_id' must be a mark id, got {element!r}")
        return {"element_id": str(element)}
    return _coordinate(arguments, required)


def _text(arguments: dict[str, Any], key: str = "text") -> str:
    value = arguments.get(key)
    if not isinstance(value, str):
        raise _Invalid(f"needs '{key}' as a string")
    return value


def _action(arguments: dict[str, Any]) -> dict[str, Any]:
    kind = arguments.get("action")
    if kind not in ACTIONS:
        raise _Invalid(f"unknown action {kind!r}; expected one of {', '.join(ACTIONS)}")
    action: dict[str, Any] = {"kind": kind}
    if kind in ("left_click", "double_click"):
        action.update(_target(arguments, required=True))
    elif kind == "type":
        action.update(_target(arguments, required=False))
        action["text"] = _text(arguments)
    elif kind == "key":
        keys = arguments.get("keys", arguments.get("text"))
        if isinstance(keys, list) and keys and all(isinstance(k, str) and k for k in keys):
            keys = "+".join(keys)
        if not isinstance(keys, str) or not keys.strip():
            raise _Invalid("needs 'keys' (a list of key names) or 'text'")
        action["text"] = keys.strip()
    elif kind == "scroll":
        action.update(_target(arguments, required=False))
        if "pixels" in arguments:
            pixels = arguments["pixels"]
            if not isinstance(pixels, int) or isinstance(pixels, bool) or pixels == 0:
                raise _Invalid(f"'pixels' must be a non-zero integer, got {pixels!r}")
            action.update(direction="up" if pixels > 0 else "down", amount=abs(pixels))
        else:
            direction = arguments.get("direction")
            if direction not in DIRECTIONS:
                raise _Invalid(f"needs 'direction' (one of {', '.join(DIRECTIONS)}) or 'pixels'")
            action["direction"] = direction
            amount = arguments.get("amount")
            if amount is not None:
                if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
                    raise _Invalid(f"'amount' must be a positive integer, got {amount!r}")
                action["amount"] = amount
    elif kind == "wait":
        seconds = arguments.get("time", arguments.get("seconds", 1.0))
        if not isinstance(seconds, int | float) or isinstance(seconds, bool):
            raise _Invalid(f"'time' must be seconds, got {seconds!r}")
        if not 0 <= seconds <= MAX_WAIT_S:
            raise _Invalid(f"'time' must be between 0 and {MAX_WAIT_S:g} seconds")
        action["seconds"] = float(seconds)
    elif kind == "navigate":
        url = _text(arguments, "url")
        if not url.strip():
            raise _Invalid("needs a non-empty 'url'")
        action["url"] = url.strip()
    elif kind == "answer":
        action["text"] = _text(arguments)
    return action


def parse_reply(text: str) -> ParsedReply | ParseError:
    """Parse one model reply; see the module docstring for the format."""
    thought = _field(_THOUGHT, text)
    memory = _field(_MEMORY, text)
    calls = _TOOL_CALL.findall(text)
    if not calls:
        return ParseError("no <tool_call>...</tool_call> block in the reply", thought, memory)
    if len(calls) > 1:
        return ParseError(
            f"{len(calls)} <tool_call> blocks; exactly one is allowed", thought, memory
        )
    try:
        call = json.loads(calls[0])
    except json.JSONDecodeError as exc:
        return ParseError(f"<tool_call> is not valid JSON: {exc.msg}", thought, memory)
    if not isinstance(call, dict) or call.get("name") != TOOL_NAME:
        return ParseError(f"<tool_call> must call '{TOOL_NAME}'", thought, memory)
    arguments = call.get("arguments")
    if not isinstance(arguments, dict):
        return ParseError("<tool_call> has no 'arguments' object", thought, memory)
    try:
        action = _action(arguments)
    except _Invalid as exc:
        return ParseError(f"{arguments.get('action')!r}: {exc}", thought, memory)
    return ParsedReply(action, thought, _field(_ACTION, text), memory)


def format_reply(
    action: dict[str, Any], thought: str = "", action_text: str = "", memory: str = ""
) -> str:
    """The reply a policy should write for ``action`` (scripted policies, tests, training)."""
    arguments: dict[str, Any] = {"action": action["kind"]}
    if action.get("element_id") is not None:
        arguments["element_id"] = action["element_id"]
    elif action.get("x") is not None and action.get("y") is not None:
        arguments["coordinate"] = [action["x"], action["y"]]
    kind = action["kind"]
    if kind in ("type", "answer"):
        arguments["text"] = action["text"]
    elif kind == "key":
        arguments["keys"] = action["text"].split("+")
    elif kind == "scroll":
        arguments["direction"] = action["direction"]
        if action.get("amount") is not None:
            arguments["amount"] = action["amount"]
    elif kind == "wait":
        arguments["time"] = action.get("seconds", 1.0)
    elif kind == "navigate":
        arguments["url"] = action["url"]
    # "</" as "<\/" (the same JSON string): a text holding "</tool_call>" cannot end the block.
    call = json.dumps({"name": TOOL_NAME, "arguments": arguments}).replace("</", "<\\/")
    return (
        f"Thought: {thought}\nAction: {action_text}\n<tool_call>\n{call}\n</tool_call>\n"
        f"Memory: {memory}"
    )
