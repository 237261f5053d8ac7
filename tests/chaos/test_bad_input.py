"""Bad input to every command and to the task loader: a clear error, a non-zero exit, nothing
written.

The table below has, for every command of ``webgym`` (and of its sub-apps), at least one input a
user gets wrong in real life: a bad option value, an unknown id, a missing or malformed file, a
number out of range, an unreadable ``--since``, an unknown backend, a taken port, a broken
setting. Each row says which words the error must contain: what is wrong, and what to do next.

"Nothing written", checked around every row: the end offset of every partition of every topic
of the deployment's own topic prefix (and the set of those topics) is unchanged, the policies
bucket holds the same objects, and the working directory (where every file a command writes
goes, ``--out``/``--json`` targets included) holds the same files.

Rows run in-process with Typer's runner; rows whose command would keep running or start
processes run as ``python -m commands.main`` with a timeout. Commands that touch the local stack
(``up``, ``down``, ``smoke``, ``run``, ``bench``) only ever get input that fails before they do
anything; as a safety net they also get a state dir of their own.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from commands.main import app
from infra.consumer import build_consumer
from infra.minio_store import build_minio
from infra.settings import Settings
from infra.topic_admin import prefix_topics
from sites import generate_sites
from sites.tasks import generate_tasks
from tasks.webgym_format import write_webgym_jsonl
from tests.chaos.conftest import command_tree, partition_watermarks
from tests.e2e.conftest import isolated_settings

REPO = Path(__file__).resolve().parents[2]
GOOD = {
    "task_id": "bad-input-1",
    "task_name": "Find the price of the cheapest kettle.",
    "website": "kettles.example.com",
    "difficulty": "easy",
    "evaluator_reference": [{"id": "g1", "description": "a price", "facts": ["a price"]}],
}


# -- what a command may have written ----------------------------------------------------------


@dataclass(frozen=True)
class Written:
    topics: dict[tuple[str, int], int]  # (topic, partition) -> end offset
    objects: frozenset[str]
    files: frozenset[str]

    def changes(self, after: Written) -> list[str]:
        found = []
        for where in sorted(set(self.topics) | set(after.topics)):
            if self.topics.get(where) != after.topics.get(where):
                found.append(
                    f"{where[0]}[{where[1]}]: {self.topics.get(where)} -> {after.topics.get(where)}"
                )
        found += [f"new object {o}" for o in sorted(after.objects - self.objects)]
        found += [f"new file {f}" for f in sorted(after.files - self.files)]
        found += [f"file gone {f}" for f in sorted(self.files - after.files)]
        return found


def written(settings: Settings, directory: Path) -> Written:
    names = prefix_topics(settings)
    consumer = build_consumer(settings, f"bad-input-{uuid.uuid4().hex[:8]}", "bad-input")
    try:
        ends = {where: high for where, (_, high) in partition_watermarks(consumer, names).items()}
    finally:
        consumer.close()
    minio = build_minio(settings)
    objects = frozenset(
        o.object_name for o in minio.list_objects(settings.policies_bucket, recursive=True)
    )
    files = frozenset(
        f"{p.relative_to(directory)}:{p.stat().st_size}"
        for p in directory.rglob("*")
        if p.is_file()
    )
    return Written(ends, objects, files)


# -- the table ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bad:
    """One bad input: the command line, the words its error must contain, how to run it."""

    args: tuple[str, ...]
    says: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    process: bool = False  # run as a subprocess (it would otherwise block or start things)
    exit_code: int | None = None  # None: any non-zero

    @property
    def name(self) -> str:
        return " ".join(self.args) + "".join(f" [{k}={v}]" for k, v in self.env.items())


def _taken_port() -> socket.socket:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    return held


HELD = _taken_port()  # a port something else listens on, for the whole module
TAKEN = str(HELD.getsockname()[1])

TABLE: list[Bad] = [
    # The app itself.
    Bad(("launch",), ("No such command 'launch'",), exit_code=2),
    # Local stack: settings are read first, so a broken one stops everything before it starts.
    Bad(
        ("up",),
        ("WEBGYM_DEFAULT_PARTITIONS", "greater than or equal to 1"),
        env={"WEBGYM_DEFAULT_PARTITIONS": "0"},
    ),
    Bad(("up", "--topics", "maybe"), ("unexpected extra argument",), exit_code=2),
    Bad(("down",), ("WEBGYM_MINIO_SECURE", "perhaps"), env={"WEBGYM_MINIO_SECURE": "perhaps"}),
    Bad(("status",), ("topic prefix",), env={"WEBGYM_TOPIC_PREFIX": "my topics!"}),
    Bad(("smoke",), ("WEBGYM_BROWSER_JPEG_QUALITY",), env={"WEBGYM_BROWSER_JPEG_QUALITY": "0"}),
    # The main job.
    Bad(("run", "--tasks", "webarena"), ("--tasks", "practice-web or miniwob")),
    Bad(("run", "--episodes", "0"), ("--episodes", "greater than or equal to 1"), exit_code=2),
    Bad(("run", "--error-rate", "1.5"), ("--error-rate",), exit_code=2),
    Bad(("run", "--ratios", "easy=lots"), ("--ratios", "easy=2")),
    Bad(("run", "--policy", "gpt-9"), ("gpt-9", "scripted")),
    Bad(("run", "--learner-model", "no-such-checkpoint"), ("no-such-checkpoint", "model tiny")),
    # Topics.
    Bad(
        ("topics", "describe", "no-such-topic"), ("no-such-topic", "does not exist", "topics list")
    ),
    Bad(("topics", "prune", "--match", " "), ("--match", "empty prefix", "bench-"), exit_code=2),
    Bad(
        ("topics", "list"),
        ("no Kafka broker answered", "webgym up"),
        env={"WEBGYM_BOOTSTRAP_SERVERS": f"127.0.0.1:{TAKEN}"},
    ),
    Bad(("topics", "create", "extra"), ("unexpected extra argument",), exit_code=2),
    # Workers.
    Bad(("worker", "browser", "--concurrency", "0"), ("--concurrency",), exit_code=2),
    Bad(
        ("worker", "browser"),
        ("Chromium not found", "WEBGYM_CHROMIUM_PATH"),
        env={"WEBGYM_CHROMIUM_PATH": "/no/such/chromium"},
        process=True,
    ),
    Bad(("worker", "policy", "--backend", "gpt-9"), ("unknown backend 'gpt-9'", "scripted")),
    Bad(("worker", "policy", "--backend", "local"), ("--model is required",)),
    Bad(("worker", "policy", "--backend", "openai", "--model", "m"), ("--base-url",)),
    # Models, the learner, policy versions.
    Bad(("model", "tiny", "existing-file.txt"), ("existing-file.txt", "not a directory")),
    Bad(("learner",), ("Missing option '--model'",), exit_code=2),
    Bad(
        ("learner", "--model", "no-such-checkpoint"),
        ("no-such-checkpoint", "model tiny"),
        process=True,
    ),
    Bad(("learner", "--model", "x", "--lr", "-1"), ("--lr",), exit_code=2),
    Bad(("policy", "versions", "--policy-name", "no-such-policy"), ("no-such-policy",)),
    Bad(("policy", "rollback", "3", "--policy-name", "no-such-policy"), ("no-such-policy",)),
    Bad(("policy", "rollback", "latest"), ("'version'", "integer"), exit_code=2),
    Bad(("bench", "rollout", "--in-flight", "0"), ("--in-flight",), exit_code=2),
    Bad(("bench", "rollout", "--seeds", "zero"), ("--seeds", "'zero'", "0,7"), exit_code=2),
    # Evaluation and the learning experiment.
    Bad(("eval", "--model", "x"), ("--versions 0,2,5", "--follow")),
    Bad(
        ("eval", "--versions", "0", "--model", "no-such-checkpoint"),
        ("no-such-checkpoint", "model tiny"),
    ),
    Bad(("eval", "--versions", "v1", "--model", "x"), ("--versions 'v1'", "0,2,5")),
    Bad(("eval", "--versions", "1"), ("--model DIR", "--attach")),
    Bad(("eval", "--versions", "1", "--attach", "--model", "x"), ("--attach", "drop --model")),
    Bad(
        ("eval", "--versions", "3", "--attach", "--policy-name", "no-such-policy"),
        ("no-such-policy", "no announced v3", "policy versions"),
    ),
    Bad(("eval", "--versions", "0", "--attach", "--task-set", "no/such/set"), ("no/such/set",)),
    Bad(
        ("eval", "--versions", "0", "--model", "x", "--per-task", "0"), ("--per-task",), exit_code=2
    ),
    Bad(("experiment", "learn", "--pages", "click-nothing"), ("click-nothing", "tasks miniwob")),
    Bad(
        ("experiment", "learn", "--warm-start-episodes", "0"),
        ("--warm-start-episodes",),
        exit_code=2,
    ),
    # Views of the log.
    Bad(("replay", "no-such-episode"), ("no-such-episode", "webgym replay --list")),
    Bad(("replay",), ("name an episode", "--list")),
    Bad(("replay", "--list", "--since", "yesterday"), ("--since 'yesterday'", "10m, 2h")),
    Bad(("replay", "--list", "--reward", "lots"), ("reward filter 'lots'", ">=0.5")),
    Bad(("rescore", "--into", "Judge V2"), ("--into 'Judge V2'", "judge-v2")),
    Bad(("rescore", "--into", "v2", "--judge", "oracle"), ("oracle", "verifier")),
    Bad(("rescore", "--into", "v2", "--run", "no-such-run"), ("no-such-run",)),
    Bad(("rescore", "--into", "v2", "--since", "soon"), ("--since 'soon'",)),
    Bad(("stats", "--since", "5 parsecs"), ("--since '5 parsecs'", "10m, 2h")),
    Bad(("stats", "--since", "2999-01-01"), ("in the future",)),
    Bad(("stats", "--metrics-port", "9109"), ("--metrics-port", "--follow")),
    Bad(("stats", "--run", "no-such-run"), ("no-such-run",)),
    Bad(("stats", "--json", "figures.json", "--run", "no-such-run"), ("no-such-run",)),
    Bad(("dashboard", "--since", "tomorrow"), ("--since 'tomorrow'",)),
    Bad(("dashboard", "--port", TAKEN), (TAKEN, "--port")),
    Bad(("check", "--run", "no-such-run"), ("no-such-run",)),
    Bad(("check", "--json", "report.json", "--run", "no-such-run"), ("no-such-run",)),
    # The practice web.
    Bad(("sites", "serve", "--port", "70000"), ("--port",), exit_code=2),
    Bad(("sites", "serve", "--port", TAKEN), ("cannot listen", "--port")),
    Bad(("sites", "list", "--count", "0"), ("--count",), exit_code=2),
    # Task files.
    Bad(("tasks", "load", "no-such-file.jsonl"), ("no-such-file.jsonl", "no such file")),
    Bad(("tasks", "load", "tasks.csv"), ("unknown task file format", ".jsonl")),
    Bad(("tasks", "load", "all-bad.jsonl"), ("all-bad.jsonl", "nothing was published")),
    Bad(("tasks", "load", "--strict", "broken.jsonl"), ("broken.jsonl:2", "nothing was published")),
    Bad(("tasks", "load", "empty.jsonl"), ("empty.jsonl", "no task")),
    Bad(("tasks", "load", "not-gzip.jsonl.gz"), ("not-gzip.jsonl.gz",)),
    Bad(("tasks", "stats", "no-such-file.jsonl"), ("no-such-file.jsonl", "no such file")),
    Bad(("tasks", "sets"), ("topic prefix", "WEBGYM_"), env={"WEBGYM_TOPIC_PREFIX": "my topics!"}),
    Bad(("tasks", "miniwob", "--pages", "nope"), ("no MiniWoB++ task 'nope'", "known:")),
    Bad(("tasks", "practice-web", "--sites", "0"), ("--sites",), exit_code=2),
    Bad(("episodes", "start", "--task-set", "no-such/set"), ("unknown task set", "webgym tasks")),
    Bad(("episodes", "start", "--task-set", "a/b", "--wait"), ("give --episodes as well",)),
    Bad(("episodes", "start", "--task-set", "a=lots"), ("a=lots", "NAME=WEIGHT")),
    Bad(("episodes", "stop"), ("Missing argument",), exit_code=2),
    Bad(
        ("tasks", "split", "good.jsonl", "--train", "good.jsonl", "--test", "test.jsonl"),
        ("three different files",),
    ),
    Bad(
        (
            "tasks",
            "split",
            "good.jsonl",
            "--train",
            "a.jsonl",
            "--test",
            "b.jsonl",
            "--test-fraction",
            "1.5",
        ),
        ("--test-fraction",),
        exit_code=2,
    ),  # fmt: skip
    Bad(("tasks", "check-split", "good.jsonl", "no-such-file.jsonl"), ("no-such-file.jsonl",)),
    Bad(("tasks", "decompose", "no-such-file.jsonl", "out.jsonl"), ("no-such-file.jsonl",)),
    Bad(("tasks", "rubrics", "good.jsonl", "out.jsonl"), ("--llm-base-url", "--llm-model")),
]


def _files(directory: Path) -> None:
    """The files the table's rows name: good, broken, empty and not what they claim to be."""
    write_webgym_jsonl(directory / "good.jsonl", generate_tasks(generate_sites(count=2)))
    (directory / "existing-file.txt").write_text("not a directory\n")
    (directory / "tasks.csv").write_text("task_id,task_name\n1,x\n")
    (directory / "empty.jsonl").write_text("\n")
    (directory / "not-gzip.jsonl.gz").write_text(json.dumps(GOOD) + "\n")
    (directory / "all-bad.jsonl").write_text(
        json.dumps({**GOOD, "difficulty": "impossible"}) + "\n{not json\n"
    )
    (directory / "broken.jsonl").write_text(
        "\n".join(
            [
                json.dumps(GOOD),
                "{not json",
                json.dumps({**GOOD, "task_id": "bad-input-3", "difficulty": "impossible"}),
                json.dumps({k: v for k, v in GOOD.items() if k != "task_name"} | {"task_id": "4"}),
                json.dumps({**GOOD, "task_id": "bad-input-5", "start_url": "ftp://x.example/"}),
            ]
        )
        + "\n"
    )


