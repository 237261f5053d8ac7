"""The page an ``observation`` event shows, as one type for whoever holds one.

The browser worker captures it (``agents.browser.session.Snapshot``) and a replay reads it back
from the log (``analytics.replay.Frame``); both carry these fields of the observation schema.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PageCapture:
    """One capture of a page: the screenshot, its encoding and size, and where it was."""

    screenshot: bytes
    screenshot_format: str  # "jpeg" or "png"
    width: int
    height: int
    url: str
    title: str


def digest_of(record: dict[str, Any]) -> str:
    """The SHA-256 (hex) of an observation's screenshot, inline or stored: the browser's stamp
    (``screenshot_sha256``, from observation v5), or for an event written before the stamp
    existed, its inline bytes hashed."""
    return (
        record.get("screenshot_sha256")
        or hashlib.sha256(record.get("screenshot") or b"").hexdigest()
    )
