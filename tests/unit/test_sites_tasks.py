"""Practice-web tasks and their verifier: schema shape, determinism, facts that are really on the
pages, answers that pass and answers that do not."""

from __future__ import annotations

import http.client
import json
import re
from collections import Counter
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from schemas.serde import default_catalog
from sites import generate_sites
from sites.server import PracticeWebServer
from sites.tasks import generate_tasks
from sites.verifier import contains_fact, normalise, verify, visible_text
from tests.samples import sample


@pytest.fixture(scope="module")
def sites():
    return generate_sites()


@pytest.fixture(scope="module")
def tasks(sites):
    return generate_tasks(sites)


def extra(task):
    return json.loads(task["extra_json"])


def visited(task):
    return [f"http://{task['website']}{path}" for path in extra(task)["required_paths"]]


def test_six_tasks_per_site_with_stable_unique_ids(sites, tasks):
    assert len(tasks) == 6 * len(sites)
    assert len({task["task_id"] for task in tasks}) == len(tasks)
    assert tasks[0]["task_id"] == f"{sites[0].site_id}-000-easy"
    assert tasks[5]["task_id"] == f"{sites[0].site_id}-005-hard"
    assert Counter(task["difficulty"] for task in tasks) == {
        "easy": 100,
        "medium": 100,
        "hard": 100,
    }
    assert {task["event_id"] for task in tasks} == {f"task:{t['task_id']}" for t in tasks}


def test_rubric_size_follows_difficulty(tasks):
    for task in tasks:
        groups = task["evaluator_reference"]
        if task["difficulty"] == "easy":
            assert len(groups) == 1 and len(groups[0]["facts"]) >= 1
        elif task["difficulty"] == "medium":
            assert len(groups) == 2
        else:
            assert len(groups) >= 3 and max(len(g["facts"]) for g in groups) >= 3
        assert [g["id"] for g in groups] == [f"g{n}" for n in range(1, len(groups) + 1)]
        assert all(fact and normalise(fact) for g in groups for fact in g["facts"])


def test_templates_include_flows_and_catalogue_comparisons(tasks):
    templates = Counter(extra(task)["template"] for task in tasks)
    assert templates["hard-flow"] and templates["hard-checkout"] and templates["hard-top-three"]
    assert templates["medium-value"] and templates["medium-rating"]


def test_deterministic(sites, tasks):
    assert generate_tasks(sites) == tasks
    other = generate_tasks(sites, seed=1)
    assert {t["task_id"] for t in other}.isdisjoint({t["task_id"] for t in tasks})
    assert [t["task_name"] for t in other] != [t["task_name"] for t in tasks]


def test_every_task_encodes_as_a_task_event(tasks):
    catalog = default_catalog()
    for task in tasks:
        decoded = catalog.decode(catalog.encode("task", task))
        assert decoded.record == task


def test_definite_answer_passes_with_the_required_pages(tasks):
    for task in tasks:
        verdict = verify(task, task["definite_answer"], visited(task))
        assert verdict.reward == 1.0, (task["task_id"], verdict.reason)
        assert all(v["satisfied"] for v in verdict.verdicts)


def test_definite_answer_fails_without_the_required_pages(tasks):
    for task in tasks:
        start = [task["start_url"]]
        verdict = verify(task, task["definite_answer"], start)
        assert verdict.reward == 0.0 and "required pages not visited" in verdict.reason
        other_host = [
            url.replace(task["website"], "elsewhere.webgym.test") for url in visited(task)
        ]
        assert verify(task, task["definite_answer"], other_host).reward == 0.0


def test_wrong_answers_fail(tasks):
    for task in tasks:
        first_fact = task["evaluator_reference"][0]["facts"][0]
        wrong = task["definite_answer"].replace(first_fact, "something else entirely")
        assert verify(task, wrong, visited(task)).reward == 0.0, task["task_id"]
        assert verify(task, "I could not find it.", visited(task)).reward == 0.0


def test_no_answer_scores_zero_with_a_reason(tasks):
    verdict = verify(tasks[0], None, visited(tasks[0]))
    assert verdict.reward == 0.0 and verdict.reason == "no final answer"
    assert not any(v["satisfied"] for v in verdict.verdicts)
    assert verify(tasks[0], "   ", visited(tasks[0])).reason == "no final answer"


