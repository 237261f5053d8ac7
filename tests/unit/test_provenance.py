"""The one result-file writer stamps what produced the result."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from infra.provenance import provenance, write_result


def test_write_result_stamps_commit_date_machine_and_command(tmp_path):
    path = tmp_path / "results" / "bench.json"  # a parent that does not exist yet

    written = write_result(path, {"benchmark": "x", "steps_per_s": 1.5}, ["webgym", "bench", "x"])

    document = json.loads(path.read_text())
    assert document == written
    assert document["benchmark"] == "x" and document["steps_per_s"] == 1.5
    stamp = document["provenance"]
    assert stamp["commit"]  # a hash (with "+uncommitted" on a dirty tree), or "unknown"
    datetime.fromisoformat(stamp["date"])
    assert stamp["machine"]["cores"] >= 1
    assert stamp["machine"]["memory_gib"] > 0
    assert stamp["command"] == "webgym bench x"


def test_the_command_defaults_to_this_process_and_is_quoted(monkeypatch):
    monkeypatch.setattr("sys.argv", ["bench.py", "--note", "two words"])

    assert provenance()["command"] == "bench.py --note 'two words'"


def test_a_provenance_taken_when_the_run_began_is_written_as_it_was(tmp_path):
    began = provenance(["run"])

    written = write_result(tmp_path / "r.json", {"a": 1}, produced_by=began)

    assert written["provenance"] == began


def test_a_payload_with_its_own_provenance_is_refused(tmp_path):
    with pytest.raises(ValueError, match="produced_by"):
        write_result(tmp_path / "r.json", {"provenance": {}})
    assert not (tmp_path / "r.json").exists()
