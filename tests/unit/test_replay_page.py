"""An episode's events paired into steps (``assemble``) and rendered as one page (pure parts)."""

from __future__ import annotations

import base64
import io
import json
from html.parser import HTMLParser
from typing import Any

from PIL import Image

from analytics.replay import assemble
from analytics.replay_html import render_html

EPISODE = "run-test-000001"
TS = 1_796_000_000_000
W, H = 320, 192
SCRIPT_THOUGHT = 'I will click <script>alert("x")</script> & see'


def jpeg(colour: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (W, H), colour).save(out, "JPEG", quality=80)
    return out.getvalue()


def act(kind: str, **fields: Any) -> dict[str, Any]:
    base = {"x": None, "y": None, "element_id": None, "text": None, "direction": None}
    return {**base, "amount": None, "url": None, "seconds": None, "kind": kind, **fields}


def observation(step: int, colour, episode_id: str = EPISODE, **fields) -> dict[str, Any]:
    return {
        "event_id": f"{episode_id}:{step}:observation",
        "episode_id": episode_id,
        "step": step,
        "ts": TS + 1000 * step + 500,
        "screenshot": jpeg(colour),
        "screenshot_format": "jpeg",
        "width": W,
        "height": H,
        "url": f"http://shop.webgym.test/page{step}",
        "title": f"Page {step} <b>bold</b>",
        "action_error": None,
        "set_of_marks": None,
        "timings_ms": {"act": 120.0, "screenshot": 40.0},
        "failure": None,
        **fields,
    }


def inference(step: int, action: dict | None, thought: str, **fields) -> dict[str, Any]:
    return {
        "event_id": f"{EPISODE}:{step}:inference",
        "episode_id": EPISODE,
        "step": step,
        "ts": TS + 1000 * step,
        "policy_version": 3,
        "raw_text": f"Thought: {thought}\nAction: ...",
        "thought": thought,
        "action": action,
        "parse_error": None if action else "no <tool_call> block",
        "memory": f"memory after step {step}",
        "latency_ms": 250.0,
        "backend": "scripted",
        "model": "scripted",
        **fields,
    }


CLICK = act("left_click", x=500, y=500)
TYPE = act("type", x=250, y=100, text="boots")
ANSWER = act("answer", text="The <best> boots")


def events() -> dict[str, list[dict[str, Any]]]:
    """Four steps: a click, an unparseable reply, typing, the answer."""
    return {
        "episode_events": [
            {
                "event_id": f"{EPISODE}:started",
                "episode_id": EPISODE,
                "kind": "started",
                "ts": TS,
                "task_id": "shop-001-easy",
                "start_url": "http://shop.webgym.test/",
                "horizon": 10,
            },
            {
                "event_id": f"{EPISODE}:end",
                "episode_id": EPISODE,
                "kind": "finished",
                "ts": TS + 9000,
                "task_id": "shop-001-easy",
                "reason": "answer",
                "final_answer": ANSWER["text"],
            },
        ],
        "navigate_ops": [
            {
                "event_id": f"{EPISODE}:0:navigate",
                "episode_id": EPISODE,
                "step": 0,
                "ts": TS,
                "url": "http://shop.webgym.test/",
                "setup": None,
                "task_id": "shop-001-easy",
                "viewport_width": W,
                "viewport_height": H,
                "allowed_hosts": ["shop.webgym.test"],
                "timeout_ms": 30000,
            },
        ],
        "act_ops": [
            {
                "event_id": f"{EPISODE}:1:act",
                "episode_id": EPISODE,
                "step": 1,
                "ts": TS + 1100,
                "action": CLICK,
                "timeout_ms": 10000,
            },
            {
                "event_id": f"{EPISODE}:3:act",
                "episode_id": EPISODE,
                "step": 3,
                "ts": TS + 3100,
                "action": TYPE,
                "timeout_ms": 10000,
            },
        ],
        "observations": [
            observation(0, (200, 30, 30)),
            observation(1, (30, 200, 30), action_error="a dialog appeared"),
            observation(3, (30, 30, 200)),
        ],
        "inferences": [
            inference(1, CLICK, SCRIPT_THOUGHT),
            inference(2, None, "hmm"),
            inference(3, TYPE, "type the query"),
            inference(4, ANSWER, "done"),
        ],
    }


