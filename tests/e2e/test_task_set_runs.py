"""Runs on one stack never cross task sets: two runs sampling at once (the practice web's train
and test splits), then a third run on MiniWoB++ instances on the same topics, which by then hold
every practice-web task. Every episode's task belongs to its own run's set."""

from __future__ import annotations

import uuid

import pytest

from commands.children import settings_env
from commands.local_run import RunOptions, run_local
from infra.log_reader import read_topic
from streams.targets import start_sampling
from tasks.publish import read_published_tasks
from tasks.sets import UnknownTaskSet, is_member


def started_by_run(settings, run_ids: list[str]) -> dict[str, list[str]]:
    """The task ids of each run's ``started`` episodes, from the log."""
    started: dict[str, list[str]] = {run_id: [] for run_id in run_ids}
    for event in read_topic(settings, "episodes"):
        record = event.record
        if record["kind"] != "started":
            continue
        for run_id in run_ids:
            if record["episode_id"].startswith(f"{run_id}-"):
                started[run_id].append(record["task_id"])
    return started


def test_runs_with_different_sets_never_cross(run_settings):
    suffix = uuid.uuid4().hex[:6]
    train_run, test_run, miniwob_run = f"e2e-tr{suffix}", f"e2e-te{suffix}", f"e2e-mw{suffix}"
    test_set = "practice-web/seed-0/test"

    def start_the_second_run(summary, children) -> None:
        # Once the first run is under way, a second run samples on the same stack at once.
        if not second_started:
            start_sampling(run_settings, test_run, test_set, in_flight=2, max_episodes=4)
            second_started.append(True)

    second_started: list[bool] = []
    first = RunOptions(
        task_set="practice-web/seed-0/train",
        episodes=10,
        in_flight=2,
        sites=10,
        error_rate=0.0,
        run_id=train_run,
    )
    summary = run_local(run_settings, first, start_stack=False, on_progress=start_the_second_run)
    assert summary.judged == 10 and summary.successes == 10

    third = RunOptions(
        task_set="miniwob/train",
        miniwob_pages=("click-button", "click-link", "focus-text"),
        miniwob_seeds=2,
        policy="heuristic",
        episodes=4,
        in_flight=2,
        sites=10,
        run_id=miniwob_run,
    )
    run_local(run_settings, third, start_stack=False)

    tasks = {task["task_id"]: task for task in read_published_tasks(run_settings)}
    started = started_by_run(run_settings, [train_run, test_run, miniwob_run])
    expected = {
        train_run: "practice-web/seed-0/train",
        test_run: test_set,
        miniwob_run: "miniwob/train",
    }
    assert len(started[train_run]) == 10
    assert started[test_run], "the second run started nothing while the first ran"
    assert len(started[miniwob_run]) == 4
    for run_id, name in expected.items():
        outside = [t for t in started[run_id] if not is_member(tasks[t], name)]
        assert outside == [], f"{run_id} drew tasks outside {name}: {outside}"
    # The topic held tasks of every set the whole time.
    assert any(is_member(task, test_set) for task in tasks.values())
    assert any(is_member(task, "miniwob/train") for task in tasks.values())

    with pytest.raises(UnknownTaskSet, match="practice-web/seed-0/test"):
        start_sampling(run_settings, "e2e-nothing", "miniwob/tarin", in_flight=1)


def test_webgym_run_refuses_an_unknown_set_naming_those_that_exist(run_settings):
    import subprocess
    import sys

    # The test's settings whole: its topics have 4 partitions, which a process told 8 refuses.
    env = {**settings_env(run_settings), "COLUMNS": "200"}
    argv = [
        sys.executable,
        "-m",
        "commands.main",
        "run",
        "--task-set",
        "miniwob/heldout=1,nope/x=2",
    ]
    completed = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 1, completed.stdout + completed.stderr
    error = " ".join(completed.stderr.split())  # one message (the console wraps it at 80)
    assert error.startswith("error: unknown task set 'nope/x'; the tasks topic holds:"), error
    assert "miniwob/heldout (2200)" in error and "Traceback" not in error  # published: it exists
