"""`webgym bench rollout --repeat 0`: no rounds, only the extra tables, never over rollout.json."""

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
