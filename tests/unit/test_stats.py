"""`webgym stats`' figures from hand-made events: counts, rates, percentiles, hops, lag."""

from __future__ import annotations

import datetime
import io
import json
import random

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from rich.console import Console

from analytics.errors import AnalyticsError
from analytics.plots import CHARTS, write_plots
from analytics.prometheus import StatsCollector
from analytics.stats import RunStats, distribution, percentile, timeline, wilson_interval
from analytics.stats_table import render
from commands.stats import parse_since

RUN = "runA"


def task(task_id, website, difficulty, domain):
    return (
        "tasks",
        {
            "event_id": f"task:{task_id}",
            "ts": 0,
            "task_id": task_id,
            "website": website,
            "difficulty": difficulty,
            "domain": domain,
        },
    )


def episode(
    episode_id,
    task_id,
    t0,
    actions,
    reward=1.0,
    success=True,
    repeated=(),
    policy_version=0,
    judge_ms=50,
):
    """Events of one episode starting at ``t0``: navigate, then one step per entry of
    ``actions`` (an action kind, or None for an unparseable reply), ending on the last one
    (``answer``). Each hand-over takes a fixed time so hops are known exactly:
    navigate 1000, observation->infer_request 10, policy 100 (model 40), inference->act_op 5,
    act 500, answer->end 7, end->scored ``judge_ms``."""
    events = [
        ("episodes", _e(episode_id, "started", 0, t0, kind="started", task_id=task_id)),
        ("ops.navigate", _e(episode_id, "navigate", 0, t0 + 3, task_id=task_id)),
    ]
    t = t0 + 3 + 1000
    events.append(("observations", _observation(episode_id, 0, t, navigate=900.0)))
    steps = []
    for step, kind in enumerate(actions, start=1):
        t += 10 if events[-1][0] == "observations" else 20  # a re-ask after a parse error
        events.append(("ops.infer", _e(episode_id, "infer", step, t)))
        t += 100
        action = None if kind is None else {"kind": kind}
        events.append(
            (
                "inferences",
                _e(
                    episode_id,
                    "inference",
                    step,
                    t,
                    policy_version=policy_version,
                    action=action,
                    parse_error=None if action else "no tool call",
                    latency_ms=40.0,
                ),
            )
        )
        steps.append({"step": step, "repeated": step in repeated})
        if kind is None:
            continue
        if kind == "answer":
            t += 7
            events.append(
                (
                    "episodes",
                    _e(
                        episode_id,
                        "finished",
                        step,
                        t,
                        kind="finished",
                        task_id=task_id,
                        reason="answer",
                    ),
                )
            )
            break
        t += 5
        events.append(("ops.act", _e(episode_id, "act", step, t, action={"kind": kind})))
        t += 500
        events.append(("observations", _observation(episode_id, step, t, act=450.0)))
    scored = _e(
        episode_id,
        "scored",
        steps[-1]["step"],
        t,
        task_id=task_id,
        website="",
        difficulty="",
        started_ts=t0,
        reward=reward,
        judge_error=None,
        blocked=False,
        aborted=False,
        steps=steps,
        policy_versions=[policy_version],
    )
    events.append(("trajectories.scored", scored, t + judge_ms))
    if success:
        events.append(("trajectories.success", {**scored, "event_id": f"{episode_id}:success"}))
    return events


def _e(episode_id, name, step, ts, **fields):
    event_id = f"{episode_id}:{step}:{name}"
    return {"event_id": event_id, "episode_id": episode_id, "step": step, "ts": ts, **fields}


def _observation(episode_id, step, ts, **timings):
    return _e(episode_id, "observation", step, ts, url=f"http://x/{step}", timings_ms=timings)


def fold(events, run_id=None):
    stats = RunStats(run_id)
    for event in events:
        suffix, record, *log_ts = event
        stats.apply(suffix, record, *log_ts)
    return stats


@pytest.fixture
def events():
    """Three episodes of run A (one fails, one has an unparseable reply and repeated steps)
    and one of run B."""
    return [
        task("t-easy", "shop.test", "easy", "shopping"),
        task("t-hard", "news.test", "hard", "news"),
        *episode(f"{RUN}-000000", "t-easy", 10_000, ["left_click", "answer"]),
        *episode(
            f"{RUN}-000001",
            "t-hard",
            11_000,
            ["navigate", None, "scroll", "answer"],
            reward=0.0,
            success=False,
            repeated=(3,),
            judge_ms=150,
        ),
        *episode(f"{RUN}-000002", "t-hard", 12_000, ["answer"], policy_version=1),
        *episode("runB-000000", "t-easy", 5_000, ["answer"]),
    ]


