"""Model fixtures shared by integration tests: a tiny random Qwen3-VL checkpoint and a real
OpenAI-compatible server (`transformers serve`) running it on CPU.

Import the fixtures into a test module (`from tests.integration.model_servers import
openai_server_fixture, tiny_model_fixture  # noqa: F401`); pytest picks up imported fixtures.
The functions are named apart from their fixtures (``name=``) so that a test's ``tiny_model``
parameter does not shadow the import (ruff F811).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from agents.policy.tiny_model import build_tiny_vl_model


@pytest.fixture(scope="module", name="tiny_model")
def tiny_model_fixture(tmp_path_factory) -> Path:
    return build_tiny_vl_model(tmp_path_factory.mktemp("models") / "tiny-qwen-vl")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(name="openai_server")
def openai_server_fixture(tiny_model, tmp_path):
    """`transformers serve` running the tiny model: a real OpenAI-compatible HTTP server."""
    executable = shutil.which("transformers", path=str(Path(sys.executable).parent))
    port = _free_port()
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen(
        [executable, "serve", str(tiny_model), "--port", str(port), "--device", "cpu"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                break
        except OSError:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "transformers serve did not start"
            time.sleep(0.5)
    yield f"http://127.0.0.1:{port}/v1"
    process.terminate()
    process.wait(timeout=30)
