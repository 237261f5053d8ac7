"""The one result-file writer stamps what produced the result."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime

import pytest

import infra.provenance as module
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


def _checkout(tmp_path, monkeypatch):
    """A git checkout with one code file and one result file, committed."""

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "bench" / "results" / "a.json").write_text("{}\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    monkeypatch.setattr(module, "CHECKOUT", tmp_path)
    return tmp_path


def test_a_result_written_by_an_earlier_benchmark_leaves_the_commit_clean(tmp_path, monkeypatch):
    checkout = _checkout(tmp_path, monkeypatch)
    (checkout / "bench" / "results" / "a.json").write_text('{"steps_per_s": 2}\n')

    commit = provenance(["bench"])["commit"]

    assert len(commit) == 40 and "+" not in commit


def test_a_changed_code_file_marks_the_commit_uncommitted(tmp_path, monkeypatch):
    checkout = _checkout(tmp_path, monkeypatch)
    (checkout / "code.py").write_text("x = 2\n")

    assert provenance(["bench"])["commit"].endswith("+uncommitted")
