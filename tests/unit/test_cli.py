"""Every command has help a new user can act on; known failures exit 1 with the next step."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from commands.main import app
from infra.settings import load_settings

runner = CliRunner()
COMMANDS = [
    ["up"],
    ["down"],
    ["status"],
    ["run"],
    ["smoke"],
    ["tasks", "load"],
    ["tasks", "sets"],
    ["tasks", "miniwob"],
    ["tasks", "stats"],
    ["tasks", "split"],
    ["tasks", "check-split"],
    ["tasks", "decompose"],
    ["tasks", "rubrics"],
    ["topics", "create"],
    ["topics", "list"],
    ["topics", "describe"],
    ["worker", "browser"],
    ["worker", "policy"],
    ["model", "tiny"],
    ["learner"],
    ["policy", "versions"],
    ["policy", "rollback"],
    ["replay"],
    ["rescore"],
    ["stats"],
    ["dashboard"],
    ["bench", "rollout"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help(command):
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0
    assert "Usage" in result.output
    assert len(result.output.split()) > 12  # a description, not just the usage line


# Each takes seconds to import: a command loads them when it does the work that needs them.
HEAVY = ("torch", "transformers", "matplotlib")


def test_no_command_loads_pytorch_transformers_or_matplotlib_to_start():
    """`webgym run` imported PyTorch and transformers for a helper (14 s of CPU before anything
    ran); every command is built here, in a fresh interpreter, and none of them may."""
    script = (
        "import json, sys\n"
        "from commands.main import COMMANDS, load_command\n"
        "for name in COMMANDS:\n"
        "    load_command(name)\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == []


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_broker_says_to_start_the_stack(monkeypatch):
    monkeypatch.setenv("WEBGYM_BOOTSTRAP_SERVERS", f"127.0.0.1:{_closed_port()}")
    result = runner.invoke(app, ["topics", "list"])
    assert result.exit_code == 1
    assert "no Kafka broker answered" in result.output
    assert "webgym up" in result.output


def test_invalid_setting_is_named(monkeypatch):
    monkeypatch.setenv("WEBGYM_DEFAULT_PARTITIONS", "zero")
    result = runner.invoke(app, ["down"])
    assert result.exit_code == 1
    assert "WEBGYM_DEFAULT_PARTITIONS" in result.output and "'zero'" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) <= 2


@pytest.mark.parametrize(
    ("horizons", "said"),
    [
        ('{"eazy": 5}', "unknown difficulty 'eazy'"),
        ('{"easy": 0}', "at least 1 step"),
        ('{"hard": -3}', "at least 1 step"),
        ("{easy: 5", "give it as JSON"),
    ],
)
def test_bad_horizons_are_refused_in_one_line(monkeypatch, horizons, said):
    monkeypatch.setenv("WEBGYM_HORIZONS", horizons)
    result = runner.invoke(app, ["down"])
    assert result.exit_code == 1
    assert said in " ".join(result.output.split()) and "WEBGYM_HORIZONS" in result.output
    assert "Traceback" not in result.output


def test_partial_horizons_keep_the_other_defaults(monkeypatch):
    from streams.orchestrator import Rules

    monkeypatch.setenv("WEBGYM_HORIZONS", '{"easy": 2}')
    rules = Rules.from_settings(load_settings())
    assert (rules.horizon("easy"), rules.horizon("medium"), rules.horizon("hard")) == (2, 20, 30)


def test_a_half_set_minio_key_pair_is_refused(monkeypatch):
    monkeypatch.setenv("WEBGYM_MINIO_SECRET_KEY", "only-the-secret")
    result = runner.invoke(app, ["down"])
    assert result.exit_code == 1
    assert "WEBGYM_MINIO_ACCESS_KEY is not" in " ".join(result.output.split())
    assert "only-the-secret" not in result.output  # a secret is never echoed


@pytest.mark.parametrize("ratios", ["easy=x", "easy", "easy=0,hard=0"])
def test_bad_difficulty_ratios_are_refused_before_anything_starts(ratios):
    result = runner.invoke(app, ["run", "--ratios", ratios])
    assert result.exit_code == 1
    assert "--ratios" in result.output
    assert "easy=2" in result.output or "above 0" in result.output


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--task-set", "miniwob/train=x"], "not NAME=WEIGHT"),
        (["--task-set", "a=0"], "above 0"),
        (["--task-set", "miniwob/train", "--tasks", "miniwob"], "not both"),
        (["--tasks", "webgym"], "--task-set"),
    ],
)
def test_bad_task_sets_are_refused_before_anything_starts(arguments, message):
    result = runner.invoke(app, ["run", *arguments])
    assert result.exit_code == 1
    assert message in result.output


def test_an_unknown_task_set_is_an_error_naming_the_sets_that_exist(monkeypatch):
    import commands.run
    from tasks.sets import UnknownTaskSet

    def run_local(settings, options, **kwargs):
        raise UnknownTaskSet(["miniwob/tarin"], {"miniwob/train": 2200})

    monkeypatch.setattr(commands.run, "run_local", run_local)
    result = runner.invoke(app, ["run", "--task-set", "miniwob/tarin"])
    assert result.exit_code == 1
    message = " ".join(result.output.split())
    assert "unknown task set 'miniwob/tarin'; the tasks topic holds: miniwob/train (2200)" in (
        message
    )
    assert "Traceback" not in result.output


def test_decompose_writes_subtasks_that_load_back(tmp_path):
    import json

    from sites import generate_sites
    from sites.tasks import generate_tasks
    from tasks.webgym_format import load_tasks, write_webgym_jsonl

    source, out = tmp_path / "tasks.jsonl", tmp_path / "subtasks.jsonl"
    parents = generate_tasks(generate_sites(count=3))
    write_webgym_jsonl(source, parents)
    result = runner.invoke(app, ["tasks", "decompose", str(source), str(out)])
    assert result.exit_code == 0, result.output
    loaded = load_tasks(out)
    assert not loaded.errors and loaded.tasks
    ids = {t["task_id"] for t in parents}
    for subtask in loaded.tasks:
        assert subtask["parent_task_id"] in ids
        assert json.loads(subtask["extra_json"])["source"] == "practice-web"
    assert f"{len(loaded.tasks)} subtasks" in result.output


def test_rubrics_without_a_server_says_what_to_give(tmp_path):
    (tmp_path / "t.jsonl").write_text("")
    result = runner.invoke(app, ["tasks", "rubrics", str(tmp_path / "t.jsonl"), "out.jsonl"])
    assert result.exit_code == 1
    assert "--llm-base-url" in result.output and "--llm-model" in result.output
