"""`webgym check` on a finished run, run as a user runs it: every invariant holds and the counts
are the run's. A copy of the run (same partitions and offsets, under a prefix of its own) holds
them too, until two records are added to it: an observation after one episode's end and a second,
different scored trajectory for another; then the check fails, naming both episodes and records.
"""

from __future__ import annotations

import json
import uuid

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from analytics.check import TOPICS
from commands.check import check_run
from infra.consumer import build_consumer, watermarks
from infra.log_reader import read_topic
from infra.producer import EventProducer, build_producer
from tests.e2e.conftest import webgym_cli


def webgym(settings, *args, timeout=180):
    return webgym_cli(settings, *args, timeout=timeout)


def test_a_finished_run_holds_every_invariant(finished_run, tmp_path):
    summary = finished_run.summary
    out = tmp_path / "check.json"
    result = webgym(finished_run.settings, "check", "--run", summary.run_id, "--json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.read_text())
    assert report["ok"] is True and report["violations"] == []
    counts = report["counts"]
    assert counts["started"] == summary.started == 16
    assert counts["ended"] == summary.ended == 16
    assert (counts["finished"], counts["aborted"]) == (summary.finished, summary.aborted)
    assert counts["lost"] == 0
    assert counts["duplicates_after_dedup"] == 0
    assert counts["trajectories"] == counts["scored"] == summary.judged == 16
    assert counts["successes"] == summary.successes
    assert f"run {summary.run_id}" in result.stdout and "all invariants hold" in result.stdout


def copy_topics(source, target, suffixes) -> None:
    """Every record of the source's topics into the same partition of the target's, in order:
    offsets stay the same, and so does every reference a trajectory or dead letter holds."""
    consumer = build_consumer(source, f"e2e-copy-{uuid.uuid4().hex[:8]}", "e2e-copy")
    producer = build_producer(target, "e2e-copy")
    expected, delivered = [], []

    def on_delivery(error, message):
        delivered.append((error, message.topic(), message.partition(), message.offset()))

    try:
        for suffix in suffixes:
            topic = source.topic(suffix)
            for partition in consumer.list_topics(topic, timeout=10).topics[topic].partitions:
                low, high = watermarks(consumer, TopicPartition(topic, partition), 10)
                assert low == 0, f"{topic}[{partition}] starts at offset {low}, not 0"
                if high == 0:
                    continue
                consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
                for offset in range(high):
                    message = consumer.poll(30)
                    assert message is not None, f"{topic}[{partition}] stopped before {high}"
                    assert message.error() is None, message.error()
                    where = (message.topic(), message.partition(), message.offset())
                    assert where == (topic, partition, offset), f"{where}: a gap in the source"
                    producer.produce(
                        target.topic(suffix),
                        value=message.value(),
                        key=message.key(),
                        partition=partition,
                        headers=message.headers(),
                        on_delivery=on_delivery,
                    )
                    producer.poll(0)
                    expected.append((target.topic(suffix), partition, offset))
        assert producer.flush(60) == 0
    finally:
        consumer.close()
    assert [d[0] for d in delivered if d[0] is not None] == []
    assert sorted(d[1:] for d in delivered) == sorted(expected)  # same offsets


def test_a_record_that_breaks_an_invariant_is_named(finished_run, run_settings, tmp_path):
    run_id = finished_run.summary.run_id
    copy_topics(finished_run.settings, run_settings, TOPICS)
    before = check_run(run_settings, run_id)
    assert before.ok, [v.as_dict() for v in before.violations]
    assert before.counts["started"] == 16

    ends = {
        e.record["episode_id"]: e.record
        for e in read_topic(run_settings, "episodes")
        if e.record["kind"] != "started"
    }
    late_episode, twice_episode = sorted(ends)[:2]
    end = ends[late_episode]
    scored = next(
        e.record
        for e in read_topic(run_settings, "trajectories.scored")
        if e.record["episode_id"] == twice_episode
    )
    placed = {}

    def on_delivery(error, message):
        if error is None:  # a failure raises at flush
            placed[message.topic()] = (message.partition(), message.offset())

    producer = EventProducer.connect(run_settings, "e2e-check-violations")
    step = end["step"] + 3  # no operation was ever issued for it
    late = {
        "event_id": f"{late_episode}:{step}:observation",
        "episode_id": late_episode,
        "step": step,
        "ts": end["ts"] + 60_000,
        "screenshot": b"a late screenshot",
        "screenshot_format": "jpeg",
        "width": 1,
        "height": 1,
        "url": "http://late.webgym.test/",
        "title": "late",
        "action_error": None,
        "set_of_marks": None,
        "timings_ms": {},
        "failure": None,
        "page_signals": {},
    }
    producer.produce(
        run_settings.topic("observations"), late_episode, "observation", late, None, on_delivery
    )
    rejudged = {
        **scored,
        "reward": 0.0 if scored["reward"] >= 1.0 else 1.0,
        "judge_version": "e2e-rejudged",
    }
    producer.produce(
        run_settings.topic("trajectories.scored"),
        twice_episode,
        "scored_trajectory",
        rejudged,
        None,
        on_delivery,
    )
    producer.flush()

    out = tmp_path / "check.json"
    result = webgym(run_settings, "check", "--run", run_id, "--json", str(out))
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads(out.read_text())
    assert report["ok"] is False
    assert {(v["invariant"], v["episode_id"]) for v in report["violations"]} == {
        ("after-end", late_episode),
        ("steps", late_episode),
        ("duplicates", twice_episode),
    }
    late_partition, late_offset = placed[run_settings.topic("observations")]
    late_at = {"topic": "observations", "partition": late_partition, "offset": late_offset}
    assert [v["at"] for v in report["violations"] if v["episode_id"] == late_episode] == [
        late_at,
        late_at,
    ]
    partition, offset = placed[run_settings.topic("trajectories.scored")]
    assert [v["at"] for v in report["violations"] if v["episode_id"] == twice_episode] == [
        {"topic": "trajectories.scored", "partition": partition, "offset": offset}
    ]
    assert report["counts"]["duplicates_after_dedup"] == 1
    assert report["counts"]["started"] == 16 and report["counts"]["lost"] == 0
    for episode_id in (late_episode, twice_episode):
        assert episode_id in result.stdout
    assert f"observations[{late_partition}]@{late_offset}" in result.stdout


def test_missing_topics_say_what_to_do(finished_run):
    elsewhere = finished_run.settings.model_copy(
        update={"topic_prefix": f"e2e-none-{uuid.uuid4().hex[:6]}"}
    )
    result = webgym(elsewhere, "check")
    assert result.returncode == 1
    said = " ".join(result.stderr.split())
    assert "topics missing" in said and "webgym topics create" in said
    assert "Traceback" not in said


def test_an_unknown_run_is_refused(finished_run):
    result = webgym(finished_run.settings, "check", "--run", "no-such-run")
    assert result.returncode == 1
    said = " ".join(result.stderr.split())
    assert "'no-such-run' has no episode events" in said
    assert finished_run.summary.run_id in said and "Traceback" not in said
