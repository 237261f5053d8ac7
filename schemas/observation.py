"""The page an ``observation`` event shows, as one type for whoever holds one.

The browser worker captures it (``agents.browser.session.Snapshot``) and a replay reads it back
from the log (``analytics.replay.Frame``); both carry these fields of the observation schema.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PageCapture:
    """One capture of a page: the screenshot, its encoding and size, and where it was."""

    screenshot: bytes
    screenshot_format: str  # "jpeg" or "png"
    width: int
    height: int
    url: str
    title: str
