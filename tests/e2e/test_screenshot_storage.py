"""A run that keeps its screenshots in MinIO (``WEBGYM_SCREENSHOT_STORAGE=minio``): the log
carries keys and digests, and training samples, replay and the checker read the same images
an inline run's would."""

from __future__ import annotations

import hashlib
import json

from analytics.replay import load_replay
from commands.local_run import run_local
from infra.log_reader import read_topic
from infra.minio_store import build_minio, read_bytes, remove_bucket
from tests.e2e.conftest import image_parts, run_options, training_samples, webgym_cli


def test_a_run_with_stored_screenshots_trains_replays_and_checks(run_settings, tmp_path):
    settings = run_settings.model_copy(
        update={
            "screenshot_storage": "minio",
            "artifacts_bucket": f"{run_settings.topic_prefix}-artifacts",
        }
    )
    minio = build_minio(settings)
    try:
        options = run_options("e2e-m", episodes=6, in_flight=3, error_rate=0.0, sites=3)
        summary = run_local(settings, options, start_stack=False)
        assert summary.ended == 6 and summary.aborted == 0

        # The log holds keys and digests, MinIO the bytes, each once under its digest.
        pages = {}
        for event in read_topic(settings, "observations"):
            record = event.record
            assert record["failure"] is None
            assert record["screenshot"] == b"" and record["screenshot_key"], record["event_id"]
            stored = read_bytes(minio, settings.artifacts_bucket, record["screenshot_key"])
            assert hashlib.sha256(stored).hexdigest() == record["screenshot_sha256"]
            assert record["screenshot_key"].endswith(f"{record['screenshot_sha256']}.jpeg")
            assert stored[:2] == b"\xff\xd8"  # a JPEG
            pages[record["event_id"]] = stored
        objects = list(minio.list_objects(settings.artifacts_bucket, "screenshots/"))
        assert len(objects) == len({hashlib.sha256(p).hexdigest() for p in pages.values()})

        # Training samples: every image is the stored screenshot of the observation it names.
        # The scripted policy without errors solves every task.
        successes, samples = training_samples(settings, 6)
        requests = {e.record["event_id"]: e.record for e in read_topic(settings, "ops.infer")}
        images = 0
        for sample in samples:
            request = requests[f"{sample.episode_id}:{sample.step}:infer"]
            shown = [part["image"] for part in image_parts(sample)]
            assert shown == [pages[i] for i in request["observation_event_ids"]]
            images += len(shown)
        assert images > 0

        # Replay: every frame shows its stored screenshot.
        for record in successes:
            replay = load_replay(settings, record["episode_id"])
            frames = [step.frame for step in replay.steps]
            assert frames and all(
                f is not None and f.screenshot == pages[f.event_id] for f in frames
            )

        # The checker holds the run to every invariant, digests from the stamps.
        out = tmp_path / "check.json"
        result = webgym_cli(settings, "check", "--run", summary.run_id, "--json", str(out))
        assert result.returncode == 0, result.stdout + result.stderr
        assert json.loads(out.read_text())["violations"] == []
    finally:
        remove_bucket(minio, settings.artifacts_bucket)
