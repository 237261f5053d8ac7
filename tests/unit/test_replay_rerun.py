"""`webgym replay --rerun`'s comparison rule: URL, title, and the screenshot (equal bytes, or at
most 0.1% of the pixels changed by more than 48 of 255)."""

import io

from PIL import Image, ImageDraw

from agents.browser.page_match import PIXEL_TOLERANCE, compare_screenshots
from analytics.replay import Frame
from analytics.rerun import compare_page
from tests.samples import step_record

W, H = 400, 250


def png(draw=None, size=(W, H)) -> bytes:
    image = Image.new("RGB", size, (240, 240, 240))
    if draw:
        draw(ImageDraw.Draw(image))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def frame(screenshot: bytes, url="http://a.webgym.test/", title="A", failure=None) -> Frame:
    """The frame of observation ``e:1:observation`` as replay reads it from the log."""
    shown = {"screenshot": screenshot, "screenshot_format": "png", "width": W, "height": H}
    page = {"url": url, "title": title, "failure": failure}
    return Frame.from_record({**step_record("e", 1, "observation", 0), **shown, **page})


def test_equal_bytes_are_identical():
    shot = png()
    difference = compare_screenshots(shot, shot)
    assert difference.identical and difference.matches and difference.changed_share == 0


def test_a_caret_or_faint_noise_still_matches():
    caret = png(lambda d: d.line([(100, 100), (100, 115)], fill=(0, 0, 0), width=2))
    faint = png(lambda d: d.rectangle([0, 0, W - 1, H - 1], fill=(240 - PIXEL_TOLERANCE, 240, 240)))
    assert compare_screenshots(png(), caret).matches  # 32 of 100,000 pixels
    assert compare_screenshots(png(), faint).matches  # every pixel, but within the tolerance
    assert not compare_screenshots(png(), caret).identical


def test_changed_content_or_size_differs():
    menu = png(lambda d: d.rectangle([100, 50, 300, 180], fill=(30, 90, 200)))
    difference = compare_screenshots(png(), menu)
    assert not difference.matches and 0.2 < difference.changed_share < 0.3
    other_size = compare_screenshots(png(), png(size=(W, H + 1)))
    assert not other_size.matches and other_size.changed_share == 1.0


def test_a_page_check_names_each_difference():
    same = compare_page(
        1, {"kind": "wait"}, frame(png()), "http://a.webgym.test/", "A", png(), None
    )
    assert same.matches and same.screenshot.identical
    moved = compare_page(
        2, {"kind": "left_click"}, frame(png()), "http://a.webgym.test/b", "B", png(), None
    )
    assert not moved.matches
    assert moved.differences == (
        "URL: recorded http://a.webgym.test/, now http://a.webgym.test/b",
        "title: recorded 'A', now 'B'",
    )


def test_steps_the_recording_cannot_show_are_differences():
    failed = compare_page(3, None, frame(b"", failure="renderer crashed"), "u", "t", png(), None)
    assert not failed.matches and "renderer crashed" in failed.differences[0]
    unknown = compare_page(3, None, None, "u", "t", png(), None)
    assert not unknown.matches and "not in the log" in unknown.differences[0]
