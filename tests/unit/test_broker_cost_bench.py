"""``bench.broker_cost``'s bookkeeping: the windows a round runs, the summary over windows (median
and spread per configuration) and the costs per record fitted from the medians."""

from __future__ import annotations

import pytest

from bench import broker_cost


def test_a_round_runs_the_idle_window_first_then_every_size_with_every_reader_count():
    assert broker_cost.configurations([1000, 70000], [0, 3]) == [
        (0, 0), (1000, 0), (1000, 3), (70000, 0), (70000, 3),
    ]  # fmt: skip
    assert [broker_cost.label(s, n) for s, n in [(0, 0), (1000, 3)]] == [
        "idle",
        "1000 B, 3 readers",
    ]


def test_the_summary_gives_each_configuration_its_median_and_spread_over_its_windows():
    windows = [
        {"config": "idle", "cores": 0.02},
        {"config": "1000 B, 0 readers", "cores": 0.05},
        {"config": "idle", "cores": 0.01},
        {"config": "1000 B, 0 readers", "cores": 0.07},
        {"config": "idle", "cores": 0.03},
        {"config": "1000 B, 0 readers", "cores": 0.06},
    ]
    found = broker_cost.summary(windows)
    assert found["idle"]["median"] == 0.02 and found["idle"]["rounds"] == [0.02, 0.01, 0.03]
    assert (found["1000 B, 0 readers"]["min"], found["1000 B, 0 readers"]["max"]) == (0.05, 0.07)


def test_a_record_costs_its_writing_above_idle_and_each_reader_added_its_own_increment():
    # At 50 records a second: 0.03 of a core above idle to take them (0.6 ms each); the first
    # reader 0.02 more (0.4 ms a record), the next two 0.01 more together (0.1 ms each).
    summary = {
        "idle": {"median": 0.02},
        "1000 B, 0 readers": {"median": 0.05},
        "1000 B, 1 readers": {"median": 0.07},
        "1000 B, 3 readers": {"median": 0.08},
    }
    costs = broker_cost.fit(summary, [1000], [3, 0, 1], rate=50.0)
    assert costs["1000"]["take_ms"] == pytest.approx(0.6)
    assert costs["1000"]["hand_ms"] == pytest.approx({"0-1": 0.4, "1-3": 0.1})


def test_without_a_readerless_window_the_cost_of_taking_a_record_is_unknown():
    summary = {"idle": {"median": 0.0}, "1 B, 1 readers": {"median": 0.1}}
    assert broker_cost.fit(summary, [1], [1], rate=10.0) == {"1": {"take_ms": None, "hand_ms": {}}}


def test_a_machine_without_a_broker_is_told_to_start_the_stack(monkeypatch):
    monkeypatch.setattr(broker_cost, "all_stats", lambda: {})
    with pytest.raises(SystemExit, match="webgym up"):
        broker_cost.broker_cpu_s()