def test_percentile_is_nearest_rank():
    values = [40, 15, 50, 35, 20]
    assert [percentile(values, p) for p in (0, 30, 40, 50, 95, 100)] == [15, 20, 20, 35, 50, 50]
    assert percentile([], 50) is None
    assert distribution([3, 1, 2]) == {"n": 3, "p50": 2, "p95": 3, "p99": 3, "mean": 2, "max": 3}


def test_counts_and_success_by_group(events):
    figures = fold(events, RUN).figures()
    assert figures["run_ids"] == [RUN]
    assert figures["episodes"] | {"terminations": None} == {
        "started": 3,
        "ended": 3,
        "finished": 3,
        "aborted": 0,
        "in_flight": 0,
        "judged": 3,
        "successes": 2,
        "success_rate": 2 / 3,
        "judge_errors": 0,
        "blocked": 0,
        "terminations": None,
    }
    assert figures["episodes"]["terminations"] == {"answer": 3}
    by = figures["success_by"]
    assert by["difficulty"] == {
        "easy": {"judged": 1, "successes": 1, "rate": 1.0},
        "hard": {"judged": 2, "successes": 1, "rate": 0.5},
    }
    assert by["domain"].keys() == {"shopping", "news"}
    assert by["site"]["news.test"] == {"judged": 2, "successes": 1, "rate": 0.5}
    assert by["policy_version"] == {
        "0": {"judged": 2, "successes": 1, "rate": 0.5},
        "1": {"judged": 1, "successes": 1, "rate": 1.0},
    }


def test_all_runs_without_a_filter(events):
    figures = fold(events).figures()
    assert figures["run_ids"] == [RUN, "runB"]
    assert figures["episodes"]["judged"] == 4


def test_parse_error_and_repetition_rates(events):
    steps = fold(events, RUN).figures()["steps"]
    # 2 + 4 + 1 inferences; one unparseable; one of 7 trajectory steps repeated.
    assert steps == {
        "steps": 7,
        "parse_errors": 1,
        "backend_errors": 0,
        "parse_error_rate": 1 / 7,
        "trajectory_steps": 7,
        "repeated_steps": 1,
        "repetition_rate": 1 / 7,
    }


def test_hops_and_operations(events):
    latency = fold(events, RUN).figures()["latency_ms"]
    hops = {name: (row["n"], row["p50"], row["max"]) for name, row in latency["hops"].items()}
    assert hops == {
        "navigate_op->observation": (3, 1000, 1000),
        "observation->infer_request": (6, 10, 10),
        "infer_request->inference": (7, 100, 100),
        "inference->act_op": (3, 5, 5),
        "act_op->observation": (3, 500, 500),
        "unparsed inference->infer_request": (1, 20, 20),
        "answer->episode end": (3, 7, 7),
        "episode end->scored": (3, 50, 150),
    }
    operations = latency["operations"]
    assert list(operations) == [
        "navigate",
        "act",
        "act.left_click",
        "act.navigate",
        "act.scroll",
        "infer",
        "judge",
    ]
    assert operations["act"]["n"] == 3 and operations["act.scroll"]["n"] == 1
    assert operations["judge"]["p95"] == 150
    assert latency["service"]["model"]["p50"] == 40.0
    assert latency["service"]["infer minus model"]["p99"] == 60.0
    assert latency["service"]["browser.navigate"]["n"] == 3
    assert latency["service"]["browser.act"]["n"] == 3


def test_any_order_and_duplicates_give_the_same_figures(events):
    expected = fold(events, RUN).figures()
    shuffled = events * 2
    random.Random(7).shuffle(shuffled)
    assert fold(shuffled, RUN).figures() == expected


def test_throughput_over_the_window(events):
    figures = fold(events, RUN).figures()
    window = figures["window"]
    assert window["first_ts"] == 10_000
    last = window["last_ts"]
    assert window["seconds"] == (last - 10_000) / 1000
    assert figures["throughput"]["episodes_per_hour"] == pytest.approx(3 * 3600 / window["seconds"])
    assert figures["throughput"]["steps_per_s"] == pytest.approx(7 / window["seconds"])
    line = figures["timeline"]
    assert sum(line["steps"]) == 7 and sum(line["episodes_ended"]) == 3


