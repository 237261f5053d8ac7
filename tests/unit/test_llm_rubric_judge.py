"""The LLM rubric judge without a server: strict parsing of recorded replies, the request it
sends, and retries against a fake asynchronous client."""

from __future__ import annotations

import asyncio
import base64
import copy
import io
import json
import logging
from asyncio import sleep as real_sleep
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletion
from PIL import Image

from infra.openai_client import ChatEndpoint
from streams.judges import Judge
from streams.judges.llm import (
    ANSWER_SUPPORTED_GROUP,
    REFERENCE_GROUP,
    JudgeReplyError,
    LLMRubricJudge,
    parse_judgement,
)
from tests.llm_fakes import REQUEST, assert_rejected, completion, status_error

REPLIES = Path(__file__).parents[1] / "data" / "judge_replies"

TASK: dict[str, Any] = {
    "event_id": "task:kettles-3-medium",
    "ts": 1_795_000_000_000,
    "task_id": "kettles-3-medium",
    "task_name": "Find the price and the capacity of the blue enamel kettle.",
    "website": "kettles.webgym.test",
    "start_url": "http://kettles.webgym.test/",
    "difficulty": "medium",
    "evaluator_reference": [
        {
            "id": "g1",
            "description": "the right product",
            "facts": ["The answer is about the Blue Enamel Kettle"],
        },
        {
            "id": "g2",
            "description": "price and capacity",
            "facts": ["The price given is $24.99", "The capacity given is 1.7 L"],
        },
    ],
    "definite_answer": "$24.99, 1.7 L",
}

TRAJECTORY: dict[str, Any] = {
    "event_id": "ep-0007:trajectory",
    "episode_id": "ep-0007",
    "task_id": "kettles-3-medium",
    "termination": "answer",
    "aborted": False,
    "final_answer": "$24.99, 1.7 L",
    "steps": [
        {
            "step": 1,
            "url": "http://kettles.webgym.test/",
            "title": "Kettle shop",
            "action": {"kind": "left_click", "x": 410, "y": 220, "text": None},
        },
        {
            "step": 2,
            "url": "http://kettles.webgym.test/p/blue-enamel",
            "title": "Blue Enamel Kettle",
            "action": {"kind": "answer", "text": "$24.99, 1.7 L"},
        },
    ],
}


def reply(name: str) -> str:
    return (REPLIES / name).read_text()


def no_reference(task: dict[str, Any] = TASK) -> dict[str, Any]:
    return {**task, "definite_answer": None}


def image(fmt: str, colour: tuple[int, int, int] = (20, 120, 200)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 32), colour).save(buffer, fmt)
    return buffer.getvalue()


# -- parsing recorded replies ---------------------------------------------------------------


def test_all_satisfied_reply_is_a_success_with_one_verdict_per_check():
    judgement = parse_judgement(reply("all_satisfied.json"), TASK)
    assert judgement.reward == 1.0
    verdicts = judgement.verdicts()
    assert [(v["fact_group_id"], v["fact"], v["satisfied"]) for v in verdicts] == [
        (ANSWER_SUPPORTED_GROUP, "the final answer is supported by the screenshots", True),
        ("g1", "The answer is about the Blue Enamel Kettle", True),
        ("g2", "The price given is $24.99", True),
        ("g2", "The capacity given is 1.7 L", True),
        (REFERENCE_GROUP, "the final answer agrees with the reference answer: $24.99, 1.7 L", True),
    ]
    assert verdicts[3]["rationale"] == (
        "The answer gives 1.7 L, matching the capacity in the specifications table."
    )
    assert set(verdicts[0]) == {"fact_group_id", "fact", "satisfied", "rationale"}


def test_a_failed_fact_gives_reward_zero_and_says_which():
    judgement = parse_judgement(reply("failed_fact.json"), TASK)
    assert judgement.reward == 0.0
    assert [v["satisfied"] for v in judgement.verdicts()] == [True, True, True, False, False]
    assert "1.2 L" in judgement.verdicts()[3]["rationale"]


