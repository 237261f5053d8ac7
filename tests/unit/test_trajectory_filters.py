"""Trajectory assembly, the block and success filters, and judging: no Kafka, no Faust."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urljoin

import pytest

from infra.settings import Settings
from schemas.inference import backend_error, parse_error
from schemas.prompt.reply import format_reply
from schemas.purpose import is_eval
from schemas.serde import default_catalog
from sites import generate_sites
from sites.tasks import generate_tasks
from sites.verifier import JUDGE_NAME, JUDGE_VERSION
from streams.assembler import assemble
from streams.filters import SCORE_FIELDS, detect_block, is_success, reaches_learner, trainable_steps
from streams.judges import Score
from streams.judging import Judging, PracticeWebJudge, scored_event
from streams.orchestrator import Rules, on_inference, on_observation, on_started
from tests.samples import started_record, step_record

TASKS = generate_tasks(generate_sites(count=3))
MEDIUM = next(t for t in TASKS if t["difficulty"] == "medium")
RULES = Rules(horizons={"easy": 10, "medium": 20, "hard": 30})
T0 = 1_795_000_000_000
EP = "run-000042"
CLICK = {"kind": "left_click", "x": 300, "y": 400}


def page(url: str, screen: str, title: str = "A page") -> dict[str, Any]:
    return {"url": url, "title": title, "screenshot": f"jpeg {screen}".encode()}


def play(task: dict, pages: list[dict], replies: list[dict | None], **marks: Any) -> dict[str, Any]:
    """One episode through the orchestrator; its trajectory.

    ``pages[0]`` is shown after navigating, the next page after every action that runs;
    ``replies`` are the policy's actions in order (None: an unparseable reply).
    """
    started = started_record(EP, task["task_id"], T0, **marks)
    state = on_started(None, started, task, RULES, T0).state
    pages = iter(pages)
    state = show(state, next(pages))
    outputs = []
    for action in replies:
        step = len(state["history"]) + 1
        inference = {
            "event_id": f"{EP}:{step}:inference",
            "step": step,
            "policy_version": 5,
            "raw_text": format_reply(action) if action else "I am not sure.",
            "action": action,
            "parse_error": None if action else "no <tool_call>...</tool_call> block in the reply",
        }
        transition = on_inference(state, inference, T0 + step)
        state, outputs = transition.state, transition.outputs
        if state["status"] == "acting":
            state = show(state, next(pages))
    assert state["status"] == "ended", state["status"]
    trajectory = next(o.record for o in outputs if o.topic == "trajectories")
    assert trajectory == assemble(state)
    default_catalog().encode("trajectory", trajectory)
    return trajectory


def show(state: dict[str, Any], shown: dict[str, Any]) -> dict[str, Any]:
    """The browser's observation of the step the orchestrator waits for."""
    step = state["step"]
    observation = {
        **step_record(EP, step, "observation", T0 + step),
        "width": 1280,
        "height": 768,
        **shown,
    }
    return on_observation(state, observation, 1, 100 + step, T0 + step).state


# -- repetition marks -----------------------------------------------------------------------------


def test_repeated_and_unparsed_steps_are_not_trainable():
    home = f"http://{MEDIUM['website']}/"
    trajectory = play(
        MEDIUM,
        [
            page(home, "home"),
            page(home, "home"),  # the first click changed nothing
            page(home + "products", "products"),
        ],
        [CLICK, None, CLICK, {"kind": "answer", "text": "no idea"}],
    )
    marks = [
        (s["step"], s["parse_error"] is not None, s["repeated"], s["trainable"])
        for s in trajectory["steps"]
    ]
    assert marks == [
        (1, False, True, False),  # its screen equals the next one
        (2, True, False, False),  # no action ran: not repeated, but nothing to train on
        (3, False, False, True),
        (4, False, False, True),  # the answer
    ]
    # the unparsed reply and the retry saw the same observation
    ids = [s["observation_event_id"] for s in trajectory["steps"]]
    assert ids == [f"{EP}:0:observation", f"{EP}:1:observation", f"{EP}:1:observation", ids[3]]
    assert ids[3] == f"{EP}:3:observation"
    assert (
        trajectory["steps"][1]["screenshot_sha256"] == trajectory["steps"][0]["screenshot_sha256"]
    )
    assert trainable_steps(trajectory) == 2


def test_an_answer_on_an_unchanged_screen_is_still_trainable():
    home = f"http://{MEDIUM['website']}/"
    trajectory = play(MEDIUM, [page(home, "home")], [{"kind": "answer", "text": "x"}])
    assert [(s["repeated"], s["trainable"]) for s in trajectory["steps"]] == [(False, True)]


# -- filters --------------------------------------------------------------------------------------


def trajectory_through(*urls_and_titles: tuple[str, str]) -> dict[str, Any]:
    return {
        "steps": [
            {"step": i + 1, "url": url, "title": title}
            for i, (url, title) in enumerate(urls_and_titles)
        ]
    }


