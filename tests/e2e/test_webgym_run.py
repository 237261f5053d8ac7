"""The README's main command, `webgym run`, as a user runs it (a small run, own topics)."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def test_webgym_run_runs_the_loop_and_writes_its_summary(run_settings, tmp_path):
    env = {
        **os.environ,
        "WEBGYM_TOPIC_PREFIX": run_settings.topic_prefix,
        "WEBGYM_DEFAULT_PARTITIONS": str(run_settings.default_partitions),
        "WEBGYM_PRACTICE_WEB_ADDRESS": run_settings.practice_web_address,
    }
    out = tmp_path / "summary.json"
    argv = [
        sys.executable,
        "-m",
        "commands.main",
        "run",
        "--episodes",
        "6",
        "--in-flight",
        "3",
        "--sites",
        "3",
        "--error-rate",
        "0",
        "--summary-json",
        str(out),
    ]
    completed = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=400)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    assert "episodes per hour" in completed.stdout
    figures = json.loads(out.read_text())
    assert figures["episodes_started"] == figures["episodes_ended"] == figures["judged"] == 6
    assert figures["successes"] == 6  # the scripted policy without errors solves every task
    assert figures["steps"] >= 6 and figures["steps_per_s"] > 0
    assert "--summary-json" in figures["provenance"]["command"]  # the one result-file writer
