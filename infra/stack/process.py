"""Processes the local stack starts, remembered by pid file so that it stops only its own.

A pid file holds the pid and the kernel's start time of that pid (``/proc/<pid>/stat`` field
22). A pid whose start time differs was reused by some other program after ours died, so it
is never signalled: ``stop`` kills exactly the processes ``start`` launched.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from infra.processes import read_stat
from infra.settings import Settings


class StackError(RuntimeError):
    """The local stack cannot start or stop; the message says what to do."""


def _start_ticks(pid: int) -> int | None:
    stat = read_stat(pid)
    return None if stat is None else stat.start_ticks


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def split_host_port(address: str, what: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise StackError(f"{what} {address!r} is not host:port")
    return host or "127.0.0.1", int(port)


@dataclass(frozen=True)
class RunningProcess:
    name: str
    pid: int
    started_at: float
    address: str
    log: Path


# A service's log is appended to across starts; at a start past this size it is set aside as
# ``<name>.log.1`` (replacing the one before) and begun afresh, so two starts' worth stay on disk.
LOG_KEPT_BYTES = 64 * 1024 * 1024
TAIL_READ_BYTES = 64 * 1024  # enough for the last lines an error message quotes


def set_aside_if_large(log: Path, limit: int) -> bool:
    """Move ``log`` to ``<log>.1`` if it is larger than ``limit`` bytes; True if it was moved."""
    try:
        if log.stat().st_size <= limit:
            return False
    except FileNotFoundError:
        return False
    log.replace(log.with_name(log.name + ".1"))
    return True


def last_lines(log: Path, lines: int) -> list[str]:
    """The last ``lines`` lines of ``log``, reading at most its last :data:`TAIL_READ_BYTES`."""
    with log.open("rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(0, size - TAIL_READ_BYTES))
        text = handle.read().decode(errors="replace")
    kept = text.splitlines()
    if size > TAIL_READ_BYTES:
        kept = kept[1:]  # the first may be a part of a line
    return kept[-lines:] if lines else []


class ManagedProcess:
    """One service of the local stack: its pid file, its log, start and stop. The log is kept
    across starts, and set aside at a start once it is past :data:`LOG_KEPT_BYTES`."""

    def __init__(self, name: str, state_dir: Path, display_name: str):
        self.name = name
        self.display_name = display_name
        self.pid_file = state_dir / "run" / f"{name}.json"
        self.log = state_dir / "logs" / f"{name}.log"

    def running(self) -> RunningProcess | None:
        """The process we started, if it is still alive; clears a stale pid file."""
        if not self.pid_file.exists():
            return None
        try:
            saved = json.loads(self.pid_file.read_text())
        except (OSError, ValueError):
            self.pid_file.unlink(missing_ok=True)
            return None
        if _start_ticks(saved["pid"]) != saved["start_ticks"]:
            self.pid_file.unlink(missing_ok=True)
            return None
        return RunningProcess(
            self.name, saved["pid"], saved["started_at"], saved["address"], self.log
        )

    def start(self, command: list[str], env: dict[str, str], address: str, cwd: Path) -> int:
        """Launch in its own session (so signals reach its children), log to ``self.log``."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        set_aside_if_large(self.log, LOG_KEPT_BYTES)
        with self.log.open("ab") as log:
            log.write(f"\n==== webgym: starting {self.name} at {time.ctime()} ====\n".encode())
            log.flush()
            process = subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        ticks = _start_ticks(process.pid)
        self.pid_file.write_text(
            json.dumps(
                {
                    "pid": process.pid,
                    "start_ticks": ticks,
                    "started_at": time.time(),
                    "address": address,
                    "command": command,
                }
            )
        )
        return process.pid

    def alive(self) -> bool:
        return self.running() is not None

    def stop(self, timeout: float = 30.0) -> bool:
        """SIGTERM our process group, SIGKILL after ``timeout``. True if something was stopped."""
        running = self.running()
        if running is None:
            return False
        self._signal(running.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.alive():
            time.sleep(0.2)
        if self.alive():
            self._signal(running.pid, signal.SIGKILL)
            while self.alive():
                time.sleep(0.1)
        self.pid_file.unlink(missing_ok=True)
        return True

    def tail(self, lines: int = 20) -> str:
        if not self.log.exists():
            return "(no log written)"
        return "\n".join(last_lines(self.log, lines))

    @staticmethod
    def _signal(pid: int, sig: signal.Signals) -> None:
        try:
            # start_new_session made the pid its own process-group leader: the group is ours.
            os.killpg(pid, sig)
        except ProcessLookupError:
            pass


def wait_until_healthy(
    process: ManagedProcess, healthy: Callable[[], bool], address: str, timeout: float
) -> None:
    """Return once ``healthy()``; raise with the log's tail if the process dies or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not process.alive():
            raise StackError(
                f"{process.display_name} exited during start. Last lines of {process.log}:\n"
                f"{process.tail()}"
            )
        if healthy():
            return
        time.sleep(0.3)
    raise StackError(
        f"{process.display_name} did not answer on {address} within {timeout:.0f}s; "
        f"see {process.log}"
    )


class LocalService:
    """A service of the local stack: one managed process listening on ``address`` (host:port,
    read from the setting ``setting``), with its files in ``<state_dir>/<name>``.

    A subclass says how to start it and when it answers (``healthy``); ``start_timeout_s`` is
    how long a start may take before :meth:`wait_healthy` gives up with the log's tail.
    """

    start_timeout_s: float

    def __init__(self, settings: Settings, name: str, label: str, address: str, setting: str):
        self.settings = settings
        self.host, self.port = split_host_port(address, setting)
        self.home = settings.state_dir / name
        self.process = ManagedProcess(name, settings.state_dir, label)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def ports(self) -> list[int]:
        """Every port the service listens on (each must be free before a start)."""
        return [self.port]

    def preflight(self) -> None:
        """Fail early, with the fix, when a tool the start needs is missing."""

    def start(self, artifact: Path) -> None:
        """Launch the service from ``artifact`` (its jars or its binary)."""
        raise NotImplementedError

    def healthy(self) -> bool:
        raise NotImplementedError

    def wait_healthy(self) -> None:
        wait_until_healthy(self.process, self.healthy, self.address, self.start_timeout_s)
