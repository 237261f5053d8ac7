"""A heuristic set-of-marks policy for MiniWoB++ pages whose instruction names what to act on.

It reads only what a policy is given: the context's task text (with the instruction the page
shows, "The page says: ..."), the marks table of the current screenshot (``[id] role 'name'``) and
the Memory it wrote last step (``progress N``: how many steps of its plan are done). From the
instruction it makes a short plan (click this button, type that text into a text box, ...); each
step is resolved against the current marks, so pages that change between steps work. When a
step finds no matching element it waits a second (the page may still be drawing) and does not
advance. Deterministic. Replies in the strict reply format, like any model.
"""

from __future__ import annotations

import ast
import re
import time
from collections.abc import Callable
from typing import Any

from agents.policy.backends import ChatRequest, Generation
from schemas.prompt.reply import format_reply

Mark = dict[str, str]
Step = Callable[[list[Mark]], dict[str, Any] | None]

_MARK = re.compile(r"^\[(\d+)\] (\S+) (.*)$")
_PROGRESS = re.compile(r"progress (\d+)")
ORDINALS = {"1st": 0, "2nd": 1, "3rd": 2}


def _name(mark: Mark) -> str:
    return mark["name"].strip().casefold()


def click(where: Callable[[Mark], bool], nth: int = 0) -> Step:
    def step(marks: list[Mark]) -> dict[str, Any] | None:
        found = [m for m in marks if where(m)]
        return {"kind": "left_click", "element_id": found[nth]["id"]} if len(found) > nth else None

    return step


def type_into(where: Callable[[Mark], bool], text: str, nth: int = 0) -> Step:
    def step(marks: list[Mark]) -> dict[str, Any] | None:
        found = [m for m in marks if where(m)]
        if len(found) <= nth:
            return None
        return {"kind": "type", "element_id": found[nth]["id"], "text": text}

    return step


def role(*roles: str) -> Callable[[Mark], bool]:
    return lambda m: m["role"] in roles


def named(name: str, *roles: str) -> Callable[[Mark], bool]:
    wanted = name.strip().casefold()
    return lambda m: _name(m) == wanted and (not roles or m["role"] in roles)


def submit(label: str = "submit") -> Step:
    return click(named(label, "button", "submit"))


def plan_for(utterance: str) -> list[Step]:
    """The steps that carry out ``utterance``; empty when the heuristics do not know it."""
    u = utterance.strip()
    button = ("button", "submit")
    rules: list[tuple[str, Callable[[re.Match], list[Step]]]] = [
        (r'Click on the "(.+)" button\.', lambda m: [click(named(m[1], *button))]),
        (
            r"Click button (\S+), then click button (\S+)\.",
            lambda m: [click(named(m[1], *button)), click(named(m[2], *button))],
        ),
        (r'Click on the link "(.+)"\.', lambda m: [click(named(m[1], "link", "clickable"))]),
        (
            r'Close the dialog box by clicking the "x"\.',
            lambda m: [click(lambda k: _closes("x", k))],
        ),
        (
            r'Click the button in the dialog box labeled "(.+)"\.',
            lambda m: [click(lambda k: named(m[1], *button)(k) or _closes(m[1], k))],
        ),
        (r"Click on Tab #(\d+)\.", lambda m: [click(named(f"Tab #{m[1]}"))]),
        (r"Click the button\.", lambda m: [click(role(*button))]),
        (r"Click button (\S+)\.", lambda m: [click(named(m[1], *button))]),
        (r'Click on a "(\w+)" widget\.', lambda m: [click(role(m[1]))]),
        (
            r'Enter "(.*)" into the text field and press Submit\.',
            lambda m: [type_into(role("text"), m[1]), submit()],
        ),
        (
            r'Type "(.*)" in all (lower|upper) case letters in the text input and press Submit\.',
            lambda m: [
                type_into(role("text"), m[1].lower() if m[2] == "lower" else m[1].upper()),
                submit(),
            ],
        ),
        (
            r'Enter the password "(.*)" into both text fields and press submit\.',
            lambda m: [
                type_into(role("password"), m[1], 0),
                type_into(role("password"), m[1], 1),
                submit(),
            ],
        ),
        (r"Focus into the textbox\.", lambda m: [click(role("text"))]),
        (
            r"Focus into the (1st|2nd|3rd) input textbox\.",
            lambda m: [click(role("text"), ORDINALS[m[1]])],
        ),
        (
            r'Enter the username "(.*)" and the password "(.*)" into the text fields and press '
            r"login\.",
            lambda m: [
                type_into(role("text"), m[1]),
                type_into(role("password"), m[2]),
                submit("login"),
            ],
        ),
        (r"Expand the section below and click submit\.", lambda m: [click(role("tab")), submit()]),
        (r"Select (.*) and click Submit\.", lambda m: _select(m[1])),
    ]
    for pattern, make in rules:
        match = re.fullmatch(pattern, u)
        if match:
            return make(match)
    return []


def _closes(label: str, mark: Mark) -> bool:
    """A dialog's close button, which pages label "x" and screen readers read "Close"."""
    return (
        label.casefold() in ("x", "×")
        and mark["role"] == "button"
        and _name(mark)
        in (
            "x",
            "×",
            "close",
        )
    )


def _select(listing: str) -> list[Step]:
    if listing.strip().casefold() in ("", "nothing"):
        return [submit()]
    names = [n.strip() for n in listing.split(",") if n.strip()]
    steps: list[Step] = [click(named(n, "checkbox", "radio")) for n in names]
    return [*steps, submit()]


def read_context(messages: list[dict[str, Any]]) -> tuple[str, list[Mark], int]:
    """(the page's instruction, the current marks, plan steps done) from a built context."""
    task = _texts(messages[1]) if len(messages) > 1 else ""
    said = re.search(r"The page says: (.*)", task)
    current = _texts(messages[-1])
    memory = re.search(r"Memory: (.*)", current)
    progress = _PROGRESS.search(memory[1]) if memory else None
    marks = []
    for line in current.splitlines():
        match = _MARK.match(line.strip())
        if match:
            try:
                name = ast.literal_eval(match[3])
            except (ValueError, SyntaxError):
                name = match[3]
            marks.append({"id": match[1], "role": match[2], "name": str(name)})
    return (said[1].strip() if said else ""), marks, int(progress[1]) if progress else 0


def _texts(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content or [] if part.get("type") == "text")


class HeuristicBackend:
    model = "heuristic-marks"
    uses_weights = False  # its replies come from rules: no policy version produced them

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        return [self._one(request) for request in requests]

    def _one(self, request: ChatRequest) -> Generation:
        started = time.perf_counter()
        utterance, marks, done = read_context(request.messages)
        plan = plan_for(utterance)
        memory = f"progress {done}"
        if not plan:
            action = {"kind": "wait", "seconds": 1.0}
            text = format_reply(action, f"I have no plan for {utterance!r}.", "wait", memory)
        elif done >= len(plan):
            action = {"kind": "wait", "seconds": 1.0}
            text = format_reply(action, "My plan is done; waiting.", "wait", memory)
        else:
            action = plan[done](marks)
            if action is None:
                action = {"kind": "wait", "seconds": 1.0}
                text = format_reply(action, "The element is not there yet.", "wait", memory)
            else:
                text = format_reply(
                    action,
                    f"Step {done + 1} of {len(plan)}.",
                    action["kind"],
                    f"progress {done + 1}",
                )
        return Generation(text, [], [], (time.perf_counter() - started) * 1000, self.model)
