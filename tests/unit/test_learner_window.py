"""The learner's replay window: bounded, recency-weighted, deterministic, staleness-bounded."""

from __future__ import annotations

from collections import Counter

import pytest

from learner.samples import Sample
from learner.window import SampleWindow, is_stale, sample_key


def _sample(n: int, version: int | None = 0) -> Sample:
    return Sample(f"ep{n}", 1, version, [], f"reply {n}")


def _filled(count: int, capacity: int = 100, half_life: float = 10.0) -> SampleWindow:
    window = SampleWindow(capacity, half_life)
    for n in range(count):
        window.add(_sample(n), partition=n % 3, offset=n)
    return window


def test_the_window_forgets_the_oldest_beyond_its_capacity():
    window = _filled(12, capacity=5)
    assert len(window) == 5
    assert [e.sample.episode_id for e in window.entries()] == [f"ep{n}" for n in range(7, 12)]
    assert window.entries()[0].partition == 7 % 3 and window.entries()[0].offset == 7


def test_draws_are_deterministic_distinct_and_bounded():
    window = _filled(30)
    first = [e.key for e in window.draw(8, seed=42)]
    assert first == [e.key for e in window.draw(8, seed=42)]
    assert first != [e.key for e in window.draw(8, seed=43)]
    assert len(set(first)) == 8
    assert len(window.draw(100, seed=1)) == 30
    assert window.draw(0, seed=1) == [] and SampleWindow(3, 1.0).draw(4, seed=1) == []


def test_recent_samples_are_drawn_more_often_by_the_half_life():
    window = _filled(40, half_life=10.0)
    counts = Counter(e.sample.episode_id for seed in range(4000) for e in window.draw(1, seed))
    newest, ten_older, thirty_older = counts["ep39"], counts["ep29"], counts["ep9"]
    # Weight halves every 10 samples: ratios 2 and 8, within sampling noise.
    assert 1.6 < newest / ten_older < 2.5, counts
    assert thirty_older < newest / 4, counts


def test_stale_samples_are_dropped_by_the_version_bound():
    window = SampleWindow(10, 5.0)
    for n, version in enumerate([0, 1, 2, 3, None]):
        window.add(_sample(n, version), 0, n)
    assert window.drop_stale(current=4, max_staleness=2) == 2  # versions 0 and 1
    # None: a teacher's sample, which the warm start trains on whatever the version.
    assert [e.sample.policy_version for e in window.entries()] == [2, 3, None]
    assert is_stale(1, 4, 2) and not is_stale(2, 4, 2) and not is_stale(None, 0, 0)
    assert not is_stale(None, 9, 2)  # a teacher's sample (no learner version) never goes stale


def test_keys_name_the_episode_and_step():
    assert sample_key(Sample("e-1", 7, 0, [], "")) == "e-1:7"


def test_nonsense_windows_are_refused():
    with pytest.raises(ValueError, match="at least one"):
        SampleWindow(0, 1.0)
    with pytest.raises(ValueError, match="half-life"):
        SampleWindow(4, 0.0)
