"""The rollout simulation on workloads small enough to check by hand, and its guarantees."""

from __future__ import annotations

import json

import pytest

from agents.policy.workload import WorkloadSpec, episode_length, inference_latency_s
from bench.rollout_sim import SimEpisode, default_episodes, simulate, simulate_both

# median 1, sigma 0: every inference takes exactly 1 s.
CONSTANT = WorkloadSpec(seed=0, median_s=1.0, sigma=0.0)
ONE_STEP = WorkloadSpec(seed=0, median_s=1.0, sigma=0.0, horizons={"one": 1})


def episodes(spec: WorkloadSpec, count: int, difficulty: str = "hard") -> list[SimEpisode]:
    return [SimEpisode(f"e{i}", difficulty) for i in range(count)]


def length(spec: WorkloadSpec, episode: SimEpisode) -> int:
    return episode_length(spec, episode.key, episode.difficulty)


def with_length(spec: WorkloadSpec, difficulty: str, wanted: int, count: int) -> list[SimEpisode]:
    """The first ``count`` episodes (by key) whose drawn length is ``wanted``."""
    found = []
    for i in range(10_000):
        episode = SimEpisode(f"k{i}", difficulty)
        if length(spec, episode) == wanted:
            found.append(episode)
            if len(found) == count:
                return found
    raise AssertionError(f"fewer than {count} keys of length {wanted}")


def chain_s(spec: WorkloadSpec, episode: SimEpisode, env_step_s: float) -> float:
    """One episode alone: navigation, then inference k and (k < L) one operation per step."""
    n = length(spec, episode)
    inference = sum(inference_latency_s(spec, episode.key, k) for k in range(1, n + 1))
    return env_step_s * n + inference


def lockstep_batch_s(spec: WorkloadSpec, batch: list[SimEpisode], env_step_s: float) -> float:
    """A synchronous batch: the navigation, then the slowest episode's time at each step."""
    lengths = {e.key: length(spec, e) for e in batch}
    total = env_step_s
    for k in range(1, max(lengths.values()) + 1):
        total += max(
            inference_latency_s(spec, e.key, k) + (env_step_s if k < lengths[e.key] else 0.0)
            for e in batch
            if lengths[e.key] >= k
        )
    return total


def test_async_with_every_episode_in_flight_takes_the_longest_chain():
    eps = episodes(CONSTANT, 6)
    result = simulate("async", eps, CONSTANT, in_flight=8)
    assert result.wall_s == max(length(CONSTANT, e) for e in eps)  # 1 s per step, no env time
    result = simulate("async", eps, CONSTANT, in_flight=8, env_step_s=0.5)
    assert result.wall_s == pytest.approx(max(1.5 * length(CONSTANT, e) for e in eps))


def test_async_with_heavy_tailed_latencies_takes_the_longest_chain():
    spec = WorkloadSpec(seed=3)
    eps = episodes(spec, 10, "medium")
    for env_step_s in (0.0, 0.7):
        result = simulate("async", eps, spec, in_flight=10, env_step_s=env_step_s)
        assert result.wall_s == pytest.approx(max(chain_s(spec, e, env_step_s) for e in eps))


def test_async_with_one_in_flight_runs_episodes_back_to_back_like_sync():
    spec = WorkloadSpec(seed=5)
    eps = episodes(spec, 5, "easy")
    serial_s = sum(chain_s(spec, e, 0.25) for e in eps)
    for mode in ("async", "sync"):
        result = simulate(mode, eps, spec, in_flight=1, env_step_s=0.25)
        assert result.wall_s == pytest.approx(serial_s)


def test_sync_batch_takes_the_sum_over_steps_of_the_slowest_episode():
    spec = WorkloadSpec(seed=1)
    eps = episodes(spec, 6, "medium")
    for env_step_s in (0.0, 0.4):
        result = simulate("sync", eps, spec, in_flight=6, env_step_s=env_step_s)
        assert result.wall_s == pytest.approx(lockstep_batch_s(spec, eps, env_step_s))


def test_sync_batches_run_one_after_another():
    spec = WorkloadSpec(seed=2)
    eps = episodes(spec, 7, "hard")
    result = simulate("sync", eps, spec, in_flight=3, env_step_s=0.1)
    batches = [eps[0:3], eps[3:6], eps[6:7]]
    assert result.wall_s == pytest.approx(sum(lockstep_batch_s(spec, b, 0.1) for b in batches))


def test_sync_with_constant_latency_takes_the_longest_length_per_batch():
    eps = with_length(CONSTANT, "medium", 4, 2) + with_length(CONSTANT, "medium", 9, 1)
    result = simulate("sync", eps, CONSTANT, in_flight=3)
    assert result.wall_s == 9
    assert result.steps == 4 + 4 + 9
    assert result.policy_busy_fraction == pytest.approx(17 / (9 * 3))


