"""`webgym replay` on a finished run: every step's screenshot and action as the log holds them,
the reward and verdicts, the list filters, a rerun in a fresh browser, and the server."""

from __future__ import annotations

import asyncio
import base64
import datetime
import html
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from html.parser import HTMLParser

import pytest

from analytics.replay import load_replay, render_replay_html
from analytics.rerun import rerun_episode
from commands.children import settings_env
from infra.log_reader import read_topic

CLI = [sys.executable, "-m", "commands.main", "replay"]


def webgym_replay(settings, *args, timeout=180):
    env = {**settings_env(settings), "COLUMNS": "200"}  # tables unwrapped
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=timeout)


class Page(HTMLParser):
    """Per step: the screenshot (observation id, bytes) and the action (JSON, sent or not)."""

    def __init__(self, text: str):
        super().__init__()
        self.step: int | None = None
        self.shots: dict[int, tuple[str, bytes]] = {}
        self.actions: dict[int, tuple[dict | None, bool]] = {}
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section" and "data-step" in attrs:
            self.step = int(attrs["data-step"])
        elif tag == "section":
            self.step = None
        if tag == "img" and self.step is not None:
            assert attrs["src"].startswith("data:image/jpeg;base64,")
            self.shots[self.step] = (
                attrs["data-observation"],
                base64.b64decode(attrs["src"].split(",", 1)[1]),
            )
        if "data-action" in attrs and self.step is not None:
            shown = json.loads(attrs["data-action"]) if attrs["data-action"] else None
            self.actions[self.step] = (shown, attrs["data-sent"] == "true")


@pytest.fixture(scope="module")
def log(finished_run):
    """The finished run's events, by topic."""
    settings = finished_run.settings
    records = {
        suffix: [e.record for e in read_topic(settings, suffix)]
        for suffix in ("episodes", "ops.act", "observations", "trajectories.scored")
    }
    records["trajectories.success"] = [
        e.record for e in read_topic(settings, "trajectories.success")
    ]
    return records


def iso(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).isoformat()


def acts_of(log) -> dict[str, dict[int, dict]]:
    acts: dict[str, dict[int, dict]] = defaultdict(dict)
    for act in log["ops.act"]:
        acts[act["episode_id"]].setdefault(act["step"], act["action"])
    return acts


def check_page(page_html: str, scored: dict, log) -> None:
    """Every step shows the observation the policy saw, and the action sent (or answered)."""
    screenshots = {o["event_id"]: o["screenshot"] for o in log["observations"]}
    acts = acts_of(log)[scored["episode_id"]]
    page = Page(page_html)
    assert sorted(page.shots) == [s["step"] for s in scored["steps"]]
    for step in scored["steps"]:
        event_id, shown = page.shots[step["step"]]
        assert event_id == step["observation_event_id"]
        assert shown == screenshots[event_id], f"step {step['step']}: another screenshot"
        action, sent = page.actions[step["step"]]
        if step["step"] in acts:
            assert sent and action == acts[step["step"]]
        else:  # the answer (or nothing, after an unparseable reply) was never sent
            assert not sent and action == step["action"]
    assert f'data-reward="{scored["reward"]}"' in page_html
    for verdict in scored["verdicts"]:
        assert html.escape(verdict["fact"]) in page_html
        assert html.escape(verdict["rationale"]) in page_html


def test_the_page_of_an_episode_shows_every_step_as_the_log_holds_it(finished_run, log, tmp_path):
    settings = finished_run.settings
    judged = {s["episode_id"]: s for s in log["trajectories.scored"]}
    clicked = {a["episode_id"] for a in log["ops.act"] if a["action"]["kind"] == "left_click"}
    # An episode with a click if there is one (the drawn marker), and several steps.
    episode_id = max(judged, key=lambda e: (e in clicked, len(judged[e]["steps"]), e))
    out = tmp_path / "replay.html"

    done = webgym_replay(settings, episode_id, "--out", str(out))

    assert done.returncode == 0, done.stderr
    assert f"replay written to {out}" in done.stdout
    page_html = out.read_text()
    check_page(page_html, judged[episode_id], log)
    assert "<script" not in page_html and "<link" not in page_html
    if episode_id in clicked:
        assert "<circle" in page_html  # the click is drawn on its screenshot


