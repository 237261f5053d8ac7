"""`webgym up | status | down` as a user runs them, on a second stack of its own.

The stack under test has its own state dir and ports, so the session's main stack (which the
other integration tests use) is never disturbed. Only processes these commands start are killed.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from infra.topics import TOPICS

WEBGYM = [sys.executable, "-m", "commands.main"]


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


@pytest.fixture
def second_stack(tmp_path):
    kafka, controller, minio = _free_ports(3)
    env = {
        **os.environ,
        "WEBGYM_STATE_DIR": str(tmp_path / "state"),
        "WEBGYM_BOOTSTRAP_SERVERS": f"127.0.0.1:{kafka}",
        "WEBGYM_LOCAL_KAFKA_CONTROLLER_PORT": str(controller),
        "WEBGYM_MINIO_ENDPOINT": f"127.0.0.1:{minio}",
        "COLUMNS": "200",
    }

    def webgym(*args: str, **extra_env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*WEBGYM, *args], env={**env, **extra_env}, capture_output=True, text=True, timeout=300
        )

    webgym.state_dir = tmp_path / "state"
    webgym.ports = (kafka, controller, minio)
    yield webgym
    webgym("down")  # whatever a failed assertion left running


def _pids(state_dir: Path) -> dict[str, int]:
    return {
        path.stem: json.loads(path.read_text())["pid"]
        for path in (state_dir / "run").glob("*.json")
    }


def test_up_twice_is_harmless_and_down_leaves_nothing(second_stack):
    first = second_stack("up", "--no-topics")
    assert first.returncode == 0, first.stderr
    assert "stack up" in first.stdout and "logs in" in first.stdout
    pids = _pids(second_stack.state_dir)
    assert set(pids) == {"kafka", "minio"}

    again = second_stack("up")
    assert again.returncode == 0, again.stderr
    assert "kafka already running" in again.stdout
    assert "minio already running" in again.stdout
    assert _pids(second_stack.state_dir) == pids
    assert f"created {len(TOPICS)} topics" in again.stdout

    status = second_stack("status")
    assert status.returncode == 0
    assert status.stdout.count("running") == 2
    assert str(pids["kafka"]) in status.stdout

    down = second_stack("down")
    assert down.returncode == 0
    assert "stopped: minio, kafka" in down.stdout
    assert all(_gone(pid) for pid in pids.values())
    assert _pids(second_stack.state_dir) == {}
    kafka, controller, minio = second_stack.ports
    for port in (kafka, controller, minio):
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0
    assert "nothing was running" in second_stack("down").stdout
    assert second_stack("status").stdout.count("stopped") == 2


def test_a_taken_port_is_a_clear_error(second_stack):
    kafka_port = second_stack.ports[0]
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", kafka_port))
        squatter.listen()
        result = second_stack("up")
    assert result.returncode == 1
    message = " ".join(result.stderr.split())
    assert f"port {kafka_port} on 127.0.0.1 is already taken" in message
    assert "WEBGYM_BOOTSTRAP_SERVERS" in message
    assert _pids(second_stack.state_dir) == {}


def test_a_service_that_dies_during_start_is_reported(second_stack):
    # The JVM refuses to start with a 1 KiB heap.
    result = second_stack("up", WEBGYM_LOCAL_KAFKA_HEAP="1k")
    assert result.returncode == 1
    message = " ".join(result.stderr.split())
    assert "Kafka exited during start" in message
    assert "heap" in message.lower()
    assert _pids(second_stack.state_dir) == {}  # MinIO, started beside it, was stopped again
