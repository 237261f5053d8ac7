"""Which judge applies to which task (``webgym rescore --judge``)."""

from __future__ import annotations

import json

from infra.settings import Settings
from streams.judging import Judging

PRACTICE = {"task_id": "p", "extra_json": json.dumps({"source": "practice-web"})}
MINIWOB = {"task_id": "m", "extra_json": json.dumps({"source": "miniwob"})}
WEBGYM = {"task_id": "w", "extra_json": "{}"}


def test_a_forced_judge_applies_only_to_the_tasks_it_can_score():
    settings = Settings(judge_base_url="http://127.0.0.1:9/v1", judge_model="judge")
    applies = {
        only: [Judging(settings, only=only).applies(t) for t in (PRACTICE, MINIWOB, WEBGYM)]
        for only in (None, "verifier", "miniwob", "llm")
    }
    assert applies == {
        None: [True, True, True],  # routing by source always has a judge to ask
        "verifier": [True, False, False],
        "miniwob": [False, True, False],
        "llm": [True, True, True],
    }
