"""The task sampler's rules (``streams.curriculum``): no Kafka, no Faust."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

from schemas.serde import default_catalog
from sites import generate_sites
from sites.tasks import generate_tasks
from streams.curriculum import apply, pick_task, short_of_target
from streams.orchestrator import Output, Rules

TASKS = generate_tasks(generate_sites(count=3))
BY_ID = {t["task_id"]: t for t in TASKS}
SITES = sorted({t["website"] for t in TASKS})
RULES = Rules(horizons={"easy": 10, "medium": 20, "hard": 30})
NOW = 1_795_000_000_000


def target(n: int, run_id: str = "r1", event_id: str = "target-1", **fields) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "ts": NOW,
        "kind": "target",
        "in_flight": n,
        "run_id": run_id,
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
        },
    )
    assert state["in_flight"] == {o.key: o.record["task_id"] for o in outputs}
    assert state["started_total"] == 3


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
    assert sorted(state["in_flight"]) == ["r1-000000", "r1-000002", "r1-000003"]
    # an episode the sampler does not hold frees nothing
    state, outputs, _ = step(state, ended("r0-000009"))
    assert outputs == []
    assert len(state["in_flight"]) == 3


def test_the_episode_budget_of_a_run_is_respected():
    state, outputs, _ = step(None, target(3, max_episodes=4))
    assert len(outputs) == 3
    state, outputs, _ = step(state, ended("r1-000000"))
    assert episode_ids(outputs) == ["r1-000003"]
    state, outputs, _ = step(state, ended("r1-000001"))
    assert outputs == []
    assert state["started_total"] == 4
    assert sorted(state["in_flight"]) == ["r1-000002", "r1-000003"]


def test_a_new_run_starts_afresh():
    state, _, _ = step(None, target(3, run_id="r1"))
    state, outputs, _ = step(state, target(2, run_id="r2", event_id="target-2"))
    assert episode_ids(outputs) == ["r2-000000", "r2-000001"]
    assert sorted(state["in_flight"]) == ["r2-000000", "r2-000001"]
    # the old run's episodes end later: they hold no slot of the new run
    state, outputs, _ = step(state, ended("r1-000000"))
    assert outputs == []


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
    assert state["attempts"] == dict(counts)
    assert sum(state["attempts"].values()) == 50
    assert max(counts.values()) > 1  # 18 tasks, 50 episodes: tasks come back


def test_a_redelivered_input_resends_the_same_started_events_and_changes_nothing():
    state, first, _ = step(None, target(3))
    again_state, again, changed = step(state, target(3))
    assert changed is False
    assert again == first
    assert again_state == state
    state, first, _ = step(state, ended("r1-000000"))
    again_state, again, changed = step(state, ended("r1-000000"))
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
    }
    state, started, _ = apply(None, target, [], rules, 1000)  # no tasks yet: nothing starts
    assert started == [] and not short_of_target(state, [], 1000)
    assert short_of_target(state, tasks, 1000)
    state, started, _ = apply(
        state, {"event_id": "tick:1", "ts": 2, "kind": "tick"}, tasks, rules, 2000
    )
    assert [o.record["episode_id"] for o in started] == ["r-000000", "r-000001"]
    assert not short_of_target(state, tasks, 2000)  # the target is in flight
    blocked = {**state, "in_flight": {}, "blocked": {t["website"]: 10**13 for t in tasks}}
    assert not short_of_target(blocked, tasks, 2000)  # every site behind a wall
