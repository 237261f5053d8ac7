"""The context builder: the window of full rounds, one-line summaries, the carried memory."""

from __future__ import annotations

from schemas.prompt.context import Current, Step, build_context, summarise, system_prompt
from schemas.prompt.reply import format_reply


def _step(i: int, memory: str = "", changed: bool = True, parse_error: str | None = None) -> Step:
    action = {"kind": "left_click", "x": 100 + i, "y": 200}
    reply = "garbage" if parse_error else format_reply(action, thought=f"t{i}", memory=memory)
    return Step(
        step=i,
        observation_event_id=f"ep:{i - 1}:observation",
        title=f"Page {i}",
        url=f"http://a.webgym.test/{i}",
        reply=reply,
        action=None if parse_error else action,
        parse_error=parse_error,
        page_changed=changed,
    )


def _current(i: int, **fields) -> Current:
    return Current(i, f"ep:{i - 1}:observation", f"Page {i}", f"http://a.webgym.test/{i}", **fields)


def _images(context) -> list[str]:
    return [
        part["observation_event_id"]
        for message in context.messages
        if isinstance(message["content"], list)
        for part in message["content"]
        if part["type"] == "image"
    ]


def test_first_step_has_the_task_and_one_screenshot():
    context = build_context("Find the kettle price.", [], _current(1))
    assert context.messages[0]["role"] == "system"
    assert "computer_use" in context.messages[0]["content"]
    assert context.messages[1]["content"][0]["text"] == "Task: Find the kettle price."
    assert context.observation_event_ids == ["ep:0:observation"] == _images(context)
    assert context.memory is None
    assert "Memory: (empty)" in context.messages[-1]["content"][0]["text"]


def test_the_last_four_rounds_are_full_and_older_ones_summarised():
    history = [_step(i, memory=f"m{i}", changed=i % 2 == 0) for i in range(1, 8)]
    context = build_context("task", history, _current(8))
    # Steps 1-3 as summaries, steps 4-7 as rounds with screenshots and replies, then now.
    assert context.summaries == [summarise(s) for s in history[:3]]
    assert context.summaries[0] == "step 1 on Page 1: left_click (101, 200) -> page unchanged"
    assert context.summaries[1].endswith("-> page changed")
    assert "Earlier steps:\nstep 1 on Page 1" in context.messages[1]["content"][0]["text"]
    assert _images(context) == [f"ep:{i}:observation" for i in range(3, 8)]
    assert context.observation_event_ids == _images(context)
    replies = [m["content"] for m in context.messages if m["role"] == "assistant"]
    assert replies == [s.reply for s in history[3:]]
    assert len(context.messages) == 2 + 2 * 4 + 1


def test_memory_is_carried_from_the_latest_reply_that_has_one():
    history = [_step(1, memory="kettles are on page 2"), _step(2, memory="")]
    context = build_context("task", history, _current(3))
    assert context.memory == "kettles are on page 2"
    assert "Memory: kettles are on page 2" in context.messages[-1]["content"][0]["text"]
    newer = build_context("task", [*history, _step(3, memory="price is $24.99")], _current(4))
    assert newer.memory == "price is $24.99"


def test_parse_errors_and_action_errors_are_shown_at_the_next_step():
    history = [_step(1), _step(2, parse_error="no <tool_call>...</tool_call> block")]
    context = build_context("task", history, _current(3, action_error="URL refused: file"))
    note = context.messages[-1]["content"][0]["text"]
    assert "could not be parsed (no <tool_call>" in note
    assert "The last action failed: URL refused: file" in note
    assert "unparseable reply" in summarise(history[1])


def test_set_of_marks_mode_lists_elements_and_uses_element_ids():
    marks = [
        {"id": "0", "role": "link", "name": "Blue kettle", "x": 1, "y": 2, "width": 3, "height": 4}
    ]
    context = build_context("task", [], _current(1, marks=marks), mode="set_of_marks")
    texts = [p["text"] for p in context.messages[-1]["content"] if p["type"] == "text"]
    assert 'Marked elements:\n[0] link "Blue kettle"' in texts
    assert "element_id" in system_prompt("set_of_marks")
    assert '"coordinate"' not in system_prompt("set_of_marks")
    assert '"coordinate"' in system_prompt("coordinate")


def test_deterministic():
    history = [_step(i, memory=f"m{i}") for i in range(1, 6)]
    assert build_context("t", history, _current(6)) == build_context("t", history, _current(6))
