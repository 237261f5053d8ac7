"""Event ids are built and parsed in schemas.event_ids only."""

from __future__ import annotations

import pytest

from schemas.event_ids import (
    EpisodeEventId,
    episode_event_id,
    is_timer_decision,
    new_episode_id,
    parse_episode_event_id,
    policy_version_event_id,
    run_id_of,
    step_event_id,
    task_event_id,
)


def test_ids_have_the_documented_shapes():
    episode = new_episode_id("run-a", 7)
    assert episode == "run-a-000007" and run_id_of(episode) == "run-a"
    assert step_event_id(episode, 3, "inference") == "run-a-000007:3:inference"
    assert episode_event_id(episode, "trajectory") == "run-a-000007:trajectory"
    assert task_event_id("shop-1") == "task:shop-1"
    assert policy_version_event_id("default", 4) == "policy:default:v4"


def test_parsing_gives_back_what_was_built():
    assert parse_episode_event_id(step_event_id("run-000001", 12, "act")) == EpisodeEventId(
        "run-000001", "act", 12
    )
    assert parse_episode_event_id(episode_event_id("run-000001", "end")) == EpisodeEventId(
        "run-000001", "end"
    )
    with pytest.raises(ValueError):
        parse_episode_event_id("no-colon")


def test_timer_decisions_are_the_deadline_and_the_lease():
    assert is_timer_decision(episode_event_id("run-000001", "deadline"))
    assert is_timer_decision(episode_event_id("run-000001", "lease"))
    assert not is_timer_decision(episode_event_id("run-000001", "end"))
    assert not is_timer_decision(step_event_id("run-000001", 2, "observation"))
    assert not is_timer_decision("garbage")