def scored(reward: float = 1.0) -> dict[str, Any]:
    seen = {1: 0, 2: 1, 3: 1, 4: 3}
    steps = []
    for step, action in ((1, CLICK), (2, None), (3, TYPE), (4, ANSWER)):
        steps.append(
            {
                "step": step,
                "observation_event_id": f"{EPISODE}:{seen[step]}:observation",
                "inference_event_id": f"{EPISODE}:{step}:inference",
                "action": action,
                "parse_error": None if action else "no <tool_call> block",
                "repeated": step == 3,
                "policy_version": 3,
            }
        )
    return {
        "event_id": f"{EPISODE}:scored",
        "episode_id": EPISODE,
        "ts": TS + 9500,
        "task_id": "shop-001-easy",
        "instruction": "Find the <best> boots",
        "website": "shop.webgym.test",
        "difficulty": "easy",
        "horizon": 10,
        "started_ts": TS,
        "termination": "answer",
        "aborted": False,
        "final_answer": ANSWER["text"],
        "policy_versions": [3],
        "steps": steps,
        "reward": reward,
        "verdicts": [
            {
                "fact_group_id": "g1",
                "fact": "boots <named>",
                "satisfied": True,
                "rationale": "named",
            },
            {"fact_group_id": "g2", "fact": "price", "satisfied": False, "rationale": "missing"},
        ],
        "judge_name": "practice-web-verifier",
        "judge_version": "1",
        "judge_error": None,
        "blocked": False,
        "block_reason": None,
    }


