"""Whether a page shown now is the page an observation recorded: the replay tolerance.

One rule serves ``webgym replay --rerun`` (each rerun step against the log) and the browser
worker's migration (a rebuilt page against the last observation the episode's previous owner
logged): :func:`page_differences`.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from typing import Protocol

from PIL import Image, ImageChops

PIXEL_TOLERANCE = 48  # channel difference (0-255) below which a pixel counts as unchanged
SCREENSHOT_SHARE = 0.001  # share of changed pixels up to which two screenshots still match


class RecordedPage(Protocol):
    """What an observation recorded of a page (``failure`` set: it recorded no page)."""

    url: str
    title: str
    screenshot: bytes
    failure: str | None


@dataclass(frozen=True)
class ScreenshotDifference:
    identical: bool  # same bytes
    changed_share: float  # share of pixels changed beyond the tolerance (1.0: sizes differ)

    @property
    def matches(self) -> bool:
        return self.identical or self.changed_share <= SCREENSHOT_SHARE


def compare_screenshots(recorded: bytes, now: bytes) -> ScreenshotDifference:
    """How far ``now`` is from ``recorded`` (both JPEG or PNG); see :func:`page_differences`."""
    if hashlib.sha256(recorded).digest() == hashlib.sha256(now).digest():
        return ScreenshotDifference(True, 0.0)
    first = Image.open(io.BytesIO(recorded)).convert("RGB")
    second = Image.open(io.BytesIO(now)).convert("RGB")
    if first.size != second.size:
        return ScreenshotDifference(False, 1.0)
    red, green, blue = ImageChops.difference(first, second).split()
    largest = ImageChops.lighter(ImageChops.lighter(red, green), blue)
    changed = sum(largest.histogram()[PIXEL_TOLERANCE + 1 :])
    return ScreenshotDifference(False, changed / (first.width * first.height))


def page_differences(
    recorded: RecordedPage | None, url: str, title: str, screenshot: bytes
) -> tuple[tuple[str, ...], ScreenshotDifference | None]:
    """How the page shown now (``url``, ``title``, ``screenshot``) differs from ``recorded``
    (None: not in the log), in words (empty: it matches), and the screenshots' difference (None:
    nothing was compared).

    The rule: the URL and the title must be equal; the screenshots match when their sha256 are
    equal, or else when at most :data:`SCREENSHOT_SHARE` of the pixels (0.1%) differ by more
    than :data:`PIXEL_TOLERANCE` (48 of 255) in some colour channel. Chromium renders a static
    page identically, so equal bytes are the rule; the tolerance absorbs what is not content (a
    text caret that blinks, JPEG noise after a sub-pixel shift), while a changed line of text,
    an opened menu or a scroll changes far more.
    """
    if recorded is None:
        return ("the recorded observation of this step is not in the log",), None
    if recorded.failure or not recorded.screenshot:
        return (f"the recording has no page here: {recorded.failure or 'no screenshot'}",), None
    differences = []
    if recorded.url != url:
        differences.append(f"URL: recorded {recorded.url}, now {url}")
    if recorded.title != title:
        differences.append(f"title: recorded {recorded.title!r}, now {title!r}")
    difference = compare_screenshots(recorded.screenshot, screenshot)
    if not difference.matches:
        differences.append(
            "screenshot: different size"
            if difference.changed_share >= 1.0
            else f"screenshot: {difference.changed_share:.2%} of the pixels changed"
        )
    return tuple(differences), difference
