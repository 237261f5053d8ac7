"""Task sets (``tasks.sets``), the built-in sets (practice web, MiniWoB++ instances) and the
seeded page set-up spec, without services."""

from __future__ import annotations

import json

import pytest

from schemas.serde import default_catalog
from sites import generate_sites
from sites.tasks import generate_tasks
from tasks import miniwob
from tasks.page_setup import SetupSpecError, parse_setup, setup_spec, task_setup
from tasks.practice_web import practice_web_seed, practice_web_tasks
from tasks.sets import (
    TaskSetError,
    UnknownTaskSet,
    check_known,
    is_member,
    members,
    name_for_file,
    parse_weights,
    set_sizes,
    stamp,
)
from tasks.split import check_split
from tasks.webgym_format import task_from_webgym, to_webgym


def test_membership_is_the_own_set_or_its_split():
    task = {"task_id": "t", "task_set": "webgym", "split": "test"}
    assert is_member(task, "webgym") and is_member(task, "webgym/test")
    assert not is_member(task, "webgym/train") and not is_member(task, "web")
    assert not is_member({"task_id": "old", "split": "test"}, "")  # no set: in none
    tasks = [task, {"task_id": "u", "task_set": "webgym", "split": None}, {"task_id": "v"}]
    assert set_sizes(tasks) == {"webgym": 2, "webgym/test": 1}
    assert [t["task_id"] for t in members(tasks, "webgym")] == ["t", "u"]


def test_weights_parse_and_bad_ones_say_what_to_write():
    assert parse_weights("miniwob/train=2,practice-web/seed-0=1") == {
        "miniwob/train": 2.0,
        "practice-web/seed-0": 1.0,
    }
    assert parse_weights(" miniwob/heldout ") == {"miniwob/heldout": 1.0}
    for bad, message in [
        ("", "name at least one"),
        ("a=x", "not NAME=WEIGHT"),
        ("a=-1", "0 or more"),
        ("a=0", "above 0"),
        ("=2", "task set name"),
        ("/a", "task set name"),
    ]:
        with pytest.raises(TaskSetError, match=message):
            parse_weights(bad)


def test_an_unknown_set_is_one_line_naming_the_sets_that_exist():
    sizes = {"miniwob/train": 2200, "practice-web/seed-0": 300}
    check_known(["miniwob/train"], sizes)
    with pytest.raises(UnknownTaskSet) as raised:
        check_known(["miniwob/train", "miniwob/tran"], sizes)
    message = str(raised.value)
    assert "\n" not in message
    assert "'miniwob/tran'" in message and "'miniwob/train'" not in message
    assert "miniwob/train (2200), practice-web/seed-0 (300)" in message


def test_a_loaded_file_s_set_is_named_after_the_file():
    assert name_for_file("/data/webgym_tasks.jsonl.gz") == "webgym_tasks"
    assert name_for_file("held.parquet") == "held"
    assert name_for_file("x.jsonl") == "x"
    stamped = stamp([{"task_id": "a"}], "mine")
    assert stamped == [{"task_id": "a", "task_set": "mine"}]
    with pytest.raises(TaskSetError):
        stamp([], "a,b")


def test_a_webgym_line_may_name_its_set_and_writes_it_back():
    line = {
        "task_id": "t1",
        "task_name": "Find it.",
        "website": "example.com",
        "difficulty": 1,
        "evaluator_reference": "the fact",
        "task_set": "webgym-v1",
    }
    task = task_from_webgym(line)
    assert task["task_set"] == "webgym-v1" and "task_set" not in json.loads(task["extra_json"])
    assert to_webgym(task)["task_set"] == "webgym-v1"
    assert task_from_webgym({**line, "task_set": None})["task_set"] == ""
    default_catalog().encode("task", task)


