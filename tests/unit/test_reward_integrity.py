"""Reward integrity: the practice-web verifier refuses answers that game the fact check (a pasted
page, a list of candidates) and still gives 1 to every honest answer of the generated tasks."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from sites import generate_sites
from sites.routes import Request, SiteApp
from sites.tasks import generate_tasks
from sites.verifier import (
    SiteCatalogues,
    answer_length_limit,
    contains_fact,
    length_refusal,
    verify,
    visible_text,
)
from streams.judging import PracticeWebJudge

SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def catalogues() -> SiteCatalogues:
    return SiteCatalogues()


@pytest.fixture(scope="module")
def task_sets() -> dict[int, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Per seed: the sites by hostname and their tasks, as `webgym run --seed` makes them."""
    sets = {}
    for seed in SEEDS:
        sites = generate_sites(seed=seed, count=50)
        sets[seed] = ({site.hostname: site for site in sites}, generate_tasks(sites, seed=seed))
    return sets


def extra(task: dict[str, Any]) -> dict[str, Any]:
    return json.loads(task["extra_json"])


def visited(task: dict[str, Any]) -> list[str]:
    return [f"http://{task['website']}{path}" for path in extra(task)["required_paths"]]


def page_text(site, address: str) -> str:
    parts = urlsplit(address)
    response = SiteApp(site).handle(Request("GET", parts.path, dict(parse_qsl(parts.query))))
    assert response.status == 200, address
    return visible_text(response.body.decode())


def all_tasks(task_sets):
    for seed in SEEDS:
        sites, tasks = task_sets[seed]
        for task in tasks:
            yield sites[task["website"]], task


# -- honest answers pass -------------------------------------------------------------------------


def test_every_definite_answer_still_scores_one(task_sets, catalogues):
    """The scripted policy answers the definite answer: its successes must stay successes."""
    for _, task in all_tasks(task_sets):
        catalogue = catalogues.for_task(task)
        assert catalogue is not None, task["task_id"]
        verdict = verify(task, task["definite_answer"], visited(task), catalogue)
        assert verdict.reward == 1.0, (task["task_id"], verdict.reason)


def test_honest_paraphrases_score_one(task_sets, catalogues):
    for site, task in all_tasks(task_sets):
        answer = task["definite_answer"]
        paraphrases = [
            f"On {site.name}, I found: {answer.replace('; ', ', and ')}.",
            f"The answer is {answer}.",
        ]
        if task["difficulty"] != "hard":
            # Restating the whole question around the facts stays within the length limit.
            paraphrases.append(f"{task['task_name']} Answer: {answer}")
        catalogue = catalogues.for_task(task)
        for paraphrase in paraphrases:
            verdict = verify(task, paraphrase, visited(task), catalogue)
            assert verdict.reward == 1.0, (task["task_id"], paraphrase, verdict.reason)


def test_an_answer_may_mention_the_item_it_is_about(task_sets, catalogues):
    """ "$12.99, for the Alder Kettle (14 left)": context about the subject, not a hedge, though
    another product may cost $14.00."""
    in_stock = 0
    for site, task in all_tasks(task_sets):
        if not extra(task)["template"].startswith("easy"):
            continue
        item = next(i for i in site.items if f'"{i.name}"' in task["task_name"])
        answer = f"{task['definite_answer']}, for the {site.spec.noun} {item.name} on {site.name}"
        if site.domain == "shopping" and item.field("Availability").startswith("In stock"):
            in_stock += 1
            answer += f" ({item.field('Availability').split('(')[1]}"
        verdict = verify(task, answer, visited(task), catalogues.for_task(task))
        assert verdict.reward == 1.0, (task["task_id"], answer, verdict.reason)
    assert in_stock > 10


def test_naming_another_value_of_the_asked_kind_of_the_same_item_scores_zero(task_sets, catalogues):
    """Asked a recipe's total time, "135 minutes, 110 minutes of them cooking" names two total
    times of the site when another recipe takes 110 minutes in all."""
    checked = 0
    for site, task in all_tasks(task_sets):
        if site.domain != "recipes" or extra(task)["template"] != "easy-value":
            continue
        item = next(i for i in site.items if f'"{i.name}"' in task["task_name"])
        cook = item.field("Cook time")
        if not any(other.value_text == cook for other in site.items):
            continue
        checked += 1
        answer = f"{task['definite_answer']}, {cook} of them cooking"
        verdict = verify(task, answer, visited(task), catalogues.for_task(task))
        assert verdict.reward == 0.0 and "candidate rule" in verdict.reason, answer
    assert checked >= 3


