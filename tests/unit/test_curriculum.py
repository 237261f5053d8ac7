"""The task sampler's rules (``streams.curriculum``), task sets and several runs: no Kafka."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pytest

from schemas.serde import default_catalog
from sites import generate_sites
from sites.tasks import generate_tasks
from streams.curriculum import (
    apply,
    empty_sets,
    pick_from_sets,
    pick_task,
    short_of_target,
    target_event,
)
from streams.orchestrator import Output, Rules
from tasks import miniwob
from tasks.practice_web import practice_web_tasks

TASKS = generate_tasks(generate_sites(count=3))
BY_ID = {t["task_id"]: t for t in TASKS}
SITES = sorted({t["website"] for t in TASKS})
RULES = Rules(horizons={"easy": 10, "medium": 20, "hard": 30})
NOW = 1_795_000_000_000
PRACTICE = "practice-web/seed-0"


def target(n: int, run_id: str = "r1", event_id: str = "target-1", **fields) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "ts": NOW,
        "kind": "target",
        "in_flight": n,
        "run_id": run_id,
        "task_sets": {PRACTICE: 1.0},
        "seed": 0,
        **fields,
    }


def ended(episode_id: str) -> dict[str, Any]:
    return {
        "event_id": f"{episode_id}:ended",
        "ts": NOW,
        "kind": "episode_ended",
        "episode_id": episode_id,
        "reason": "finished: answer",
    }


def blocked(website: str, until_ts: int) -> dict[str, Any]:
    return {
        "event_id": f"blocked:{website}:{until_ts}",
        "ts": NOW,
        "kind": "site_blocked",
        "website": website,
        "until_ts": until_ts,
    }


def step(state, event, now=NOW) -> tuple[dict, list[Output], bool]:
    default_catalog().encode("curriculum", event)  # inputs as the topic carries them
    state, outputs, changed = apply(state, event, TASKS, RULES, now)
    for output in outputs:
        default_catalog().encode(output.event_type, output.record)
    return state, outputs, changed


def episode_ids(outputs: list[Output]) -> list[str]:
    return [o.record["episode_id"] for o in outputs]


def test_a_target_starts_that_many_episodes():
    state, outputs, changed = step(None, target(3))
    assert changed
    assert episode_ids(outputs) == ["r1-000000", "r1-000001", "r1-000002"]
    first = outputs[0]
    task = BY_ID[first.record["task_id"]]
    assert first == Output(
        "episodes",
        "episode",
        "r1-000000",
        {
            "event_id": "r1-000000:started",
            "episode_id": "r1-000000",
            "step": 0,
            "ts": NOW,
            "kind": "started",
            "task_id": task["task_id"],
            "start_url": task["start_url"],
            "horizon": RULES.horizon(task["difficulty"]),
            "purpose": "train",
            "pinned_version": None,
            "phase": None,
        },
    )
    assert state["runs"]["r1"]["in_flight"] == {o.key: o.record["task_id"] for o in outputs}
    assert state["runs"]["r1"]["started_total"] == 3


def test_the_draws_are_deterministic_for_a_seed():
    def draws(seed: int) -> list[str]:
        _, outputs, _ = step(None, target(8, seed=seed))
        return [o.record["task_id"] for o in outputs]

    assert draws(0) == draws(0)
    assert draws(0) != draws(1)


def test_an_ended_episode_frees_one_slot_filled_at_once():
    state, _, _ = step(None, target(3))
    state, outputs, changed = step(state, ended("r1-000001"))
    assert changed
    assert episode_ids(outputs) == ["r1-000003"]
    assert sorted(state["runs"]["r1"]["in_flight"]) == ["r1-000000", "r1-000002", "r1-000003"]
    # an episode the sampler does not hold frees nothing
    state, outputs, _ = step(state, ended("r0-000009"))
    assert outputs == []
    assert len(state["runs"]["r1"]["in_flight"]) == 3


def test_the_episode_budget_of_a_run_is_respected():
    state, outputs, _ = step(None, target(3, max_episodes=4))
    assert len(outputs) == 3
    state, outputs, _ = step(state, ended("r1-000000"))
    assert episode_ids(outputs) == ["r1-000003"]
    state, outputs, _ = step(state, ended("r1-000001"))
    assert outputs == []
    assert state["runs"]["r1"]["started_total"] == 4
    assert sorted(state["runs"]["r1"]["in_flight"]) == ["r1-000002", "r1-000003"]


def test_a_raised_target_in_the_same_run_tops_up():
    state, _, _ = step(None, target(2))
    state, outputs, _ = step(state, target(5, event_id="target-2"))
    assert episode_ids(outputs) == ["r1-000002", "r1-000003", "r1-000004"]


def test_difficulty_ratios_are_respected():
    _, outputs, _ = step(None, target(30, difficulty_ratios={"hard": 1.0}))
    assert {BY_ID[o.record["task_id"]]["difficulty"] for o in outputs} == {"hard"}
    assert {o.record["horizon"] for o in outputs} == {30}
    _, outputs, _ = step(None, target(60))  # no ratios: every difficulty
    counts = Counter(BY_ID[o.record["task_id"]]["difficulty"] for o in outputs)
    assert set(counts) == {"easy", "medium", "hard"}


def test_pick_task_without_anything_to_pick():
    assert pick_task([], {}, {}, random.Random(0)) is None
    assert pick_task(TASKS, {"expert": 1.0}, {}, random.Random(0)) is None
    every_site = dict.fromkeys(SITES, NOW + 1)
    assert pick_task(TASKS, {}, every_site, random.Random(0)) is None


def test_blocked_sites_are_not_sampled_until_their_time():
    site = SITES[0]
    until = NOW + 60_000
    state, outputs, _ = step(None, blocked(site, until))
    assert outputs == []
    state, outputs, _ = step(state, target(40), now=NOW + 1)
    assert len(outputs) == 40
    assert site not in {BY_ID[o.record["task_id"]]["website"] for o in outputs}
    state, outputs, _ = step(state, target(80, event_id="target-2"), now=until - 1)
    assert site not in {BY_ID[o.record["task_id"]]["website"] for o in outputs}
    state, outputs, _ = step(state, target(120, event_id="target-3"), now=until)
    assert len(outputs) == 40
    assert site in {BY_ID[o.record["task_id"]]["website"] for o in outputs}
    assert state["blocked"] == {}


def test_a_block_never_shortens_an_earlier_one():
    state, _, _ = step(None, blocked(SITES[0], NOW + 60_000))
    state, _, _ = step(state, blocked(SITES[0], NOW + 1_000))
    assert state["blocked"] == {SITES[0]: NOW + 60_000}


def test_every_site_blocked_starts_nothing_until_one_is_free():
    state = None
    for site in SITES:
        state, _, _ = step(state, blocked(site, NOW + 1_000))
    state, outputs, _ = step(state, target(2))
    assert outputs == []
    state, outputs, _ = step(state, ended("r1-000000"), now=NOW + 1_000)
    assert episode_ids(outputs) == ["r1-000000", "r1-000001"]


def test_attempts_are_counted_per_task():
    state, outputs, _ = step(None, target(50))
    counts = Counter(o.record["task_id"] for o in outputs)
    assert state["runs"]["r1"]["attempts"] == dict(counts)
    assert sum(state["runs"]["r1"]["attempts"].values()) == 50
    assert max(counts.values()) > 1  # 18 tasks, 50 episodes: tasks come back


def test_a_redelivered_input_resends_the_same_started_events_and_changes_nothing():
    state, first, _ = step(None, target(3))
    # Redelivered after a crash, later: the same events, started when they first were (a chaos
    # run's trajectory once carried the re-sent event's time, 10.9 s after the logged one).
    again_state, again, changed = step(state, target(3), now=NOW + 10_900)
    assert changed is False
    assert again == first
    assert again_state == state
    state, first, _ = step(state, ended("r1-000000"))
    again_state, again, changed = step(state, ended("r1-000000"), now=NOW + 10_900)
    assert (changed, again, again_state) == (False, first, state)
    # an episode that ended since is not started again
    state, _, _ = step(state, ended("r1-000001"))
    _, again, _ = step(state, target(3))
    assert episode_ids(again) == ["r1-000002"]


def test_the_state_given_is_never_changed_in_place():
    state, _, _ = step(None, target(3))
    before = json.dumps(state, sort_keys=True)
    step(state, ended("r1-000000"))
    assert json.dumps(state, sort_keys=True) == before


def test_a_tick_tops_up_only_when_short_and_something_can_be_sampled():
    tasks = generate_tasks(generate_sites(count=2))
    rules = Rules(horizons={"easy": 10, "medium": 20, "hard": 30})
    target = {
        "event_id": "t",
        "ts": 1,
        "kind": "target",
        "in_flight": 2,
        "run_id": "r",
        "max_episodes": 3,
        "task_sets": {PRACTICE: 1.0},
    }
    state, started, _ = apply(None, target, [], rules, 1000)  # no tasks yet: nothing starts
    assert started == [] and not short_of_target(state, [], 1000)
    assert short_of_target(state, tasks, 1000)
    state, started, _ = apply(
        state, {"event_id": "tick:1", "ts": 2, "kind": "tick"}, tasks, rules, 2000
    )
    assert [o.record["episode_id"] for o in started] == ["r-000000", "r-000001"]
    assert not short_of_target(state, tasks, 2000)  # the target is in flight
    blocked = {**state, "blocked": {t["website"]: 10**13 for t in tasks}}
    blocked["runs"] = {"r": {**state["runs"]["r"], "in_flight": {}}}
    assert not short_of_target(blocked, tasks, 2000)  # every site behind a wall


# -- task sets and several runs -------------------------------------------------------------------

MINIWOB_TRAIN = miniwob.instance_tasks(["click-button", "click-link"], range(5), "miniwob/train")
MINIWOB_HELDOUT = miniwob.heldout_tasks(["click-button", "click-link"], 5)
SPLIT_PRACTICE = practice_web_tasks(seed=1, count=10)
NO_SET = [{**t, "task_id": f"old-{t['task_id']}", "task_set": ""} for t in TASKS[:6]]
EVERYTHING = TASKS + MINIWOB_TRAIN + MINIWOB_HELDOUT + SPLIT_PRACTICE + NO_SET
SET_OF = {t["task_id"]: t for t in EVERYTHING}


def run_on(state, event, tasks=EVERYTHING, now=NOW):
    default_catalog().encode("curriculum", event)
    return apply(state, event, tasks, RULES, now)


def sets_drawn(outputs: list[Output]) -> Counter:
    return Counter(SET_OF[o.record["task_id"]]["task_set"] for o in outputs)


def test_a_run_draws_only_from_its_sets_whatever_else_the_topic_holds():
    _, outputs, _ = run_on(None, target(40, task_sets={"miniwob/train": 1.0}))
    assert len(outputs) == 40 and sets_drawn(outputs) == {"miniwob/train": 40}
    _, outputs, _ = run_on(None, target(30, task_sets={"miniwob/heldout": 1.0}))
    assert sets_drawn(outputs) == {"miniwob/heldout": 30}
    # every training instance is tried before any is tried twice
    _, outputs, _ = run_on(None, target(10, task_sets={"miniwob/train": 1.0}))
    assert sorted(o.record["task_id"] for o in outputs) == sorted(
        t["task_id"] for t in MINIWOB_TRAIN
    )


def test_a_set_s_split_is_a_set_and_tasks_without_a_set_are_never_drawn():
    test_ids = {t["task_id"] for t in SPLIT_PRACTICE if t["split"] == "test"}
    assert 0 < len(test_ids) < len(SPLIT_PRACTICE)
    _, outputs, _ = run_on(None, target(50, task_sets={"practice-web/seed-1/test": 1.0}))
    assert {o.record["task_id"] for o in outputs} == test_ids
    _, outputs, _ = run_on(None, target(200, task_sets={"practice-web/seed-1": 1.0}))
    assert {o.record["task_id"] for o in outputs} == {t["task_id"] for t in SPLIT_PRACTICE}
    state, outputs, _ = run_on(None, target(5, task_sets={}))  # no set: nothing
    assert outputs == [] and not short_of_target(state, EVERYTHING, NOW)
    _, outputs, _ = run_on(None, target(5, task_sets={"no/such-set": 1.0}))
    assert outputs == []


def test_sets_are_drawn_by_their_weights():
    weights = {"miniwob/train": 3.0, PRACTICE: 1.0}
    _, outputs, _ = run_on(None, target(400, task_sets=weights, max_episodes=400))
    drawn = sets_drawn(outputs)
    assert set(drawn) == {"miniwob/train", PRACTICE}
    assert 0.68 < drawn["miniwob/train"] / 400 < 0.82, drawn  # 0.75 expected
    # a set with weight 0 is never drawn, and a set with nothing to give leaves the others
    _, outputs, _ = run_on(None, target(20, task_sets={"miniwob/train": 0.0, PRACTICE: 1.0}))
    assert sets_drawn(outputs) == {PRACTICE: 20}
    _, outputs, _ = run_on(None, target(20, task_sets={"none/yet": 5.0, PRACTICE: 1.0}))
    assert sets_drawn(outputs) == {PRACTICE: 20}


def test_two_runs_sample_at_once_each_with_its_own_set_slots_and_budget():
    state, first, _ = run_on(None, target(3, run_id="train", task_sets={"miniwob/train": 1}))
    evaluation = target(
        2, run_id="eval", event_id="t-eval", task_sets={"miniwob/heldout": 1}, max_episodes=3
    )
    state, second, _ = run_on(state, evaluation)
    assert episode_ids(first) == ["train-000000", "train-000001", "train-000002"]
    assert episode_ids(second) == ["eval-000000", "eval-000001"]  # the training run goes on
    assert sorted(state["runs"]) == ["eval", "train"]
    # an ended episode refills the slot of its own run only
    state, outputs, _ = run_on(state, ended("eval-000000"))
    assert episode_ids(outputs) == ["eval-000002"]
    state, outputs, _ = run_on(state, ended("train-000001"))
    assert episode_ids(outputs) == ["train-000003"]
    # the evaluation budget (3) is spent: its slots are not refilled, training's still are
    state, outputs, _ = run_on(state, ended("eval-000001"))
    assert outputs == []
    everything = first + second
    for event in (ended("eval-000002"), ended("train-000000"), ended("train-000002")):
        state, outputs, _ = run_on(state, event)
        everything += outputs
    assert all(
        SET_OF[o.record["task_id"]]["task_set"]
        == ("miniwob/train" if o.key.startswith("train-") else "miniwob/heldout")
        for o in everything
    )
    assert len(state["runs"]["train"]["in_flight"]) == 3
    assert state["runs"]["eval"]["in_flight"] == {}


def test_a_run_s_draws_do_not_depend_on_other_runs():
    def draws(state) -> list[str]:
        state, outputs, _ = run_on(
            state, target(4, run_id="b", event_id="tb", task_sets={PRACTICE: 1})
        )
        for n in range(4):
            state, more, _ = run_on(state, ended(f"b-{n:06d}"))
            outputs += more
        return [o.record["task_id"] for o in outputs if o.key.startswith("b-")]

    alone = draws(None)
    busy, _, _ = run_on(None, target(6, run_id="a", event_id="ta", task_sets={PRACTICE: 1}))
    busy, _, _ = run_on(busy, ended("a-000002"))
    assert draws(busy) == alone


def test_a_stop_or_a_zero_target_ends_only_that_run_s_sampling():
    state, _, _ = run_on(None, target(2, run_id="a", event_id="ta"))
    state, _, _ = run_on(state, target(2, run_id="b", event_id="tb"))
    stop = {"event_id": "stop-a", "ts": NOW, "kind": "stop", "run_id": "a"}
    state, outputs, _ = run_on(state, stop)
    assert outputs == []
    state, outputs, _ = run_on(state, ended("a-000000"))
    assert outputs == []  # the slot stays empty
    state, outputs, _ = run_on(state, ended("b-000000"))
    assert episode_ids(outputs) == ["b-000002"]
    state, outputs, _ = run_on(state, target(0, run_id="b", event_id="tb0"))
    state, outputs, _ = run_on(state, ended("b-000001"))
    assert outputs == []
    assert not short_of_target(state, EVERYTHING, NOW)
    # a later target of a finished run goes on with its numbering: no episode id comes twice
    state, _, _ = run_on(state, ended("a-000001"))
    state, outputs, _ = run_on(state, target(1, run_id="a", event_id="ta2"))
    assert episode_ids(outputs) == ["a-000002"]


def test_redelivered_inputs_resend_the_same_started_events_across_runs():
    state, _, _ = run_on(None, target(2, run_id="a", event_id="ta"))
    state, first, _ = run_on(state, target(2, run_id="b", event_id="tb"))
    again_state, again, changed = run_on(state, target(2, run_id="b", event_id="tb"))
    assert (changed, again, again_state) == (False, first, state)
    state, first, _ = run_on(state, ended("a-000000"))
    again_state, again, changed = run_on(state, ended("a-000000"))
    assert (changed, again, again_state) == (False, first, state)


def test_a_row_of_the_single_target_sampler_is_upgraded():
    old = {
        "target": {"in_flight": 2, "max_episodes": 5, "ratios": {}, "run_id": "old", "seed": 0},
        "in_flight": {"old-000000": TASKS[0]["task_id"], "old-000001": TASKS[1]["task_id"]},
        "started_total": 2,
        "attempts": {TASKS[0]["task_id"]: 1, TASKS[1]["task_id"]: 1},
        "blocked": {},
        "started_by": {"t-old": ["old-000000", "old-000001"]},
        "order": ["t-old"],
    }
    state, outputs, _ = run_on(old, ended("old-000000"))
    assert outputs == []  # the old target names no set: nothing is drawn
    assert state["runs"]["old"]["in_flight"] == {"old-000001": TASKS[1]["task_id"]}
    state, outputs, _ = run_on(state, target(2, run_id="old", event_id="t-old-2"))
    assert episode_ids(outputs) == ["old-000002"]


def test_pick_from_sets_without_anything_to_pick():
    assert pick_from_sets({}, {"x": 1.0}, {}, {}, random.Random(0)) is None
    sets = {PRACTICE: TASKS}
    assert pick_from_sets(sets, {PRACTICE: 1.0}, {"expert": 1.0}, {}, random.Random(0)) is None
    assert pick_from_sets(sets, {PRACTICE: 1.0}, {}, {}, random.Random(0)) is not None


def test_a_runs_purpose_pinned_version_and_phase_go_into_every_started_event():
    marks = {"purpose": "eval", "pinned_version": 3, "phase": "on_policy"}
    state, outputs, _ = step(None, target(3, **marks))
    _, trained, _ = step(state, target(2, run_id="r2", event_id="target-2"))
    assert [{k: o.record[k] for k in marks} for o in outputs] == [marks] * 3
    assert {(o.record["purpose"], o.record["pinned_version"]) for o in trained} == {("train", None)}
    # a re-delivered target re-sends the same marked events
    _, again, _ = step(state, target(3, **marks))
    assert [o.record for o in again] == [o.record for o in outputs]


def test_a_target_without_marks_runs_train_episodes_served_by_any_version():
    old = target(2)
    default_catalog().encode("curriculum", old, version=2)  # as a v2 writer sent it
    _, outputs, _ = step(None, old)
    marks = {(o.record["purpose"], o.record["pinned_version"], o.record["phase"]) for o in outputs}
    assert marks == {("train", None, None)}


def test_a_target_with_an_unknown_purpose_is_refused_where_it_is_built():
    with pytest.raises(ValueError, match="purpose"):
        target_event("r", {PRACTICE: 1.0}, 1, purpose="holdout", now_ms=NOW)
    assert target_event("r", {PRACTICE: 1.0}, 1, purpose="eval", now_ms=NOW)["purpose"] == "eval"


def test_an_eval_run_enumerates_its_set_each_task_k_times_in_order():
    members = sorted(t["task_id"] for t in TASKS if t.get("task_set", PRACTICE) == PRACTICE)
    budget = 2 * len(members)
    state, outputs, _ = step(None, target(budget, purpose="eval", max_episodes=budget))
    drawn = [o.record["task_id"] for o in outputs]
    assert drawn == members + members  # every task once before any twice, in task id order
    assert {o.record["purpose"] for o in outputs} == {"eval"}
    # A second version's run with the same budget meets the very same instances.
    _, again, _ = step(state, target(budget, run_id="r2", event_id="t2", purpose="eval",
                                     max_episodes=budget))  # fmt: skip
    assert [o.record["task_id"] for o in again] == drawn


def test_a_target_names_the_sets_that_hold_no_task_yet():
    tasks = [*SPLIT_PRACTICE, *MINIWOB_TRAIN]
    record = target(4, task_sets={"miniwob/train": 1.0, "practice-web/seed-9": 1.0, "x/y": 2.0})
    assert empty_sets(record, tasks) == ["practice-web/seed-9", "x/y"]
    assert empty_sets(target(4, task_sets={"practice-web/seed-1/test": 1.0}), tasks) == []
    assert empty_sets(ended("r1-000000"), []) == []  # only targets name sets
