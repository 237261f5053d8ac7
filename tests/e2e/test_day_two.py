"""Day two: what a user meets after the first run, on a stack that already holds other runs,
other task sets and a published policy version (the ``used_stack`` fixture).

Each test runs the commands as a user runs them (``python -m commands.main ...`` in a child process,
or Faust's own ``faust worker``) and checks what they print and what they leave on the stack.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from commands.children import Child, faust_argv, settings_env
from commands.local_run import RunOptions, RunSummary, run_local
from infra.log_reader import read_topic
from infra.minio_store import build_minio
from infra.producer import EventProducer
from infra.settings import Settings
from infra.weights import publish_weights
from tasks.publish import read_published_tasks
from tests.e2e.conftest import isolated_settings, webgym_cli

TRACEBACK = "Traceback (most recent call last)"


@dataclass(frozen=True)
class UsedStack:
    settings: Settings
    practice_run: RunSummary  # a practice-web run (scripted policy)
    miniwob_run: dict  # a MiniWoB++ run through `webgym run`, with the pages' port taken
    miniwob_output: str
    held_port: int
    policy_name: str  # v1 published


webgym = webgym_cli


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The command failed with one error message (after any progress lines) and no traceback;
    returns the message, unwrapped."""
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert TRACEBACK not in output, output
    lines = output.strip().splitlines()
    start = next((n for n, line in enumerate(lines) if line.startswith("error:")), None)
    assert start is not None, output
    assert len(lines) - start <= 3, output  # one message; rich wraps it at 200 columns
    return " ".join(" ".join(lines[start:]).split())


