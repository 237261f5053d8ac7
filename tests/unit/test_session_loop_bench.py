"""``bench.session_loop``'s bookkeeping: the episodes every variant runs, the summary over
rounds (medians, spread, each session variant over the same round's bare loop), and the errors
a user gets for a revision that is not there or no rounds."""

from __future__ import annotations

import pytest

from bench import session_loop


def figures(steps_per_s: float, driver: float | None = 0.005) -> dict:
    return {
        "steps_per_s": steps_per_s,
        "chromium_cpu_s_per_step": 0.2,
        "driver_cpu_s_per_step": driver,
        "python_cpu_s_per_step": 0.003,
    }


def test_every_variant_runs_the_same_episodes():
    one = session_loop.episodes_of(seed=0, count=12, sites=3)
    assert one == session_loop.episodes_of(seed=0, count=12, sites=3)
    assert len({e.key for e in one}) == 12
    assert {e.difficulty for e in one} <= {"easy", "medium", "hard"}


def test_summary_gives_medians_spread_and_each_round_over_its_own_bare_loop():
    rounds = [
        {"bare": figures(8.0), "session": figures(6.0), "session_against": figures(4.0)},
        {"bare": figures(10.0), "session": figures(9.0), "session_against": figures(5.0, None)},
        {"bare": figures(6.0), "session": figures(6.0), "session_against": figures(6.0)},
    ]
    out = session_loop.summary(rounds)
    assert out["bare"]["steps_per_s"] == {
        "median": 8.0,
        "min": 6.0,
        "max": 10.0,
        "rounds": [8.0, 10.0, 6.0],
    }
    assert "of_bare" not in out["bare"]
    assert out["session"]["of_bare"] == {
        "median": 0.9,
        "min": 0.75,
        "max": 1.0,
        "rounds": [0.75, 0.9, 1.0],
    }
    assert out["session_against"]["of_bare"] == {
        "median": 0.5,
        "min": 0.5,
        "max": 1.0,
        "rounds": [0.5, 0.5, 1.0],
    }
    # A figure a round did not measure is left out, not counted as zero.
    assert out["session_against"]["driver_cpu_s_per_step"]["median"] == 0.005


def test_a_revision_that_is_not_a_commit_is_a_clear_error():
    with pytest.raises(SystemExit, match="not a commit here"):
        session_loop.main(["--against", "no-such-revision-xyz", "--repeat", "1"])


def test_no_rounds_is_refused():
    with pytest.raises(SystemExit):
        session_loop.main(["--repeat", "0"])