def test_timeline_picks_a_round_bucket():
    line = timeline(0, 3_600_000, [0, 59_999, 60_000, 3_600_000], [1_000])
    assert line["bucket_s"] == 300 and len(line["steps"]) == 13
    assert line["steps"][0] == 3 and line["steps"][-1] == 1
    assert timeline(None, None, [], [])["steps"] == []


def test_policy_lag_against_announced_versions():
    stats = RunStats()
    for ts, version in ((1000, 1), (2000, 2)):
        stats.apply(
            "policy.versions",
            {"event_id": f"policy:default:v{version}", "ts": ts, "policy_version": version},
        )
    for step, (ts, version) in enumerate(((500, 0), (1500, 0), (2500, 1), (2600, 2)), start=1):
        record = _e("r-000000", "inference", step, ts, policy_version=version, latency_ms=1.0)
        stats.apply("inferences", {**record, "action": {"kind": "wait"}, "parse_error": None})
    lag = stats.figures()["policy_lag"]
    assert lag["by_versions_behind"] == {"0": 2, "1": 2}
    assert (lag["mean"], lag["max"], lag["behind"], lag["behind_rate"]) == (0.5, 1, 2, 0.5)
    assert lag["announced_versions"] == [1, 2]


def test_dead_letters_by_source_and_run():
    def letter(n, topic, error_class, key):
        return {
            "event_id": f"dlq:{n}",
            "ts": n,
            "source_topic": topic,
            "source_partition": 0,
            "source_offset": n,
            "error_class": error_class,
            "error_message": "bad",
            "original_key": key,
        }

    letters = [
        letter(1, "p.observations", "EventDecodeError", f"{RUN}-000001".encode()),
        letter(2, "p.observations", "KeyError", b"runB-000000"),
        letter(3, "p.inferences", "EventDecodeError", None),
    ]
    stats = fold([("dlq", record) for record in letters + letters])
    assert stats.figures()["dead_letters"] == {
        "total": 3,
        "by_source_topic": {"p.observations": 2, "p.inferences": 1},
        "by_error_class": {"EventDecodeError": 2, "KeyError": 1},
    }
    assert (
        fold([("dlq", record) for record in letters], RUN).figures()["dead_letters"]["total"] == 1
    )


def test_undecodable_records_are_counted():
    stats = RunStats()
    stats.apply_undecodable("observations")
    assert stats.figures()["undecodable"] == {"observations": 1}


def test_figures_are_json_and_render(events):
    figures = fold(events, RUN).figures()
    assert json.loads(json.dumps(figures)) == figures
    console = Console(file=io.StringIO(), width=200)
    console.print(render(figures))
    text = console.file.getvalue()
    assert f"run {RUN}" in text and "2 (66.7%)" in text and "act_op->observation" in text


def test_prometheus_metrics_equal_the_figures(events):
    figures = fold(events, RUN).figures()
    collector = StatsCollector()
    registry = CollectorRegistry()
    registry.register(collector)
    assert "webgym_stats_caught_up 0.0" in generate_latest(registry).decode()
    collector.update(figures, caught_up=True)
    text = generate_latest(registry).decode()
    assert "webgym_stats_caught_up 1.0" in text
    assert 'webgym_episodes_total{state="succeeded"} 2.0' in text
    assert 'webgym_group_success_rate{by="difficulty",group="hard"} 0.5' in text
    assert (
        'webgym_latency_seconds{kind="hop",name="act_op->observation",quantile="0.5"} 0.5' in text
    )
    assert f"webgym_parse_error_rate {1 / 7}" in text


def test_plots_are_png(events, tmp_path):
    paths = write_plots(fold(events, RUN).figures(), tmp_path / "charts")
    assert [p.name for p in paths] == list(CHARTS)
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    empty = write_plots(RunStats().figures(), tmp_path / "empty")
    assert all(p.stat().st_size > 0 for p in empty)


def test_since_accepts_times_and_durations():
    now = 1_800_000_000_000
    assert parse_since("10m", now) == now - 600_000
    assert parse_since("1h30m", now) == now - 5_400_000
    assert parse_since("2d", now) == now - 2 * 86_400_000
    assert parse_since("2026-11-30T00:00:00Z", now) == int(
        datetime.datetime(2026, 11, 30, tzinfo=datetime.UTC).timestamp() * 1000
    )
    with pytest.raises(AnalyticsError, match="neither a time nor a duration"):
        parse_since("yesterday", now)
    with pytest.raises(AnalyticsError, match="in the future"):
        parse_since("2099-01-01", now)