def test_a_hallucinated_answer_fails_even_when_every_fact_and_the_reference_match():
    judgement = parse_judgement(reply("hallucinated.json"), TASK)
    assert judgement.answer_supported is False
    assert all(check.satisfied for check in judgement.facts)
    assert judgement.matches_reference is True
    assert judgement.reward == 0.0
    assert judgement.verdicts()[0]["fact_group_id"] == ANSWER_SUPPORTED_GROUP
    assert judgement.verdicts()[0]["satisfied"] is False


def test_a_fenced_json_block_is_accepted():
    assert reply("fenced.md").startswith("```json\n")
    judgement = parse_judgement(reply("fenced.md"), TASK)
    assert judgement.reward == 1.0
    assert judgement.verdicts()[1]["rationale"] == "The product page title is 'Blue Enamel Kettle'."


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("empty.txt", "empty reply"),
        ("truncated.txt", "reply ends mid-JSON (truncated)"),
        ("prose.txt", "reply is not a JSON object: 'The agent navigated"),
        ("missing_fact.json", "facts missing from the reply: g2.f1"),
        ("yes_strings.json", "answer_supported must be a JSON boolean, got str 'yes'"),
        ("unknown_fact_id.json", "facts[3] has unknown fact id 'g3.f0'"),
    ],
)
def test_bad_recorded_replies_are_rejected_precisely(name, message):
    assert_rejected(JudgeReplyError, message, lambda: parse_judgement(reply(name), TASK))


def test_yes_strings_are_rejected_for_facts_too():
    text = reply("yes_strings.json").replace(
        '"answer_supported": "yes"', '"answer_supported": true'
    )
    with pytest.raises(JudgeReplyError, match=r"facts\[0\]\.satisfied \(g1\.f0\) must be a JSON"):
        parse_judgement(text, TASK)


def test_a_truncated_fenced_block_is_rejected():
    text = reply("fenced.md")[:200]
    with pytest.raises(JudgeReplyError, match="not exactly one closed ```json block"):
        parse_judgement(text, TASK)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.pop("answer_supported"), "answer_supported is missing"),
        (lambda r: r.pop("matches_reference"), "matches_reference is missing"),
        (lambda r: r.update(matches_reference=None), "matches_reference must be a JSON boolean"),
        (lambda r: r["facts"].append(dict(r["facts"][0])), "fact 'g1.f0' is judged twice"),
        (lambda r: r["facts"][1].pop("satisfied"), r"facts\[1\] \(g2.f0\) has no 'satisfied'"),
        (lambda r: r["facts"][1].update(satisfied=1), r"facts\[1\]\.satisfied \(g2.f0\)"),
        (lambda r: r.update(facts={}), "facts must be a JSON list, got dict"),
        (lambda r: r.update(reward=1), r"unknown keys \['reward'\]"),
        (lambda r: r["facts"][0].update(score=1), r"facts\[0\] has unknown keys \['score'\]"),
    ],
)
def test_malformed_judgements_are_rejected(mutate, message):
    parsed = json.loads(reply("all_satisfied.json"))
    mutate(parsed)
    with pytest.raises(JudgeReplyError, match=message):
        parse_judgement(json.dumps(parsed), TASK)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Here is my judgement:\n" + reply("all_satisfied.json"), "text outside the JSON object"),
        ("Here is my judgement:\n" + reply("fenced.md"), "text outside the JSON object"),
        (reply("all_satisfied.json") + "\nAll good.", "text after the JSON object"),
        (reply("fenced.md") + "\n" + reply("fenced.md"), "more than one code block"),
        ('{"answer_supported": true, "answer_supported": false, "facts": []}', "appears twice"),
        ("[true]", "reply is not a JSON object: '\\[true\\]'"),
        ('{"answer_supported": NaN}', "NaN is not valid JSON"),
    ],
)
def test_anything_but_the_object_or_one_fenced_block_is_rejected(text, message):
    with pytest.raises(JudgeReplyError, match=message):
        parse_judgement(text, TASK)


def test_without_a_reference_matches_reference_must_be_null():
    parsed = json.loads(reply("all_satisfied.json"))
    parsed["matches_reference"] = None
    judgement = parse_judgement(json.dumps(parsed), no_reference())
    assert judgement.reward == 1.0
    assert REFERENCE_GROUP not in {v["fact_group_id"] for v in judgement.verdicts()}
    with pytest.raises(JudgeReplyError, match="matches_reference must be null"):
        parse_judgement(reply("all_satisfied.json"), no_reference())


