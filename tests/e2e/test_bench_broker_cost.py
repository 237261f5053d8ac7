"""`bench.broker_cost` at the size of a test, on the real broker: one window of each configuration
(the full benchmark, with its repetitions, is the figure of record: bench/results/broker_cost.json);
every reader receives every record written, and the run leaves no topic and no consumer group
behind."""

from __future__ import annotations

import pytest

from infra.topic_admin import build_admin
from tests.e2e.conftest import run_bench


@pytest.mark.timeout(300)
def test_one_window_of_each_configuration_measures_the_broker_and_loses_no_record(
    stack_settings, tmp_path
):
    admin = build_admin(stack_settings)

    def groups() -> set[str]:
        return {g.group_id for g in admin.list_consumer_groups().result(timeout=10).valid}

    before, groups_before = set(admin.list_topics(timeout=10).topics), groups()
    args = ["--repeat", "1", "--seconds", "3", "--warmup", "2", "--rate", "40",
            "--sizes", "1000,70000", "--readers", "0,2"]  # fmt: skip
    result, done = run_bench(
        stack_settings, "broker_cost", *args, out=tmp_path / "broker_cost.json", timeout=280
    )

    assert "broker_cost" in result["provenance"]["command"] and result["repeats"] == 1
    configs = [w["config"] for w in result["windows"]]
    sizes = ["1000 B, 0 readers", "1000 B, 2 readers", "70000 B, 0 readers", "70000 B, 2 readers"]
    assert configs == ["idle", *sizes]
    loaded = result["windows"][1:]
    assert all(w["written"] >= 100 for w in loaded)  # 40 a second for 3 s, paced
    # Every reader got every record written in its window: the readers were following from
    # the start of the window, not from a later offset.
    assert all(
        w["received"] == [w["written"]] * 2 for w in loaded if w["config"].endswith("2 readers")
    )
    assert all(w["cores"] > 0 for w in result["windows"])  # the broker never sleeps 3 s through
    assert set(result["per_record"]) == {"1000", "70000"}
    assert all(c["take_ms"] is not None for c in result["per_record"].values())
    assert all(list(c["hand_ms"]) == ["0-2"] for c in result["per_record"].values())
    assert done.stderr.count("min left)") == 6, done.stderr[-2000:]
    left = set(admin.list_topics(timeout=10).topics) - before
    assert not [t for t in left if t.endswith(".broker-cost")], sorted(left)
    # Each window's readers were groups of their own, committing as the workers do; the run
    # deleted them all (the tenth run finds the broker as the first did).
    assert not groups() - groups_before, sorted(groups() - groups_before)
