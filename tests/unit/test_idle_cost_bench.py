"""``bench.idle_cost``'s bookkeeping: a window's shares of a core from its profile, and the
summary over windows of each kind (medians and spread, a role absent from a window counted 0)."""

from __future__ import annotations

from bench import idle_cost


def profile(wall_s: float, cpu_s: dict[str, float]) -> dict:
    return {"wall_s": wall_s, "by_role": {role: {"cpu_s": s} for role, s in cpu_s.items()}}


def test_a_window_gives_each_role_a_share_of_one_core_and_the_pipeline_leaves_out_chromium():
    window = idle_cost.shares(
        profile(
            60.0,
            {
                "kafka broker": 1.2,
                "faust worker": 0.3,
                "chromium browser": 0.6,
                "profiler": 0.06,
                "bench helper": 0.03,
            },
        )
    )
    assert window["cores"] == {
        "kafka broker": 0.02,
        "faust worker": 0.005,
        "chromium browser": 0.01,
        "profiler": 0.001,
        "bench helper": 0.0005,
    }
    assert window["pipeline_cores"] == 0.025  # the broker and Faust only
    assert idle_cost.shares(profile(0.0, {"kafka broker": 0.0}))["cores"] == {"kafka broker": 0.0}


def test_summary_keeps_the_kinds_apart_and_counts_a_missing_role_as_zero():
    windows = [
        {"kind": "stack", "pipeline_cores": 0.02, "cores": {"kafka broker": 0.02}},
        {"kind": "workers", "pipeline_cores": 0.04, "cores": {"kafka broker": 0.03}},
        {"kind": "stack", "pipeline_cores": 0.03, "cores": {"kafka broker": 0.025, "minio": 0.005}},
        {"kind": "workers", "pipeline_cores": 0.05, "cores": {"kafka broker": 0.035}},
    ]
    out = idle_cost.summary(windows)
    assert out["stack"]["windows"] == 2
    assert out["stack"]["cores"]["minio"] == {
        "median": 0.0025,
        "min": 0.0,
        "max": 0.005,
        "rounds": [0.0, 0.005],
    }
    assert out["workers"]["pipeline_cores"]["median"] == 0.045
    assert out["workers"]["cores"]["kafka broker"]["rounds"] == [0.03, 0.035]
    assert idle_cost.summary([]) == {}
