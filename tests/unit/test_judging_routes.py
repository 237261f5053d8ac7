"""Which judge applies to which task (``webgym rescore --judge``)."""

from __future__ import annotations

import json
import subprocess
import sys

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


def test_the_stream_processors_load_the_openai_sdk_only_with_an_llm_judge():
    """Importing it takes about a second, paid at every `faust worker` start: only a worker
    configured with an LLM judge needs it."""
    script = (
        "import sys\n"
        "import streams.app\n"
        "from infra.settings import Settings\n"
        "from streams.judging import Judging\n"
        "Judging(Settings())\n"
        "print('openai' in sys.modules)\n"
        "Judging(Settings(judge_base_url='http://127.0.0.1:9/v1', judge_model='judge'))\n"
        "print('openai' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "True"]
