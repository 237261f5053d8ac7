"""Pid-file bookkeeping of the local stack, on harmless `sleep` processes."""

import json
import socket
import subprocess
import sys
import time

import pytest

from infra.stack.process import (
    ManagedProcess,
    StackError,
    last_lines,
    port_is_free,
    set_aside_if_large,
    split_host_port,
)


def test_start_running_stop(tmp_path):
    managed = ManagedProcess("sleeper", tmp_path, "Sleeper")
    pid = managed.start(["sleep", "60"], env={}, address="-", cwd=tmp_path)
    running = managed.running()
    assert running is not None and running.pid == pid
    assert managed.stop(timeout=5) is True
    assert managed.running() is None
    assert not managed.pid_file.exists()
    assert managed.stop() is False  # nothing left to stop


def test_a_reused_pid_is_never_signalled(tmp_path):
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        managed = ManagedProcess("sleeper", tmp_path, "Sleeper")
        managed.pid_file.parent.mkdir(parents=True)
        # Our record names the stranger's pid but a different start time: a reused pid.
        managed.pid_file.write_text(
            json.dumps({"pid": stranger.pid, "start_ticks": 1, "started_at": 0, "address": "-"})
        )
        assert managed.running() is None
        assert managed.stop() is False
        assert stranger.poll() is None  # still alive
    finally:
        stranger.kill()
        stranger.wait()


def test_sigterm_ignored_means_sigkill(tmp_path):
    managed = ManagedProcess("stubborn", tmp_path, "Stubborn")
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('up', flush=True); time.sleep(60)"
    )
    managed.start([sys.executable, "-c", code], env={}, address="-", cwd=tmp_path)
    for _ in range(100):
        if "up" in managed.tail():
            break
        time.sleep(0.05)
    assert managed.stop(timeout=0.5) is True
    assert managed.running() is None


def test_port_is_free():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert port_is_free("127.0.0.1", port) is False
    assert port_is_free("127.0.0.1", port) is True


def test_split_host_port():
    assert split_host_port("127.0.0.1:9092", "x") == ("127.0.0.1", 9092)
    with pytest.raises(StackError, match="not host:port"):
        split_host_port("localhost", "WEBGYM_MINIO_ENDPOINT")


def test_a_log_past_its_size_is_set_aside_at_start(tmp_path, monkeypatch):
    monkeypatch.setattr("infra.stack.process.LOG_KEPT_BYTES", 1000)
    managed = ManagedProcess("sleeper", tmp_path, "Sleeper")
    managed.log.parent.mkdir(parents=True)
    managed.log.write_bytes(b"old line\n" * 200)  # 1,800 bytes
    managed.start(["true"], env={}, address="-", cwd=tmp_path)
    kept = managed.log.with_name("sleeper.log.1")
    assert kept.read_bytes() == b"old line\n" * 200
    assert b"old line" not in managed.log.read_bytes()
    assert b"starting sleeper" in managed.log.read_bytes()
    managed.start(["true"], env={}, address="-", cwd=tmp_path)  # small: appended to, not moved
    assert managed.log.read_bytes().count(b"starting sleeper") == 2
    assert kept.read_bytes() == b"old line\n" * 200


def test_set_aside_leaves_a_small_or_missing_log(tmp_path):
    log = tmp_path / "a.log"
    assert set_aside_if_large(log, limit=10) is False
    log.write_text("short\n")
    assert set_aside_if_large(log, limit=10) is False
    assert log.exists()


def test_last_lines_reads_the_end_of_a_large_log(tmp_path):
    log = tmp_path / "big.log"
    log.write_text("".join(f"line {n}\n" for n in range(100_000)))  # about 1 MB
    assert last_lines(log, 3) == ["line 99997", "line 99998", "line 99999"]
    assert last_lines(log, 0) == []
    short = tmp_path / "short.log"
    short.write_text("only\nlines")
    assert last_lines(short, 5) == ["only", "lines"]
