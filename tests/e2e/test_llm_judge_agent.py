"""The judge agent alone (`WEBGYM_STREAMS_AGENTS=judge`) with the LLM rubric judge configured,
against a real OpenAI-compatible server running a tiny random model.

A trajectory of a task without ground truth goes to the LLM judge: its screenshots are read back
from the log by partition and offset, sent with the rubric, and the random model's reply fails
strict parsing, so the score is a judge error with reward 0, stamped with the judge. A trajectory
without a final answer scores 0 without a model call.
"""

from __future__ import annotations

import io
import json
import time
import uuid

from PIL import Image

from commands.children import Child, faust_argv, settings_env
from infra.log_reader import read_topic
from infra.producer import EventProducer, now_ms
from tests.integration.model_servers import openai_server_fixture, tiny_model_fixture  # noqa: F401


def _jpeg() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (1280, 768), (200, 60, 40)).save(buffer, "JPEG", quality=80)
    return buffer.getvalue()


def _trajectory(episode_id, task_id, step, final_answer):
    return {
        "event_id": f"{episode_id}:trajectory",
        "episode_id": episode_id,
        "step": 1,
        "ts": now_ms(),
        "task_id": task_id,
        "instruction": "What does the banner say?",
        "termination": "answer" if final_answer else "horizon",
        "aborted": False,
        "final_answer": final_answer,
        "policy_versions": [0],
        "website": "example.org",
        "difficulty": "easy",
        "horizon": 10,
        "started_ts": now_ms() - 1000,
        "steps": [step],
    }


def test_the_judge_agent_scores_real_web_tasks_with_the_llm_judge(
    run_settings, tiny_model, openai_server, tmp_path
):
    producer = EventProducer.connect(run_settings, "e2e-llm-judge")
    task_id = f"web-{uuid.uuid4().hex[:6]}"
    task = {
        "event_id": f"task:{task_id}",
        "ts": now_ms(),
        "task_id": task_id,
        "task_name": "What does the banner on the home page say?",
        "website": "example.org",
        "start_url": "https://example.org/",
        "difficulty": "easy",
        "evaluator_reference": [
            {"id": "g1", "description": "the banner", "facts": ["Summer sale", "20% off"]}
        ],
        "definite_answer": "Summer sale, 20% off",
        "extra_json": json.dumps({"source": "webgym"}),
    }
    producer.produce(run_settings.topic("tasks"), task_id, "task", task)
    episode = f"judge-{uuid.uuid4().hex[:6]}"
    where = {}
    producer.produce(
        run_settings.topic("observations"),
        episode,
        "observation",
        {
            "event_id": f"{episode}:0:observation",
            "episode_id": episode,
            "step": 0,
            "ts": now_ms(),
            "screenshot": _jpeg(),
            "width": 1280,
            "height": 768,
            "url": "https://example.org/",
            "title": "Example",
        },
        on_delivery=lambda error, message: where.update(p=message.partition(), o=message.offset()),
    )
    producer.flush()
    step = {
        "step": 1,
        "observation_event_id": f"{episode}:0:observation",
        "inference_event_id": f"{episode}:1:inference",
        "action": {"kind": "answer", "text": "Summer sale, 20% off"},
        "observation_partition": where["p"],
        "observation_offset": where["o"],
        "url": "https://example.org/",
        "title": "Example",
    }
    unanswered = f"{episode}-x"
    for episode_id, answer in ((episode, "Summer sale, 20% off"), (unanswered, None)):
        record = _trajectory(episode_id, task_id, step, answer)
        producer.produce(run_settings.topic("trajectories"), episode_id, "trajectory", record)
    producer.flush()

    env = {
        **settings_env(run_settings),
        "WEBGYM_STREAMS_AGENTS": "judge",
        "WEBGYM_JUDGE_BASE_URL": openai_server,
        "WEBGYM_JUDGE_MODEL": str(tiny_model),
        "WEBGYM_JUDGE_MAX_TOKENS": "16",
    }
    judge = Child.start("judge", faust_argv(), env, tmp_path)
    try:
        judge.wait_for("Ready", 120)
        deadline = time.monotonic() + 180
        scored = {}
        while set(scored) != {episode, unanswered} and time.monotonic() < deadline:
            time.sleep(1)
            judge.check()
            scored = {
                e.record["episode_id"]: e.record
                for e in read_topic(run_settings, "trajectories.scored")
            }
    finally:
        judge.stop()
    assert set(scored) == {episode, unanswered}, judge.text()[-3000:]

    answered = scored[episode]
    assert answered["judge_name"] == f"llm:{tiny_model}"
    assert answered["judge_version"] == "rubric-v2"
    assert answered["reward"] == 0.0
    # The screenshot was found by its log position and sent; the random reply never parses.
    assert answered["judge_error"].startswith("no verdict after 3 attempt"), answered["judge_error"]

    empty = scored[unanswered]
    assert empty["reward"] == 0.0 and empty["judge_error"] is None
    assert {v["rationale"] for v in empty["verdicts"]} == {"no final answer"}
