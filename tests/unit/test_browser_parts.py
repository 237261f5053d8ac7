import pytest

from agents.browser.actions import ActionRefused, key_combo, to_pixels
from infra.offsets import OffsetTracker


def test_offsets_commit_only_the_finished_prefix():
    tracker = OffsetTracker()
    tp = ("webgym.ops.act", 0)
    for offset in (10, 11, 12, 13):
        tracker.started(tp, offset)
    assert tracker.finished(tp, 12) is None  # 10 and 11 still in flight
    assert tracker.finished(tp, 10) == 11
    assert tracker.finished(tp, 11) == 13  # 12 was done already
    assert tracker.in_flight(tp) == 1
    assert tracker.finished(tp, 13) == 14
    assert tracker.finished(tp, 99) is None  # unknown offsets change nothing


def test_forgotten_partitions_are_not_committed():
    tracker = OffsetTracker()
    tp = ("webgym.ops.act", 3)
    tracker.started(tp, 5)
    tracker.forget(tp)
    assert tracker.finished(tp, 5) is None


def test_key_combos():
    assert key_combo("enter") == "Enter"
    assert key_combo("ctrl+a") == "Control+a"
    assert key_combo("Shift+Tab") == "Shift+Tab"
    assert key_combo("x") == "x"
    with pytest.raises(ActionRefused):
        key_combo("")


def test_normalised_coordinates():
    viewport = {"width": 1281, "height": 769}
    assert to_pixels({"x": 0, "y": 1000}, viewport) == (0, 768)
    assert to_pixels({"x": 500, "y": 500}, viewport) == (640, 384)
    assert to_pixels({"kind": "scroll"}, viewport) is None
    with pytest.raises(ActionRefused, match="outside 0-1000"):
        to_pixels({"x": 1200, "y": 5}, viewport)
