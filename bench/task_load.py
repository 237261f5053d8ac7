"""Benchmark: a 100,000-task WebGym file through the code path of `webgym tasks load`.

The file is synthetic and deterministic (seed 0): JSON Lines in the WebGym shape, with every
rubric shape (fact groups, one string, a list of strings, a list of {description, difficulty}),
difficulty as words in any case and as 1-3, split markers and extra fields, over 2,000 websites.
On the local stack, under a fresh topic prefix whose topics are deleted afterwards, it measures:

- parse + validate: ``load_tasks`` of the file, in tasks/s;
- publish: ``publish_tasks`` into the empty tasks topic (read its state, encode, compare,
  produce, wait for every acknowledgement), in tasks/s;
- re-load: ``load_tasks`` + ``publish_tasks`` of the same file again, when nothing changes (the
  whole topic is read back and compared), in seconds; the topic's end offset must not move.

Writes bench/results/task_load.json. Run: `.venv/bin/python -m bench.task_load` (after
`webgym up`); `--tasks N` for another size.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import TopicPartition

from infra.consumer import build_consumer, watermarks
from infra.provenance import write_result
from infra.settings import Settings
from infra.topic_admin import create_topics, delete_topics
from tasks.publish import PublishCounts, publish_tasks
from tasks.webgym_format import load_tasks

RESULTS = Path(__file__).parent / "results" / "task_load.json"
WEBSITES = 2000
DOMAINS = {
    "shopping": ["electronics", "groceries", "fashion"],
    "travel": ["hotels", "flights", "car rental"],
    "news": ["world", "sport", "weather"],
    "cooking": ["recipes", "reviews"],
    "government": ["permits", "taxes"],
    "education": ["courses", "libraries"],
}
DIFFICULTY_SPELLINGS = ["easy", "Medium", "HARD", 1, 2, 3, "1", "2", "3"]


def synthetic_line(rng: random.Random, number: int) -> dict:
    """One WebGym-shaped task; the shapes rotate so every parser branch is exercised."""
    site = rng.randrange(WEBSITES)
    domain = list(DOMAINS)[site % len(DOMAINS)]
    facts = [f"fact {number}.{k}: value {rng.randrange(10_000)}" for k in range(rng.randint(1, 4))]
    shape = number % 4
    if shape == 0:
        rubric = [
            {"id": f"g{k + 1}", "description": f"the answer shows {fact}", "facts": [fact]}
            for k, fact in enumerate(facts)
        ]
    elif shape == 1:
        rubric = facts[0]
    elif shape == 2:
        rubric = facts
    else:
        rubric = [
            {"description": fact, "difficulty": rng.choice(["easy", "hard"])} for fact in facts
        ]
    line = {
        "task_id": f"bench-{number:06d}",
        "task_name": f"On site {site}, find item {rng.randrange(100_000)} and report its "
        f"{rng.choice(['price', 'rating', 'opening hours', 'author', 'release date'])}.",
        "website": f"{'www.' if site % 3 == 0 else ''}site{site:04d}.example.com",
        "domain": domain,
        "subdomain": rng.choice(DOMAINS[domain]),
        "difficulty": DIFFICULTY_SPELLINGS[number % len(DIFFICULTY_SPELLINGS)],
        "evaluator_reference": rubric,
        "definite_answer": str(rng.randrange(1000)) if number % 5 == 0 else None,
        "language": "en",
        "template_id": number % 97,
    }
    if number % 3 == 0:
        line["is_ood"] = site % 5 == 0
    return line


def write_file(path: Path, count: int) -> None:
    rng = random.Random(0)
    with path.open("w") as out:
        for number in range(count):
            out.write(json.dumps(synthetic_line(rng, number)) + "\n")


def end_offset(settings: Settings) -> int:
    topic = settings.topic("tasks")
    consumer = build_consumer(settings, group_id=f"bench-{uuid.uuid4().hex[:8]}", client_id="bench")
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(watermarks(consumer, TopicPartition(topic, p), 10)[1] for p in partitions)
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000, help="tasks in the synthetic file")
    count = parser.parse_args().tasks

    settings = Settings().model_copy(
        update={"topic_prefix": f"bench-tasks-{uuid.uuid4().hex[:8]}", "default_partitions": 1}
    )
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "webgym_tasks.jsonl"
        write_file(path, count)
        file_bytes = path.stat().st_size
        create_topics(settings)
        try:
            started = time.perf_counter()
            loaded = load_tasks(path, strict=True)
            parse_s = time.perf_counter() - started
            assert not loaded.errors and len(loaded.tasks) == count, loaded.errors[:3]

            started = time.perf_counter()
            first = publish_tasks(settings, loaded.tasks)
            publish_s = time.perf_counter() - started
            assert first == PublishCounts(count, 0, 0), first
            offset = end_offset(settings)
            del loaded  # a re-load runs in a fresh process: nothing of the first load in memory
            gc.collect()

            started = time.perf_counter()
            reloaded = load_tasks(path, strict=True)
            reparse_s = time.perf_counter() - started
            again = publish_tasks(settings, reloaded.tasks)
            reload_s = time.perf_counter() - started
            assert again == PublishCounts(0, 0, count), again
            assert end_offset(settings) == offset, "the re-load appended records"
        finally:
            delete_topics(settings)

    result = {
        "benchmark": "webgym tasks load: parse + validate, publish, re-load of a WebGym JSONL file",
        "tasks": count,
        "websites": WEBSITES,
        "file_mib": round(file_bytes / 2**20, 1),
        "parse_validate": {"seconds": round(parse_s, 2), "tasks_per_s": round(count / parse_s)},
        "publish": {
            "seconds": round(publish_s, 2),
            "tasks_per_s": round(count / publish_s),
            "counts": {"new": first.new, "changed": first.changed, "unchanged": first.unchanged},
        },
        "reload_nothing_changes": {
            "seconds": round(reload_s, 2),
            "parse_validate_s": round(reparse_s, 2),
            "read_topic_and_compare_s": round(reload_s - reparse_s, 2),
            "counts": {"new": again.new, "changed": again.changed, "unchanged": again.unchanged},
            "end_offset_moved": False,
        },
    }
    write_result(RESULTS, result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
