"""The README's main command, `webgym run`, as a user runs it (a small run, own topics)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path


def _plant_old_run_logs(logs_dir: Path) -> list[Path]:
    """Three run-log directories from long ago, the last one the newest of them."""
    planted = []
    for n, year in enumerate((1999, 2000, 2001)):
        directory = logs_dir / f"planted-{uuid.uuid4().hex[:6]}-{n}"
        directory.mkdir(parents=True)
        (directory / "streams.log").write_text("an earlier run\n")
        when = datetime(year, 1, 1, tzinfo=UTC).timestamp()
        os.utime(directory / "streams.log", (when, when))
        os.utime(directory, (when, when))
        planted.append(directory)
    return planted


def test_webgym_run_runs_the_loop_and_writes_its_summary(run_settings, tmp_path):
    # A used stack: earlier runs' logs. The run keeps the ones there and the newest planted one
    # (WEBGYM_RUN_LOGS_KEPT is their count), and removes the two older planted ones.
    logs_dir = run_settings.logs_dir
    earlier = [d for d in logs_dir.iterdir() if d.is_dir()] if logs_dir.is_dir() else []
    planted = _plant_old_run_logs(logs_dir)
    env = {
        **os.environ,
        "WEBGYM_RUN_LOGS_KEPT": str(len(earlier) + 1),
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
    assert [d.exists() for d in planted] == [False, False, True]
    assert all(d.exists() for d in earlier)
    own = [d for d in logs_dir.iterdir() if d.is_dir() and d not in earlier and d not in planted]
    assert len(own) == 1 and (own[0] / "streams.log").is_file()  # the run's own, kept