def test_a_pasted_table_of_the_items_fields_scores_zero(task_sets, catalogues):
    for site, task in all_tasks(task_sets):
        if not extra(task)["template"].startswith("easy"):
            continue
        item = next(i for i in site.items if f'"{i.name}"' in task["task_name"])
        table = " ".join(f"{label}: {text}" for label, text in item.fields)
        verdict = verify(task, table, visited(task), catalogues.for_task(task))
        assert verdict.reward == 0.0, (task["task_id"], table)
        if len(table) <= answer_length_limit(task["definite_answer"]):
            assert "rule: " in verdict.reason and "length rule" not in verdict.reason


def test_the_length_limit_is_inclusive():
    assert answer_length_limit("$12.99") == 6 + 150
    assert answer_length_limit("x" * 200) == 400
    # Runs of whitespace count as one space, on both sides.
    spaced = answer_length_limit("Alder   Kettle,\n$12.99")
    assert spaced == answer_length_limit("Alder Kettle, $12.99") == 20 + 150
    assert length_refusal("a" * 156, "$12.99") is None
    assert length_refusal("a" * 157, "$12.99") == (
        "length rule: the answer has 157 characters, over the limit of 156 "
        "(max(2 x 6, 6 + 150) for a definite answer of 6)"
    )
    assert length_refusal("a " * 5000, None) is None  # no definite answer, no limit


def test_an_honest_answer_padded_to_the_limit_passes_and_one_more_character_fails(
    task_sets, catalogues
):
    sites, tasks = task_sets[0]
    for task in tasks[:6]:
        answer, limit = task["definite_answer"], answer_length_limit(task["definite_answer"])
        padded = (answer + " ").ljust(limit, ".")
        catalogue = catalogues.for_task(task)
        assert verify(task, padded, visited(task), catalogue).reward == 1.0, task["task_id"]
        verdict = verify(task, padded + ".", visited(task), catalogue)
        assert verdict.reward == 0.0 and "length rule" in verdict.reason


# -- gaming answers get 0 ------------------------------------------------------------------------


def test_a_page_dump_scores_zero_though_it_contains_every_fact(task_sets, catalogues):
    sites, tasks = task_sets[0]
    for task in tasks:
        site, catalogue = sites[task["website"]], catalogues.for_task(task)
        pages = [page_text(site, address) for address in extra(task)["solution_urls"]]
        dump = " ".join(pages)
        facts = [fact for group in task["evaluator_reference"] for fact in group["facts"]]
        assert all(contains_fact(dump, fact) for fact in facts), task["task_id"]
        for answer in [dump, *pages]:
            verdict = verify(task, answer, visited(task), catalogue)
            assert verdict.reward == 0.0, task["task_id"]
            assert verdict.reason.startswith("answer refused by the length rule: "), verdict.reason
            rule = "not credited: answer refused by the length rule"
            assert all(not v["satisfied"] and rule in v["rationale"] for v in verdict.verdicts)


def listing_tasks(task_sets, template: str):
    for site, task in all_tasks(task_sets):
        if extra(task)["template"] == template:
            yield site, task


def test_a_list_of_all_prices_on_a_listing_scores_zero(task_sets, catalogues):
    """The sorted listing a medium task needs: every value on its page, names left out."""
    refused_by_candidates = 0
    for site, task in listing_tasks(task_sets, "medium-value"):
        listing = extra(task)["solution_urls"][0]
        category = dict(parse_qsl(urlsplit(listing).query))["category"]
        members = sorted(
            (item for item in site.items if item.category == category), key=lambda i: i.value
        )
        if len({item.value_text for item in members}) < 2:
            continue
        name = task["evaluator_reference"][0]["facts"][0]
        answer = f"{name}: " + ", ".join(item.value_text for item in members[:12])
        verdict = verify(task, answer, visited(task), catalogues.for_task(task))
        assert verdict.reward == 0.0, (task["task_id"], answer)
        if len(answer) <= answer_length_limit(task["definite_answer"]):
            refused_by_candidates += 1
            assert verdict.reason.startswith("answer refused by the candidate rule: "), answer
            assert f"other {site.spec.value_label} value(s) of the site" in verdict.reason
            assert all("candidate rule" in v["rationale"] for v in verdict.verdicts)
    assert refused_by_candidates >= 50  # the candidate rule, not only the length rule, is tested