@contextlib.contextmanager
def listening_port() -> Iterator[int]:
    """A port held by a listening socket of this process (what `webgym sites serve &` does)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


@pytest.fixture(scope="module")
def used_stack(stack_settings: Settings, tmp_path_factory) -> Iterator[UsedStack]:
    with isolated_settings(stack_settings) as settings:
        # The practice run's workers are told WEBGYM_HORIZONS='{"easy": 3}' (medium and hard
        # keep their defaults).
        practice = run_local(
            settings.model_copy(update={"horizons": {"easy": 3}}),
            RunOptions(episodes=6, in_flight=3, sites=3, run_id=f"d2a-{uuid.uuid4().hex[:6]}"),
            start_stack=False,
        )
        out = tmp_path_factory.mktemp("day-two")
        with listening_port() as port:
            result = webgym(
                settings,
                "run", "--task-set", "miniwob", "--policy", "heuristic", "--episodes", "6",
                "--in-flight", "3", "--miniwob-seeds", "2", "--summary-json",
                str(out / "miniwob.json"),
                env={"WEBGYM_PRACTICE_WEB_ADDRESS": f"127.0.0.1:{port}"},
                timeout=600,
            )  # fmt: skip
            assert result.returncode == 0, result.stdout + result.stderr
        weights = out / "checkpoint"
        weights.mkdir()
        (weights / "model.safetensors").write_bytes(os.urandom(10_000))
        policy_name = f"day2-{uuid.uuid4().hex[:6]}"
        producer = EventProducer.connect(settings, "day-two")
        publish_weights(build_minio(settings), settings, producer, policy_name, 1, weights, "tiny")
        yield UsedStack(
            settings,
            practice,
            json.loads((out / "miniwob.json").read_text()),
            result.stdout + result.stderr,
            port,
            policy_name,
        )


# -- 1. settings read wrongly or silently --------------------------------------------------------


def test_invalid_horizons_json_is_one_line(used_stack):
    said = one_line_error(
        webgym(used_stack.settings, "topics", "list", env={"WEBGYM_HORIZONS": '{"easy": 5'})
    )
    assert "WEBGYM_HORIZONS" in said and "JSON" in said
    said = one_line_error(
        webgym(used_stack.settings, "topics", "list", env={"WEBGYM_HORIZONS": '{"eazy": 5}'})
    )
    assert "unknown difficulty 'eazy'" in said


def test_partial_horizons_keep_the_defaults_for_the_rest(used_stack):
    # The practice run was started with WEBGYM_HORIZONS='{"easy": 3}': its easy episodes got 3
    # steps, the others their defaults (not 3, the largest value given).
    horizons = {"easy": 3, "medium": 20, "hard": 30}
    run_id = used_stack.practice_run.run_id
    started = [
        e.record
        for e in read_topic(used_stack.settings, "episodes")
        if e.event_type
        and e.record["kind"] == "started"
        and e.record["episode_id"].startswith(run_id)
    ]
    tasks = {t["task_id"]: t for t in read_published_tasks(used_stack.settings)}
    difficulties = [tasks[record["task_id"]]["difficulty"] for record in started]
    assert len(started) == 6 and set(difficulties) != {"easy"}, difficulties
    for record, difficulty in zip(started, difficulties, strict=True):
        assert record["horizon"] == horizons[difficulty], (record, difficulty)


# -- 2. MinIO credentials ------------------------------------------------------------------------


@pytest.mark.parametrize("command", [("policy", "versions"), ("smoke",)])
def test_wrong_minio_credentials_are_one_line_naming_the_cause(used_stack, command):
    wrong = {"WEBGYM_MINIO_ACCESS_KEY": "nobody", "WEBGYM_MINIO_SECRET_KEY": "wrong-secret-1"}
    said = one_line_error(webgym(used_stack.settings, *command, env=wrong))
    assert "InvalidAccessKeyId" in said and "refused the credentials" in said
    assert "wrong-secret-1" not in said


def test_wrong_minio_credentials_stop_a_run_in_one_line(used_stack):
    wrong = {"WEBGYM_MINIO_ACCESS_KEY": "nobody", "WEBGYM_MINIO_SECRET_KEY": "wrong-secret-1"}
    said = one_line_error(webgym(used_stack.settings, "run", "--episodes", "2", env=wrong))
    assert "InvalidAccessKeyId" in said


def test_a_half_set_key_pair_and_a_wrong_endpoint_are_one_line(used_stack):
    said = one_line_error(
        webgym(used_stack.settings, "policy", "versions", env={"WEBGYM_MINIO_SECRET_KEY": "s"})
    )
    assert "WEBGYM_MINIO_SECRET_KEY is set but WEBGYM_MINIO_ACCESS_KEY is not" in said
    with listening_port() as port:  # something that is not MinIO... and then nothing at all
        pass
    said = one_line_error(
        webgym(
            used_stack.settings,
            "policy",
            "versions",
            env={"WEBGYM_MINIO_ENDPOINT": f"127.0.0.1:{port}"},
        )
    )
    assert f"no MinIO answered at http://127.0.0.1:{port}" in said
    assert "WEBGYM_MINIO_ENDPOINT" in said


# -- 3. partition counts -------------------------------------------------------------------------


def test_every_partitioned_process_refuses_other_partition_counts(used_stack):
    # The stack's topics have 4 partitions; these processes are told 2.
    two = {"WEBGYM_DEFAULT_PARTITIONS": "2"}
    for args in (("worker", "browser"), ("worker", "policy", "--backend", "heuristic"),
                 ("run", "--episodes", "2")):  # fmt: skip
        said = one_line_error(webgym(used_stack.settings, *args, env=two))
        assert "has 4 (this process expects 2)" in said, args
        assert "WEBGYM_DEFAULT_PARTITIONS=4" in said, args
    faust = subprocess.run(
        faust_argv(),
        env=settings_env(used_stack.settings) | two,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert faust.returncode == 1, faust.stdout + faust.stderr
    assert "has 4 (this process expects 2)" in faust.stderr


# -- 4. ratios -----------------------------------------------------------------------------------


def test_an_unknown_difficulty_in_ratios_is_refused(used_stack):
    said = one_line_error(
        webgym(used_stack.settings, "run", "--episodes", "2", "--ratios", "easy=2,extreme=1")
    )
    assert "'extreme' is not a difficulty" in said and "easy, medium, hard" in said


# -- 5. a taken port -----------------------------------------------------------------------------


def test_a_run_serves_its_pages_elsewhere_when_the_port_is_taken(used_stack):
    said = " ".join(used_stack.miniwob_output.split())
    assert f"port {used_stack.held_port} is taken by pid {os.getpid()}" in said
    assert TRACEBACK not in used_stack.miniwob_output
    run = used_stack.miniwob_run
    assert run["judged"] == 6 and run["successes"] >= 1  # the pages were served on the new port


# -- 6. rescore with a judge that does not apply -------------------------------------------------


def test_rescore_skips_trajectories_its_judge_cannot_score(used_stack, tmp_path):
    miniwob_run = used_stack.miniwob_run["run_id"]
    out = tmp_path / "verifier.json"
    result = webgym(
        used_stack.settings, "rescore", "--into", f"v-{uuid.uuid4().hex[:6]}", "--judge",
        "verifier", "--run", miniwob_run, "--json", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    figures = json.loads(out.read_text())
    assert figures["not_applicable"] == 6 and figures["rescored"] == 0
    assert figures["rewards_changed"] == 0 and figures["lost_success"] == 0
    assert "does not apply" in result.stdout

    # The auto judge re-scores everything; a rubric change would be named episode by episode.
    out = tmp_path / "auto.json"
    result = webgym(
        used_stack.settings, "rescore", "--into", f"a-{uuid.uuid4().hex[:6]}", "--run",
        used_stack.practice_run.run_id, "--json", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    figures = json.loads(out.read_text())
    assert figures["rescored"] == 6 and figures["not_applicable"] == 0
    assert figures["reward_changed_episodes"] == []  # the same verifier: nothing changed


# -- 7. rollback messages ------------------------------------------------------------------------


def test_rollback_says_what_is_actually_wrong(used_stack):
    name = used_stack.policy_name
    said = one_line_error(
        webgym(used_stack.settings, "policy", "rollback", "0", "--policy-name", name)
    )
    assert "is the base model" in said and "no files" in said
    said = one_line_error(
        webgym(used_stack.settings, "policy", "rollback", "99", "--policy-name", name)
    )
    assert "v99 of" in said and "does not exist" in said and "the latest is v1" in said
    said = one_line_error(
        webgym(used_stack.settings, "policy", "rollback", "1", "--policy-name", name)
    )
    assert "already the latest" in said


# -- 8 and 9. task files -------------------------------------------------------------------------

TASK = {
    "task_name": "Find the opening hours of the library.",
    "domain": "info",
    "subdomain": "hours",
    "difficulty": "easy",
    "evaluator_reference": [
        {"id": "hours", "description": "The hours", "facts": ["the hours are given"]}
    ],
}


def _task_file(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_split_honours_the_files_own_markers(used_stack, tmp_path):
    rows = [
        {**TASK, "task_id": "t1", "website": "library.example", "is_ood": True},
        {**TASK, "task_id": "t2", "website": "www.library.example"},
        {**TASK, "task_id": "t3", "website": "shop.example", "distribution": "test"},
        {**TASK, "task_id": "t4", "website": "news.example", "split": "train"},
        *({**TASK, "task_id": f"u{n}", "website": f"site{n}.example"} for n in range(6)),
    ]
    source = _task_file(tmp_path / "tasks.jsonl", rows)
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    result = webgym(used_stack.settings, "tasks", "split", str(source), "--train", str(train),
                    "--test", str(test), "--test-fraction", "0.5")  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    test_ids = {json.loads(line)["task_id"] for line in test.read_text().splitlines()}
    train_ids = {json.loads(line)["task_id"] for line in train.read_text().splitlines()}
    assert {"t1", "t2", "t3"} <= test_ids and "t4" in train_ids
    assert "3 tasks carry the file's own split marker" in " ".join(result.stdout.split())


def test_tasks_load_exits_non_zero_when_lines_were_refused(used_stack, tmp_path):
    task_set = f"day2-load-{uuid.uuid4().hex[:6]}"
    rows = [{**TASK, "task_id": f"{task_set}-good", "website": "library.example"}]
    rows += [{**TASK, "task_id": f"bad{n}", "website": "x.example", "difficulty": "extreme"}
             for n in range(7)]  # fmt: skip
    source = _task_file(tmp_path / "mostly-bad.jsonl", rows)
    result = webgym(used_stack.settings, "tasks", "load", str(source), "--task-set", task_set)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "7 lines bad, more than --max-bad 0" in " ".join(result.stderr.split())
    published = [
        t for t in read_published_tasks(used_stack.settings) if t["task_id"] == rows[0]["task_id"]
    ]
    assert published and published[0]["task_set"] == task_set  # the good line was published
    accepted = webgym(used_stack.settings, "tasks", "load", str(source), "--task-set", task_set,
                      "--max-bad", "7")  # fmt: skip
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr


# -- 10 and 11. views that agree, readably -------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def dashboard(used_stack, tmp_path_factory) -> Iterator[str]:
    port = _free_port()
    child = Child.start(
        "dashboard",
        [sys.executable, "-m", "commands.main", "dashboard", "--port", str(port)],
        settings_env(used_stack.settings),
        tmp_path_factory.mktemp("dashboard"),
    )
    try:
        child.wait_for("dashboard of", 60)
        yield f"http://127.0.0.1:{port}"
    finally:
        child.stop()


def _dashboard_state(url: str) -> dict:
    deadline = time.monotonic() + 60
    while True:
        with urllib.request.urlopen(f"{url}/api/state", timeout=10) as response:
            state = json.loads(response.read())
        if state["caught_up"] and state["totals"]["judged"] >= 12 or time.monotonic() > deadline:
            return state
        time.sleep(0.5)


def test_every_view_counts_steps_and_rates_the_same_way(used_stack, dashboard, tmp_path):
    settings = used_stack.settings
    listed = webgym(settings, "replay", "--list", "--json", "--limit", "0")
    assert listed.returncode == 0, listed.stderr
    rows = {row["episode_id"]: row for row in map(json.loads, listed.stdout.splitlines())}
    replies: dict[str, int] = {}
    for event in read_topic(settings, "inferences"):
        if event.event_type:
            replies[event.record["episode_id"]] = replies.get(event.record["episode_id"], 0) + 1
    state = _dashboard_state(dashboard)
    recent = {row["episode_id"]: row for row in state["recent"]}
    assert len(rows) == 12 and set(recent) <= set(rows)
    for episode_id, row in rows.items():
        assert row["steps"] == replies[episode_id], episode_id  # a step is a reply
        if episode_id in recent:
            assert recent[episode_id]["steps"] == row["steps"], episode_id

    stats = webgym(settings, "stats", "--json", str(tmp_path / "stats.json"))
    assert stats.returncode == 0, stats.stderr
    figures = json.loads((tmp_path / "stats.json").read_text())
    runs = {run["run_id"]: run for run in figures["throughput"]["runs"]}
    assert set(runs) == {used_stack.practice_run.run_id, used_stack.miniwob_run["run_id"]}
    # Each run has its own window, and the rates leave out the idle time between the runs.
    first, second = sorted(runs.values(), key=lambda run: run["first_ts"])
    assert second["first_ts"] > first["last_ts"]
    span_s = (second["last_ts"] - first["first_ts"]) / 1000
    window_s = first["seconds"] + second["seconds"]
    assert figures["throughput"]["window_s"] == pytest.approx(window_s)
    assert window_s < span_s
    steps = sum(replies.values())
    assert figures["throughput"]["steps_per_s"] == pytest.approx(steps / window_s)
    # The dashboard shows the same figures, with their definitions.
    throughput = state["throughput"]
    assert throughput["steps_per_s"] == pytest.approx(figures["throughput"]["steps_per_s"])
    assert throughput["episodes_per_hour"] == pytest.approx(
        figures["throughput"]["episodes_per_hour"]
    )
    assert "idle time between runs left out" in throughput["definitions"]["window"]


def test_replay_list_fits_80_columns_without_cutting_a_cell(used_stack):
    result = webgym(used_stack.settings, "replay", "--list", "--limit", "0", env={"COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    assert "…" not in result.stdout, result.stdout
    for header in ("episode", "state", "steps", "reward"):
        assert header in lines[1], lines[1]
    ids = {
        e.record["episode_id"] for e in read_topic(used_stack.settings, "episodes") if e.event_type
    }
    assert all(episode_id in result.stdout for episode_id in ids)


def test_the_dashboards_minute_labels_never_overlap(used_stack, dashboard):
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(used_stack.settings.chromium_path))
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(dashboard)
        page.wait_for_function(
            "document.querySelector('#throughput rect') !== null", timeout=30_000
        )
        # Thirty minutes of bars, as a long run shows them.
        boxes = page.evaluate(
            """() => {
              const start = Date.UTC(2026, 11, 2, 6, 20);
              const bars = Array.from({length: 30}, (_, i) =>
                ({name: hhmm(start + i * 60000), value: 100 + i}));
              const svg = document.getElementById("throughput");
              barChart(svg, bars, (b) => b.value);
              return Array.from(svg.querySelectorAll("text")).map((t) => {
                const b = t.getBBox();
                return {text: t.textContent, x: b.x, y: b.y, w: b.width, h: b.height};
              });
            }"""
        )
        browser.close()
    names = [b for b in boxes if ":" in b["text"]]
    assert names and all(len(b["text"]) == 5 for b in names), names  # HH:MM
    assert "06:49" in {b["text"] for b in names}  # the newest minute is labelled
    for row in (names, [b for b in boxes if ":" not in b["text"]]):
        ordered = sorted(row, key=lambda b: b["x"])
        for left, right in zip(ordered, ordered[1:], strict=False):
            overlap_y = left["y"] < right["y"] + right["h"] and right["y"] < left["y"] + left["h"]
            assert not (overlap_y and left["x"] + left["w"] > right["x"]), (left, right)
