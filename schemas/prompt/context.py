"""The context a policy sees at one step, in the Qwen-VL computer-use convention of the paper.

A system prompt with the ``computer_use`` tool schema (0-1000 normalised coordinates, or element
ids in set-of-marks mode), then the task, one-line summaries of the steps older than the window,
the last ``window`` rounds as full messages (the screenshot the policy saw, then the reply it
gave), and the current screenshot with the Memory carried forward from the previous reply, the
error of the last action and the parse error of the last reply (or the backend error that left
the last step without one), if any.

Images are referenced by observation event id (``{"type": "image", "observation_event_id":
...}``), not embedded: the inference request stays small, and a policy worker fetches each
screenshot from ``webgym.observations`` (or its cache). Deterministic: the same history gives the
same messages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from schemas.prompt.reply import ACTIONS, TOOL_NAME, parse_reply

Mode = Literal["coordinate", "set_of_marks"]
WINDOW = 4

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": list(ACTIONS)},
        "coordinate": {
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": 1000},
            "description": "[x, y] on the screenshot, normalised to 0-1000 on both axes",
        },
        "text": {"type": "string", "description": "text to type, or the final answer"},
        "keys": {"type": "array", "items": {"type": "string"}, "description": "e.g. ['Enter']"},
        "direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
        "amount": {"type": "integer", "description": "scroll distance in pixels"},
        "time": {"type": "number", "description": "seconds to wait (at most 10)"},
        "url": {"type": "string", "description": "address to open (only the task's site)"},
    },
    "required": ["action"],
}

_SYSTEM = """You are a web agent. You see a screenshot of a browser at each step and act with
the mouse and keyboard until you can answer the task.

# Tools

<tools>
{tool}
</tools>

Actions: left_click, double_click (a {target}); type (text, optionally into a {target}); key
(keys, e.g. ["Enter"]); scroll (direction, optional amount, optional {target}); wait (time);
go_back; navigate (url); answer (text: your final answer, which ends the task).
{targets}

# Reply format

