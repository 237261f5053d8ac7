"""Publishing WebGym tasks to the compacted tasks topic on the real broker: once, and only once.

The session's topics are shared by its tests, so each test gives the fixture's task ids a prefix
of its own and counts only its own tasks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, TopicPartition

from infra.consumer import build_consumer, watermarks
from infra.settings import Settings
from infra.topic_admin import TopicMissing
from tasks.publish import PublishCounts, publish_tasks, read_published_tasks
from tasks.webgym_format import load_tasks

FIXTURE = Path(__file__).parents[1] / "data" / "webgym_tasks.jsonl"
REPO = Path(__file__).parents[2]
GOOD_LINES = 11


def _own_copy(directory: Path, tag: str, changes: dict[str, dict] | None = None) -> Path:
    """The fixture with task ids prefixed by ``tag``; ``changes`` by original task id."""
    lines = []
    for line in FIXTURE.read_text().splitlines():
        row = json.loads(line)
        row.update((changes or {}).get(row["task_id"], {}))
        row["task_id"] = f"{tag}-{row['task_id']}"
        lines.append(json.dumps(row) + "\n")
    path = directory / f"tasks-{tag}-{uuid.uuid4().hex[:4]}.jsonl"
    path.write_text("".join(lines))
    return path


def _tag() -> str:
    return uuid.uuid4().hex[:8]


def _end_offset(settings: Settings, timeout_s: float = 15.0) -> int:
    """Records ever appended to the tasks topic (the sum of its partitions' end offsets)."""
    topic = settings.topic("tasks")
    consumer = build_consumer(settings, group_id=f"end-{uuid.uuid4().hex[:8]}", client_id="test")
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
                return sum(
                    watermarks(consumer, TopicPartition(topic, p), 10)[1] for p in partitions
                )
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # the session's topics are new: their leader may not be known yet
    finally:
        consumer.close()


def _published(settings: Settings, tag: str) -> dict[str, dict]:
    return {
        task["task_id"]: task
        for task in read_published_tasks(settings)
        if task["task_id"].startswith(f"{tag}-")
    }


def test_loading_publishes_every_task_and_loading_again_changes_nothing(settings, tmp_path):
    tag = _tag()
    path = _own_copy(tmp_path, tag)
    loaded = load_tasks(path)
    assert len(loaded.tasks) == GOOD_LINES

    before = _end_offset(settings)
    assert publish_tasks(settings, loaded.tasks) == PublishCounts(GOOD_LINES, 0, 0)
    assert _end_offset(settings) == before + GOOD_LINES
    assert _published(settings, tag) == {task["task_id"]: task for task in loaded.tasks}

    after_first = _end_offset(settings)
    assert publish_tasks(settings, load_tasks(path).tasks) == PublishCounts(0, 0, GOOD_LINES)
    assert _end_offset(settings) == after_first


def test_a_changed_instruction_republishes_exactly_that_task(settings, tmp_path):
    tag = _tag()
    path = _own_copy(tmp_path, tag)
    publish_tasks(settings, load_tasks(path).tasks)
    before = _end_offset(settings)

    changed = _own_copy(tmp_path, tag, {"wg-0004": {"task_name": "Find a vegan lasagna recipe."}})

    assert publish_tasks(settings, load_tasks(changed).tasks) == PublishCounts(0, 1, GOOD_LINES - 1)
    assert _end_offset(settings) == before + 1
    published = _published(settings, tag)
    assert published[f"{tag}-wg-0004"]["task_name"] == "Find a vegan lasagna recipe."
    assert len(published) == GOOD_LINES


def test_a_missing_topic_says_how_to_create_it(settings):
    elsewhere = settings.model_copy(update={"topic_prefix": f"missing-{uuid.uuid4().hex[:8]}"})
    with pytest.raises(TopicMissing, match="webgym topics create"):
        publish_tasks(elsewhere, load_tasks(FIXTURE).tasks)


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "WEBGYM_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "WEBGYM_TOPIC_PREFIX": settings.topic_prefix,
        "WEBGYM_DEFAULT_PARTITIONS": str(settings.default_partitions),
        "COLUMNS": "200",  # keep rich tables and messages on one line each
    }
    return subprocess.run(
        [sys.executable, "-m", "commands.main", "tasks", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_load_publishes_once_and_reports_the_bad_line(settings, tmp_path):
    tag = _tag()
    path = _own_copy(tmp_path, tag)

    strict = _cli(settings, "load", "--strict", str(path))
    assert strict.returncode == 1
    assert "nothing was published" in strict.stderr
    assert f"{path}:7" in strict.stdout
    assert _published(settings, tag) == {}

    first = _cli(settings, "load", str(path))
    assert first.returncode == 1, first.stderr  # a line was refused: scripts can tell
    assert "1 line bad, more than --max-bad 0" in " ".join(first.stderr.split())
    assert f"{GOOD_LINES} new, 0 changed, 0 unchanged" in first.stdout
    assert "1 of 12 lines skipped" in first.stdout
    assert "'extreme' is not easy, medium, hard or 1-3" in first.stdout
    assert len(_published(settings, tag)) == GOOD_LINES

    before = _end_offset(settings)
    again = _cli(settings, "load", "--max-bad", "1", str(path))
    assert again.returncode == 0, again.stderr
    assert f"0 new, 0 changed, {GOOD_LINES} unchanged" in again.stdout
    assert _end_offset(settings) == before

    stats = _cli(settings, "stats")
    assert stats.returncode == 0, stats.stderr
    assert "tasks from" in stats.stdout and settings.topic("tasks") in stats.stdout


def test_cli_load_puts_a_file_in_a_task_set_with_its_splits(settings, tmp_path):
    tag = _tag()
    path = _own_copy(tmp_path, tag)

    default = _cli(settings, "load", "--max-bad", "1", str(path))
    assert default.returncode == 0, default.stderr
    published = _published(settings, tag)
    assert {task["task_set"] for task in published.values()} == {path.name.removesuffix(".jsonl")}

    named = _cli(settings, "load", str(path), "--task-set", f"set-{tag}", "--max-bad", "1")
    assert named.returncode == 0, named.stderr
    assert f"0 new, {GOOD_LINES} changed" in named.stdout  # the tasks moved to the named set
    published = _published(settings, tag)
    assert {task["task_set"] for task in published.values()} == {f"set-{tag}"}
    ood = [t for t in published.values() if t["split"] == "test"]
    assert ood  # the fixture marks out-of-distribution tasks

    listed = _cli(settings, "sets")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[1]: line.split()[3] for line in listed.stdout.splitlines() if tag in line}
    assert rows[f"set-{tag}"] == str(GOOD_LINES)
    assert rows[f"set-{tag}/test"] == str(len(ood))

    miniwob = _cli(
        settings, "miniwob", "--pages", "click-button", "--train-seeds", "2",
        "--heldout-seeds", "1", "--prefix", f"mw-{tag}",
    )  # fmt: skip
    assert miniwob.returncode == 0, miniwob.stderr
    assert f"mw-{tag}/train (2), mw-{tag}/heldout (1)" in miniwob.stdout
    sets = {task["task_set"] for task in read_published_tasks(settings)}
    assert {f"mw-{tag}/train", f"mw-{tag}/heldout"} <= sets

    bad = _cli(settings, "miniwob", "--pages", "no-such-page")
    assert bad.returncode == 1 and "no MiniWoB++ task 'no-such-page'" in bad.stderr