@pytest.mark.parametrize(
    ("url", "title", "reason"),
    [
        (
            "http://shop.example/",
            "Please solve this CAPTCHA",
            "step 2: title 'Please solve this CAPTCHA' matches 'CAPTCHA'",
        ),
        (
            "https://shop.example/cdn-cgi/challenge-platform/h/b",
            "Shop",
            "step 2: url 'https://shop.example/cdn-cgi/challenge-platform/h/b' matches "
            "'/cdn-cgi/challenge'",
        ),
        (
            "http://shop.example/",
            "Just a moment...",
            "step 2: title 'Just a moment...' matches 'Just a moment...'",
        ),
    ],
)
def test_a_bot_wall_blocks_the_trajectory(url, title, reason):
    trajectory = trajectory_through(("http://shop.example/", "Shop"), (url, title))
    assert detect_block(trajectory) == reason


@pytest.mark.parametrize(
    ("url", "title"),
    [
        ("http://hazeloak-shop.webgym.test/products/kettle", "Brightwell Kettle"),
        ("http://news.example/captain-of-industry", "The captain of industry"),
        ("http://shop.example/checkout", "Checkout: verify your address"),
    ],
)
def test_normal_pages_do_not_block(url, title):
    assert detect_block(trajectory_through((url, title))) is None


def scored(**fields) -> dict[str, Any]:
    return {
        "reward": 1.0,
        "aborted": False,
        "judge_error": None,
        "blocked": False,
        "final_answer": "$15.95",
        **fields,
    }


def test_only_a_clean_reward_of_one_is_a_success():
    assert is_success(scored())
    assert not is_success(scored(reward=0.0))
    assert not is_success(scored(reward=0.5))
    assert not is_success(scored(aborted=True))
    assert not is_success(scored(judge_error="judge replied garbage"))
    assert not is_success(scored(blocked=True))
    # No answer needed where the judge is the page itself (MiniWoB++): its reward 1 suffices.
    assert is_success(scored(final_answer=None))


# -- judging --------------------------------------------------------------------------------------


def solution_pages(task: dict) -> list[dict[str, Any]]:
    urls = json.loads(task["extra_json"])["solution_urls"]
    return [page(task["start_url"], "start")] + [
        page(urljoin(task["start_url"], u), f"solution {i}") for i, u in enumerate(urls)
    ]


@pytest.mark.parametrize("task", TASKS[:3], ids=lambda t: t["difficulty"])
def test_the_verifier_gives_one_for_the_answer_after_the_solution_pages(task):
    pages = solution_pages(task)
    navigate = [{"kind": "navigate", "url": p["url"]} for p in pages[1:]]
    answer = {"kind": "answer", "text": task["definite_answer"]}
    trajectory = play(task, pages, [*navigate, answer])
    score = asyncio.run(PracticeWebJudge().score(task, trajectory, []))
    assert (score.reward, score.judge_name, score.judge_version) == (1.0, JUDGE_NAME, JUDGE_VERSION)
    assert score.judge_error is None
    assert score.verdicts and all(v["satisfied"] for v in score.verdicts)

    wrong = play(task, pages, [*navigate, {"kind": "answer", "text": "I could not find it"}])
    score = asyncio.run(PracticeWebJudge().score(task, wrong, []))
    assert score.reward == 0.0
    assert not any(v["satisfied"] for v in score.verdicts)

    # the right answer without visiting the required pages is not enough
    lucky = play(task, pages[:1], [answer])
    assert asyncio.run(PracticeWebJudge().score(task, lucky, [])).reward == 0.0


