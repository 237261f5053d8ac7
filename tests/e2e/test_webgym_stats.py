"""`webgym stats` on a finished run, run as a user runs it: its figures equal those computed
here directly from the run's events (read with ``read_topic``), by simpler means."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter

import pytest

from analytics.episodes import TOPICS
from commands.children import settings_env
from infra.log_reader import read_topic
from streams.filters import is_success
from tests.e2e.conftest import webgym_cli

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EPISODE_TOPICS = tuple(t for t in TOPICS if t != "tasks")


def webgym(settings, *args, timeout=120):
    return webgym_cli(settings, *args, timeout=timeout)


@pytest.fixture(scope="module")
def log(finished_run):
    """The run's records by topic suffix (every record decodes)."""
    records = {}
    for suffix in (*EPISODE_TOPICS, "dlq"):
        events = read_topic(finished_run.settings, suffix)
        assert all(event.error is None for event in events)
        records[suffix] = [event.record for event in events]
    return records


@pytest.fixture(scope="module")
def reported(finished_run, tmp_path_factory):
    """`webgym stats --run ID --json F --plot DIR`: its figures, chart directory and output."""
    out = tmp_path_factory.mktemp("stats")
    run_id = finished_run.summary.run_id
    result = webgym(
        finished_run.settings,
        "stats",
        "--run",
        run_id,
        "--json",
        str(out / "figures.json"),
        "--plot",
        str(out / "charts"),
    )
    assert result.returncode == 0, result.stderr
    return json.loads((out / "figures.json").read_text()), out / "charts", result.stdout


def nearest_rank(samples, p):
    """The smallest sample with at least p% of the samples at or below it."""
    return min(v for v in samples if sum(x <= v for x in samples) >= p / 100 * len(samples))


def by_step(records):
    return {(r["episode_id"], r["step"]): r["ts"] for r in records}


def test_episode_and_success_figures(finished_run, log, reported):
    figures, _, stdout = reported
    summary = finished_run.summary
    scored = log["trajectories.scored"]
    ends = [r for r in log["episodes"] if r["kind"] != "started"]
    successes = sum(is_success(r) for r in scored)
    assert successes == len(log["trajectories.success"])
    assert figures["run_ids"] == [summary.run_id]
    episodes = figures["episodes"]
    assert episodes["started"] == sum(r["kind"] == "started" for r in log["episodes"]) == 16
    assert episodes["ended"] == len(ends) == summary.ended
    assert episodes["aborted"] == sum(r["kind"] == "aborted" for r in ends)
    assert episodes["judged"] == len(scored) == summary.judged
    assert episodes["successes"] == successes == summary.successes
    assert episodes["success_rate"] == pytest.approx(successes / len(scored))
    for group, field in (("difficulty", "difficulty"), ("site", "website")):
        judged = Counter(r[field] for r in scored)
        won = Counter(r[field] for r in scored if is_success(r))
        assert {
            value: (row["judged"], row["successes"])
            for value, row in figures["success_by"][group].items()
        } == {value: (judged[value], won[value]) for value in judged}
    assert f"run {summary.run_id}" in stdout and "success by" in stdout


def test_step_figures(finished_run, log, reported):
    figures, _, _ = reported
    inferences = log["inferences"]
    trajectory_steps = [step for r in log["trajectories.scored"] for step in r["steps"]]
    repeated = sum(step["repeated"] for step in trajectory_steps)
    parse_errors = sum(r["parse_error"] is not None for r in inferences)
    steps = figures["steps"]
    assert steps["steps"] == len(inferences)
    assert steps["trajectory_steps"] == len(trajectory_steps) == finished_run.summary.steps
    assert steps["repeated_steps"] == repeated == finished_run.summary.repeated_steps
    assert steps["repetition_rate"] == pytest.approx(repeated / len(trajectory_steps))
    assert steps["parse_errors"] == parse_errors
    assert steps["parse_error_rate"] == pytest.approx(parse_errors / len(inferences))
    assert figures["dead_letters"]["total"] == len(log["dlq"])
    stamps = [r["ts"] for suffix in EPISODE_TOPICS for r in log[suffix]]
    window_s = (max(stamps) - min(stamps)) / 1000
    throughput = figures["throughput"]
    assert figures["window"]["seconds"] == pytest.approx(window_s)
    assert throughput["steps_per_s"] == pytest.approx(len(inferences) / window_s)
    assert throughput["episodes_per_hour"] == pytest.approx(
        figures["episodes"]["ended"] * 3600 / window_s
    )
    assert sum(figures["timeline"]["steps"]) == len(inferences)


