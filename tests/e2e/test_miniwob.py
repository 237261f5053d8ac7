"""MiniWoB++ through the whole pipeline: the package's pages served locally, the heuristic
marks-reading policy, rewards read from the pages' own signal."""

from __future__ import annotations

import uuid
from collections import defaultdict

from commands.local_run import RunOptions, run_local
from infra.log_reader import read_topic
from tasks.miniwob import JUDGE_NAME, MARKS_SOLVABLE


def test_twenty_miniwob_tasks_pass_with_rewards_from_the_pages(run_settings):
    options = RunOptions(
        episodes=len(MARKS_SOLVABLE),
        in_flight=4,
        policy="heuristic",
        task_set="miniwob",  # miniwob/train: one instance (seed 0) of each page here
        miniwob_seeds=1,
        sites=2,
        run_id=f"e2e-m{uuid.uuid4().hex[:6]}",
    )
    summary = run_local(run_settings, options, start_stack=False)
    scored = [
        e.record
        for e in read_topic(run_settings, "trajectories.scored")
        if e.record["episode_id"].startswith(summary.run_id)
    ]
    by_task = defaultdict(list)
    for record in scored:
        by_task[record["task_id"]].append(record)
    # Attempts spread evenly: every task ran exactly once.
    assert sorted(by_task) == sorted(f"miniwob-{name}-s0" for name in MARKS_SOLVABLE)
    for record in scored:
        signals = record["final_page_signals"]
        assert record["judge_name"] == JUDGE_NAME and record["judge_error"] is None
        page_says_done_right = signals.get("done") == "true" and float(signals["raw_reward"]) >= 1
        assert record["reward"] == (1.0 if page_says_done_right else 0.0), record
        assert signals.get("utterance")  # the page's own instruction reached the context
    passed = sorted(r["task_id"] for r in scored if r["reward"] == 1.0)
    assert len(passed) >= 20, passed
    successes = {
        e.record["episode_id"]
        for e in read_topic(run_settings, "trajectories.success")
        if e.record["episode_id"].startswith(summary.run_id)
    }
    assert successes == {r["episode_id"] for r in scored if r["reward"] == 1.0}
