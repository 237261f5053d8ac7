"""Procedural decomposition without a server: the rule, the subsets, ids, duplicates, practice-web
subtasks that the verifier accepts, and LLM rewrites validated from recorded replies."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from sites.data import generate_sites
from sites.tasks import generate_tasks
from sites.verifier import verify
from tasks.decompose import (
    Duplicate,
    InstructionRewriter,
    Rejected,
    Skipped,
    candidate_subsets,
    decompose,
    not_decomposable,
    parse_instruction,
)
from tasks.llm_client import LLMReplyError
from tests.llm_fakes import assert_rejected, fake_llm, recorded
from tests.samples import LASAGNA_INGREDIENTS, LASAGNA_RECIPE, LASAGNA_TIME, lasagna_task

RECIPE, TIME, INGREDIENTS = LASAGNA_RECIPE, LASAGNA_TIME, LASAGNA_INGREDIENTS
REAL: dict[str, Any] = lasagna_task()
KEPT, LEFT_OUT = [RECIPE, TIME], [INGREDIENTS]


def practice_task(**fields: Any) -> dict[str, Any]:
    """A hand-written practice-web task of the "three most expensive" kind."""
    extra = {
        "source": "practice-web",
        "site_id": "kettle-shop",
        "template": "hard-top-three",
        "required_paths": ["/products", "/products/blue-enamel-kettle"],
        "solution_urls": ["/products?sort=value_desc", "/products/blue-enamel-kettle"],
    }
    task = {
        "event_id": "task:kettle-shop-005-hard",
        "ts": 1_795_000_000_000,
        "task_id": "kettle-shop-005-hard",
        "task_name": "On Kettle Shop, list the three most expensive products of the whole "
        "catalogue (by price) with their price, and give the capacity of the most expensive one.",
        "website": "kettles.webgym.test",
        "start_url": "http://kettles.webgym.test/",
        "domain": "shopping",
        "subdomain": "Kitchen",
        "difficulty": "hard",
        "evaluator_reference": [
            {
                "id": "g1",
                "description": "the three most expensive products",
                "facts": ["Blue Enamel Kettle", "Copper Kettle", "Glass Kettle"],
            },
            {"id": "g2", "description": "their Price", "facts": ["$89.00", "$64.50", "$41.99"]},
            {"id": "g3", "description": "Capacity of Blue Enamel Kettle", "facts": ["1.7 L"]},
        ],
        "definite_answer": "Blue Enamel Kettle: $89.00; Copper Kettle: $64.50; Glass Kettle: "
        "$41.99. Capacity of Blue Enamel Kettle: 1.7 L",
        "split": "train",
        "parent_task_id": None,
        "extra_json": json.dumps(extra),
    }
    return {**task, **fields}


FLOW_INSTRUCTION = (
    'On Kettle Shop, open the product "Blue Enamel Kettle", choose "Engrave it" and fill in '
    'Full name: "Ada Moss"; Text: "Tea time". Leave the other fields empty and confirm. Report '
    "the engraving reference, the price shown on the confirmation and the capacity of the product."
)


def flow_task() -> dict[str, Any]:
    extra = {
        "source": "practice-web",
        "template": "hard-flow",
        "required_paths": ["/engrave/blue-enamel-kettle/confirmed", "/products/blue-enamel-kettle"],
        "solution_urls": [
            "/products/blue-enamel-kettle",
            "/engrave/blue-enamel-kettle/confirmed?name=Ada+Moss&text=Tea+time",
        ],
    }
    return practice_task(
        task_id="kettle-shop-002-hard",
        task_name=FLOW_INSTRUCTION,
        evaluator_reference=[
            {"id": "g1", "description": "Engraving reference", "facts": ["KS-1A2B3C4D"]},
            {
                "id": "g2",
                "description": "confirmation summary",
                "facts": ["Blue Enamel Kettle", "$89.00", "$12.00"],
            },
            {"id": "g3", "description": "Capacity of Blue Enamel Kettle", "facts": ["1.7 L"]},
        ],
        definite_answer="Engraving reference: KS-1A2B3C4D. Blue Enamel Kettle: $89.00; "
        "Engraving: $12.00. Capacity: 1.7 L",
        extra_json=json.dumps(extra),
    )


@pytest.fixture(scope="module")
def practice_tasks() -> list[dict[str, Any]]:
    return generate_tasks(generate_sites(count=8))


def by_id(tasks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {task["task_id"]: task for task in tasks}


def extra(task: dict[str, Any]) -> dict[str, Any]:
    return json.loads(task["extra_json"])


# -- the rule ----------------------------------------------------------------------------------


def test_a_task_with_one_fact_group_gives_no_subtask():
    task = practice_task(evaluator_reference=[RECIPE])
    result = decompose([task])
    assert result.subtasks == [] and result.rejected == []
    assert result.skipped == [
        Skipped("kettle-shop-005-hard", "1 fact group(s); decomposition needs at least 2")
    ]


def test_a_task_whose_groups_all_have_fewer_than_three_facts_gives_no_subtask():
    two_facts = [
        {"id": "g1", "description": "a", "facts": ["x1", "x2"]},
        {"id": "g2", "description": "b", "facts": ["y1", "y2"]},
    ]
    result = decompose([practice_task(evaluator_reference=two_facts)])
    assert result.subtasks == []
    assert result.skipped == [Skipped("kettle-shop-005-hard", "no fact group has 3 or more facts")]


def test_no_rubric_gives_no_subtask():
    assert not_decomposable(practice_task(evaluator_reference=[])) == (
        "0 fact group(s); decomposition needs at least 2"
    )


def test_practice_web_tasks_follow_the_rule(practice_tasks):
    result = decompose(practice_tasks)
    parents = {subtask["parent_task_id"] for subtask in result.subtasks}
    for task in practice_tasks:
        groups = task["evaluator_reference"]
        meets = len(groups) >= 2 and any(len(group["facts"]) >= 3 for group in groups)
        assert (task["task_id"] in parents) == meets, task["task_id"]
    assert {task_id for task_id, _ in result.skipped} == {
        task["task_id"] for task in practice_tasks if task["task_id"] not in parents
    }
    assert result.duplicates == []
    # Easy (one group) and medium (two one-fact groups) tasks are never decomposed.
    assert all(by_id(practice_tasks)[p]["difficulty"] == "hard" for p in parents)


# -- subsets, ids, records -----------------------------------------------------------------------


def test_candidates_are_proper_subsets_smallest_first_capped():
    assert candidate_subsets(3, 6) == [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2)]
    assert candidate_subsets(3, 100) == candidate_subsets(3, 6)
    assert candidate_subsets(4, 5) == [(0,), (1,), (2,), (3,), (0, 1)]
    assert candidate_subsets(2, 6) == [(0,), (1,)]
    with pytest.raises(ValueError, match="max_per_task must be at least 1"):
        decompose([], max_per_task=0)


def test_every_subtask_is_a_proper_nonempty_subset_of_its_parent(practice_tasks):
    llm, _ = fake_llm(lambda request: _rewrite_for(request))
    result = decompose([*practice_tasks, REAL], rewriter=InstructionRewriter(llm))
    parents = by_id([*practice_tasks, REAL])
    assert result.subtasks
    assert any(s["parent_task_id"] == "allrecipes-0042" for s in result.subtasks)
    for subtask in result.subtasks:
        parent = parents[subtask["parent_task_id"]]
        groups = subtask["evaluator_reference"]
        assert 0 < len(groups) < len(parent["evaluator_reference"])
        assert all(group in parent["evaluator_reference"] for group in groups)
        order = [parent["evaluator_reference"].index(group) for group in groups]
        assert order == sorted(order)


def test_ids_are_deterministic_and_name_the_groups(practice_tasks):
    first = decompose(practice_tasks)
    again = decompose(copy.deepcopy(practice_tasks))
    assert first == again
    ids = [subtask["task_id"] for subtask in first.subtasks]
    assert len(ids) == len(set(ids))
    for subtask in first.subtasks:
        groups = "+".join(group["id"] for group in subtask["evaluator_reference"])
        assert subtask["task_id"] == f"{subtask['parent_task_id']}~{groups}"
        assert subtask["event_id"] == f"task:{subtask['task_id']}"


def test_subtask_records_lower_the_difficulty_and_inherit_the_rest():
    parent = practice_task(split="test")
    (first, *_) = decompose([parent]).subtasks
    assert first["task_id"] == "kettle-shop-005-hard~g1"
    assert first["difficulty"] == "medium"
    assert first["split"] == "test"
    assert first["parent_task_id"] == "kettle-shop-005-hard"
    for field in ("ts", "website", "start_url", "domain", "subdomain"):
        assert first[field] == parent[field]
    assert set(first) == set(parent)
    medium = decompose([practice_task(difficulty="medium")]).subtasks
    easy = decompose([practice_task(difficulty="easy")]).subtasks
    assert {s["difficulty"] for s in medium} == {s["difficulty"] for s in easy} == {"easy"}


def test_a_task_with_an_unknown_difficulty_or_repeated_group_ids_is_rejected():
    groups = practice_task()["evaluator_reference"]
    repeated = [groups[0], {**groups[1], "id": "g1"}, groups[2]]
    result = decompose(
        [
            practice_task(difficulty="expert"),
            practice_task(task_id="t2", evaluator_reference=repeated),
            practice_task(task_id="t3", extra_json="not json"),
        ]
    )
    assert result.subtasks == []
    reasons = [(task_id, ids, reason.split(":")[0]) for task_id, ids, reason in result.rejected]
    assert reasons == [
        ("kettle-shop-005-hard", (), "difficulty 'expert' is not easy, medium or hard"),
        ("t2", (), "fact group ids are not unique"),
        ("t3", (), "extra_json is not JSON"),
    ]


def test_the_input_is_not_modified(practice_tasks):
    before = copy.deepcopy(practice_tasks)
    decompose(practice_tasks)
    assert practice_tasks == before


# -- duplicates ----------------------------------------------------------------------------------


def test_duplicates_across_parents_are_removed():
    twin = practice_task(task_id="kettle-shop-105-hard", event_id="task:kettle-shop-105-hard")
    result = decompose([practice_task(), twin])
    kept = [s["task_id"] for s in result.subtasks]
    assert all(task_id.startswith("kettle-shop-005-hard~") for task_id in kept)
    assert result.duplicates == [
        Duplicate(task_id.replace("005", "105"), task_id) for task_id in kept
    ]


def test_a_subtask_equal_to_an_input_task_is_removed():
    first = decompose([practice_task()]).subtasks[0]
    existing = {
        **first,
        "task_id": "kettle-shop-009-medium",
        "task_name": first["task_name"].upper(),  # case and spacing do not make a new task
        "parent_task_id": None,
    }
    result = decompose([practice_task(), existing])
    assert first["task_id"] not in [s["task_id"] for s in result.subtasks]
    assert Duplicate(first["task_id"], "kettle-shop-009-medium") in result.duplicates


# -- practice web: from ground truth -------------------------------------------------------------


def test_practice_web_subtasks_are_verified_with_the_parents_pages(practice_tasks):
    result = decompose(practice_tasks)
    parents = by_id(practice_tasks)
    assert len(result.subtasks) > 20
    for subtask in result.subtasks:
        parent = parents[subtask["parent_task_id"]]
        host = f"http://{parent['website']}"
        parent_pages = [host + page for page in extra(parent)["solution_urls"]]
        own_pages = [host + page for page in extra(subtask)["solution_urls"]]
        for pages in (parent_pages, own_pages):
            verdict = verify(subtask, subtask["definite_answer"], pages)
            assert verdict.reward == 1.0, (subtask["task_id"], verdict.reason)
        assert verify(subtask, subtask["definite_answer"], []).reward == 0.0


def test_practice_web_instructions_are_built_from_the_descriptions():
    result = decompose([practice_task()])
    made = {s["task_id"].split("~")[1]: s for s in result.subtasks}
    assert made["g1"]["task_name"] == "On Kettle Shop, find: the three most expensive products."
    # "their Price" needs the group before it: spelt out when that group is left out.
    assert made["g2"]["task_name"] == (
        "On Kettle Shop, find: Price of the three most expensive products."
    )
    assert made["g1+g2"]["task_name"] == (
        "On Kettle Shop, find: the three most expensive products; their Price."
    )
    assert made["g3"]["task_name"] == "On Kettle Shop, find: Capacity of Blue Enamel Kettle."
    assert made["g1+g2"]["definite_answer"] == (
        "Blue Enamel Kettle; Copper Kettle; Glass Kettle; $89.00; $64.50; $41.99"
    )
    assert made["g3"]["definite_answer"] == "1.7 L"
    assert json.loads(made["g3"]["extra_json"])["decomposition"] == {
        "parent_task_id": "kettle-shop-005-hard",
        "fact_group_ids": ["g3"],
        "instruction_source": "ground-truth",
    }


def test_a_practice_web_instruction_that_gives_away_an_answer_is_rejected():
    result = decompose([practice_task()])
    # {g1, g3}: "Capacity of Blue Enamel Kettle" names the most expensive product, a g1 fact.
    assert result.rejected == [
        Rejected(
            "kettle-shop-005-hard",
            ("g1", "g3"),
            "instruction gives away fact 'Blue Enamel Kettle' of kept fact group g1 (an answer)",
        )
    ]
    assert "kettle-shop-005-hard~g1+g3" not in [s["task_id"] for s in result.subtasks]


def test_pages_named_by_a_left_out_group_are_dropped():
    made = {s["task_id"].split("~")[1]: extra(s) for s in decompose([practice_task()]).subtasks}
    # The detail page belongs to g3 ("Capacity of Blue Enamel Kettle"); the listing to all.
    assert made["g1"]["required_paths"] == ["/products"]
    assert made["g1"]["solution_urls"] == ["/products?sort=value_desc"]
    assert made["g3"]["required_paths"] == ["/products", "/products/blue-enamel-kettle"]
    assert made["g2+g3"]["solution_urls"] == [
        "/products?sort=value_desc",
        "/products/blue-enamel-kettle",
    ]
    assert made["g1"]["template"] == "hard-top-three"  # the rest of extra_json is kept


def test_form_flow_subtasks_keep_the_steps_and_the_confirmation_page():
    result = decompose([flow_task()])
    made = {s["task_id"].split("~")[1]: s for s in result.subtasks}
    steps = FLOW_INSTRUCTION[: FLOW_INSTRUCTION.index(" Report the")]
    assert made["g1"]["task_name"] == f"{steps} Report: Engraving reference."
    assert made["g1+g3"]["task_name"] == (
        f"{steps} Report: Engraving reference; Capacity of Blue Enamel Kettle."
    )
    # The product's name is in the parent's instruction: naming it gives nothing away.
    assert "kettle-shop-002-hard~g2+g3" in [s["task_id"] for s in result.subtasks]
    assert extra(made["g1"])["required_paths"] == ["/engrave/blue-enamel-kettle/confirmed"]
    assert extra(made["g3"])["required_paths"] == [
        "/engrave/blue-enamel-kettle/confirmed",
        "/products/blue-enamel-kettle",
    ]
    assert result.rejected == []


# -- real websites: LLM rewrites, validated ------------------------------------------------------


def _kept(request: dict[str, Any]) -> list[tuple[str, str]]:
    """(id, description) of the fact groups a rewrite request asks to keep."""
    prompt = request["messages"][1]["content"]
    section = prompt.split("KEEP:\n", 1)[1].split("\nLEAVE OUT:", 1)[0]
    return re.findall(r"^- (g\d+) \((.*?)\): facts:", section, re.MULTILINE)


def _rewrite_for(request: dict[str, Any]) -> str:
    """A well-behaved model: asks for the kept groups' descriptions."""
    wanted = " and ".join(description for _, description in _kept(request))
    return json.dumps({"instruction": f"On allrecipes.com, find the {wanted} of a lasagna."})


