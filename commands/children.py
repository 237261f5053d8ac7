"""The child processes of a run: workers and ``faust worker`` started as a user would start them.

A child gets the run's settings through its environment (``settings_env``) and logs to its own file;
``Child.check`` turns an exited child into ``RunFailed`` with the tail of its log.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from infra.event_loop import faust_env
from infra.settings import Settings


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def stop_cleanly_on_sigterm() -> None:
    """SIGTERM ends this process as Ctrl-C does: ``finally`` blocks run, so its workers are
    stopped and what it made under a throwaway prefix is deleted, not left behind. Call from the
    main thread."""
    signal.signal(signal.SIGTERM, _interrupt)


class RunFailed(RuntimeError):
    """A worker died or the run made no progress; the message names the log to read."""


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that gives a child process the same settings (a Faust worker its event
    loop too: :func:`infra.event_loop.faust_env`)."""
    env = {**os.environ, **faust_env(settings)}
    for name, value in settings.model_dump().items():
        if value is None:
            continue
        if hasattr(value, "get_secret_value"):
            value = value.get_secret_value()
        elif isinstance(value, dict | list):
            value = json.dumps(value)
        env[f"WEBGYM_{name.upper()}"] = str(value)
    return env


@dataclass
class Child:
    """A worker process this run started, with its log file."""

    name: str
    process: subprocess.Popen
    log: Path
    argv: list[str]
    env: dict[str, str]

    @classmethod
    def start(cls, name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> Child:
        log = log_dir / f"{name}.log"
        handle = log.open("ab")
        process = subprocess.Popen(argv, env=env, stdout=handle, stderr=subprocess.STDOUT)
        return cls(name, process, log, argv, env)

    def restart(self, suffix: str) -> Child:
        """The same command again, logging to ``<name>-<suffix>.log`` (after a kill)."""
        return Child.start(f"{self.name}-{suffix}", self.argv, self.env, self.log.parent)

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def check(self) -> None:
        if self.process.poll() is not None:
            tail = self.text()[-2000:]
            raise RunFailed(
                f"the {self.name} exited ({self.process.returncode}); {self.log}:\n{tail}"
            )

    def wait_for(self, marker: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while marker not in self.text():
            self.check()
            if time.monotonic() > deadline:
                raise RunFailed(
                    f"the {self.name} did not become ready in {timeout_s:.0f} s; see {self.log}"
                )
            time.sleep(0.2)

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def kill(self) -> None:
        """SIGKILL: what a crash looks like (used by tests)."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)


def faust_argv() -> list[str]:
    faust = shutil.which("faust", path=str(Path(sys.executable).parent)) or "faust"
    return [faust, "-A", "streams.app", "worker", "-l", "info", "--without-web"]


def start_faust(env: dict[str, str], log_dir: Path, name: str = "streams") -> Child:
    child = Child.start(name, faust_argv(), env, log_dir)
    child.wait_for("Ready", timeout_s=120)
    return child


CLI = [sys.executable, "-m", "commands.main"]


WORKER_CLI = [*CLI, "worker"]