# -- the request ----------------------------------------------------------------------------


class FakeClient:
    """`AsyncOpenAI`'s `chat.completions.create`, answering from a script of replies/errors."""

    def __init__(self, script: list[ChatCompletion | Exception]):
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.chat = self
        self.completions = self

    async def create(self, **request: Any) -> ChatCompletion:
        self.requests.append(request)
        await real_sleep(0)  # a real await point, as over HTTP
        outcome = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def judge(script: list[ChatCompletion | Exception], **options: Any) -> LLMRubricJudge:
    """A judge over a :class:`FakeClient`; ``options`` are the endpoint's and the judge's."""
    own = {
        name: options.pop(name) for name in ("screenshots_k", "prompt_version") if name in options
    }
    endpoint = ChatEndpoint("http://judge.invalid/v1", "judge-model", **{"backoff_s": 0, **options})
    return LLMRubricJudge(endpoint, client=FakeClient(script), **own)


def run(coro):
    return asyncio.run(coro)


def test_the_judge_is_a_judge_stamped_with_model_and_prompt_version():
    made: Judge = judge([completion("{}")], prompt_version="rubric-v7")
    assert (made.name, made.version) == ("llm:judge-model", "rubric-v7")


def test_the_request_lists_every_fact_id_and_sends_the_last_k_screenshots():
    made = judge([completion(reply("all_satisfied.json"))], screenshots_k=2, max_tokens=333)
    shots = [image("JPEG", (1, 1, 1)), image("PNG", (2, 2, 2)), image("JPEG", (3, 3, 3))]
    score = run(made.score(TASK, TRAJECTORY, shots))
    assert score.reward == 1.0 and score.judge_error is None
    (request,) = made.llm._client.requests
    assert request["model"] == "judge-model"
    assert request["max_tokens"] == 333
    system, user = request["messages"]
    assert system["role"] == "system" and '"answer_supported"' in system["content"]
    text = user["content"][0]["text"]
    for line in [
        "Task: Find the price and the capacity of the blue enamel kettle.",
        "- g1.f0 (group g1: the right product): The answer is about the Blue Enamel Kettle",
        "- g2.f1 (group g2: price and capacity): The capacity given is 1.7 L",
        'Reference answer: "$24.99, 1.7 L"',
        '1. on http://kettles.webgym.test/ ("Kettle shop"): left_click(x=410, y=220)',
        '2. on http://kettles.webgym.test/p/blue-enamel ("Blue Enamel Kettle"): '
        'answer(text="$24.99, 1.7 L")',
        'Agent\'s final answer: "$24.99, 1.7 L"',
    ]:
        assert line in text.splitlines(), line
    images = [part["image_url"]["url"] for part in user["content"][1:]]
    assert [url.split(";")[0] for url in images] == ["data:image/png", "data:image/jpeg"]
    assert base64.b64decode(images[1].split(",", 1)[1]) == shots[2]


def test_without_a_reference_the_prompt_asks_for_null():
    made = judge([completion(reply("all_satisfied.json"))])
    run(made.score(no_reference(), TRAJECTORY, []))
    text = made.llm._client.requests[0]["messages"][1]["content"][0]["text"]
    assert "Reference answer: none (matches_reference must be null)" in text


@pytest.mark.parametrize("final_answer", [None, "  "])
def test_no_final_answer_scores_zero_without_asking_the_model(final_answer):
    made = judge([completion(reply("all_satisfied.json"))])
    trajectory = {**TRAJECTORY, "final_answer": final_answer, "termination": "horizon"}
    score = run(made.score(TASK, trajectory, [image("JPEG")]))
    assert made.calls == 0 and made.llm._client.requests == []
    assert score.reward == 0.0 and score.judge_error is None
    assert [v["fact_group_id"] for v in score.verdicts] == [
        ANSWER_SUPPORTED_GROUP,
        "g1",
        "g2",
        "g2",
        REFERENCE_GROUP,
    ]
    assert all(not v["satisfied"] and v["rationale"] == "no final answer" for v in score.verdicts)