def test_practice_web_tasks_carry_their_set_and_a_split_that_never_depends_on_the_count():
    tasks = generate_tasks(generate_sites(seed=3, count=2), seed=3)
    assert {t["task_set"] for t in tasks} == {"practice-web/seed-3"}
    small = {t["task_id"]: t["split"] for t in practice_web_tasks(seed=0, count=7)}
    large = practice_web_tasks(seed=0, count=30)
    assert {t["task_id"]: t["split"] for t in large if t["task_id"] in small} == small
    train = [t for t in large if t["split"] == "train"]
    test = [t for t in large if t["split"] == "test"]
    assert len({t["website"] for t in test}) == 6  # 2 of each block of 10 sites
    assert check_split(train, test) == []
    for task in large:
        default_catalog().encode("task", task)


def test_practice_web_set_names():
    assert practice_web_seed("practice-web/seed-0") == 0
    assert practice_web_seed("practice-web/seed-12/test") == 12
    assert practice_web_seed("practice-web/seed-12/other") is None
    assert practice_web_seed("practice-web/seed-x") is None
    assert practice_web_seed("miniwob/train") is None


def test_miniwob_instances_are_page_and_seed_with_disjoint_held_out_seeds():
    train = miniwob.train_tasks(["click-button", "focus-text"], 3)
    heldout = miniwob.heldout_tasks(["click-button"], 2)
    assert [t["task_id"] for t in train] == [
        "miniwob-click-button-s0",
        "miniwob-click-button-s1",
        "miniwob-click-button-s2",
        "miniwob-focus-text-s0",
        "miniwob-focus-text-s1",
        "miniwob-focus-text-s2",
    ]
    assert [t["task_id"] for t in heldout] == [
        "miniwob-click-button-s1000000",
        "miniwob-click-button-s1000001",
    ]
    assert {t["task_set"] for t in train} == {"miniwob/train"}
    assert {t["task_set"] for t in heldout} == {"miniwob/heldout"}
    extra = json.loads(heldout[0]["extra_json"])
    assert extra == {
        "miniwob": "click-button",
        "mode": "set_of_marks",
        "seed": 1_000_000,
        "setup": "miniwob",
        "source": "miniwob",
    }
    assert task_setup(extra) == "miniwob?seed=1000000"
    with pytest.raises(ValueError, match="below"):
        miniwob.instance_tasks(["click-button"], [1_000_000], miniwob.TRAIN_SET)
    with pytest.raises(ValueError, match="from 1000000"):
        miniwob.instance_tasks(["click-button"], [5], miniwob.HELDOUT_SET)
    # sets of other names never share a task id with the built-in ones
    both = miniwob.instance_sets(["click-button"], 2, 2, prefix="learn")
    assert {t["task_set"] for t in both} == {"learn/train", "learn/heldout"}
    assert both[0]["task_id"] == "learn/train:miniwob-click-button-s0"
    assert not {t["task_id"] for t in both} & {t["task_id"] for t in train + heldout}


def test_the_set_up_spec_round_trips_and_refuses_garbage():
    assert setup_spec(None, 3) is None
    assert setup_spec("miniwob") == "miniwob"
    assert parse_setup(setup_spec("miniwob", 17)) == ("miniwob", 17)
    assert parse_setup("miniwob") == ("miniwob", None)
    assert task_setup({"seed": 4}) is None  # a practice-web seed is no set-up
    assert task_setup({"setup": "miniwob"}) == "miniwob"
    assert task_setup({"setup": "miniwob", "seed": "x"}) == "miniwob?seed=x"
    for bad in ("miniwob?seed=x", "miniwob?seed=1&seed=2", "miniwob?other=1"):
        with pytest.raises(SetupSpecError):
            parse_setup(bad)
    with pytest.raises(SetupSpecError):
        setup_spec("miniwob", "17")


def test_the_navigate_operation_of_an_instance_carries_its_seed():
    from streams.orchestrator import Rules, on_started

    task = miniwob.task_record("click-link", 17)
    started = {
        "event_id": "r-000000:started",
        "episode_id": "r-000000",
        "step": 0,
        "ts": 1,
        "kind": "started",
        "task_id": task["task_id"],
    }
    transition = on_started(None, started, task, Rules(horizons={}), 1)
    [navigate] = [o.record for o in transition.outputs if o.topic == "ops.navigate"]
    assert navigate["setup"] == "miniwob?seed=17"
    assert navigate["set_of_marks"] is True
    default_catalog().encode("navigate_op", navigate)