def test_a_list_of_the_listing_items_with_their_values_scores_zero(task_sets, catalogues):
    for site, task in listing_tasks(task_sets, "medium-value"):
        listing = extra(task)["solution_urls"][0]
        category = dict(parse_qsl(urlsplit(listing).query))["category"]
        members = [item for item in site.items if item.category == category]
        fact_name = task["evaluator_reference"][0]["facts"][0]
        others = [item for item in members if item.name != fact_name][:2]
        if not others:
            continue
        answer = "; ".join(
            f"{item.name} {item.value_text}"
            for item in [next(i for i in members if i.name == fact_name), *others]
        )
        verdict = verify(task, answer, visited(task), catalogues.for_task(task))
        assert verdict.reward == 0.0, (task["task_id"], answer)
        assert "candidate rule" in verdict.reason and f"{site.spec.noun} name" in verdict.reason


def test_hedging_between_two_values_scores_zero(task_sets, catalogues):
    for site, task in all_tasks(task_sets):
        if extra(task)["template"] != "easy-value":
            continue
        fact = task["evaluator_reference"][0]["facts"][0]
        other = next(i.value_text for i in site.items if i.value_text != fact)
        for answer in (f"{fact} or {other}", f"either {other} or {fact}"):
            verdict = verify(task, answer, visited(task), catalogues.for_task(task))
            assert verdict.reward == 0.0, (task["task_id"], answer)
            assert "candidate rule" in verdict.reason


# -- the judge and the catalogues ----------------------------------------------------------------


def test_the_practice_web_judge_records_the_rule_on_every_verdict(task_sets):
    sites, tasks = task_sets[0]
    task = next(t for t in tasks if extra(t)["template"] == "easy-value")
    site = sites[task["website"]]
    steps = [{"url": address} for address in visited(task)]
    dump = page_text(site, extra(task)["solution_urls"][0])
    judge = PracticeWebJudge()
    cases = {
        dump: "length rule",
        f"{task['definite_answer']} or {site.items[0].value_text} or {site.items[1].value_text}": (
            "candidate rule"
        ),
    }
    for answer, rule in cases.items():
        if rule == "candidate rule" and task["definite_answer"] in (
            site.items[0].value_text,
            site.items[1].value_text,
        ):
            continue
        score = asyncio.run(judge.score(task, {"steps": steps, "final_answer": answer}, []))
        assert score.reward == 0.0 and score.judge_error is None
        assert score.verdicts and all(rule in v["rationale"] for v in score.verdicts)
    score = asyncio.run(
        judge.score(task, {"steps": steps, "final_answer": task["definite_answer"]}, [])
    )
    assert score.reward == 1.0


def test_site_positions_do_not_depend_on_how_many_sites_are_generated():
    """What SiteCatalogues relies on to find a site without knowing the run's site count."""
    few, many = generate_sites(seed=4, count=10), generate_sites(seed=4, count=70)
    assert [(s.site_id, s.items) for s in few] == [(s.site_id, s.items) for s in many[:10]]


def test_catalogues_find_a_site_beyond_the_first_batch():
    sites = generate_sites(seed=4, count=70)
    task = generate_tasks(sites[68:69], per_site=1, seed=4)[0]
    catalogue = SiteCatalogues().for_task(task)
    assert catalogue is not None and catalogue.hostname == sites[68].hostname


def test_no_catalogue_for_a_task_it_cannot_confirm(task_sets):
    catalogues = SiteCatalogues(max_sites=64)
    task = task_sets[0][1][0]
    info = extra(task)
    assert catalogues.for_task(task) is not None
    unconfirmed = [
        {**task, "extra_json": json.dumps({**info, "source": "real-web"})},
        {**task, "extra_json": json.dumps({**info, "site_id": "nowhere-shop"})},
        {**task, "extra_json": json.dumps({k: v for k, v in info.items() if k != "seed"})},
        {**task, "website": "elsewhere.webgym.test"},
        # Another seed's sites: the site with this id (if any) is not the one the task names.
        {**task, "extra_json": json.dumps({**info, "seed": 7})},
        {**task, "extra_json": "not json"},
    ]
    for other in unconfirmed:
        assert catalogues.for_task(other) is None, other["extra_json"]
    # Without a catalogue the length rule still applies.
    dump = "all the facts: " + task["definite_answer"] + " and the rest of the page" * 20
    assert verify(task, dump, visited(task)).reward == 0.0
