"""The scripted policy solves every practice-web task it is given, in the real reply format."""

from __future__ import annotations

import json

import pytest

from agents.policy.backends import ChatRequest
from agents.policy.backends.scripted import WRONG_ANSWER, ScriptedBackend
from schemas.prompt.reply import ParsedReply, parse_reply
from sites import generate_sites
from sites.tasks import generate_tasks
from sites.verifier import verify

TASKS = generate_tasks(generate_sites(seed=0, count=8), per_site=6)


def _episode(backend: ScriptedBackend, task: dict, episode_id: str = "ep") -> tuple[list, str]:
    """Run the script until it answers; return the URLs it opened and its answer."""
    visited = [task["start_url"]]
    for step in range(1, 20):
        reply = backend.generate(
            [ChatRequest([], {"task_id": task["task_id"], "episode_id": episode_id, "step": step})]
        )[0]
        parsed = parse_reply(reply.text)
        assert isinstance(parsed, ParsedReply), parsed
        if parsed.action["kind"] == "answer":
            return visited, parsed.action["text"]
        if parsed.action["kind"] == "navigate":
            visited.append(parsed.action["url"])
    raise AssertionError("the script never answered")


@pytest.mark.parametrize("task", TASKS, ids=[t["task_id"] for t in TASKS])
def test_the_script_earns_the_reward(task):
    visited, answer = _episode(ScriptedBackend({t["task_id"]: t for t in TASKS}), task)
    assert answer == task["definite_answer"]
    assert verify(task, answer, visited).reward == 1.0
    assert len(visited) - 1 == len(json.loads(task["extra_json"])["solution_urls"])


def test_with_errors_it_fails_and_is_deterministic():
    task = TASKS[0]
    always_wrong = ScriptedBackend({task["task_id"]: task}, error_rate=1.0, seed=3)
    visited, answer = _episode(always_wrong, task)
    assert answer == WRONG_ANSWER
    assert verify(task, answer, visited).reward == 0.0
    assert _episode(always_wrong, task) == (visited, answer)
    with pytest.raises(ValueError, match="within 0-1"):
        ScriptedBackend({}, error_rate=1.5)


def test_an_unknown_task_is_an_unparseable_reply_not_a_guess():
    reply = ScriptedBackend({}).generate([ChatRequest([], {"task_id": "nope", "step": 1})])[0]
    assert not isinstance(parse_reply(reply.text), ParsedReply)