@pytest.fixture
def no_llm_judge(monkeypatch) -> Settings:
    for name in ("WEBGYM_JUDGE_BASE_URL", "WEBGYM_JUDGE_MODEL", "WEBGYM_JUDGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return Settings()


def test_judging_routes_practice_web_tasks_to_the_verifier(no_llm_judge):
    task = TASKS[0]
    pages = solution_pages(task)
    navigate = [{"kind": "navigate", "url": p["url"]} for p in pages[1:]]
    trajectory = play(task, pages, [*navigate, {"kind": "answer", "text": task["definite_answer"]}])
    score = asyncio.run(Judging(no_llm_judge).score(task, trajectory))
    assert (score.reward, score.judge_name, score.judge_error) == (1.0, JUDGE_NAME, None)


def test_an_unknown_task_is_a_judge_error(no_llm_judge):
    trajectory = {"task_id": "gone-001-easy", "steps": [], "final_answer": "x"}
    score = asyncio.run(Judging(no_llm_judge).score(None, trajectory))
    assert score == Score(0.0, "none", "0", [], "unknown task 'gone-001-easy'")


def test_a_real_web_task_without_an_llm_judge_is_a_judge_error(no_llm_judge):
    task = {**MEDIUM, "task_id": "real-1", "extra_json": json.dumps({"source": "real-web"})}
    trajectory = {"task_id": "real-1", "steps": [], "final_answer": "x"}
    score = asyncio.run(Judging(no_llm_judge).score(task, trajectory))
    assert score.reward == 0.0
    assert score.judge_name == "none"
    assert score.judge_error == (
        "no judge for tasks of source 'real-web': set WEBGYM_JUDGE_BASE_URL and "
        "WEBGYM_JUDGE_MODEL for the LLM rubric judge"
    )


def test_the_scored_event_fits_its_schema_and_feeds_the_filter():
    task = TASKS[1]
    pages = solution_pages(task)
    navigate = [{"kind": "navigate", "url": p["url"]} for p in pages[1:]]
    trajectory = play(task, pages, [*navigate, {"kind": "answer", "text": task["definite_answer"]}])
    score = asyncio.run(PracticeWebJudge().score(task, trajectory, []))
    event = scored_event(trajectory, score, detect_block(trajectory))
    assert event["event_id"] == f"{EP}:scored"
    assert (event["reward"], event["blocked"], event["block_reason"]) == (1.0, False, None)
    catalog = default_catalog()
    decoded = catalog.decode(catalog.encode("scored_trajectory", event), "scored_trajectory")
    assert decoded.record["verdicts"] == score.verdicts
    assert is_success(event)

    walled = scored_event(trajectory, score, "step 1: title 'captcha' matches 'captcha'")
    catalog.encode("scored_trajectory", walled)
    assert walled["blocked"] is True
    assert not is_success(walled)


def test_a_judge_that_refuses_the_client_gives_judge_errors_not_a_dead_stream():
    import httpx
    import openai

    from streams.judging import Judging

    class Refusing:
        name, version = "llm:missing-model", "rubric-v1"

        async def score(self, task, trajectory, screenshots):
            request = httpx.Request("POST", "http://judge.invalid/v1/chat/completions")
            raise openai.NotFoundError(
                "model not found", response=httpx.Response(404, request=request), body=None
            )

    judging = Judging(Settings())
    judging.llm = Refusing()
    task = {"task_id": "t", "extra_json": json.dumps({"source": "webgym"})}
    trajectory = {"task_id": "t", "final_answer": None, "steps": []}
    score = asyncio.run(judging.score(task, trajectory))
    assert score.reward == 0.0
    assert score.judge_name == "llm:missing-model"
    assert score.judge_error.startswith("judge configuration error (NotFoundError)")


def solved(task: dict, **marks: Any) -> dict[str, Any]:
    """A scored trajectory of ``task`` solved right (reward 1), with the run's ``marks``."""
    pages = solution_pages(task)
    navigate = [{"kind": "navigate", "url": p["url"]} for p in pages[1:]]
    answer = {"kind": "answer", "text": task["definite_answer"]}
    trajectory = play(task, pages, [*navigate, answer], **marks)
    score = asyncio.run(PracticeWebJudge().score(task, trajectory, []))
    event = scored_event(trajectory, score, detect_block(trajectory))
    catalog = default_catalog()
    return catalog.decode(catalog.encode("scored_trajectory", event), "scored_trajectory").record


def test_an_eval_success_never_reaches_the_learner_whatever_its_reward():
    held_out = solved(TASKS[1], purpose="eval", phase="on_policy")
    assert (held_out["purpose"], held_out["phase"]) == ("eval", "on_policy")
    assert is_success(held_out) and is_eval(held_out)  # it counts as a held-out success...
    assert not reaches_learner(held_out)  # ...but is never training data
    assert reaches_learner(solved(TASKS[1], phase="warm_start"))
    assert not reaches_learner({**held_out, "purpose": "something new"})  # unknown: held out


def test_old_trajectories_decode_as_train():
    catalog = default_catalog()
    record = {k: v for k, v in solved(TASKS[1]).items() if k not in ("purpose", "phase")}
    # Steps before v7 had no backend_error.
    record["steps"] = [
        {k: v for k, v in step.items() if k != "backend_error"} for step in record["steps"]
    ]
    for event_type, version in (("scored_trajectory", 5), ("trajectory", 5)):
        if event_type == "trajectory":
            record = {k: v for k, v in record.items() if k not in SCORE_FIELDS}
        old = catalog.decode(catalog.encode(event_type, record, version=version)).record
        assert (old["purpose"], old["phase"]) == ("train", None)
        assert not is_eval(old)


def test_a_trajectory_step_carries_its_backend_error_and_old_ones_read_it_from_the_prefix():
    catalog = default_catalog()
    assert catalog.latest("trajectory").version == catalog.latest("scored_trajectory").version == 7
    event = solved(TASKS[1])
    step = {**event["steps"][0], "action": None, "backend_error": "no answer within 1 s"}
    record = {**event, "steps": [step]}
    decoded = catalog.decode(catalog.encode("scored_trajectory", record)).record["steps"][0]
    assert (decoded["parse_error"], backend_error(decoded)) == (None, "no answer within 1 s")
    legacy = {k: v for k, v in step.items() if k != "backend_error"}
    legacy["parse_error"] = "backend error: no answer within 1 s"
    old = catalog.decode(
        catalog.encode("scored_trajectory", {**record, "steps": [legacy]}, version=6)
    ).record["steps"][0]
    assert old["backend_error"] is None  # the field did not exist: the prefix still says it
    assert (parse_error(old), backend_error(old)) == (None, "no answer within 1 s")