def test_one_env_slot_serialises_operations_first_come_first_served():
    # Four one-step episodes, 1 s operations, one slot: navigations end at 1, 2, 3, 4 and the
    # answers 1 s later; the operations waited 0 + 1 + 2 + 3 s for the slot.
    eps = episodes(ONE_STEP, 4, "one")
    for mode in ("async", "sync"):
        result = simulate(mode, eps, ONE_STEP, in_flight=4, env_step_s=1.0, env_slots=1)
        assert result.wall_s == 5
        assert result.env_wait_s == 6
        assert result.env_busy_fraction == pytest.approx(4 / 5)
    unlimited = simulate("async", eps, ONE_STEP, in_flight=4, env_step_s=1.0)
    assert unlimited.wall_s == 2 and unlimited.env_wait_s == 0


def test_a_freed_slot_goes_to_the_waiting_operation_and_the_next_episode_starts_at_once():
    # Two in flight, one slot: A navigates 0-1, B 1-2; A answers at 2 and C starts, B answers
    # at 3 and D starts; C navigates 2-3, D 3-4, D answers at 5. Without the limit: two waves.
    eps = episodes(ONE_STEP, 4, "one")
    limited = simulate("async", eps, ONE_STEP, in_flight=2, env_step_s=1.0, env_slots=1)
    assert limited.wall_s == 5
    assert simulate("async", eps, ONE_STEP, in_flight=2, env_step_s=1.0).wall_s == 4


def test_slots_beyond_what_runs_at_once_change_nothing():
    spec = WorkloadSpec(seed=4)
    eps = default_episodes(spec, 20)
    for mode in ("async", "sync"):
        unlimited = simulate(mode, eps, spec, in_flight=4, env_step_s=0.3)
        plenty = simulate(mode, eps, spec, in_flight=4, env_step_s=0.3, env_slots=4)
        assert plenty.wall_s == pytest.approx(unlimited.wall_s)
        assert plenty.env_wait_s == 0


def test_counts_and_rates():
    spec = WorkloadSpec(seed=6)
    eps = default_episodes(spec, 12)
    result = simulate("async", eps, spec, in_flight=4, env_step_s=0.2)
    steps = sum(length(spec, e) for e in eps)
    assert (result.episodes, result.steps, result.env_ops) == (12, steps, steps)
    assert result.steps_per_s == pytest.approx(steps / result.wall_s)
    assert result.episodes_per_hour == pytest.approx(12 * 3600 / result.wall_s)
    latencies = sum(
        inference_latency_s(spec, e.key, k) for e in eps for k in range(1, length(spec, e) + 1)
    )
    assert result.inference_s == pytest.approx(latencies)
    assert result.policy_busy_fraction == pytest.approx(latencies / (result.wall_s * 4))
    assert result.env_busy_fraction == pytest.approx(steps * 0.2 / (result.wall_s * 4))


def test_same_arguments_give_the_same_figures_and_they_are_json():
    spec = WorkloadSpec(seed=7)
    eps = default_episodes(spec, 40)
    first = simulate_both(eps, spec, in_flight=8, env_step_s=0.5, env_slots=3)
    assert first == simulate_both(eps, spec, in_flight=8, env_step_s=0.5, env_slots=3)
    assert json.loads(json.dumps(first)) == first
    assert first["async"]["steps"] == first["sync"]["steps"]
    assert first["async_over_sync"] == pytest.approx(
        first["sync"]["wall_s"] / first["async"]["wall_s"]
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "batch"}, "mode must be"),
        ({"episodes": []}, "no episodes"),
        ({"in_flight": 0}, "in_flight"),
        ({"env_step_s": -1.0}, "env_step_s"),
        ({"env_slots": 0}, "env_slots"),
    ],
)
def test_rejects_what_cannot_be_simulated(kwargs, message):
    arguments = {"mode": "async", "episodes": episodes(CONSTANT, 2), "spec": CONSTANT, **kwargs}
    with pytest.raises(ValueError, match=message):
        simulate(**arguments)


def test_default_workload_async_is_several_times_sync(capsys):
    spec = WorkloadSpec(seed=0)
    figures = simulate_both(default_episodes(spec, 256), spec, in_flight=32)
    with capsys.disabled():
        print(f"\nideal async/sync on the default workload: {figures['async_over_sync']:.2f}x")
    assert figures["async_over_sync"] > 3
    assert figures["async"]["policy_busy_fraction"] > figures["sync"]["policy_busy_fraction"]
