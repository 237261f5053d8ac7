"""Performing one agent action on a page, in the Qwen-VL computer-use convention.

Coordinates are normalised to 0-1000 on both axes of the viewport; set-of-marks actions name an
element id from the last marks table instead. An action the page refuses (no such element, a
click that times out) returns its error as a string, which the agent sees in the next
observation; only a page that is gone raises (see ``session.EpisodeFailure``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from playwright.async_api import Page

MAX_WAIT_S = 10.0
DEFAULT_SCROLL_PX = 500
# Resolves once the scroll offsets of the element under the point and of its ancestors (the
# page's included) stayed the same for three animation frames (five at least), or after 60:
# a wheel event returns before the page has scrolled.
SCROLL_SETTLED = """([x, y]) => new Promise((resolve) => {
  const offsets = () => {
    const parts = [window.scrollX, window.scrollY];
    for (let el = document.elementFromPoint(x, y); el; el = el.parentElement) {
      parts.push(el.scrollLeft, el.scrollTop);
    }
    return parts.join(",");
  };
  let last = offsets(), still = 0, frames = 0;
  const tick = () => {
    const now = offsets();
    still = now === last ? still + 1 : 0;
    last = now;
    frames += 1;
    if ((still >= 3 && frames >= 5) || frames >= 60) resolve(true);
    else requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})"""
KEY_NAMES = {
    "ctrl": "Control",
    "control": "Control",
    "alt": "Alt",
    "shift": "Shift",
    "cmd": "Meta",
    "meta": "Meta",
    "enter": "Enter",
    "return": "Enter",
    "esc": "Escape",
    "escape": "Escape",
    "tab": "Tab",
    "backspace": "Backspace",
    "delete": "Delete",
    "space": "Space",
    "up": "ArrowUp",
    "down": "ArrowDown",
    "left": "ArrowLeft",
    "right": "ArrowRight",
    "pageup": "PageUp",
    "pagedown": "PageDown",
    "home": "Home",
    "end": "End",
}


class ActionRefused(Exception):
    """The action cannot be performed as given; the message is shown to the agent."""


def key_combo(text: str) -> str:
    """``ctrl+a`` -> ``Control+a``; ``enter`` -> ``Enter``; single characters pass through."""
    parts = [p.strip() for p in text.split("+") if p.strip()]
    if not parts:
        raise ActionRefused("key action without a key")
    return "+".join(KEY_NAMES.get(p.lower(), p if len(p) == 1 else p.capitalize()) for p in parts)


def to_pixels(action: dict[str, Any], viewport: dict[str, int]) -> tuple[float, float] | None:
    x, y = action.get("x"), action.get("y")
    if x is None or y is None:
        return None
    if not (0 <= x <= 1000 and 0 <= y <= 1000):
        raise ActionRefused(f"coordinates ({x}, {y}) are outside 0-1000")
    return x / 1000 * (viewport["width"] - 1), y / 1000 * (viewport["height"] - 1)


async def _element_point(page: Page, element_id: str) -> tuple[float, float]:
    box = await page.locator(f'[data-webgym-mark="{element_id}"]').first.bounding_box(timeout=2000)
    if box is None:
        raise ActionRefused(f"element {element_id} is not visible on this page")
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


async def _target(page: Page, action: dict[str, Any], viewport: dict[str, int]):
    if action.get("element_id") is not None:
        if not await page.locator(f'[data-webgym-mark="{action["element_id"]}"]').count():
            raise ActionRefused(f"no element with id {action['element_id']} on this page")
        return await _element_point(page, action["element_id"])
    return to_pixels(action, viewport)


Point = tuple[float, float]


async def perform(
    page: Page, action: dict[str, Any], viewport: dict[str, int], pointer: Point | None = None
) -> Point | None:
    """Do ``action`` (navigate and go_back are the session's: they need the URL policy).

    ``pointer`` is where the mouse is known to be on this document (``None``: unknown); a
    scroll there wheels without moving first. Returns where the mouse is afterwards.
    """
    kind = action["kind"]
    if kind in ("left_click", "double_click"):
        point = await _target(page, action, viewport)
        if point is None:
            raise ActionRefused(f"{kind} needs x and y (0-1000) or an element_id")
        if kind == "left_click":
            await page.mouse.click(*point)
        else:
            await page.mouse.dblclick(*point)
        return point
    if kind == "type":
        if action.get("text") is None:
            raise ActionRefused("type needs text")
        point = await _target(page, action, viewport)
        if point is not None:
            await page.mouse.click(*point)
        await page.keyboard.type(action["text"])
        return point or pointer
    if kind == "key":
        await page.keyboard.press(key_combo(action.get("text") or ""))
        return pointer
    if kind == "scroll":
        point = await _target(page, action, viewport)
        if point is None:
            point = (viewport["width"] / 2, viewport["height"] / 2)
        amount = action.get("amount") or DEFAULT_SCROLL_PX
        direction = (action.get("direction") or "down").lower()
        deltas = {
            "down": (0, amount),
            "up": (0, -amount),
            "right": (amount, 0),
            "left": (-amount, 0),
        }
        if direction not in deltas:
            raise ActionRefused(f"scroll direction '{direction}' is not up/down/left/right")
        if point != pointer:
            await page.mouse.move(*point)
        await page.mouse.wheel(*deltas[direction])
        await page.evaluate(SCROLL_SETTLED, list(point))
        return point
    if kind == "wait":
        await asyncio.sleep(min(max(action.get("seconds") or 1.0, 0.0), MAX_WAIT_S))
    elif kind == "answer":
        pass  # ends the episode at the orchestrator; the browser only observes
    else:
        raise ActionRefused(f"unknown action kind '{kind}'")
    return pointer