# -- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def deployment(stack_settings: Settings) -> Iterator[Settings]:
    """A topic prefix and policies bucket of this module's own, topics created."""
    with isolated_settings(stack_settings) as settings:
        yield settings


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    _files(tmp_path)
    return tmp_path


def _env(settings: Settings, workdir: Path, bad: Bad) -> dict[str, str]:
    env = {
        "WEBGYM_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "WEBGYM_TOPIC_PREFIX": settings.topic_prefix,
        "WEBGYM_DEFAULT_PARTITIONS": str(settings.default_partitions),
        "WEBGYM_POLICIES_BUCKET": settings.policies_bucket,
        "WEBGYM_PRACTICE_WEB_ADDRESS": "127.0.0.1:0",
        "COLUMNS": "200",  # messages on one line each
    }
    if bad.args[0] in ("up", "down", "smoke", "run", "bench"):
        # Safety net: were the input ever accepted, no process of the shared stack is touched.
        env["WEBGYM_STATE_DIR"] = str(workdir / ".state")
    env.update(bad.env)
    return env


def _invoke(bad: Bad, env: dict[str, str], workdir: Path) -> tuple[int, str]:
    if bad.process:
        try:
            done = subprocess.run(
                [sys.executable, "-m", "commands.main", *bad.args],
                env={**os.environ, **env},
                cwd=workdir,
                capture_output=True,
                text=True,
                timeout=180,
            )
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"`webgym {bad.name}` kept running: {exc.output!r}") from None
        return done.returncode, done.stdout + done.stderr
    result = CliRunner().invoke(app, list(bad.args), env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(
            f"`webgym {bad.name}` crashed instead of saying what is wrong:\n{result.output}"
        ) from result.exception
    return result.exit_code, result.output


@pytest.mark.parametrize("bad", TABLE, ids=lambda bad: bad.name)
def test_bad_input_is_a_clear_error_and_writes_nothing(bad: Bad, deployment, workdir):
    env = _env(deployment, workdir, bad)
    before = written(deployment, workdir)
    code, output = _invoke(bad, env, workdir)
    after = written(deployment, workdir)
    said = " ".join(output.split())
    assert code != 0, f"`webgym {bad.name}` exited 0:\n{output}"
    if bad.exit_code is not None:
        assert code == bad.exit_code, output
    for words in bad.says:
        assert words in said, f"`webgym {bad.name}` does not say {words!r}:\n{output}"
    assert "Traceback" not in output, output
    assert not before.changes(after), f"`webgym {bad.name}` wrote: {before.changes(after)}"


def test_the_table_covers_every_command():
    root = typer.main.get_command(app)

    leaves = [path for path, group in command_tree(root) if not group]
    assert len(leaves) >= 30, leaves  # the walk reached every group's commands
    missing = [
        " ".join(leaf) for leaf in leaves if not any(bad.args[: len(leaf)] == leaf for bad in TABLE)
    ]
    assert not missing, f"commands without a bad-input row: {missing}"


def test_a_broken_task_file_names_every_bad_line_and_field(deployment, workdir):
    env = _env(deployment, workdir, Bad(("tasks",), ()))
    before = written(deployment, workdir)
    result = CliRunner().invoke(app, ["tasks", "load", "--strict", "broken.jsonl"], env=env)
    after = written(deployment, workdir)
    said = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    expected = {
        2: ("-", "not valid JSON"),
        3: ("difficulty", "'impossible' is not easy, medium, hard or 1-3"),
        4: ("task_name", "missing"),
        5: ("start_url", "http"),
    }
    for line, (column, message) in expected.items():
        row = next((r for r in result.output.splitlines() if f"broken.jsonl:{line} " in r), None)
        assert row is not None, f"line {line} is not named:\n{result.output}"
        assert column in row and message in " ".join(row.split()), row
    assert "broken.jsonl:1 " not in result.output  # the good line is not blamed
    assert "4 of 5 lines bad" in said and "nothing was published" in said
    assert not before.changes(after), before.changes(after)
