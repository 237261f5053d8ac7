"""`bench.idle_cost` at the size of a test: one window of each kind on the real stack, the idle
workers profiled like a rollout phase (the full benchmark, with its repetitions, is the figure of
record: bench/results/idle_cost.json); it leaves no topic behind."""

from __future__ import annotations

import pytest

from infra.topic_admin import build_admin
from tests.e2e.conftest import run_bench

WORKER_ROLES = {
    "kafka broker", "faust worker", "browser worker", "policy worker", "playwright driver",
    "chromium browser",
}  # fmt: skip


@pytest.mark.timeout(300)
def test_one_window_of_each_kind_profiles_the_stack_alone_then_the_idle_workers(
    stack_settings, tmp_path
):
    before = set(build_admin(stack_settings).list_topics(timeout=10).topics)
    args = ["--repeat", "1", "--seconds", "4", "--settle", "2"]
    result, done = run_bench(
        stack_settings, "idle_cost", *args, out=tmp_path / "idle_cost.json", timeout=280
    )

    assert "idle_cost" in result["provenance"]["command"] and result["repeats"] == 1
    stack, workers = result["windows"]
    assert (stack["kind"], workers["kind"]) == ("stack", "workers")
    # The stack alone: the broker, and no worker of any run.
    assert "kafka broker" in stack["cores"] and "faust worker" not in stack["cores"]
    assert stack["wall_s"] >= 3 and workers["wall_s"] >= 3
    # Idle workers: every process of the pipeline was found, with its share of a core.
    assert WORKER_ROLES <= set(workers["cores"]), sorted(workers["cores"])
    assert all(share >= 0 for share in workers["cores"].values())
    assert workers["pipeline_cores"] > 0  # the broker never sleeps 4 s through
    summary = result["summary"]["workers"]
    assert summary["windows"] == 1
    assert summary["pipeline_cores"]["rounds"] == [workers["pipeline_cores"]]
    assert done.stderr.count("min left)") == 2, done.stderr[-2000:]
    # The window's topics (Faust's own too) are gone.
    left = set(build_admin(stack_settings).list_topics(timeout=10).topics) - before
    assert not [t for t in left if t.startswith("bench-idle-")], sorted(left)