def test_hop_latencies(log, reported):
    figures, _, _ = reported
    hops = figures["latency_ms"]["hops"]
    acts, observations = by_step(log["ops.act"]), by_step(log["observations"])
    requests, inferences = by_step(log["ops.infer"]), by_step(log["inferences"])
    act_hop = [observations[k] - ts for k, ts in acts.items() if k in observations]
    policy_hop = [inferences[k] - ts for k, ts in requests.items() if k in inferences]
    navigate_hop = [
        observations[(r["episode_id"], 0)] - r["ts"]
        for r in log["ops.navigate"]
        if (r["episode_id"], 0) in observations
    ]
    observation_hop = [
        requests[(episode_id, step + 1)] - ts
        for (episode_id, step), ts in observations.items()
        if (episode_id, step + 1) in requests
    ]
    assert act_hop and policy_hop
    for name, samples in (
        ("act_op->observation", act_hop),
        ("infer_request->inference", policy_hop),
        ("navigate_op->observation", navigate_hop),
        ("observation->infer_request", observation_hop),
    ):
        assert hops[name]["n"] == len(samples), name
        for p in (50, 95, 99):
            assert hops[name][f"p{p}"] == nearest_rank(samples, p), (name, p)
    assert hops["episode end->scored"]["n"] == len(log["trajectories.scored"])
    operations = figures["latency_ms"]["operations"]
    kinds = Counter(
        r["action"]["kind"] for r in log["ops.act"] if (r["episode_id"], r["step"]) in observations
    )
    for kind, count in kinds.items():
        assert operations[f"act.{kind}"]["n"] == count
    assert operations["infer"]["n"] == len(policy_hop)


def test_plots_are_written(reported):
    _, charts, _ = reported
    pngs = sorted(charts.glob("*.png"))
    assert [p.name for p in pngs] == [
        "heldout_by_policy_version.png",
        "success_by_difficulty.png",
        "success_by_policy_version.png",
        "throughput.png",
    ]
    for png in pngs:
        data = png.read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 1000


def test_prometheus_endpoint_serves_the_figures(finished_run, log):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = settings_env(finished_run.settings) | {"COLUMNS": "200"}
    process = subprocess.Popen(
        [sys.executable, "-m", "commands.main", "stats", "--follow", "--metrics-port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        metrics = _scrape_when_caught_up(port, process)
    finally:
        process.terminate()
        stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    successes = sum(is_success(r) for r in log["trajectories.scored"])
    assert metrics['webgym_episodes_total{state="succeeded"}'] == successes
    assert metrics['webgym_episodes_total{state="judged"}'] == len(log["trajectories.scored"])
    assert metrics["webgym_steps_total"] == len(log["inferences"])
    assert metrics["webgym_dead_letters_total"] == len(log["dlq"])
    assert f"http://127.0.0.1:{port}/metrics" in stdout


def _scrape_when_caught_up(port, process, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
                text = reply.read().decode()
        except OSError:
            time.sleep(0.3)
            continue
        metrics = {
            name: float(value)
            for name, _, value in (
                line.rpartition(" ") for line in text.splitlines() if not line.startswith("#")
            )
            if name
        }
        if metrics.get("webgym_stats_caught_up") == 1.0 and "webgym_steps_total" in metrics:
            return metrics
        time.sleep(0.3)
    raise AssertionError(f"stats did not catch up within {timeout_s} s")


def test_a_bad_since_is_refused(finished_run):
    result = webgym(finished_run.settings, "stats", "--since", "last tuesday")
    assert result.returncode == 1
    assert "--since 'last tuesday' is neither a time nor a duration" in result.stderr
    assert "10m" in result.stderr and "Traceback" not in result.stderr


def test_an_unknown_run_is_refused(finished_run):
    result = webgym(finished_run.settings, "stats", "--run", "no-such-run")
    assert result.returncode == 1
    assert finished_run.summary.run_id in result.stderr


def test_since_a_time_after_the_run_finds_nothing(finished_run):
    result = webgym(finished_run.settings, "stats", "--since", "1s")
    assert result.returncode == 0, result.stderr
    assert "no episode events" in result.stdout