def test_an_over_long_answer_scores_zero_without_asking_the_model():
    # The definite answer has 13 characters: the limit is max(2 x 13, 13 + 150) = 163.
    page_dump = "Kettle shop Home Kettles Blue Enamel Kettle $24.99 1.7 L " * 4
    assert len(page_dump) > 163
    made = judge([completion(reply("all_satisfied.json"))])
    score = run(made.score(TASK, {**TRAJECTORY, "final_answer": page_dump}, [image("JPEG")]))
    assert made.calls == 0 and made.llm._client.requests == []
    assert score.reward == 0.0 and score.judge_error is None
    assert len(score.verdicts) == 5 and not any(v["satisfied"] for v in score.verdicts)
    assert {v["rationale"] for v in score.verdicts} == {
        f"answer refused by the length rule: the answer has {len(page_dump.strip())} characters, "
        "over the limit of 163 (max(2 x 13, 13 + 150) for a definite answer of 13)"
    }


def test_an_answer_at_the_length_limit_is_judged_by_the_model():
    answer = "The blue enamel kettle costs $24.99 and holds 1.7 L. ".ljust(163, ".")
    made = judge([completion(reply("all_satisfied.json"))])
    score = run(made.score(TASK, {**TRAJECTORY, "final_answer": answer}, []))
    assert made.calls == 1 and score.reward == 1.0


def test_without_a_reference_there_is_no_length_limit():
    no_reference_reply = {**json.loads(reply("all_satisfied.json")), "matches_reference": None}
    made = judge([completion(json.dumps(no_reference_reply))])
    trajectory = {**TRAJECTORY, "final_answer": "$24.99, 1.7 L. " * 100}
    score = run(made.score(no_reference(), trajectory, []))
    assert made.calls == 1 and score.reward == 1.0


def test_the_prompt_fails_answers_that_hedge_over_candidates():
    made = judge([completion(reply("all_satisfied.json"))])
    run(made.score(TASK, TRAJECTORY, []))
    system = made.llm._client.requests[0]["messages"][0]["content"]
    assert "hedges over several candidates" in system
    assert "every fact is not satisfied and matches_reference is false" in system


def test_a_rubric_with_duplicate_group_ids_is_a_judge_error_without_a_call():
    task = copy.deepcopy(TASK)
    task["evaluator_reference"][1]["id"] = "g1"
    made = judge([completion(reply("all_satisfied.json"))])
    score = run(made.score(task, TRAJECTORY, []))
    assert made.calls == 0
    assert score.reward == 0.0
    assert (
        score.judge_error == "task cannot be judged: fact group id 'g1' appears twice in the rubric"
    )


# -- retries --------------------------------------------------------------------------------


def test_garbage_then_a_valid_reply_succeeds_after_two_calls(caplog):
    made = judge([completion(reply("prose.txt")), completion(reply("all_satisfied.json"))])
    with caplog.at_level(logging.WARNING, logger="infra.openai_client"):
        score = run(made.score(TASK, TRAJECTORY, [image("JPEG")]))
    assert made.calls == 2
    assert score.reward == 1.0 and score.judge_error is None
    assert (score.judge_name, score.judge_version) == ("llm:judge-model", "rubric-v2")
    (retry,) = caplog.records
    assert retry.levelno == logging.WARNING and "attempt 1/3 failed" in retry.getMessage()


def test_garbage_every_time_is_a_judge_error_after_max_attempts():
    made = judge([completion(reply("prose.txt"))], max_attempts=4)
    score = run(made.score(TASK, TRAJECTORY, [image("JPEG")]))
    assert made.calls == 4
    assert score.reward == 0.0 and score.verdicts == []
    assert score.judge_error.startswith("no verdict after 4 attempt(s); last: bad reply: reply is")
    assert (score.judge_name, score.judge_version) == ("llm:judge-model", "rubric-v2")


@pytest.mark.parametrize("name", ["empty.txt", "truncated.txt"])
def test_empty_and_truncated_replies_never_give_reward_one(name):
    finish = "length" if name == "truncated.txt" else "stop"
    made = judge([completion(reply(name), finish)], max_attempts=2)
    score = run(made.score(TASK, TRAJECTORY, []))
    assert made.calls == 2
    assert score.reward == 0.0 and score.judge_error is not None


