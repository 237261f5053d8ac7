"""The strict reply parser: typed actions or typed errors, never a silent substitution."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.prompt.reply import ACTIONS, ParsedReply, ParseError, format_reply, parse_reply


def _call(arguments: dict) -> str:
    return (
        "Thought: the search box is at the top.\nAction: click it.\n<tool_call>\n"
        + json.dumps({"name": "computer_use", "arguments": arguments})
        + "\n</tool_call>\nMemory: looking for kettles."
    )


def test_a_well_formed_reply():
    parsed = parse_reply(_call({"action": "left_click", "coordinate": [500, 120]}))
    assert parsed == ParsedReply(
        action={"kind": "left_click", "x": 500, "y": 120},
        thought="the search box is at the top.",
        action_text="click it.",
        memory="looking for kettles.",
    )


@pytest.mark.parametrize(
    ("arguments", "action"),
    [
        ({"action": "double_click", "element_id": 7}, {"kind": "double_click", "element_id": "7"}),
        (
            {"action": "type", "text": "blue kettle", "coordinate": [10, 20]},
            {"kind": "type", "x": 10, "y": 20, "text": "blue kettle"},
        ),
        ({"action": "key", "keys": ["ctrl", "a"]}, {"kind": "key", "text": "ctrl+a"}),
        (
            {"action": "scroll", "pixels": -300},
            {"kind": "scroll", "direction": "down", "amount": 300},
        ),
        ({"action": "scroll", "direction": "up"}, {"kind": "scroll", "direction": "up"}),
        ({"action": "wait", "time": 2}, {"kind": "wait", "seconds": 2.0}),
        ({"action": "go_back"}, {"kind": "go_back"}),
        (
            {"action": "navigate", "url": " http://a.webgym.test/ "},
            {"kind": "navigate", "url": "http://a.webgym.test/"},
        ),
        ({"action": "answer", "text": "$24.99"}, {"kind": "answer", "text": "$24.99"}),
    ],
)
def test_every_action(arguments, action):
    parsed = parse_reply(_call(arguments))
    assert isinstance(parsed, ParsedReply)
    assert parsed.action == action


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("Thought: hmm\nAction: click\nMemory: x", "no <tool_call>"),
        (_call({"action": "left_click", "coordinate": [1, 2]}) * 2, "2 <tool_call> blocks"),
        ("<tool_call>{not json}</tool_call>", "not valid JSON"),
        ('<tool_call>{"name": "browser", "arguments": {}}</tool_call>', "must call 'computer_use'"),
        ('<tool_call>{"name": "computer_use"}</tool_call>', "no 'arguments'"),
        (_call({"action": "fly"}), "unknown action 'fly'"),
        (_call({"action": "left_click"}), "needs 'coordinate'"),
        (_call({"action": "left_click", "coordinate": [1200, 5]}), "outside 0-1000"),
        (_call({"action": "left_click", "coordinate": [True, 5]}), "must be [x, y] numbers"),
        (_call({"action": "type"}), "needs 'text'"),
        (_call({"action": "scroll", "direction": "sideways"}), "needs 'direction'"),
        (_call({"action": "wait", "time": 60}), "between 0 and 10"),
        (_call({"action": "key", "keys": []}), "needs 'keys'"),
        (_call({"action": "navigate", "url": ""}), "non-empty 'url'"),
    ],
)
def test_errors_say_why(reply, reason):
    parsed = parse_reply(reply)
    assert isinstance(parsed, ParseError)
    assert reason in parsed.reason


def test_a_parse_error_keeps_thought_and_memory():
    parsed = parse_reply("Thought: lost\nAction: none\nMemory: page 2 done")
    assert isinstance(parsed, ParseError)
    assert (parsed.thought, parsed.memory) == ("lost", "page 2 done")


@given(st.text(max_size=400))
def test_arbitrary_text_never_raises(text):
    parsed = parse_reply(text)
    assert isinstance(parsed, ParsedReply | ParseError)
    if isinstance(parsed, ParsedReply):
        assert parsed.action["kind"] in ACTIONS


_coordinates = st.tuples(st.integers(0, 1000), st.integers(0, 1000))
_text = st.text(min_size=1, max_size=40).filter(lambda t: t.strip() == t and "\n" not in t)
_actions = st.one_of(
    st.builds(lambda c: {"kind": "left_click", "x": c[0], "y": c[1]}, _coordinates),
    st.builds(lambda c: {"kind": "double_click", "x": c[0], "y": c[1]}, _coordinates),
    st.builds(lambda t: {"kind": "type", "text": t}, _text),
    st.builds(lambda t: {"kind": "answer", "text": t}, _text),
    st.builds(
        lambda d, a: {"kind": "scroll", "direction": d, "amount": a},
        st.sampled_from(["up", "down", "left", "right"]),
        st.integers(1, 5000),
    ),
    st.builds(lambda s: {"kind": "wait", "seconds": float(s)}, st.integers(0, 10)),
    st.just({"kind": "go_back"}),
    st.builds(lambda e: {"kind": "left_click", "element_id": str(e)}, st.integers(0, 500)),
)


@given(_actions, _text, _text)
def test_format_then_parse_gives_the_same_action(action, thought, memory):
    parsed = parse_reply(format_reply(action, thought=thought, memory=memory))
    assert isinstance(parsed, ParsedReply), parsed
    assert parsed.action == action
    assert parsed.memory == memory
