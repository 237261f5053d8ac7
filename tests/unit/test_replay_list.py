"""`webgym replay --list` filters: the text a user writes, and which episodes pass."""

import pytest

from analytics.episodes import EpisodeView
from analytics.errors import AnalyticsError
from analytics.replay_list import EpisodeFilter, parse_reward

NOW = 1_796_000_000_000


def test_reward_tests():
    assert parse_reward("1")(1.0) and not parse_reward("1")(0.5)
    assert parse_reward(">=0.5")(0.5) and not parse_reward(">=0.5")(0.4)
    assert parse_reward("<1")(0.0) and not parse_reward("<1")(1.0)
    assert parse_reward("> 0")(0.1)
    with pytest.raises(AnalyticsError, match="comparison"):
        parse_reward("good")


def view(episode_id, **fields) -> EpisodeView:
    base = dict(task_id="shop-001-easy", website="shop.webgym.test", started_ts=NOW, state="judged")
    return EpisodeView(episode_id, **{**base, **fields})


EPISODES = [
    view("a", reward=1.0, success=True),
    view("b", reward=0.0, task_id="recipes-002-hard", website="recipes.webgym.test"),
    view("c", reward=0.5, started_ts=NOW + 60_000),
    view("d", state="thinking", started_ts=NOW + 120_000),  # running: no reward yet
    view("e", state="waiting", started_ts=None),
]


def passing(**filters) -> list[str]:
    check = EpisodeFilter(**filters).check()
    return [v.episode_id for v in EPISODES if check(v)]


def test_filters_pick_the_right_episodes():
    assert passing() == ["a", "b", "c", "d", "e"]
    assert passing(task="RECIPES") == ["b"]
    assert passing(site="shop") == ["a", "c", "d", "e"]
    assert passing(reward="1") == ["a"]
    assert passing(reward="<1") == ["b", "c"]  # an episode without a reward never passes
    assert passing(success=True) == ["a"]
    assert passing(success=False) == ["b", "c"]  # judged and not successful; running is neither
    assert passing(since_ms=NOW + 1) == ["c", "d"]
    assert passing(until_ms=NOW + 60_000) == ["a", "b"]
    assert passing(since_ms=NOW, until_ms=NOW + 60_001, site="shop") == ["a", "c"]


def test_an_empty_time_window_is_refused():
    with pytest.raises(AnalyticsError, match="--since is not before --until"):
        EpisodeFilter(since_ms=NOW, until_ms=NOW).check()
