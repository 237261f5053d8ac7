import os
import time

from commands import run_logs


def _run_dir(logs, name, age_s, files=("streams.log",)):
    directory = logs / name
    directory.mkdir(parents=True)
    when = time.time() - age_s
    for file in files:
        path = directory / file
        path.write_text("x\n")
        os.utime(path, (when, when))
    os.utime(directory, (when, when))
    return directory


def test_keeps_the_newest_and_removes_the_rest(tmp_path):
    logs = tmp_path / "logs"
    dirs = [_run_dir(logs, f"run{n}", age_s=100 * n) for n in range(5)]
    (logs / "kafka.log").write_text("broker\n")

    removed = run_logs.keep_newest(logs, keep=2)

    assert sorted(removed) == sorted(dirs[2:])
    assert [d.exists() for d in dirs] == [True, True, False, False, False]
    assert (logs / "kafka.log").read_text() == "broker\n"


def test_a_run_still_writing_is_kept_however_old_its_directory(tmp_path):
    logs = tmp_path / "logs"
    running = _run_dir(logs, "long-run", age_s=10_000)
    newer = [_run_dir(logs, f"run{n}", age_s=100 + n) for n in range(3)]
    (running / "streams.log").write_text("still writing\n")  # appended now

    run_logs.keep_newest(logs, keep=2)

    assert running.exists()
    assert [d.exists() for d in newer] == [True, False, False]


def test_nothing_to_do_on_a_new_stack(tmp_path):
    assert run_logs.keep_newest(tmp_path / "logs", keep=3) == []
    logs = tmp_path / "logs"
    _run_dir(logs, "run0", age_s=5)
    assert run_logs.keep_newest(logs, keep=3) == []