def test_verdicts_fit_the_scored_trajectory_schema(tasks):
    task = tasks[2]
    verdict = verify(task, task["definite_answer"], visited(task))
    record = {**sample("scored_trajectory"), "reward": verdict.reward, "verdicts": verdict.verdicts}
    default_catalog().encode("scored_trajectory", record)


@pytest.mark.parametrize(
    ("answer", "fact", "found"),
    [
        ("It costs $1,299.00.", "1299.00", True),
        ("It costs 1299", "$1,299.00", True),
        ("It costs $1299.50", "$1,299.50", True),
        ("**Total:** $472.00", "$472", True),
        ("Takes 45 mins", "45 minutes", True),
        ("chefs knife", "Chef's Knife", True),
        ("Reference: hos-ba2dcb7c", "HOS-BA2DCB7C", True),
        ("posted 4 May 2026", "4 May 2026", True),
        ("It costs $112", "$12", False),
        ("rated 4.12", "12", False),
        ("rated 4.5", "5", False),
        ("posted 14 May 2026", "4 May 2026", False),
        ("", "x", False),
    ],
)
def test_fact_matching(answer, fact, found):
    assert contains_fact(answer, fact) is found


def test_required_paths_match_on_segment_boundaries(tasks):
    task = {**tasks[0], "extra_json": json.dumps({"required_paths": ["/products/kettle"]})}
    host = f"http://{task['website']}"
    fact_answer = task["definite_answer"]
    assert verify(task, fact_answer, [f"{host}/products/kettle?x=1"]).reward == 1.0
    assert verify(task, fact_answer, [f"{host}:8088/products/kettle/"]).reward == 1.0
    assert verify(task, fact_answer, [f"{host}/products/kettle-2"]).reward == 0.0


@pytest.fixture(scope="module")
def web(sites):
    with PracticeWebServer(sites) as server:
        yield server


def _get(connection, host, path):
    connection.request("GET", path, headers={"Host": host})
    response = connection.getresponse()
    return response.status, dict(response.getheaders()), response.read().decode()


def test_every_fact_is_shown_on_a_solution_page(tasks, web):
    connection = http.client.HTTPConnection("127.0.0.1", web.port, timeout=10)
    for task in tasks:
        text = ""
        for url in extra(task)["solution_urls"]:
            status, _, html = _get(connection, task["website"], url)
            assert status == 200, (task["task_id"], url)
            text += " " + visible_text(html)
        for group in task["evaluator_reference"]:
            for fact in group["facts"]:
                assert contains_fact(text, fact), (task["task_id"], fact)
    connection.close()


def _post(connection, host, path, form, cookie=""):
    headers = {"Host": host, "Content-Type": "application/x-www-form-urlencoded"}
    if cookie:
        headers["Cookie"] = cookie
    connection.request("POST", path, body=urlencode(form), headers=headers)
    response = connection.getresponse()
    response.read()
    return response.status, dict(response.getheaders())


def test_flow_tasks_are_solvable_by_submitting_the_dictated_inputs(tasks, web):
    """Fill the forms as the instruction says: the page shows the rubric's reference."""
    connection = http.client.HTTPConnection("127.0.0.1", web.port, timeout=10)
    flow_tasks = [t for t in tasks if extra(t)["template"] in ("hard-flow", "hard-checkout")]
    for task in flow_tasks[:16]:
        host, info = task["website"], extra(task)
        if info["template"] == "hard-checkout":
            cookie = ""
            for slug, quantity in info["cart"]:
                _, headers = _post(connection, host, "/cart/add",
                                   {"slug": slug, "quantity": quantity}, cookie)  # fmt: skip
                cookie = headers["Set-Cookie"].split(";")[0]
            status, headers = _post(connection, host, "/checkout", info["inputs"], cookie)
        else:
            form_path = re.sub(r"/confirmed$", "", info["required_paths"][0])
            status, headers = _post(connection, host, form_path, info["inputs"])
            assert status == 303, task["task_id"]
            review = headers["Location"]
            query = dict(parse_qsl(urlsplit(review).query))
            headers = {"Location": f"{form_path}/confirmed?{urlencode(query)}"}
            assert _get(connection, host, review)[0] == 200
        assert status == 303, task["task_id"]
        status, _, html = _get(connection, host, headers["Location"])
        reference = task["evaluator_reference"][0]["facts"][0]
        assert status == 200 and reference in html, task["task_id"]
        answer = task["definite_answer"]
        final = [f"http://{host}{urlsplit(headers['Location']).path}"] + visited(task)
        assert verify(task, answer, final).reward == 1.0
    connection.close()