# -- held-out (eval) success, apart from training ------------------------------------------------


def test_the_wilson_interval_matches_known_values():

    assert wilson_interval(0, 0) is None
    low, high = wilson_interval(8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and round(high, 4) == 0.2775  # not empty at 0 of n
    low, high = wilson_interval(10, 10)
    assert round(low, 4) == 0.7225 and high == 1.0


def _marked_episode(stats, episode: str, version: int, reward: float, purpose: str) -> None:
    started = {
        "event_id": f"{episode}:started",
        "episode_id": episode,
        "ts": 100,
        "kind": "started",
        "task_id": "t",
        "purpose": purpose,
        "phase": None,
    }
    scored = {"event_id": f"{episode}:scored", "episode_id": episode, "step": 1, "ts": 2_000,
              "task_id": "t", "website": "w", "difficulty": "easy", "reward": reward,
              "aborted": False, "judge_error": None, "blocked": False, "started_ts": 100,
              "steps": [{"step": 1, "repeated": False}], "policy_versions": [version],
              "purpose": purpose}  # fmt: skip
    inference = {"event_id": f"{episode}:1:inference", "episode_id": episode, "step": 1,
                 "ts": 1_000, "policy_version": version, "parse_error": None, "latency_ms": 1.0,
                 "action": {"kind": "answer"}}  # fmt: skip
    stats.apply("episodes", started)
    stats.apply("inferences", inference)
    stats.apply("trajectories.scored", scored)
    if reward >= 1 and purpose == "train":
        stats.apply("trajectories.success", {**scored, "event_id": f"{episode}:success"})


def test_heldout_success_by_version_is_kept_apart_from_training_success():
    stats = RunStats()
    for n, (version, reward) in enumerate([(1, 0.0), (1, 1.0), (2, 1.0), (2, 1.0), (2, 0.0)]):
        _marked_episode(stats, f"ev-{n:06d}", version, reward, "eval")
    _marked_episode(stats, "tr-000000", 2, 1.0, "train")
    _marked_episode(stats, "tr-000001", 2, 0.0, "train")
    figures = stats.figures()
    assert figures["episodes"]["started"] == 7  # every episode is counted...
    episodes = figures["episodes"]
    assert (episodes["judged"], episodes["successes"]) == (2, 1)  # ...training success apart
    assert figures["success_by"]["policy_version"] == {
        "2": {"judged": 2, "successes": 1, "rate": 0.5}
    }
    heldout = figures["heldout"]
    assert (heldout["judged"], heldout["successes"]) == (5, 3)
    by_version = heldout["by_policy_version"]
    assert list(by_version) == ["1", "2"]
    assert (by_version["1"]["judged"], by_version["1"]["successes"]) == (2, 1)
    assert (by_version["2"]["judged"], by_version["2"]["successes"]) == (3, 2)
    assert by_version["2"]["ci_low"] < 2 / 3 < by_version["2"]["ci_high"]
    rendered = render(figures)  # the table shows it
    assert any("held-out" in str(getattr(part, "title", "")) for part in rendered.renderables)


def test_without_eval_episodes_there_is_no_heldout_figure():
    stats = RunStats()
    _marked_episode(stats, "tr-000000", 2, 1.0, "train")
    assert stats.figures()["heldout"]["judged"] == 0
    assert stats.figures()["heldout"]["ci_low"] is None


def test_migrations_are_counted_with_their_pause(events):
    migrated = [
        (
            "observations",
            _observation(
                f"{RUN}-m{i}", 2, 90_000 + i, migration=300.0 + i, migration_pause=1000.0 * (i + 1)
            ),
        )
        for i in range(4)
    ]
    figures = fold(events + migrated, RUN).figures()
    migrations = figures["migrations"]
    assert migrations["count"] == 4
    assert (migrations["pause_ms"]["p50"], migrations["pause_ms"]["p99"]) == (2000.0, 4000.0)
    assert migrations["rebuild_ms"]["max"] == 303.0
    assert fold(events, RUN).figures()["migrations"]["count"] == 0
    console = Console(file=io.StringIO(), width=200)
    console.print(render(figures))
    assert "4 (pause p50 2,000 ms, p99 4,000 ms)" in console.file.getvalue()
