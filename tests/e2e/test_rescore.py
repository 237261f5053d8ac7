"""`webgym rescore` on a finished run: a different judge writes a new scored stream beside the
running system, and the changed verdicts it reports are the ones in the streams."""

from __future__ import annotations

import json
import subprocess
import sys

from commands.children import settings_env
from infra.log_reader import read_topic
from streams.filters import is_success
from tests.integration.model_servers import openai_server_fixture, tiny_model_fixture  # noqa: F401


def _webgym(settings, *args):
    env = {**settings_env(settings), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "commands.main", *args], env=env, capture_output=True, text=True
    )


def _by_episode(settings, suffix):
    return {e.record["episode_id"]: e.record for e in read_topic(settings, suffix)}


def test_a_different_judge_rescores_into_a_new_stream(
    finished_run, openai_server, tiny_model, tmp_path
):
    settings = finished_run.settings
    original = _by_episode(settings, "trajectories.scored")
    ends_before = {
        suffix: len(read_topic(settings, suffix))
        for suffix in ("trajectories.scored", "trajectories.success")
    }

    # The LLM rubric judge with the tiny random model: its replies never parse, so every
    # answered trajectory becomes a judge error with reward 0, and each success is lost.
    done = _webgym(
        settings, "rescore", "--into", "tiny-llm", "--judge", "llm",
        "--judge-base-url", openai_server, "--judge-model", str(tiny_model),
        "--judge-max-tokens", "8", "--json", str(tmp_path / "llm.json"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "llm.json").read_text())
    rescored = _by_episode(settings, "trajectories.rescored.tiny-llm")
    assert set(rescored) == set(original) and report["rescored"] == len(original)
    assert len(read_topic(settings, "trajectories.rescored.tiny-llm")) == len(original)
    assert {r["judge_name"] for r in rescored.values()} == {f"llm:{tiny_model}"}

    changed_rewards = [e for e in original if original[e]["reward"] != rescored[e]["reward"]]
    lost = [e for e in original if is_success(original[e]) and not is_success(rescored[e])]
    assert lost, "the run had successes for the new judge to disagree with"
    assert report["rewards_changed"] == len(changed_rewards)
    assert report["lost_success"] == len(lost) and report["became_success"] == 0
    facts = 0
    for episode, old in original.items():
        before = {(v["fact_group_id"], v["fact"]): v["satisfied"] for v in old["verdicts"]}
        after = {
            (v["fact_group_id"], v["fact"]): v["satisfied"] for v in rescored[episode]["verdicts"]
        }
        facts += sum(1 for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert report["verdicts_changed"] == facts > 0
    assert f"{len(report['changed_episodes'])} episodes changed verdict" in done.stdout

    # The running system's streams are untouched.
    for suffix, count in ends_before.items():
        assert len(read_topic(settings, suffix)) == count

    # The same judge as the stream: nothing changes. Run again: everything is skipped.
    same = _webgym(settings, "rescore", "--into", "same", "--json", str(tmp_path / "same.json"))
    assert same.returncode == 0, same.stderr
    report = json.loads((tmp_path / "same.json").read_text())
    assert report["rescored"] == len(original) and report["rewards_changed"] == 0
    assert report["verdicts_changed"] == 0
    again = _webgym(settings, "rescore", "--into", "same", "--json", str(tmp_path / "again.json"))
    assert again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "again.json").read_text())["skipped"] == len(original)
    assert len(read_topic(settings, "trajectories.rescored.same")) == len(original)

    bad = _webgym(settings, "rescore", "--into", "x", "--judge", "llm")
    assert bad.returncode == 1 and "--judge-base-url" in bad.stderr