@pytest.mark.parametrize("name", ["rewrite/valid.json", "rewrite/fenced.md"])
def test_valid_recorded_rewrites_are_accepted(name):
    document = recorded(name).strip().strip("`").removeprefix("json")
    expected = json.loads(document)["instruction"]
    assert parse_instruction(recorded(name), REAL, KEPT, LEFT_OUT) == expected


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        (
            "rewrite/leaks_left_out_fact.json",
            "instruction mentions fact 'ricotta cheese' of left-out fact group g3",
        ),
        ("rewrite/empty.txt", "empty reply"),
        ("rewrite/truncated.txt", "reply ends mid-JSON (truncated): "),
        ("rewrite/prose.txt", "reply is not a JSON object: 'Sure! Here is the rewritten"),
        ("rewrite/identical.json", "instruction is the parent's instruction unchanged"),
    ],
)
def test_bad_recorded_rewrites_are_rejected_with_the_reason(name, reason):
    text = recorded(name)
    assert_rejected(LLMReplyError, reason, lambda: parse_instruction(text, REAL, KEPT, LEFT_OUT))


@pytest.mark.parametrize(
    ("instruction", "reason"),
    [
        ("   ", "instruction is empty"),
        (
            "on ALLRECIPES.com,   find a vegetarian lasagna recipe rated at least 4.5 stars with "
            "more than 100 reviews. Report its name, its total time and its first three "
            "ingredients.",
            "instruction is the parent's instruction unchanged",
        ),
        ("Find a lasagna. " * 30, "instruction is 479 characters, more than 2x the parent's 169"),
        (
            "On allrecipes.com, find a lasagna with LASAGNA NOODLES and report its total time.",
            "instruction mentions fact 'lasagna noodles' of left-out fact group g3",
        ),
        (
            "On allrecipes.com, check that the recipe has more than 100 reviews and give its time.",
            "instruction gives away fact 'The recipe has more than 100 reviews' of kept fact "
            "group g1",
        ),
        (["a list"], "instruction must be a JSON string, got list"),
    ],
)
def test_bad_rewrites_are_rejected_with_the_reason(instruction, reason):
    reply = json.dumps({"instruction": instruction})
    assert_rejected(LLMReplyError, reason, lambda: parse_instruction(reply, REAL, KEPT, LEFT_OUT))


