"""The LLM rubric judge against a real OpenAI-compatible server (`transformers serve`) running a
tiny random model: the request goes over HTTP with a real screenshot, the random reply comes back,
fails strict parsing, and the score is a judge error after exactly `max_attempts` attempts."""

from __future__ import annotations

import asyncio
import io

from PIL import Image

from infra.openai_client import ChatEndpoint
from streams.judges.llm import LLMRubricJudge
from tests.integration.model_servers import (  # noqa: F401
    openai_server_fixture,
    tiny_model_fixture,
)
from tests.samples import sample


def _jpeg() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (1280, 768), (240, 240, 235)).save(buffer, "JPEG", quality=80)
    return buffer.getvalue()


def test_a_random_model_reply_is_a_judge_error_never_a_success(tiny_model, openai_server):
    endpoint = ChatEndpoint(openai_server, str(tiny_model), max_tokens=16, max_attempts=2)
    judge = LLMRubricJudge(endpoint)
    task = sample("task")
    trajectory = sample("trajectory")
    assert trajectory["final_answer"]  # so the model is asked

    score = asyncio.run(judge.score(task, trajectory, [_jpeg()]))

    assert judge.calls == 2
    assert score.reward == 0.0
    assert score.verdicts == []
    assert (score.judge_name, score.judge_version) == (f"llm:{tiny_model}", "rubric-v2")
    # The server answered both times (no API error): its random reply failed strict parsing.
    assert score.judge_error.startswith("no verdict after 2 attempt(s); last: bad reply: "), (
        score.judge_error
    )
