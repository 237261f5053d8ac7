"""Where `webgym replay` draws each action on its screenshot (pure geometry)."""

import pytest

from agents.browser.actions import to_pixels
from analytics.replay_draw import (
    ClickMarker,
    ScrollArrow,
    TextLabel,
    action_point,
    describe,
    overlay,
)

W, H = 1280, 768


def action(kind, **fields):
    return {"kind": kind, "x": None, "y": None, "element_id": None, **fields}


def test_a_click_is_drawn_where_the_browser_clicks():
    for x, y in ((0, 0), (500, 500), (1000, 1000), (581, 518)):
        drawn = overlay(action("left_click", x=x, y=y), W, H)
        (marker,) = drawn.shapes
        assert isinstance(marker, ClickMarker) and not marker.double
        assert (marker.x, marker.y) == to_pixels({"x": x, "y": y}, {"width": W, "height": H})
    corner = overlay(action("left_click", x=1000, y=1000), W, H).shapes[0]
    assert (corner.x, corner.y) == (W - 1, H - 1)
    assert overlay(action("double_click", x=10, y=10), W, H).shapes[0].double


def test_an_element_action_is_drawn_at_the_centre_of_its_mark():
    marks = [
        {"id": "7", "role": "link", "name": "Shop", "x": 100, "y": 40, "width": 60, "height": 20}
    ]
    assert action_point(action("left_click", element_id="7"), W, H, marks) == (130, 50)
    missing = overlay(action("left_click", element_id="8"), W, H, marks)
    assert missing.shapes == () and "element 8" in missing.problem


def test_coordinates_outside_the_screen_are_a_problem_not_a_shape():
    drawn = overlay(action("left_click", x=1200, y=5), W, H)
    assert drawn.shapes == () and "outside 0-1000" in drawn.problem
    assert drawn.caption == "left_click at (1200, 5)"


def test_typed_text_is_labelled_next_to_its_point_or_along_the_top():
    drawn = overlay(action("type", x=500, y=500, text="hiking boots"), W, H)
    marker, label = drawn.shapes
    assert isinstance(marker, ClickMarker) and isinstance(label, TextLabel)
    assert label.text == "hiking boots"
    assert label.x > marker.x and label.y + label.height < marker.y  # up and to the right
    top = overlay(action("type", text="x" * 200), W, H)
    (label,) = top.shapes
    assert (label.x, label.y) == (8.0, 8.0)
    assert len(label.text) == 60 and label.text.endswith("…")
    assert label.width <= W


@pytest.mark.parametrize("x,y", [(1000, 0), (0, 0), (1000, 1000), (990, 995)])
def test_labels_stay_on_the_screenshot(x, y):
    _, label = overlay(action("type", x=x, y=y, text="a long search phrase here"), W, H).shapes
    assert 0 <= label.x and label.x + label.width <= W
    assert 0 <= label.y and label.y + label.height <= H


@pytest.mark.parametrize(
    "direction,sign",
    [("down", (0, 1)), ("up", (0, -1)), ("right", (1, 0)), ("left", (-1, 0))],
)
def test_a_scroll_is_an_arrow_in_its_direction(direction, sign):
    drawn = overlay(action("scroll", direction=direction, amount=400), W, H)
    (arrow,) = drawn.shapes
    assert isinstance(arrow, ScrollArrow)
    assert (arrow.x1, arrow.y1) == (W / 2, H / 2)  # no point: the browser scrolls at the centre
    dx, dy = arrow.x2 - arrow.x1, arrow.y2 - arrow.y1
    assert (dx > 0) - (dx < 0) == sign[0] and (dy > 0) - (dy < 0) == sign[1]
    assert arrow.head[0] == (arrow.x2, arrow.y2)  # the head's tip is the shaft's end
    assert drawn.caption == f"scroll {direction} 400 px"


def test_a_scroll_from_a_point_near_the_edge_stays_on_the_screenshot():
    (arrow,) = overlay(action("scroll", x=500, y=990, direction="down", amount=5000), W, H).shapes
    assert arrow.y2 <= H - 1 and arrow.y2 > arrow.y1
    bad = overlay(action("scroll", direction="sideways"), W, H)
    assert bad.shapes == () and "sideways" in bad.problem


def test_actions_without_a_place_are_captions_only():
    cases = {
        "navigate": (action("navigate", url="http://a.webgym.test/x"), "http://a.webgym.test/x"),
        "answer": (action("answer", text="42 hotels"), "answer: 42 hotels"),
        "key": (action("key", text="ctrl+a"), "key ctrl+a"),
        "wait": (action("wait", seconds=2.0), "wait 2 s"),
        "go_back": (action("go_back"), "go_back"),
    }
    for expected_kind, (recorded, caption) in cases.items():
        drawn = overlay(recorded, W, H)
        assert drawn.shapes == () and drawn.problem is None
        assert caption in drawn.caption, expected_kind
    assert describe(None) == "no action (the reply did not parse)"
    assert overlay(None, W, H).shapes == ()
