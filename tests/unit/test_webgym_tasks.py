"""WebGym task files: every rubric shape, exact line errors, strict mode, Parquet, the OOD split and
the counts. No services: the CLI commands tested here never reach Kafka."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from commands.tasks import tasks_app
from schemas.serde import default_catalog
from tasks.split import SplitError, check_split, split_by_website, website_key
from tasks.stats import task_stats
from tasks.webgym_format import (
    TASK_TS,
    LineError,
    TaskFieldError,
    TaskFileError,
    load_tasks,
    normalise_difficulty,
    normalise_split,
    to_webgym,
    write_webgym_jsonl,
)

FIXTURE = Path(__file__).parents[1] / "data" / "webgym_tasks.jsonl"
runner = CliRunner()


@pytest.fixture(scope="module")
def loaded():
    return load_tasks(FIXTURE)


@pytest.fixture(scope="module")
def by_id(loaded):
    return {task["task_id"]: task for task in loaded.tasks}


def test_fixture_loads_every_good_line_and_names_the_bad_one(loaded):
    assert loaded.rows == 12
    assert len(loaded.tasks) == 11
    assert loaded.skipped == 1
    assert loaded.errors == [
        LineError(str(FIXTURE), 7, "difficulty", "'extreme' is not easy, medium, hard or 1-3")
    ]
    assert str(loaded.errors[0]) == (
        f"{FIXTURE}:7: field 'difficulty': 'extreme' is not easy, medium, hard or 1-3"
    )
    assert "wg-0007" not in {task["task_id"] for task in loaded.tasks}


def test_every_record_fits_the_task_schema(loaded):
    catalog = default_catalog()
    for task in loaded.tasks:
        assert catalog.decode(catalog.encode("task", task), "task").record == task


def test_strict_mode_loads_nothing():
    strict = load_tasks(FIXTURE, strict=True)
    assert strict.tasks == []
    assert [(error.line, error.field) for error in strict.errors] == [(7, "difficulty")]
    assert strict.skipped == 12


def test_loading_is_deterministic(loaded):
    again = load_tasks(FIXTURE)
    assert again.tasks == loaded.tasks
    assert {task["ts"] for task in loaded.tasks} == {TASK_TS}
    assert all(task["event_id"] == f"task:{task['task_id']}" for task in loaded.tasks)


def test_fact_groups_are_kept_and_numbered(by_id):
    assert by_id["wg-0001"]["evaluator_reference"] == [
        {
            "id": "price",
            "description": "The answer states a price",
            "facts": ["a price in US dollars"],
        },
        {
            "id": "item",
            "description": "The item is a 1.7 litre electric kettle",
            "facts": ["electric kettle", "1.7 litre"],
        },
    ]
    assert [group["id"] for group in by_id["wg-0002"]["evaluator_reference"]] == ["g1", "g2"]


def test_one_string_becomes_one_group_with_that_fact(by_id):
    text = "The answer quotes the headline of the top story"
    assert by_id["wg-0003"]["evaluator_reference"] == [
        {"id": "g1", "description": text, "facts": [text]}
    ]


def test_a_list_of_strings_becomes_one_group_each(by_id):
    assert by_id["wg-0004"]["evaluator_reference"] == [
        {
            "id": "g1",
            "description": "The recipe is vegetarian",
            "facts": ["The recipe is vegetarian"],
        },
        {
            "id": "g2",
            "description": "The recipe is rated 4.5 stars or more",
            "facts": ["The recipe is rated 4.5 stars or more"],
        },
    ]


def test_description_and_difficulty_groups_keep_their_difficulty_in_extra_json(by_id):
    task = by_id["wg-0005"]
    assert task["evaluator_reference"] == [
        {
            "id": "g1",
            "description": "The search is for hotels in Lisbon",
            "facts": ["The search is for hotels in Lisbon"],
        },
        {
            "id": "g2",
            "description": "The filter is a guest rating of 9 or more",
            "facts": ["The filter is a guest rating of 9 or more"],
        },
    ]
    extra = json.loads(task["extra_json"])
    assert extra["evaluator_reference_extra"] == {
        "g1": {"difficulty": "easy"},
        "g2": {"difficulty": "medium"},
    }


def test_fields_are_normalised(by_id):
    assert {task_id: task["difficulty"] for task_id, task in by_id.items()} == {
        "wg-0001": "easy",
        "wg-0002": "medium",  # 2
        "wg-0003": "hard",  # "3"
        "wg-0004": "hard",  # "Hard"
        "wg-0005": "medium",  # "MEDIUM"
        "wg-0006": "easy",  # 1
        "wg-0008": "medium",
        "wg-0009": "easy",
        "wg-0010": "medium",
        "wg-0011": "easy",
        "wg-0012": "hard",
    }
    assert by_id["wg-0001"]["split"] == "train"
    assert by_id["wg-0002"]["split"] == "train"  # distribution: in-distribution
    assert by_id["wg-0003"]["split"] == "test"  # is_ood: true
    assert by_id["wg-0004"]["split"] == "test"
    assert by_id["wg-0005"]["split"] is None
    assert by_id["wg-0001"]["start_url"] == "https://amazon.com/"
    assert by_id["wg-0003"]["start_url"] == "https://www.bbc.co.uk/"  # the website had a scheme
    assert by_id["wg-0006"]["start_url"] == "https://github.com/trending"  # given
    assert by_id["wg-0005"]["definite_answer"] == "42"
    assert by_id["wg-0001"]["definite_answer"] is None
    assert by_id["wg-0001"]["domain"] == "shopping"
    assert by_id["wg-0001"]["subdomain"] == "electronics"


def test_unknown_fields_are_kept_with_the_source(by_id):
    assert json.loads(by_id["wg-0001"]["extra_json"]) == {
        "language": "en",
        "source": "webgym",
        "tags": ["price", "kettle"],
    }
    assert json.loads(by_id["wg-0006"]["extra_json"]) == {"source": "webvoyager"}
    # split markers are consumed, not extras
    assert json.loads(by_id["wg-0003"]["extra_json"]) == {"source": "webgym"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("easy", "easy"),
        (" Medium ", "medium"),
        ("HARD", "hard"),
        (1, "easy"),
        (2.0, "medium"),
        ("3", "hard"),
        (" 2 ", "medium"),
    ],
)
def test_accepted_difficulties(value, expected):
    assert normalise_difficulty(value) == expected


@pytest.mark.parametrize("value", ["extreme", 0, 4, "4", 1.5, True, None, [], ""])
def test_refused_difficulties(value):
    with pytest.raises(TaskFieldError) as refused:
        normalise_difficulty(value)
    assert refused.value.field == "difficulty"


@pytest.mark.parametrize(
    ("markers", "expected"),
    [
        ({}, None),
        ({"split": "Train"}, "train"),
        ({"split": "test"}, "test"),
        ({"split": ""}, None),
        ({"distribution": "out-of-distribution"}, "test"),
        ({"distribution": "OOD"}, "test"),
        ({"distribution": "in distribution"}, "train"),
        ({"is_ood": False}, "train"),
        ({"is_ood": 1}, "test"),
        ({"is_ood": "yes"}, "test"),
        ({"split": "test", "is_ood": True}, "test"),
    ],
)
def test_split_markers(markers, expected):
    assert normalise_split(markers) == expected


@pytest.mark.parametrize(
    ("markers", "field"),
    [
        ({"split": "validation"}, "split"),
        ({"distribution": 3}, "distribution"),
        ({"is_ood": "maybe"}, "is_ood"),
        ({"split": "train", "is_ood": True}, "split"),
    ],
)
def test_refused_split_markers(markers, field):
    with pytest.raises(TaskFieldError) as refused:
        normalise_split(markers)
    assert refused.value.field == field


def _write_lines(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _rows() -> list[dict]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


def test_a_repeated_task_id_is_an_error_on_the_later_line(tmp_path):
    rows = _rows()
    rows.insert(3, {**rows[0], "task_name": "another instruction"})
    result = load_tasks(_write_lines(tmp_path / "dup.jsonl", rows))
    assert [(e.line, e.field) for e in result.errors] == [(4, "task_id"), (8, "difficulty")]
    assert "line 1" in result.errors[0].message
    first = next(task for task in result.tasks if task["task_id"] == "wg-0001")
    assert first["task_name"] == rows[0]["task_name"]


def test_unreadable_lines_are_errors_and_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "broken.jsonl"
    lines = FIXTURE.read_text().splitlines()
    path.write_text("\n".join([lines[0], "", "{not json", "[1, 2]", lines[1]]) + "\n")
    result = load_tasks(path)
    assert [task["task_id"] for task in result.tasks] == ["wg-0001", "wg-0002"]
    assert [(e.line, e.field) for e in result.errors] == [(3, None), (4, None)]
    assert result.errors[0].message.startswith("not valid JSON")
    assert str(result.errors[1]) == f"{path}:4: a line must be one JSON object, got a list"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"task_id": ""}, "task_id"),
        ({"task_name": None}, "task_name"),
        ({"website": "file:///etc/passwd"}, "website"),
        ({"start_url": "javascript:alert(1)"}, "start_url"),
        ({"evaluator_reference": []}, "evaluator_reference"),
        (
            {"evaluator_reference": [{"id": "a", "description": "x", "facts": []}]},
            "evaluator_reference",
        ),
        ({"evaluator_reference": 5}, "evaluator_reference"),
        ({"domain": ["shopping"]}, "domain"),
    ],
)
def test_bad_fields_are_named(tmp_path, change, field):
    row = {**_rows()[0], **change}
    result = load_tasks(_write_lines(tmp_path / "one.jsonl", [row]))
    assert result.tasks == []
    assert [(e.line, e.field) for e in result.errors] == [(1, field)]


def test_gzipped_jsonl_loads_the_same(tmp_path, loaded):
    path = tmp_path / "tasks.jsonl.gz"
    path.write_bytes(gzip.compress(FIXTURE.read_bytes()))
    result = load_tasks(path)
    assert result.tasks == loaded.tasks
    assert [(e.line, e.field) for e in result.errors] == [(7, "difficulty")]


def _write_parquet(path: Path, rows: list[dict]) -> Path:
    # Columns from the union of the rows' fields: a row without a field has a null there.
    names = list(dict.fromkeys(name for row in rows for name in row))
    pq.write_table(pa.table({name: [row.get(name) for row in rows] for name in names}), path)
    return path


def test_parquet_loads_the_same(tmp_path, loaded):
    path = _write_parquet(tmp_path / "tasks.parquet", [to_webgym(t) for t in loaded.tasks])
    assert load_tasks(path).tasks == loaded.tasks


def test_parquet_numeric_difficulty_old_rubrics_and_a_bad_row(tmp_path):
    rows = [
        {
            "task_id": f"pq-{n}",
            "task_name": f"instruction {n}",
            "website": "example.org",
            "difficulty": n,
            "evaluator_reference": [{"description": f"fact {n}", "difficulty": "easy"}],
        }
        for n in (1, 2, 7, 3)
    ]
    result = load_tasks(_write_parquet(tmp_path / "numeric.parquet", rows))
    assert [task["difficulty"] for task in result.tasks] == ["easy", "medium", "hard"]
    assert result.errors == [
        LineError(
            str(tmp_path / "numeric.parquet"), 3, "difficulty", "7 is not easy, medium, hard or 1-3"
        )
    ]
    assert result.tasks[0]["evaluator_reference"] == [
        {"id": "g1", "description": "fact 1", "facts": ["fact 1"]}
    ]
    assert json.loads(result.tasks[0]["extra_json"]) == {
        "evaluator_reference_extra": {"g1": {"difficulty": "easy"}},
        "source": "webgym",
    }


def test_written_webgym_lines_load_back_to_the_same_records(tmp_path, loaded):
    path = tmp_path / "out" / "tasks.jsonl.gz"
    write_webgym_jsonl(path, loaded.tasks)
    assert load_tasks(path).tasks == loaded.tasks


def test_unknown_files_are_refused(tmp_path):
    with pytest.raises(TaskFileError, match="no such file"):
        load_tasks(tmp_path / "missing.jsonl")
    (tmp_path / "tasks.csv").write_text("task_id\n")
    with pytest.raises(TaskFileError, match="expected .jsonl, .jsonl.gz or .parquet"):
        load_tasks(tmp_path / "tasks.csv")
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(TaskFileError, match="not a readable Parquet file"):
        load_tasks(tmp_path / "bad.parquet")


def test_website_keys():
    assert website_key("https://www.Amazon.com/books") == "amazon.com"
    assert website_key("www.amazon.com") == "amazon.com"
    assert website_key("amazon.com:443") == "amazon.com"
    assert website_key("smile.amazon.com") == "smile.amazon.com"


def test_split_keeps_every_website_on_one_side(loaded):
    train, test = split_by_website(loaded.tasks, test_fraction=0.3, seed=0, honour_markers=False)
    assert check_split(train, test) == []
    train_sites = {website_key(task["website"]) for task in train}
    test_sites = {website_key(task["website"]) for task in test}
    assert not train_sites & test_sites
    assert len(test_sites) == 2  # round(0.3 * 7 websites)
    assert sorted(t["task_id"] for t in train + test) == sorted(t["task_id"] for t in loaded.tasks)
    assert {task["split"] for task in train} == {"train"}
    assert {task["split"] for task in test} == {"test"}


def test_split_honours_the_files_own_markers(loaded):
    marked = {t["task_id"]: t["split"] for t in loaded.tasks if t.get("split")}
    assert "test" in marked.values()  # the fixture file marks some tasks (is_ood, distribution)
    for seed in range(5):
        train, test = split_by_website(loaded.tasks, test_fraction=0.3, seed=seed)
        assert check_split(train, test) == []
        placed = {t["task_id"]: t["split"] for t in train + test}
        assert all(placed[task_id] == split for task_id, split in marked.items())


def test_split_refuses_markers_that_split_a_website():
    tasks = [
        {"task_id": "a", "website": "shop.example", "split": "train"},
        {"task_id": "b", "website": "www.shop.example", "split": "test"},
        {"task_id": "c", "website": "news.example", "split": None},
    ]
    with pytest.raises(SplitError, match="shop.example.*--ignore-markers"):
        split_by_website(tasks, 0.5)
    train, test = split_by_website(tasks, 0.5, honour_markers=False)
    assert check_split(train, test) == []


def test_split_depends_on_the_seed_only(loaded):
    shuffled = list(loaded.tasks)
    random.Random(5).shuffle(shuffled)

    def test_ids(tasks, seed):
        return sorted(task["task_id"] for task in split_by_website(tasks, 0.3, seed)[1])

    assert test_ids(loaded.tasks, 0) == test_ids(shuffled, 0)
    assert len({tuple(test_ids(loaded.tasks, seed)) for seed in range(10)}) > 1


def test_check_split_catches_a_planted_overlap(loaded):
    train, test = split_by_website(loaded.tasks, test_fraction=0.3, seed=0)
    planted = train[0]
    violations = check_split(train, [*test, {**planted, "task_id": "planted"}])
    assert [violation.website for violation in violations] == [website_key(planted["website"])]
    assert violations[0].test_task_ids == ("planted",)
    assert planted["task_id"] in violations[0].train_task_ids


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1])
def test_split_refuses_fractions_outside_0_1(loaded, fraction):
    with pytest.raises(SplitError, match="between 0 and 1"):
        split_by_website(loaded.tasks, fraction)


def test_split_needs_two_websites(by_id):
    with pytest.raises(SplitError, match="at least 2"):
        split_by_website([by_id["wg-0001"], by_id["wg-0002"]], 0.5)


def test_stats_counts_are_exact(loaded):
    stats = task_stats(loaded.tasks)
    assert stats.tasks == 11
    assert stats.websites == 7
    assert stats.by_domain == {
        "shopping": 3,
        "news": 2,
        "cooking": 2,
        "travel": 1,
        "technology": 1,
        "science": 1,
        "education": 1,
    }
    assert stats.by_subdomain == {
        ("shopping", "electronics"): 2,
        ("shopping", "customer service"): 1,
        ("news", "world"): 1,
        ("news", "weather"): 1,
        ("cooking", "recipes"): 2,
        ("travel", "hotels"): 1,
        ("technology", "code hosting"): 1,
        ("science", "space"): 1,
        ("education", "courses"): 1,
    }
    assert stats.by_difficulty == {"easy": 4, "medium": 4, "hard": 3}
    assert stats.by_split == {"train": 2, "test": 2, "(none)": 7}
    assert stats.by_source == {"webgym": 10, "webvoyager": 1}


@pytest.mark.parametrize("command", ["load", "stats", "split", "check-split"])
def test_every_command_has_help(command):
    result = runner.invoke(tasks_app, [command, "--help"])
    assert result.exit_code == 0
    assert "Usage" in result.output
    assert len(result.output.split()) > 30


def test_cli_split_writes_both_files_and_checks_them(tmp_path):
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    result = runner.invoke(
        tasks_app,
        [
            "split",
            str(FIXTURE),
            "--train",
            str(train),
            "--test",
            str(test),
            "--test-fraction",
            "0.3",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "split ok" in result.output
    assert "1 line left out" in result.output
    train_tasks, test_tasks = load_tasks(train).tasks, load_tasks(test).tasks
    assert len(train_tasks) + len(test_tasks) == 11
    assert check_split(train_tasks, test_tasks) == []
    assert [json.loads(line)["split"] for line in test.read_text().splitlines()] == ["test"] * len(
        test_tasks
    )


def test_cli_check_split_names_the_overlapping_website(tmp_path, loaded):
    train, test = split_by_website(loaded.tasks, test_fraction=0.3, seed=0)
    planted = train[0]
    write_webgym_jsonl(tmp_path / "train.jsonl", train)
    write_webgym_jsonl(tmp_path / "test.jsonl", [*test, {**planted, "task_id": "planted"}])
    result = runner.invoke(
        tasks_app, ["check-split", str(tmp_path / "train.jsonl"), str(tmp_path / "test.jsonl")]
    )
    assert result.exit_code == 1
    assert "split check failed" in result.output
    assert website_key(planted["website"]) in result.output


def test_cli_stats_of_a_file(loaded):
    result = runner.invoke(tasks_app, ["stats", str(FIXTURE)])
    assert result.exit_code == 0, result.output
    assert "11 tasks from 7 websites" in result.output
    assert "webvoyager" in result.output


def test_cli_strict_load_refuses_the_file_before_publishing(monkeypatch):
    # A port where nothing listens: a publish attempt would fail with "no Kafka broker answered".
    monkeypatch.setenv("WEBGYM_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    result = runner.invoke(tasks_app, ["load", "--strict", str(FIXTURE)])
    assert result.exit_code == 1
    assert "nothing was published" in result.output
    assert "extreme" in result.output
    assert "no Kafka broker" not in result.output


def test_cli_unknown_format_says_what_to_give(tmp_path):
    (tmp_path / "tasks.csv").write_text("task_id\n")
    result = runner.invoke(tasks_app, ["stats", str(tmp_path / "tasks.csv")])
    assert result.exit_code == 1
    assert "expected .jsonl, .jsonl.gz or .parquet" in result.output
