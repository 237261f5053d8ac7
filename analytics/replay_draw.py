"""Where an action lands on its screenshot, as shapes in the screenshot's pixels.

Pure geometry (no I/O, no rendering): :func:`overlay` turns one recorded action into a click
marker, a text label, a scroll arrow and a one-line caption, which ``replay_html`` draws as SVG
over the screenshot. Points come from the browser worker's own mapping
(:func:`agents.browser.actions.to_pixels`, 0-1000 normalised coordinates over the viewport), or
from the centre of the set-of-marks element an action names, so the marker sits exactly where the
browser clicked. An action whose target cannot be placed (coordinates outside 0-1000, an element
id missing from the marks) gets no marker and says why in ``problem``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.browser.actions import DEFAULT_SCROLL_PX, ActionRefused, to_pixels

LABEL_FONT_PX = 22
LABEL_CHARS = 60  # longer typed text is cut, with an ellipsis, in the label (not the caption)
CAPTION_CHARS = 300


@dataclass(frozen=True)
class ClickMarker:
    """A circle with a crosshair at the point; two rings for a double click."""

    x: float
    y: float
    radius: float
    double: bool = False


@dataclass(frozen=True)
class TextLabel:
    """A boxed label whose box starts at (x, y) (top left) and is ``width`` x ``height``."""

    x: float
    y: float
    width: float
    height: float
    text: str


@dataclass(frozen=True)
class ScrollArrow:
    """A shaft from (x1, y1) to (x2, y2) and a triangular head at (x2, y2)."""

    x1: float
    y1: float
    x2: float
    y2: float
    head: tuple[tuple[float, float], tuple[float, float], tuple[float, float]]


Shape = ClickMarker | TextLabel | ScrollArrow


@dataclass(frozen=True)
class Overlay:
    shapes: tuple[Shape, ...]
    caption: str  # the action in words, always set
    problem: str | None = None  # why the action could not be placed on the screenshot


def action_point(
    action: dict[str, Any], width: int, height: int, marks: list[dict[str, Any]] | None = None
) -> tuple[float, float] | None:
    """Where the browser aimed ``action`` on a ``width`` x ``height`` viewport (None: nowhere).

    Raises :class:`ActionRefused` like the browser does for coordinates outside 0-1000, and for
    an element id that the screenshot's marks do not list.
    """
    element_id = action.get("element_id")
    if element_id is not None:
        for mark in marks or []:
            if str(mark.get("id")) == str(element_id):
                return mark["x"] + mark["width"] / 2, mark["y"] + mark["height"] / 2
        raise ActionRefused(f"element {element_id} is not among this screenshot's marks")
    return to_pixels(action, {"width": width, "height": height})


# Each kind of action in words, from the action and where it aims (" at (x, y)", " on element
# n" or ""); :func:`describe` shows any other kind by its name.
_IN_WORDS: dict[str, Callable[[dict[str, Any], str], str]] = {
    "left_click": lambda _, where: f"left_click{where}",
    "double_click": lambda _, where: f"double_click{where}",
    "type": lambda a, where: f"type {json.dumps(a.get('text') or '', ensure_ascii=False)}{where}",
    "key": lambda a, _: f"key {a.get('text') or ''}",
    "scroll": lambda a, where: (
        f"scroll {(a.get('direction') or 'down').lower()} {a.get('amount') or DEFAULT_SCROLL_PX} px"
        f"{where}"
    ),
    "navigate": lambda a, _: f"navigate to {a.get('url') or ''}",
    "answer": lambda a, _: f"answer: {a.get('text') or ''}",
    "wait": lambda a, _: f"wait {a.get('seconds') or 1.0:g} s",
}


def describe(action: dict[str, Any] | None) -> str:
    """The action in one line, e.g. ``left_click (581, 518)`` or ``type "bread" + at (10, 20)``."""
    if action is None:
        return "no action (the reply did not parse)"
    kind = action.get("kind", "?")
    where = ""
    if action.get("element_id") is not None:
        where = f" on element {action['element_id']}"
    elif action.get("x") is not None and action.get("y") is not None:
        where = f" at ({action['x']}, {action['y']})"
    in_words = _IN_WORDS.get(kind)
    text = kind if in_words is None else in_words(action, where)
    return text if len(text) <= CAPTION_CHARS else text[: CAPTION_CHARS - 1] + "…"


def _label(
    text: str, near: tuple[float, float] | None, width: int, height: int, radius: float
) -> TextLabel:
    shown = text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"
    box_w = min(0.6 * LABEL_FONT_PX * max(len(shown), 1) + 16, width)
    box_h = LABEL_FONT_PX + 12
    if near is None:
        x, y = 8.0, 8.0  # no point: along the top
    else:
        x, y = near[0] + radius + 6, near[1] - radius - box_h
        if y < 0:
            y = near[1] + radius + 6  # no room above: below the point
    x = min(max(x, 0.0), max(width - box_w, 0.0))
    y = min(max(y, 0.0), max(height - box_h, 0.0))
    return TextLabel(x, y, box_w, box_h, shown)


def _arrow(
    start: tuple[float, float], direction: str, amount: int, width: int, height: int
) -> ScrollArrow:
    dx, dy = {"down": (0, 1), "up": (0, -1), "right": (1, 0), "left": (-1, 0)}[direction]
    # Scaled so that any scroll reads as an arrow, and a long one stays on the screenshot.
    span = width if dx else height
    length = min(max(amount * 0.25, 60.0), 0.4 * span)
    x1, y1 = start
    x2 = min(max(x1 + dx * length, 0.0), width - 1.0)
    y2 = min(max(y1 + dy * length, 0.0), height - 1.0)
    head_len, head_half = 26.0, 14.0
    angle = math.atan2(y2 - y1, x2 - x1) if (x2, y2) != (x1, y1) else math.atan2(dy, dx)
    back_x, back_y = x2 - head_len * math.cos(angle), y2 - head_len * math.sin(angle)
    normal_x, normal_y = -math.sin(angle) * head_half, math.cos(angle) * head_half
    head = (
        (x2, y2),
        (back_x + normal_x, back_y + normal_y),
        (back_x - normal_x, back_y - normal_y),
    )
    return ScrollArrow(x1, y1, x2, y2, head)


def overlay(
    action: dict[str, Any] | None,
    width: int,
    height: int,
    marks: list[dict[str, Any]] | None = None,
) -> Overlay:
    """The shapes that show ``action`` on a ``width`` x ``height`` screenshot.

    Clicks: a marker at the point. Type: a marker at the point if it has one, and the text in a
    label next to it (or along the top). Scroll: an arrow from the point (or the centre, as the
    browser does) in the scroll direction. Key, navigate, go_back, wait, answer: caption only.
    """
    caption = describe(action)
    if action is None or width <= 0 or height <= 0:
        return Overlay((), caption)
    kind = action.get("kind")
    radius = max(min(width, height) * 0.022, 10.0)
    try:
        point = action_point(action, width, height, marks)
    except ActionRefused as refused:
        return Overlay((), caption, str(refused))
    shapes: list[Shape] = []
    if kind in ("left_click", "double_click"):
        if point is None:
            return Overlay((), caption, f"{kind} without a point")
        shapes.append(ClickMarker(point[0], point[1], radius, double=kind == "double_click"))
    elif kind == "type":
        if point is not None:
            shapes.append(ClickMarker(point[0], point[1], radius))
        shapes.append(_label(action.get("text") or "", point, width, height, radius))
    elif kind == "scroll":
        direction = (action.get("direction") or "down").lower()
        if direction not in ("up", "down", "left", "right"):
            return Overlay((), caption, f"scroll direction {direction!r} is unknown")
        start = point if point is not None else (width / 2, height / 2)
        amount = action.get("amount") or DEFAULT_SCROLL_PX
        shapes.append(_arrow(start, direction, amount, width, height))
    return Overlay(tuple(shapes), caption)
