"""Benchmark command lines: `webgym bench rollout --repeat 0` (no rounds, only the extra tables,
never over rollout.json) and the browser-priority comparison's configurations."""

from __future__ import annotations

import pytest

from bench import rollout


def test_no_rounds_and_nothing_else_to_run_is_refused_before_anything_starts(capsys):
    with pytest.raises(SystemExit) as refused:
        rollout.main(["--repeat", "0"])
    assert refused.value.code == 2
    assert "--growth and/or --scaling" in capsys.readouterr().err


def test_a_growth_only_run_writes_its_own_file(monkeypatch, tmp_path):
    written = {}

    def growth(base, args, progress):
        written["seed"] = args.seed
        return {"in_flight": []}

    def write_result(path, result, produced_by):
        written["path"], written["rounds"] = path, result["rounds"]
        return result

    monkeypatch.setattr(rollout, "growth", growth)
    monkeypatch.setattr(rollout, "write_result", write_result)
    monkeypatch.setattr(rollout, "one_round", lambda *a: pytest.fail("no round may run"))
    rollout.main(["--repeat", "0", "--growth", "--seeds", "7,0"])
    assert written == {"seed": 7, "path": rollout.RESULTS.with_name("rollout_growth.json"),
                       "rounds": []}  # fmt: skip


def test_browser_priority_compares_nicenesses_then_weights_and_names_a_bad_value():
    from bench.browser_priority import configurations

    configs = configurations("0, 10", "50")
    assert list(configs) == ["nice 0", "nice 10", "cpu.weight 50"]
    assert (configs["nice 10"].browser_nice, configs["nice 10"].browser_cpu_weight) == (10, 0)
    assert (configs["cpu.weight 50"].browser_nice, configs["cpu.weight 50"].browser_cpu_weight) == (
        0, 50
    )  # fmt: skip
    with pytest.raises(ValueError, match="--weights: 0 is not"):
        configurations("0", "0")
    with pytest.raises(ValueError, match="--nice: 20 is not"):
        configurations("20", "")
