"""Driving real workers from outside, for benchmarks (and the tests that drive them the same way).

- :class:`WorkerProcess` runs a `webgym worker browser` as a process of its own, with
  :func:`worker_env` pointing it at the caller's topics and practice web;
- :func:`ask` sends what an orchestrator sends a policy worker: an observation, then the
  inference request that uses it (:func:`jpeg` makes a screenshot of one colour).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from infra.producer import EventProducer, now_ms
from infra.settings import Settings
from schemas.prompt.context import Current, build_context

# The task every request of :func:`ask` carries.
INSTRUCTION = "Find the price of the blue kettle."


def worker_env(settings: Settings, practice_web_port: int) -> dict[str, str]:
    """This process's environment, with the settings a worker needs to join ``settings``' run."""
    return {
        **os.environ,
        "WEBGYM_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "WEBGYM_TOPIC_PREFIX": settings.topic_prefix,
        "WEBGYM_DEFAULT_PARTITIONS": str(settings.default_partitions),
        "WEBGYM_PRACTICE_WEB_ADDRESS": f"127.0.0.1:{practice_web_port}",
        "WEBGYM_STATE_DIR": str(settings.state_dir),
    }


@dataclass
class WorkerProcess:
    """A `webgym worker browser` process the caller started (and only ever kills)."""

    process: subprocess.Popen
    log: Path

    @classmethod
    def start(cls, env: dict[str, str], log_dir: Path, group: str, *extra: str) -> WorkerProcess:
        log = log_dir / f"worker-{uuid.uuid4().hex[:6]}.log"
        handle = log.open("wb")
        process = subprocess.Popen(
            [sys.executable, "-m", "commands.main", "worker", "browser", "--group", group, *extra],
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        worker = cls(process, log)
        worker.wait_for("assigned", timeout=60)
        return worker

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log.read_text(errors="replace"):
                return
            if self.process.poll() is not None:
                raise AssertionError(f"worker exited:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.2)
        raise AssertionError(f"worker never logged {text!r}:\n{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()


def jpeg(colour: tuple[int, int, int]) -> bytes:
    """A 1280x768 screenshot of one colour."""
    buffer = io.BytesIO()
    Image.new("RGB", (1280, 768), colour).save(buffer, "JPEG", quality=80)
    return buffer.getvalue()


def _screenshot_fields(image: bytes, key: str | None) -> dict[str, Any]:
    if key is None:
        return {"screenshot": image}
    return {
        "screenshot": b"",
        "screenshot_sha256": hashlib.sha256(image).hexdigest(),
        "screenshot_key": key,
    }


def ask(
    settings: Settings,
    producer: EventProducer,
    episode_id: str,
    step: int = 1,
    task_id: str = "task-1",
    screenshot: bytes | None = None,
    observed: bool = True,
    screenshot_key: str | None = None,
) -> str:
    """Produce the observation of step ``step - 1`` (unless ``observed`` is False: it is in the
    log already) and the inference request of ``step``; return the request's event id. With
    ``screenshot_key`` the observation names a stored screenshot (``screenshot``'s bytes,
    already in the object store) instead of carrying it."""
    observation_id = f"{episode_id}:{step - 1}:observation"
    if observed:
        producer.produce(
            settings.topic("observations"),
            episode_id,
            "observation",
            {
                "event_id": observation_id,
                "episode_id": episode_id,
                "step": step - 1,
                "ts": now_ms(),
                "screenshot": b""
                if screenshot_key
                else screenshot or jpeg((30, 90 + step % 100, 200)),
                "screenshot_sha256": hashlib.sha256(screenshot).hexdigest()
                if screenshot_key
                else "",
                "screenshot_key": screenshot_key,
                "width": 1280,
                "height": 768,
                "url": "http://a.webgym.test/",
                "title": "Home",
            },
        )
    context = build_context(
        INSTRUCTION, [], Current(step, observation_id, "Home", "http://a.webgym.test/")
    )
    request_id = f"{episode_id}:{step}:infer"
    producer.produce(
        settings.topic("ops.infer"),
        episode_id,
        "infer_request",
        {
            "event_id": request_id,
            "episode_id": episode_id,
            "step": step,
            "ts": now_ms(),
            "task_id": task_id,
            "messages_json": json.dumps(context.messages),
            "observation_event_ids": context.observation_event_ids,
        },
    )
    producer.flush()
    return request_id