def test_every_episode_of_the_run_replays(finished_run, log):
    settings = finished_run.settings
    for scored in log["trajectories.scored"]:
        check_page(render_replay_html(settings, scored["episode_id"]), scored, log)


def test_list_filters_find_the_right_episodes(finished_run, log):
    settings = finished_run.settings
    judged = {s["episode_id"]: s for s in log["trajectories.scored"]}
    started = {e["episode_id"]: e["ts"] for e in log["episodes"] if e["kind"] == "started"}
    successes = {s["episode_id"] for s in log["trajectories.success"]}

    def listed(*filters) -> list[str]:
        done = webgym_replay(settings, "--list", "--json", "--limit", "0", *filters)
        assert done.returncode == 0, done.stderr
        return [json.loads(line)["episode_id"] for line in done.stdout.splitlines()]

    assert sorted(listed()) == sorted(started)
    assert sorted(listed("--success")) == sorted(successes)
    assert sorted(listed("--failure")) == sorted(set(judged) - successes)
    site = judged[min(judged)]["website"].split(".")[0]
    assert sorted(listed("--site", site, "--reward", "<1")) == sorted(
        e for e, s in judged.items() if site in s["website"] and s["reward"] < 1
    )
    task = judged[max(judged)]["task_id"]
    assert sorted(listed("--task", task)) == sorted(
        e for e, s in judged.items() if task in s["task_id"]
    )
    times = sorted(started.values())
    since, until = times[3], times[10]
    assert sorted(listed("--since", iso(since), "--until", iso(until))) == sorted(
        e for e, ts in started.items() if since <= ts < until
    )
    table = webgym_replay(settings, "--list")
    assert table.returncode == 0 and f"{len(started)} episodes match" in table.stdout


def test_a_rerun_of_static_pages_matches_every_step(finished_run, log):
    settings = finished_run.settings
    acts = acts_of(log)
    judged = {s["episode_id"] for s in log["trajectories.scored"]}
    navigations_only = sorted(
        e
        for e in judged
        if acts[e] and all(action["kind"] == "navigate" for action in acts[e].values())
    )
    assert navigations_only, "the run has no episode that only navigates"
    episode_id = navigations_only[0]

    done = webgym_replay(settings, episode_id, "--rerun", "--sites", "5", "--seed", "0")

    assert done.returncode == 0, done.stderr
    assert f"all {1 + len(acts[episode_id])} steps match the recording" in done.stdout


def test_a_rerun_performs_the_recorded_clicks(finished_run, log):
    """Clicks go through the browser worker's own code; the start page matches exactly. (A
    click that opens a native <select> may differ: Chromium places its popup by where the
    worker's window sat on the virtual screen, which a fresh browser does not reproduce.)"""
    settings = finished_run.settings
    clicked = sorted({a["episode_id"] for a in log["ops.act"] if a["action"]["kind"] != "navigate"})
    if not clicked:
        pytest.skip("the run made no click")
    episode = load_replay(settings, clicked[0])

    report = asyncio.run(rerun_episode(settings, episode, sites_count=5, seed=0))

    assert report.stopped is None
    assert [c.step for c in report.checks] == [0, *sorted(episode.act_ops)]
    assert report.checks[0].matches and report.checks[0].screenshot.identical


def test_an_unknown_episode_says_how_to_find_one(finished_run):
    done = webgym_replay(finished_run.settings, "run-nope-000001", "--out", "/dev/null")
    assert done.returncode == 1
    assert "no episode 'run-nope-000001'" in done.stderr
    assert "webgym replay --list" in done.stderr


def test_serve_answers_with_the_page(finished_run, log):
    settings = finished_run.settings
    episode_id = log["trajectories.scored"][0]["episode_id"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = settings_env(settings)
    server = subprocess.Popen(
        [*CLI, episode_id, "--serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as reply:
                    body = reply.read().decode()
                break
            except OSError:
                assert server.poll() is None, server.stderr.read()
                assert time.monotonic() < deadline, "the server did not answer"
                time.sleep(0.5)
        assert episode_id in body and "data:image/jpeg;base64," in body
    finally:
        server.send_signal(signal.SIGINT)
        out, _ = server.communicate(timeout=30)
    assert f"http://127.0.0.1:{port}/" in out
