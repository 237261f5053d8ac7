"""Instruction rewriting and rubric generation against a real OpenAI-compatible server
(`transformers serve`) running a tiny random model: the requests go over HTTP, replies come back,
fail validation, and the subtask or task is reported rejected with the reason, never accepted."""

from __future__ import annotations

import json
from typing import Any

import openai

from infra.openai_client import resolve_api_key
from tasks.decompose import decompose
from tasks.llm_client import LLMClient, LLMConfig
from tasks.rubrics import generate_rubrics
from tests.integration.model_servers import (  # noqa: F401
    openai_server_fixture,
    tiny_model_fixture,
)
from tests.samples import LASAGNA_RECIPE, LASAGNA_TIME, lasagna_task

TASK: dict[str, Any] = lasagna_task(
    evaluator_reference=[LASAGNA_RECIPE, LASAGNA_TIME], extra_json=json.dumps({"source": "webgym"})
)


class RecordingOpenAI:
    """A real `openai.OpenAI` client that keeps every response it received."""

    def __init__(self, client: openai.OpenAI):
        self._create = client.chat.completions.create
        self.responses: list[Any] = []
        self.chat = self
        self.completions = self

    def create(self, **request: Any) -> Any:
        response = self._create(**request)
        self.responses.append(response)
        return response


def _llm(server: str, model: str) -> tuple[LLMClient, RecordingOpenAI]:
    config = LLMConfig(server, model, max_tokens=16, max_attempts=2, timeout_s=60)
    recording = RecordingOpenAI(
        openai.OpenAI(base_url=server, api_key=resolve_api_key(config.api_key))
    )
    return LLMClient(config, recording), recording


def test_random_model_replies_are_rejected_never_accepted(tiny_model, openai_server):
    llm, recording = _llm(openai_server, str(tiny_model))

    decomposition = decompose([TASK], rewriter=llm, max_per_task=1)

    assert decomposition.subtasks == []
    ((task_id, fact_group_ids, reason),) = decomposition.rejected
    assert (task_id, fact_group_ids) == ("allrecipes-0042", ("g1",))
    # The server answered both times (no API error): its random reply failed validation.
    assert reason.startswith("no valid reply after 2 attempt(s); last: bad reply: "), reason
    assert llm.calls == 2

    rubrics = generate_rubrics([{**TASK, "evaluator_reference": []}], llm)

    assert rubrics.tasks_with_rubrics == []
    ((task_id, reason),) = rubrics.rejected
    assert task_id == "allrecipes-0042"
    assert reason.startswith("no valid reply after 2 attempt(s); last: bad reply: "), reason
    assert llm.calls == 4

    # Four replies arrived over HTTP, each a real chat completion of the served model.
    assert len(recording.responses) == 4
    for response in recording.responses:
        assert response.choices, response
        assert isinstance(response.choices[0].message.content, str)
