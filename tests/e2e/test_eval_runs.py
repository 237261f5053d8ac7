"""Evaluation episodes never reach the learner's input: an eval run samples on the held-out split
while a training run samples on the train split of the same stack, with the same (scripted, always
right) policy. Both runs' episodes succeed; only the training run's reach
``webgym.trajectories.success``."""

from __future__ import annotations

import time
import uuid

from commands.local_run import RunFollower, RunOptions, run_local
from infra.log_reader import read_topic
from infra.producer import now_ms
from streams.targets import start_sampling

TRAIN_SET, HELDOUT_SET = "practice-web/seed-0/train", "practice-web/seed-0/test"
TRAIN_EPISODES, EVAL_EPISODES = 6, 3


def of_run(settings, suffix: str, run_id: str) -> list[dict]:
    """The records of ``settings.topic(suffix)`` for the episodes of ``run_id``, one per event id
    (delivery is at least once)."""
    records = {event.record["event_id"]: event.record for event in read_topic(settings, suffix)}
    return [r for r in records.values() if r["episode_id"].startswith(f"{run_id}-")]


def test_an_eval_runs_successes_never_reach_the_success_stream(run_settings):
    suffix = uuid.uuid4().hex[:6]
    train_run, eval_run = f"e2e-tr{suffix}", f"e2e-ev{suffix}"
    followers: list[RunFollower] = []

    def evaluate_alongside(summary, children) -> None:
        if not followers:
            # Once the training run is under way, the eval run samples on the same stack.
            followers.append(RunFollower(run_settings, eval_run, now_ms() - 1000))
            start_sampling(
                run_settings,
                eval_run,
                HELDOUT_SET,
                in_flight=2,
                max_episodes=EVAL_EPISODES,
                purpose="eval",
                phase="heldout",
            )
        if summary.judged >= TRAIN_EPISODES and summary.ended >= TRAIN_EPISODES:
            settle(followers[0], train_run)  # the workers stop when this returns

    def settle(eval_follower: RunFollower, train_run: str) -> None:
        """Wait until every eval episode is judged and every training success is on the
        success stream, then a little longer for the filter to have read every score."""
        deadline = time.monotonic() + 180
        while eval_follower.summary.judged < EVAL_EPISODES and time.monotonic() < deadline:
            eval_follower.poll(0.5)
        while time.monotonic() < deadline:
            if len(of_run(run_settings, "trajectories.success", train_run)) >= TRAIN_EPISODES:
                break
            time.sleep(1)
        time.sleep(3)

    options = RunOptions(
        task_set=TRAIN_SET,
        episodes=TRAIN_EPISODES,
        in_flight=2,
        sites=10,
        error_rate=0.0,
        run_id=train_run,
    )
    try:
        summary = run_local(
            run_settings, options, start_stack=False, on_progress=evaluate_alongside
        )
    finally:
        for follower in followers:
            follower.close()
    assert summary.judged == TRAIN_EPISODES and summary.successes == TRAIN_EPISODES

    started = of_run(run_settings, "episodes", eval_run)
    started = [r for r in started if r["kind"] == "started"]
    assert len(started) == EVAL_EPISODES
    assert {(r["purpose"], r["phase"]) for r in started} == {("eval", "heldout")}
    requests = of_run(run_settings, "ops.infer", eval_run)
    assert requests and {r["purpose"] for r in requests} == {"eval"}
    scored = of_run(run_settings, "trajectories.scored", eval_run)
    assert len(scored) == EVAL_EPISODES and {r["purpose"] for r in scored} == {"eval"}
    assert any(r["reward"] >= 1.0 for r in scored), "no eval episode succeeded: nothing proven"

    assert of_run(run_settings, "trajectories.success", eval_run) == []
    trained = of_run(run_settings, "trajectories.success", train_run)
    assert len(trained) == TRAIN_EPISODES and {r["purpose"] for r in trained} == {"train"}