Thought: what you see and what to do next.
Action: the action in a few words.
<tool_call>
{{"name": "{name}", "arguments": {{"action": "...", ...}}}}
</tool_call>
Memory: everything you must remember for later steps (facts found so far, progress). It is
shown to you again at the next step; earlier screenshots may not be.
"""

_TARGETS = {
    "coordinate": (
        "point given as 'coordinate': [x, y]",
        "Coordinates are normalised: [0, 0] is the top-left corner of the screenshot and "
        "[1000, 1000] the bottom-right.",
    ),
    "set_of_marks": (
        "element given as 'element_id'",
        "Interactive elements carry numbered boxes on the screenshot and are listed with their "
        "ids below it; name them with 'element_id'.",
    ),
}


def system_prompt(mode: Mode = "coordinate") -> str:
    target, targets = _TARGETS[mode]
    properties = dict(_PARAMETERS["properties"])
    if mode == "set_of_marks":
        properties.pop("coordinate")
        properties["element_id"] = {"type": "string", "description": "id of a marked element"}
    tool = {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": "Use the mouse and keyboard on the web page shown in the screenshot.",
            "parameters": {**_PARAMETERS, "properties": properties},
        },
    }
    return _SYSTEM.format(
        tool=json.dumps(tool), target=target, targets=targets, name=TOOL_NAME
    ).strip()


@dataclass(frozen=True)
class Step:
    """One past step: the observation the policy saw and what came of its reply."""

    step: int
    observation_event_id: str
    title: str
    url: str
    reply: str  # the raw reply text
    action: dict[str, Any] | None  # None when the reply did not parse
    parse_error: str | None = None
    page_changed: bool = True  # did the screen change after the action?
    marks: list[dict[str, Any]] | None = None
    backend_error: str | None = None  # the backend gave no reply (failed, timed out)


@dataclass(frozen=True)
class Current:
    """The observation the policy must act on now."""

    step: int
    observation_event_id: str
    title: str
    url: str
    action_error: str | None = None
    marks: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class Context:
    messages: list[dict[str, Any]]
    observation_event_ids: list[str]
    memory: str | None
    mode: Mode = "coordinate"
    summaries: list[str] = field(default_factory=list)


def describe_action(action: dict[str, Any] | None) -> str:
    """A short, stable description: ``left_click (500, 120)``, ``type 'kettle'``..."""
    if action is None:
        return "unparseable reply"
    kind = action["kind"]
    if action.get("element_id") is not None:
        where = f" [{action['element_id']}]"
    elif action.get("x") is not None:
        where = f" ({action['x']}, {action['y']})"
    else:
        where = ""
    detail = ""
    if action.get("text") is not None:
        detail = f" {action['text'][:60]!r}"
    elif action.get("url"):
        detail = f" {action['url'][:80]}"
    elif action.get("direction"):
        detail = f" {action['direction']}"
    return f"{kind}{where}{detail}"


def summarise(step: Step) -> str:
    outcome = "page changed" if step.page_changed else "page unchanged"
    return (
        f"step {step.step} on {step.title or step.url}: {describe_action(step.action)} -> {outcome}"
    )


def marks_table(marks: list[dict[str, Any]] | None) -> str:
    if not marks:
        return "No interactive elements are marked on this page."
    # Names in double quotes, as the instructions and the reply's JSON write them: a word then
    # reads the same in all three (with Python's repr, 'Deneen' splits where "Deneen" does not).
    lines = [f"[{m['id']}] {m['role']} {json.dumps(m['name'], ensure_ascii=False)}" for m in marks]
    return "Marked elements:\n" + "\n".join(lines)


def _observation_part(
    observation_event_id: str, title: str, url: str, marks: list | None, mode: Mode
) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [
        {"type": "image", "observation_event_id": observation_event_id},
        {"type": "text", "text": f"Page: {title} ({url})"},
    ]
    if mode == "set_of_marks":
        parts.append({"type": "text", "text": marks_table(marks)})
    return parts


def build_context(
    instruction: str,
    history: list[Step],
    current: Current,
    mode: Mode = "coordinate",
    window: int = WINDOW,
) -> Context:
    """Messages for the step ``current.step``; ``history`` holds every earlier step in order."""
    older, recent = history[: max(0, len(history) - window)], history[-window:] if window else []
    summaries = [summarise(step) for step in older]
    task = f"Task: {instruction}"
    if summaries:
        task += "\n\nEarlier steps:\n" + "\n".join(summaries)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt(mode)},
        {"role": "user", "content": [{"type": "text", "text": task}]},
    ]
    images = []
    for step in recent:
        parts = _observation_part(step.observation_event_id, step.title, step.url, step.marks, mode)
        messages.append(
            {"role": "user", "content": [{"type": "text", "text": f"Step {step.step}."}, *parts]}
        )
        messages.append({"role": "assistant", "content": step.reply})
        images.append(step.observation_event_id)
    memory = _carried_memory(history)
    notes = [f"Step {current.step}. Memory: {memory or '(empty)'}"]
    last = history[-1] if history else None
    if last is not None and last.backend_error:
        notes.append(
            f"No reply was received for the previous step (backend error: {last.backend_error}); "
            "no action was taken."
        )
    elif last is not None and last.parse_error:
        notes.append(
            f"Your previous reply could not be parsed ({last.parse_error}); no action was taken. "
            "Reply in the required format."
        )
    if current.action_error:
        notes.append(f"The last action failed: {current.action_error}")
    parts = _observation_part(
        current.observation_event_id, current.title, current.url, current.marks, mode
    )
    messages.append(
        {"role": "user", "content": [{"type": "text", "text": "\n".join(notes)}, *parts]}
    )
    images.append(current.observation_event_id)
    return Context(messages, images, memory, mode, summaries)


def _carried_memory(history: list[Step]) -> str | None:
    """The Memory of the latest reply that had one (a reply without Memory keeps the old one)."""
    for step in reversed(history):
        memory = parse_reply(step.reply).memory
        if memory:
            return memory
    return None
