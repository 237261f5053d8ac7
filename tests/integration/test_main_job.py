"""`webgym smoke`: the stack checked end to end without the loop."""

from __future__ import annotations

import subprocess
import sys

from commands.smoke import run_smoke, smoke_group
from infra.topic_admin import build_admin


def test_smoke_job_round_trips_a_screenshot(settings):
    result = run_smoke(settings, progress=lambda line: None)
    groups = build_admin(settings).list_consumer_groups().result().valid
    assert smoke_group(result.episode_id) not in {g.group_id for g in groups}  # none left behind
    assert result.screenshot_bytes > 1000
    assert result.title == "webgym smoke"
    assert result.minio_object.startswith(f"s3://{settings.artifacts_bucket}/smoke/")


def test_webgym_smoke_exits_zero(stack_settings):
    completed = subprocess.run(
        [sys.executable, "-m", "commands.main", "smoke"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    assert "ok episode smoke-" in completed.stdout
