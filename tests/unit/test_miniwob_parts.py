"""MiniWoB++ pieces without a browser: task records, the page-reward rule, the static host, and
the heuristic policy's plans read from a real built context."""

from __future__ import annotations

import json

import pytest

from agents.policy.backends import ChatRequest
from agents.policy.backends.heuristic import HeuristicBackend, plan_for, read_context
from schemas.prompt.context import Current, build_context
from schemas.prompt.reply import parse_reply
from schemas.serde import default_catalog
from sites import generate_sites
from sites.server import PracticeWebServer
from tasks.miniwob import HOST, MARKS_SOLVABLE, available, html_root, page_reward, task_record


def test_every_listed_task_is_in_the_package_and_a_valid_task_event():
    assert set(MARKS_SOLVABLE) <= set(available())
    for name in MARKS_SOLVABLE:
        record = task_record(name, 17)
        default_catalog().encode("task", record)
        assert record["task_id"] == f"miniwob-{name}-s17"
        assert record["start_url"] == f"http://{HOST}/miniwob/{name}.html"
        assert json.loads(record["extra_json"])["setup"] == "miniwob"
        assert json.loads(record["extra_json"])["seed"] == 17
    with pytest.raises(ValueError, match="no MiniWoB"):
        task_record("no-such-task", 0)
    with pytest.raises(ValueError, match="seed"):
        task_record("click-button", -1)


def test_reward_is_one_only_when_the_page_reports_the_task_done_right():
    assert page_reward({"done": "true", "raw_reward": "1", "reward": "0.8"})[0] == 1.0
    assert page_reward({"done": "true", "raw_reward": "-1"})[0] == 0.0
    assert page_reward({"done": "true", "raw_reward": "0.5"})[0] == 0.0  # partly right
    assert page_reward({"done": "false", "raw_reward": "1"})[0] == 0.0
    assert page_reward({})[0] == 0.0


def test_the_static_host_serves_package_files_and_nothing_outside():
    server = PracticeWebServer(generate_sites(count=1), static_hosts={HOST: html_root()})
    page = server.static_file(f"{HOST}:8088", "/miniwob/click-button.html")
    assert page.status == 200 and b"Click Button Task" in page.body
    assert page.content_type.startswith("text/html")
    assert server.static_file(HOST, "/../../../../etc/passwd").status == 404
    assert server.static_file(HOST, "/miniwob/%2e%2e/%2e%2e/setup.py").status == 404
    assert server.static_file("other.webgym.test", "/miniwob/click-button.html") is None


def _context(utterance: str, marks: list[dict], memory_reply: str | None = None) -> list[dict]:
    from schemas.prompt.context import Step

    history = []
    if memory_reply is not None:
        history = [Step(1, "ep:0:observation", "t", "u", memory_reply, {"kind": "wait"})]
    current = Current(len(history) + 1, "ep:1:observation", "t", "u", marks=marks)
    instruction = f"MiniWoB++ x: do it.\nThe page says: {utterance}"
    return build_context(instruction, history, current, mode="set_of_marks").messages


MARKS = [
    {"id": "0", "role": "text", "name": ""},
    {"id": "1", "role": "password", "name": ""},
    {"id": "2", "role": "button", "name": "Login"},
    {"id": "3", "role": "checkbox", "name": "kXq"},
    {"id": "4", "role": "clickable", "name": "egestas"},
]


def test_the_context_gives_back_the_instruction_marks_and_progress():
    messages = _context('Click on the link "egestas".', MARKS)
    utterance, marks, done = read_context(messages)
    assert utterance == 'Click on the link "egestas".'
    assert marks == [{k: m[k] for k in ("id", "role", "name")} for m in MARKS]
    assert done == 0


@pytest.mark.parametrize(
    ("utterance", "actions"),
    [
        ('Click on the link "egestas".', [{"kind": "left_click", "element_id": "4"}]),
        (
            'Enter the username "ann" and the password "pw1" into the text fields and press login.',
            [
                {"kind": "type", "element_id": "0", "text": "ann"},
                {"kind": "type", "element_id": "1", "text": "pw1"},
                {"kind": "left_click", "element_id": "2"},
            ],
        ),
        ("Select kXq and click Submit.", [{"kind": "left_click", "element_id": "3"}, None]),
        ("Identify the largest shape.", []),
    ],
)
def test_plans_resolve_against_the_marks(utterance, actions):
    plan = plan_for(utterance)
    assert [step(MARKS) for step in plan] == actions  # no Submit button here: None


def test_the_backend_walks_its_plan_through_memory():
    backend = HeuristicBackend()
    utterance = (
        'Enter the username "ann" and the password "pw1" into the text fields and press login.'
    )
    first = backend.generate([ChatRequest(_context(utterance, MARKS))])[0].text
    parsed = parse_reply(first)
    assert parsed.action == {"kind": "type", "element_id": "0", "text": "ann"}
    assert parsed.memory == "progress 1"
    second = backend.generate([ChatRequest(_context(utterance, MARKS, first))])[0].text
    assert parse_reply(second).action == {"kind": "type", "element_id": "1", "text": "pw1"}
    unknown = backend.generate([ChatRequest(_context("Draw a cat.", MARKS))])[0].text
    assert parse_reply(unknown).action["kind"] == "wait"