class PageReader(HTMLParser):
    """Steps, screenshots and actions as the page states them."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.step: int | None = None
        self.shots: dict[int, tuple[str, bytes]] = {}
        self.actions: dict[int, tuple[dict | None, bool]] = {}
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "section" and "data-step" in attrs:
            self.step = int(attrs["data-step"])
        if tag == "img" and self.step is not None:
            data = attrs["src"].split(",", 1)[1]
            self.shots[self.step] = (attrs["data-observation"], base64.b64decode(data))
        if "data-action" in attrs and self.step is not None:
            shown = json.loads(attrs["data-action"]) if attrs["data-action"] else None
            self.actions[self.step] = (shown, attrs["data-sent"] == "true")

    def handle_data(self, data):
        self.text.append(data)


def read_page(html: str) -> PageReader:
    reader = PageReader()
    reader.feed(html)
    return reader


# -- assemble -------------------------------------------------------------------------------------


def test_a_judged_episode_follows_its_trajectory():
    replay = assemble(EPISODE, **events(), scored=scored())
    assert replay.state == "judged" and replay.source == "scored trajectory"
    assert [s.step for s in replay.steps] == [1, 2, 3, 4]
    assert [s.frame.step for s in replay.steps] == [0, 1, 1, 3]
    assert [s.sent_action for s in replay.steps] == [CLICK, None, TYPE, None]
    assert replay.steps[1].parse_error and replay.steps[1].action is None
    assert [s.repeated for s in replay.steps] == [False, False, True, False]
    assert replay.instruction == "Find the <best> boots" and replay.reward == 1.0
    assert replay.final_frame is None
    assert sorted(replay.frames) == [0, 1, 3] and sorted(replay.act_ops) == [1, 3]


def test_without_a_trajectory_each_reply_gets_the_latest_page_before_it():
    replay = assemble(EPISODE, **events(), task={"task_name": "Find boots", "website": "shop"})
    assert replay.state == "ended" and replay.source == "raw topics"
    # the reply of step 2 did not parse: step 3 sees the same page again
    assert [s.frame.step for s in replay.steps] == [0, 1, 1, 3]
    assert replay.instruction == "Find boots" and replay.reward is None


def test_a_running_episode_shows_what_the_log_has_so_far():
    partial = events()
    partial["episode_events"] = partial["episode_events"][:1]
    partial["inferences"] = partial["inferences"][:3]
    replay = assemble(EPISODE, **partial)
    assert replay.state == "running" and len(replay.steps) == 3
    assert replay.final_frame.step == 3  # the page after the last action, no reply yet
    assert "still running" in render_html(replay)


def test_duplicates_and_other_episodes_are_ignored():
    doubled = events()
    first = doubled["observations"][0]
    doubled["observations"] = [
        first,
        {**first, "screenshot": jpeg((0, 0, 0))},  # a redelivery: the first copy wins
        observation(0, (9, 9, 9), episode_id="run-test-000002"),
        *doubled["observations"][1:],
    ]
    doubled["inferences"] = doubled["inferences"] + doubled["inferences"][:1]
    replay = assemble(EPISODE, **doubled, scored=scored())
    assert replay.steps[0].frame.screenshot == first["screenshot"]
    assert len(replay.steps) == 4


def test_events_gone_from_the_log_say_why():
    partial = events()
    partial["observations"] = partial["observations"][1:]
    gone = f"{EPISODE}:0:observation"
    replay = assemble(EPISODE, **partial, scored=scored(), missing={gone: "gone (retention)"})
    assert replay.steps[0].frame is None and replay.steps[0].frame_missing == "gone (retention)"
    assert "screenshot unavailable: gone (retention)" in render_html(replay)


# -- the page -------------------------------------------------------------------------------------


def test_the_page_shows_every_step_with_its_screenshot_and_action():
    records = events()
    replay = assemble(EPISODE, **records, scored=scored())
    page = read_page(render_html(replay))
    by_id = {o["event_id"]: o["screenshot"] for o in records["observations"]}
    assert sorted(page.shots) == [1, 2, 3, 4]
    for step in replay.steps:
        event_id, shown = page.shots[step.step]
        assert event_id == step.frame.event_id and shown == by_id[event_id]
    assert page.actions == {
        1: (CLICK, True),
        2: (None, False),
        3: (TYPE, True),
        4: (ANSWER, False),
    }
    text = "".join(page.text)
    assert "memory after step 3" in text and "a dialog appeared" in text
    assert "filtered as a repetition" in text and "did not parse" in text


def test_the_page_shows_the_reward_and_every_verdict():
    page_html = render_html(assemble(EPISODE, **events(), scored=scored(0.5)))
    text = "".join(read_page(page_html).text)
    assert 'data-reward="0.5"' in page_html and "reward 0.5" in text
    assert "boots <named>" in text and "not satisfied" in text and "practice-web-verifier" in text
    assert "The <best> boots" in text  # the final answer, as text


def test_model_text_is_escaped_never_markup():
    page_html = render_html(assemble(EPISODE, **events(), scored=scored()))
    assert "<script" not in page_html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; see" in page_html
    assert "<best>" not in page_html and "<named>" not in page_html and "<b>bold" not in page_html
    assert SCRIPT_THOUGHT in "".join(read_page(page_html).text)  # shown exactly as written


def test_the_page_is_self_contained():
    page = read_page(render_html(assemble(EPISODE, **events(), scored=scored())))
    for tag, attrs in page.tags:
        assert tag not in ("script", "link", "iframe", "object")
        for name in ("src", "href"):
            if name in attrs:
                assert attrs[name].startswith(("data:", "#")), (tag, attrs[name][:80])


def test_the_action_is_drawn_over_its_screenshot():
    page_html = render_html(assemble(EPISODE, **events(), scored=scored()))
    step1 = page_html.split('id="step-1"')[1].split('id="step-2"')[0]
    assert f'viewBox="0 0 {W} {H}"' in step1
    x, y = 0.5 * (W - 1), 0.5 * (H - 1)  # (500, 500) on the 0-1000 grid
    assert f'<circle cx="{x:.1f}" cy="{y:.1f}"' in step1
    step3 = page_html.split('id="step-3"')[1].split('id="step-4"')[0]
    assert ">boots</text>" in step3  # the typed text, labelled