def test_the_length_limit_is_configurable():
    text = json.dumps({"instruction": "On allrecipes.com, find a vegetarian lasagna. " * 3})
    assert parse_instruction(text, REAL, KEPT, LEFT_OUT)
    with pytest.raises(LLMReplyError, match="more than 0.5x the parent's 169"):
        parse_instruction(text, REAL, KEPT, LEFT_OUT, max_length_ratio=0.5)


def test_facts_the_parent_instruction_mentions_may_be_mentioned():
    named = REAL["task_name"].replace("lasagna recipe", "ricotta cheese lasagna recipe")
    parent = {**REAL, "task_name": named}
    reply = recorded("rewrite/leaks_left_out_fact.json")
    assert "ricotta cheese" in parse_instruction(reply, parent, KEPT, LEFT_OUT)


def test_unknown_keys_in_a_rewrite_are_rejected():
    expected = r"unknown keys \['notes'\]; expected \['instruction'\]"
    with pytest.raises(LLMReplyError, match=expected):
        parse_instruction('{"instruction": "Find it.", "notes": "x"}', REAL, KEPT, LEFT_OUT)


def test_the_rewrite_request_lists_what_to_keep_and_what_to_leave_out():
    llm, fake = fake_llm([recorded("rewrite/valid.json")], max_tokens=64)
    rewriter = InstructionRewriter(llm)
    assert rewriter.rewrite(REAL, KEPT, LEFT_OUT).startswith("On allrecipes.com, find a veg")
    (request,) = fake.requests
    assert (request["model"], request["max_tokens"]) == ("fake-model", 64)
    system, user = request["messages"]
    assert '{"instruction": "..."}' in system["content"]
    assert f"Original instruction: {REAL['task_name']}" in user["content"]
    keep = "KEEP:\n- g1 (a recipe that meets the criteria): facts: The recipe is a veg"
    assert keep in user["content"]
    assert (
        "LEAVE OUT:\n- g3 (first three ingredients): facts: ricotta cheese; lasagna noodles; "
        "fresh spinach"
    ) in user["content"]


