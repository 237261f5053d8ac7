"""Rubric generation without a server: recorded model replies accepted or rejected with precise
reasons, retries, and the task set in and out."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tasks.llm_client import LLMClient, LLMConfig, LLMRejected, LLMReplyError, parse_json_object
from tasks.rubrics import RubricRejected, generate_rubrics, parse_rubric, propose_rubric
from tests.llm_fakes import REQUEST, completion, fake_llm, recorded, status_error

VALID_RUBRIC = [
    {
        "id": "g1",
        "description": "Friday opening hours",
        "facts": [
            "The answer says the museum opens at 9:00 on Fridays",
            "The answer says the museum closes at 21:45 on Fridays",
        ],
    },
    {
        "id": "g2",
        "description": "online full-rate ticket price",
        "facts": ["The answer gives €22 as the price of a full-rate ticket bought online"],
    },
]

NO_RUBRIC: dict[str, Any] = {
    "event_id": "task:louvre-0007",
    "ts": 1_795_000_000_000,
    "task_id": "louvre-0007",
    "task_name": "On the Louvre's website, find the museum's opening hours on Fridays and the "
    "price of a full-rate ticket bought online.",
    "website": "louvre.fr",
    "start_url": "https://www.louvre.fr/en",
    "domain": "culture",
    "subdomain": "museums",
    "difficulty": "medium",
    "evaluator_reference": [],
    "definite_answer": "9:00 to 21:45; €22",
    "split": "train",
    "parent_task_id": None,
    "extra_json": json.dumps({"source": "webgym"}),
}

WITH_RUBRIC: dict[str, Any] = {
    **NO_RUBRIC,
    "event_id": "task:louvre-0008",
    "task_id": "louvre-0008",
    "evaluator_reference": [{"id": "g1", "description": "hours", "facts": ["9:00"]}],
}


# -- recorded replies --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["rubric/valid.json", "rubric/fenced.md"])
def test_valid_recorded_replies_are_accepted(name):
    assert parse_rubric(recorded(name)) == VALID_RUBRIC


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("rubric/bad_id.json", "fact_groups[1].id 'group2' is not of the form g<number>"),
        ("rubric/empty_facts.json", "fact_groups[1] (g2) has no facts; 1 to 10 are needed"),
        (
            "rubric/duplicate_facts.json",
            "fact 'The answer says the museum closes at 21:45 on Fridays' appears twice "
            "(in g1 and g2)",
        ),
        ("rubric/truncated.txt", "reply ends mid-JSON (truncated): "),
        ("rubric/too_many_groups.json", "fact_groups has 9 groups; at most 8 are allowed"),
        ("rubric/not_json.txt", "reply is not a JSON object: 'Here is a rubric for this task:"),
    ],
)
def test_bad_recorded_replies_are_rejected_with_the_reason(name, reason):
    with pytest.raises(LLMReplyError) as caught:
        parse_rubric(recorded(name))
    assert str(caught.value).startswith(reason), str(caught.value)


def _mutated(mutate) -> str:
    reply = json.loads(recorded("rubric/valid.json"))
    mutate(reply)
    return json.dumps(reply, ensure_ascii=False)


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda r: r["fact_groups"][1].update(id="g1"), "fact group id 'g1' appears twice"),
        (lambda r: r["fact_groups"][0].update(id=1), "fact_groups[0].id 1 is not of the form"),
        (lambda r: r["fact_groups"][0].update(id="G1"), "fact_groups[0].id 'G1' is not of the"),
        (lambda r: r["fact_groups"][0].update(id="g"), "fact_groups[0].id 'g' is not of the form"),
        (
            lambda r: r["fact_groups"][0].update(description="  "),
            "fact_groups[0].description (g1) is empty",
        ),
        (
            lambda r: r["fact_groups"][0].update(description=None),
            "fact_groups[0].description (g1) must be a JSON string, got NoneType",
        ),
        (
            lambda r: r["fact_groups"][1].update(facts=[f"fact {n}" for n in range(11)]),
            "fact_groups[1] (g2) has 11 facts; at most 10 are allowed",
        ),
        (lambda r: r["fact_groups"][1].update(facts=[""]), "fact_groups[1].facts[0] (g2) is empty"),
        (
            lambda r: r["fact_groups"][1].update(facts=[3]),
            "fact_groups[1].facts[0] (g2) must be a JSON string, got int",
        ),
        (
            lambda r: r["fact_groups"][1].update(facts="one fact"),
            "fact_groups[1].facts (g2) must be a JSON list, got str",
        ),
        (lambda r: r["fact_groups"][1].pop("facts"), "fact_groups[1] has no facts"),
        (
            lambda r: r["fact_groups"][1].update(weight=1),
            "fact_groups[1] has unknown keys ['weight']",
        ),
        (
            lambda r: r["fact_groups"][1]["facts"].append(
                "the answer says the museum OPENS at 9:00  on Fridays"
            ),
            "fact 'the answer says the museum OPENS at 9:00  on Fridays' appears twice "
            "(in g1 and g2)",
        ),
        (lambda r: r.update(fact_groups=[]), "fact_groups is empty; at least 1 fact group"),
        (lambda r: r.update(fact_groups={}), "fact_groups must be a JSON list, got dict"),
        (lambda r: r.update(fact_groups=["g1"]), "fact_groups[0] must be a JSON object, got str"),
        (
            lambda r: r.update(rationale="x"),
            "the reply has unknown keys ['rationale']; expected ['fact_groups']",
        ),
        (lambda r: r.pop("fact_groups"), "the reply has no fact_groups"),
    ],
)
def test_malformed_rubrics_are_rejected_with_the_reason(mutate, reason):
    with pytest.raises(LLMReplyError) as caught:
        parse_rubric(_mutated(mutate))
    assert str(caught.value).startswith(reason), str(caught.value)


def test_strings_are_stored_stripped():
    text = _mutated(lambda r: r["fact_groups"][1].update(description="  price ", facts=[" €22 "]))
    assert parse_rubric(text)[1] == {"id": "g2", "description": "price", "facts": ["€22"]}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("   \n", "empty reply"),
        ("Here it is: " + recorded("rubric/valid.json"), "reply has text outside the JSON"),
        (recorded("rubric/valid.json") + "\nDone.", "reply has text after the JSON object"),
        (recorded("rubric/fenced.md")[:60], "reply opens a code fence but is not exactly one"),
        (recorded("rubric/fenced.md") * 2, "reply has more than one code block"),
        ('{"fact_groups": [], "fact_groups": []}', "key 'fact_groups' appears twice"),
        ('{"fact_groups": NaN}', "NaN is not valid JSON"),
        ("[1, 2]", "reply is not a JSON object: '[1, 2]'"),
    ],
)
def test_replies_that_are_not_one_json_object_are_rejected(text, reason):
    with pytest.raises(LLMReplyError) as caught:
        parse_json_object(text, {"fact_groups"})
    assert str(caught.value).startswith(reason), str(caught.value)


# -- asking the model --------------------------------------------------------------------------


def test_the_request_carries_the_instruction_website_and_reference_answer():
    llm, fake = fake_llm([recorded("rubric/valid.json")], max_tokens=300)
    assert propose_rubric(NO_RUBRIC, llm) == VALID_RUBRIC
    (request,) = fake.requests
    assert (request["model"], request["max_tokens"], request["temperature"]) == (
        "fake-model",
        300,
        0.0,
    )
    system, user = request["messages"]
    assert system["role"] == "system" and '{"fact_groups": [' in system["content"]
    assert NO_RUBRIC["task_name"] in user["content"]
    assert "Website: louvre.fr" in user["content"]
    assert "Reference answer: 9:00 to 21:45; €22" in user["content"]


def test_no_reference_line_without_a_definite_answer():
    llm, fake = fake_llm([recorded("rubric/valid.json")])
    propose_rubric({**NO_RUBRIC, "definite_answer": None}, llm)
    assert "Reference answer" not in fake.requests[0]["messages"][1]["content"]


def test_a_bad_reply_is_retried_with_its_reason_and_a_good_one_accepted():
    llm, fake = fake_llm([recorded("rubric/bad_id.json"), recorded("rubric/valid.json")])
    assert propose_rubric(NO_RUBRIC, llm) == VALID_RUBRIC
    assert llm.calls == 2
    retry = fake.requests[1]["messages"]
    assert retry[:2] == fake.requests[0]["messages"]
    assert retry[2] == {"role": "assistant", "content": recorded("rubric/bad_id.json")}
    assert retry[3]["role"] == "user"
    assert retry[3]["content"].startswith(
        "Your reply was rejected: fact_groups[1].id 'group2' is not of the form g<number>."
    )


def test_after_max_attempts_the_task_is_rejected_with_the_last_reason():
    script = [recorded("rubric/not_json.txt"), recorded("rubric/too_many_groups.json")]
    llm, _ = fake_llm(script, max_attempts=3)
    result = generate_rubrics([NO_RUBRIC], llm)
    assert llm.calls == 3
    assert result.tasks_with_rubrics == []
    assert result.rejected == [
        RubricRejected(
            "louvre-0007",
            "no valid reply after 3 attempt(s); last: bad reply: "
            "fact_groups has 9 groups; at most 8 are allowed",
        )
    ]


def test_a_reply_cut_at_max_tokens_is_a_bad_reply():
    cut = completion('{"fact_groups": [{"id": "g1"', finish_reason="length")
    llm, _ = fake_llm([cut], max_tokens=16, max_attempts=1)
    with pytest.raises(LLMRejected) as caught:
        propose_rubric(NO_RUBRIC, llm)
    assert caught.value.reason == (
        "no valid reply after 1 attempt(s); last: bad reply: reply cut at max_tokens=16 "
        """(finish_reason 'length'): '{"fact_groups": [{"id": "g1"'"""
    )


def test_transient_api_errors_are_retried_with_backoff():
    pauses: list[float] = []
    fake_script = [
        openai.APIConnectionError(request=REQUEST),
        status_error(openai.RateLimitError, 429),
        recorded("rubric/valid.json"),
    ]
    llm, fake = fake_llm(fake_script, sleep=pauses.append, backoff_s=0.25)
    assert propose_rubric(NO_RUBRIC, llm) == VALID_RUBRIC
    assert pauses == [0.25, 0.5]
    assert fake.requests[0]["messages"] == fake.requests[2]["messages"]


def test_a_request_the_server_refuses_is_rejected_at_once():
    llm, _ = fake_llm([status_error(openai.BadRequestError, 400)])
    result = generate_rubrics([NO_RUBRIC], llm)
    assert llm.calls == 1
    assert result.rejected == [
        RubricRejected("louvre-0007", "API error: BadRequestError: Error code: 400")
    ]


def test_a_configuration_error_is_raised():
    llm, _ = fake_llm([status_error(openai.AuthenticationError, 401)])
    with pytest.raises(openai.AuthenticationError):
        generate_rubrics([NO_RUBRIC], llm)


# -- the task set ------------------------------------------------------------------------------


def test_tasks_with_a_rubric_pass_through_and_order_is_kept():
    llm, fake = fake_llm([recorded("rubric/fenced.md")])
    ticked: list[str] = []
    result = generate_rubrics([WITH_RUBRIC, NO_RUBRIC], llm, on_task=ticked.append)
    assert llm.calls == 1 and len(fake.requests) == 1
    first, second = result.tasks_with_rubrics
    assert first is WITH_RUBRIC
    assert second["evaluator_reference"] == VALID_RUBRIC
    assert {k: v for k, v in second.items() if k not in ("evaluator_reference", "extra_json")} == {
        k: v for k, v in NO_RUBRIC.items() if k not in ("evaluator_reference", "extra_json")
    }
    assert json.loads(second["extra_json"]) == {
        "source": "webgym",
        "rubric_source": "llm:fake-model",
    }
    assert NO_RUBRIC["evaluator_reference"] == []  # the input is not modified
    assert result.rejected == []
    assert ticked == ["louvre-0008", "louvre-0007"]


def test_a_config_builds_a_real_client():
    result = generate_rubrics([WITH_RUBRIC], LLMConfig("http://llm.invalid/v1", "m"))
    assert result.tasks_with_rubrics == [WITH_RUBRIC]
    assert isinstance(LLMClient(LLMConfig("http://llm.invalid/v1", "m"))._client, openai.OpenAI)


def test_a_task_with_bad_extra_json_is_rejected_without_asking():
    llm, _ = fake_llm([recorded("rubric/valid.json")])
    result = generate_rubrics([{**NO_RUBRIC, "extra_json": "[1]"}], llm)
    assert llm.calls == 0
    assert result.rejected == [
        RubricRejected("louvre-0007", "extra_json is a JSON list, not an object")
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_tokens": 0}, "max_tokens must be at least 1"),
        ({"max_attempts": 0}, "max_attempts must be at least 1"),
        ({"model": ""}, "model is empty"),
        ({"base_url": ""}, "base_url is empty"),
    ],
)
def test_bad_configs_are_refused_with_how_to_fix(options, message):
    with pytest.raises(ValueError, match=message):
        LLMConfig(**{"base_url": "http://llm.invalid/v1", "model": "m", **options})
