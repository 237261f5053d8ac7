"""Held-out evaluation results (``analytics.evaluation``), the learning-curve outputs and the
experiment's bookkeeping: pure parts, no Kafka."""

from __future__ import annotations

import pytest

from analytics.evaluation import VersionTally, curve, task_family
from analytics.plots import write_learning_curve
from commands.experiment import LearnOptions, Timeline, result, staleness, trainable_steps
from commands.learning import parse_versions
from infra.settings import SettingsError
from infra.tensorboard import ScalarLog
from schemas.serde import default_catalog

CATALOG = default_catalog()


def scored(episode_id: str, task_id: str, reward: float, **fields) -> dict:
    return {
        "episode_id": episode_id,
        "task_id": task_id,
        "website": "miniwob.webgym.test",
        "reward": reward,
        "judge_error": None,
        "aborted": False,
        "purpose": "eval",
        "steps": [],
        **fields,
    }


def test_task_family_is_the_miniwob_page_or_the_website():
    assert task_family("miniwob-click-button-s1000003") == "click-button"
    assert task_family("experiments/x/heldout:miniwob-enter-text-s1000000") == "enter-text"
    assert task_family("shop-001-easy", "hazeloak-shop.webgym.test") == "hazeloak-shop.webgym.test"


def test_a_version_tally_counts_each_episode_once_with_intervals_per_task():
    tally = VersionTally("ev1", "pol", 3, "miniwob/heldout")
    first = tally.add(scored("ev1-v3-000000", "miniwob-click-button-s1000000", 1.0), 10)
    assert first["kind"] == "episode" and first["success"] is True
    assert tally.add(scored("ev1-v3-000000", "miniwob-click-button-s1000000", 0.0), 11) is None
    tally.add(scored("ev1-v3-000001", "miniwob-click-button-s1000001", 0.0), 12)
    tally.add(scored("ev1-v3-000002", "miniwob-focus-text-s1000000", 1.0), 13)
    version = tally.result(20, announced_ts=5, samples_seen=64)
    for record in (first, version):
        CATALOG.encode("eval_result", record)  # both are valid events
    assert (version["episodes"], version["successes"]) == (3, 2)
    assert 0 < version["ci_low"] < 2 / 3 < version["ci_high"] < 1
    assert [(r["task"], r["episodes"], r["successes"]) for r in version["by_task"]] == [
        ("click-button", 2, 1),
        ("focus-text", 1, 1),
    ]
    assert version["event_id"] == "ev1:v3" and version["samples_seen"] == 64


def test_the_curve_is_one_row_per_version_in_order_latest_result_winning():
    def version(v: int, successes: int, ts: int, eval_id: str = "e") -> dict:
        tally = VersionTally(eval_id, "pol", v, "s")
        for n in range(4):
            tally.add(scored(f"{eval_id}-v{v}-{n}", f"t{n}", 1.0 if n < successes else 0.0), ts)
        return tally.result(ts)

    rows = curve([version(2, 3, 5), version(0, 0, 1), version(2, 4, 9), version(1, 1, 3, "f")])
    assert [(r["policy_version"], r["success"]) for r in rows] == [(0, 0.0), (1, 0.25), (2, 1.0)]
    assert [r["policy_version"] for r in curve(rows, eval_id="e")] == [0, 2]


def test_versions_parse_or_are_refused_with_the_form_to_use():
    assert parse_versions("5,0,2,2") == [0, 2, 5]
    assert parse_versions("all") == "all" and parse_versions("") == ""
    with pytest.raises(SettingsError, match="0,2,5"):
        parse_versions("v1")
    with pytest.raises(SettingsError, match="0 or more"):
        parse_versions("-1")


def test_the_learning_curve_png_and_tensorboard_files_are_written(tmp_path):
    rows = [
        {"version": 0, "phase": "initial", "wall_s": 0.0, "heldout_success": 0.0,
         "ci_low": 0.0, "ci_high": 0.07},
        {"version": 1, "phase": "warm_start", "wall_s": 100.0, "heldout_success": 0.5,
         "ci_low": 0.37, "ci_high": 0.63},
    ]  # fmt: skip
    png = write_learning_curve(rows, tmp_path / "curve.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    log = ScalarLog(tmp_path / "tb")
    log.scalar("heldout/success", 0.5, 1)
    log.close()
    events = list((tmp_path / "tb").glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 0
    ScalarLog(None).scalar("x", 1.0, 0)  # without a directory: nothing, no error


def test_trainable_steps_count_only_training_successes():
    steps = [{"trainable": True}, {"trainable": False}, {"trainable": True}]
    records = [
        scored("a", "t", 1.0, purpose="train", steps=steps),
        scored("b", "t", 0.0, purpose="train", steps=steps),
        scored("c", "t", 1.0, purpose="eval", steps=steps),
    ]
    assert trainable_steps(records) == 2


def test_staleness_counts_versions_announced_past_the_one_that_served():
    announced = {1: {"ts": 100}, 2: {"ts": 200}, 3: {"ts": 300}}
    records = [
        scored("a", "t", 1.0, policy_versions=[1], ts=350),  # v3 was out: 2 behind
        scored("b", "t", 1.0, policy_versions=[2, 3], ts=310),  # fresh
        scored("c", "t", 1.0, policy_versions=[], ts=310),  # no weights: not counted
    ]
    assert staleness(records, announced) == {"episodes": 2, "median": 1.0, "max": 2}


def test_the_result_compares_phases_and_checks_the_warm_start_flattened():
    def row(version, phase, success, low, high):
        return {"version": version, "phase": phase, "heldout_success": success,
                "ci_low": low, "ci_high": high}  # fmt: skip

    versions = [
        row(0, "initial", 0.0, 0.0, 0.07),
        row(1, "warm_start", 0.4, 0.27, 0.54),
        row(2, "warm_start", 0.5, 0.37, 0.63),
        row(3, "on_policy", 0.7, 0.56, 0.81),
    ]
    tasks = [{"task_id": "h1", "task_set": "x/heldout"}, {"task_id": "t1", "task_set": "x/train"}]
    out = result(LearnOptions(), "exp", tasks, versions, {}, Timeline())
    assert out["tasks"] == ["h1"] and out["initial_success"] == 0.0
    assert out["best_warm_start_success"] == 0.5 and out["on_policy_gain_points"] == 20.0
    assert out["warm_start_flattened"] is True