def test_a_rejected_rewrite_is_retried_with_the_reason_then_accepted():
    llm, fake = fake_llm([recorded("rewrite/prose.txt"), recorded("rewrite/fenced.md")])
    instruction = InstructionRewriter(llm).rewrite(REAL, KEPT, LEFT_OUT)
    assert instruction.endswith("and give its total time.")
    assert llm.calls == 2
    feedback = fake.requests[1]["messages"][-1]["content"]
    assert feedback.startswith("Your reply was rejected: reply is not a JSON object: 'Sure!")


def test_subtasks_whose_rewrite_never_validates_are_dropped_and_reported():
    def model(request: dict[str, Any]) -> str:
        if [group_id for group_id, _ in _kept(request)] == ["g1", "g2"]:
            return recorded("rewrite/leaks_left_out_fact.json")
        return _rewrite_for(request)

    llm, fake = fake_llm(model, max_attempts=2)
    result = decompose([REAL], rewriter=llm)
    assert [s["task_id"] for s in result.subtasks] == [
        "allrecipes-0042~g1",
        "allrecipes-0042~g2",
        "allrecipes-0042~g3",
        "allrecipes-0042~g1+g3",
        "allrecipes-0042~g2+g3",
    ]
    assert result.rejected == [
        Rejected(
            "allrecipes-0042",
            ("g1", "g2"),
            "no valid reply after 2 attempt(s); last: bad reply: instruction mentions fact "
            "'ricotta cheese' of left-out fact group g3",
        )
    ]
    assert llm.calls == 5 + 2


def test_real_web_subtasks_have_the_rewrite_and_no_definite_answer():
    llm, _ = fake_llm(_rewrite_for)
    result = decompose([REAL], rewriter=llm, max_per_task=2)
    first, second = result.subtasks
    assert first["task_name"] == (
        "On allrecipes.com, find the a recipe that meets the criteria of a lasagna."
    )
    assert second["task_name"] == "On allrecipes.com, find the total time of a lasagna."
    assert first["definite_answer"] is None
    assert (first["difficulty"], first["split"]) == ("medium", "train")
    assert extra(first) == {
        "source": "webgym",
        "website_id": 17,
        "decomposition": {
            "parent_task_id": "allrecipes-0042",
            "fact_group_ids": ["g1"],
            "instruction_source": "llm:fake-model",
        },
    }


def test_without_a_rewriter_real_web_subsets_are_rejected_not_guessed():
    result = decompose([REAL], max_per_task=2)
    assert result.subtasks == []
    reason = "a real-website task needs an LLM rewriter; none was given"
    assert result.rejected == [
        Rejected("allrecipes-0042", ("g1",), reason),
        Rejected("allrecipes-0042", ("g2",), reason),
    ]
