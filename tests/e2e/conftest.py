"""The end-to-end tier: the whole loop as child processes, on the real stack.

Each test gets a topic prefix of its own, so its Faust app (named after the prefix), its
consumer groups and its topics start empty, and are deleted afterwards; likewise its own bucket
of policy versions.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from commands.children import settings_env
from commands.local_run import RunOptions, RunSummary, run_local
from infra.leftovers import remove_prefix
from infra.log_reader import read_topic
from infra.minio_store import build_minio, ensure_buckets
from infra.provenance import CHECKOUT
from infra.settings import Settings
from infra.topic_admin import build_admin, create_topics
from learner.samples import SampleBuilder


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/e2e" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


def run_options(tag: str, **fields: Any) -> RunOptions:
    """A test run's :class:`RunOptions`: ``fields``, and a fresh run id (the prefix of its
    episode ids): ``tag`` and six random hex digits."""
    return RunOptions(run_id=f"{tag}{uuid.uuid4().hex[:6]}", **fields)


def webgym_cli(
    settings: Settings, *args: str, env: dict[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess:
    """``webgym ARGS`` as a user runs it: a child process with these settings (and ``env`` on
    top), 200 columns wide, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "commands.main", *args],
        env=settings_env(settings) | {"COLUMNS": "200"} | (env or {}),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_bench(
    settings: Settings, module: str, *args: str, out: Path, timeout: float
) -> tuple[dict[str, Any], subprocess.CompletedProcess]:
    """``python -m bench.MODULE ARGS --out OUT`` as a user runs it from the checkout, with these
    settings; asserts it exited 0 (its output's tail in the message) and returns the result file
    it wrote and the finished process (its progress lines on stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{module}", *args, "--out", str(out)],
        cwd=CHECKOUT,
        env=settings_env(settings),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(out.read_text()), done


@contextlib.contextmanager
def isolated_settings(stack_settings: Settings) -> Iterator[Settings]:
    """Settings with a fresh topic prefix and policies bucket; both are deleted afterwards."""
    prefix = f"e2e-{uuid.uuid4().hex[:10]}"
    isolated = stack_settings.model_copy(
        update={
            "topic_prefix": prefix,
            "default_partitions": 4,
            "practice_web_address": "127.0.0.1:0",  # any free port
            "policies_bucket": f"{prefix}-policies",
        }
    )
    create_topics(isolated)
    minio = build_minio(isolated)
    ensure_buckets(minio, isolated)
    try:
        yield isolated
    finally:
        # Its topics (the Faust app's changelogs too), idle groups and buckets.
        remove_prefix(build_admin(isolated), minio, isolated.topic_prefix)


@pytest.fixture
def run_settings(stack_settings: Settings) -> Iterator[Settings]:
    with isolated_settings(stack_settings) as settings:
        yield settings


@dataclass(frozen=True)
class FinishedRun:
    settings: Settings
    summary: RunSummary


@pytest.fixture(scope="session")
def finished_run(stack_settings: Settings) -> Iterator[FinishedRun]:
    """One finished run shared by the tests that only read the log (replay, stats, rescore):
    16 episodes, 4 in flight, the scripted policy with 30% of steps wrong, 5 sites."""
    with isolated_settings(stack_settings) as settings:
        options = run_options("e2e-f", episodes=16, in_flight=4, error_rate=0.3, sites=5)
        yield FinishedRun(settings, run_local(settings, options, start_stack=False))


def training_samples(settings: Settings, expected: int) -> tuple[list[dict], list[Any]]:
    """The run's successes (``expected`` of them) and the training samples the learner builds
    from them, every one available."""
    successes = [e.record for e in read_topic(settings, "trajectories.success")]
    assert len(successes) == expected
    builder = SampleBuilder(settings)
    try:
        built = [builder.build(record) for record in successes]
    finally:
        builder.close()
    assert all(not b.unavailable for b in built)
    return successes, [s for b in built for s in b.samples]


def image_parts(sample: Any) -> list[dict[str, Any]]:
    """The image parts of a training sample's messages, in order."""
    return [
        part
        for message in sample.messages
        if isinstance(message["content"], list)
        for part in message["content"]
        if part["type"] == "image"
    ]
