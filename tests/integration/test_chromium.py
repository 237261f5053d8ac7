"""Debian's Chromium, driven by Playwright, screenshots a page served on loopback."""

from __future__ import annotations

import io

from PIL import Image

from commands.smoke import VIEWPORT, screenshot, serve_page


def test_screenshot_of_a_local_page(settings):
    with serve_page() as url:
        image, final_url, title = screenshot(settings, url)
    assert final_url == url
    assert title == "webgym smoke"
    decoded = Image.open(io.BytesIO(image))
    assert decoded.format == "JPEG"
    assert decoded.size == (VIEWPORT["width"], VIEWPORT["height"])
    # A rendered page, not a blank frame: the heading's dark pixels are there.
    assert decoded.convert("L").getextrema()[0] < 60