def test_a_reply_cut_at_max_tokens_is_rejected_even_if_it_parses():
    made = judge(
        [completion(reply("all_satisfied.json"), "length")], max_attempts=1, max_tokens=1024
    )
    score = run(made.score(TASK, TRAJECTORY, []))
    assert score.reward == 0.0
    assert "reply cut at max_tokens=1024 (finish_reason 'length')" in score.judge_error


@pytest.mark.parametrize(
    "error",
    [
        openai.APIConnectionError(request=REQUEST),
        openai.APITimeoutError(request=REQUEST),
        status_error(openai.RateLimitError, 429),
        status_error(openai.InternalServerError, 503),
    ],
)
def test_transient_api_errors_are_retried(error):
    made = judge([error, completion(reply("failed_fact.json"))])
    score = run(made.score(TASK, TRAJECTORY, []))
    assert made.calls == 2
    assert score.judge_error is None and score.reward == 0.0 and len(score.verdicts) == 5


def test_a_server_that_stays_down_is_a_judge_error_naming_the_last_failure():
    made = judge([openai.APIConnectionError(request=REQUEST)], max_attempts=3)
    score = run(made.score(TASK, TRAJECTORY, []))
    assert made.calls == 3
    assert score.reward == 0.0
    assert score.judge_error == (
        "no verdict after 3 attempt(s); last: API error: APIConnectionError: Connection error."
    )


def test_a_refused_request_is_a_judge_error_at_once():
    made = judge([status_error(openai.BadRequestError, 400)])
    score = run(made.score(TASK, TRAJECTORY, []))
    assert made.calls == 1
    assert score.reward == 0.0
    assert score.judge_error == "API error: BadRequestError: Error code: 400"


def test_bad_credentials_are_raised():
    made = judge([status_error(openai.AuthenticationError, 401)])
    with pytest.raises(openai.AuthenticationError):
        run(made.score(TASK, TRAJECTORY, []))


def test_backoff_is_exponential_and_capped():
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    made = judge([openai.APIConnectionError(request=REQUEST)], max_attempts=7, backoff_s=0.5)
    made.llm._sleep = sleep
    run(made.score(TASK, TRAJECTORY, []))
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]


def test_a_bad_reply_is_retried_at_once_showing_the_model_its_reply():
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    made = judge([completion(reply("prose.txt")), completion(reply("all_satisfied.json"))])
    made.llm._sleep = sleep
    score = run(made.score(TASK, TRAJECTORY, []))
    assert score.reward == 1.0 and delays == []
    first, second = made.llm._client.requests
    assert second["messages"][:2] == first["messages"]
    assert second["messages"][2] == {"role": "assistant", "content": reply("prose.txt")}
    assert second["messages"][3]["content"].startswith("Your reply was rejected: reply is not")


def test_a_reasoning_block_before_the_judgement_is_ignored():
    thought = "<think>The kettle is blue; the price shows $24.99.</think>\n"
    made = judge([completion(thought + reply("all_satisfied.json"))])
    score = run(made.score(TASK, TRAJECTORY, []))
    assert made.calls == 1 and score.reward == 1.0 and score.judge_error is None


def test_slow_judgements_run_concurrently():
    class SlowClient(FakeClient):
        async def create(self, **request: Any) -> ChatCompletion:
            self.in_flight = getattr(self, "in_flight", 0) + 1
            self.peak = max(getattr(self, "peak", 0), self.in_flight)
            await real_sleep(0.05)
            self.in_flight -= 1
            return completion(reply("all_satisfied.json"))

    client = SlowClient([])
    made = LLMRubricJudge(ChatEndpoint("http://judge.invalid/v1", "judge-model"), client=client)

    async def many():
        return await asyncio.gather(*(made.score(TASK, TRAJECTORY, []) for _ in range(5)))

    assert [s.reward for s in run(many())] == [1.0] * 5
    assert client.peak == 5


def test_conflicting_options_are_refused():
    with pytest.raises(ValueError, match="max_attempts must be at least 1"):
        LLMRubricJudge(ChatEndpoint("http://judge.invalid/v1", "m", max_attempts=0))
    with pytest.raises(ValueError, match="screenshots_k must be 0 or more"):
        LLMRubricJudge(ChatEndpoint("http://judge.invalid/v1", "m"), screenshots_k=-1)
