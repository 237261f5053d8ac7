"""The local MinIO server, built with Go from the module proxy at a pinned version.

The upstream repository publishes releases as ``RELEASE.<date>`` tags, which the module proxy
does not serve, so we pin the pseudo-version of upstream's final commit. The binary is built once
into the cache dir; data and the generated root credentials live in the state dir.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from infra.settings import Settings
from infra.stack.process import LocalService, StackError

MINIO_MODULE = "github.com/minio/minio"
MINIO_VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"
START_TIMEOUT_S = 60.0
# How long a first build (a cold Go module cache) took a new user: said before it starts.
BUILD_TAKES = "about 3 minutes"


def _binary(settings: Settings) -> Path:
    return settings.cache_dir / "minio" / MINIO_VERSION / "minio"


def binary_cached(settings: Settings) -> bool:
    return _binary(settings).exists()


def build_binary(settings: Settings, report: Callable[[str], None] = lambda line: None) -> Path:
    """``go install`` the pinned MinIO into the cache; a no-op when already built. A build says
    what it does and how long it takes to ``report`` before it starts, and when it is done."""
    binary = _binary(settings)
    if binary.exists():
        return binary
    go = shutil.which("go")
    if go is None:
        raise StackError(
            "Go is not installed; the local MinIO server is built from source with it. Install "
            "Go 1.24 or newer (https://go.dev/doc/install) and run `webgym up` again."
        )
    scratch = binary.parent / "build"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    env = dict(os.environ)
    env.update(
        {
            "GOBIN": str(scratch),
            "CGO_ENABLED": "0",  # a static binary that runs wherever the cache is copied
            "GOFLAGS": "-trimpath",
            "GOTOOLCHAIN": "local",  # never download another Go; 1.24+ builds this version
        }
    )
    report(
        f"building MinIO {MINIO_VERSION} with {go} from the Go module proxy "
        f"(first time only, {BUILD_TAKES})..."
    )
    started = time.monotonic()
    result = subprocess.run(
        [go, "install", f"{MINIO_MODULE}@{MINIO_VERSION}"],
        env=env,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise StackError(
            f"building MinIO {MINIO_VERSION} with {go} failed (exit {result.returncode}):\n"
            f"{result.stderr[-2000:]}\nIt needs Go 1.24+ and the Go module proxy (GOPROXY)."
        )
    (scratch / "minio").rename(binary)
    shutil.rmtree(scratch, ignore_errors=True)
    report(f"built MinIO in {time.monotonic() - started:.0f} s, cached as {binary}")
    return binary


def ensure_credentials(settings: Settings) -> tuple[str, str]:
    """The local root credentials: generated once, kept 0600 in the state dir."""
    path = settings.minio_credentials_file
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        credentials = {
            "access_key": f"webgym-{secrets.token_hex(6)}",
            "secret_key": secrets.token_urlsafe(30),
        }
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            json.dump(credentials, handle)
    return settings.minio_credentials()


class LocalMinio(LocalService):
    start_timeout_s = START_TIMEOUT_S

    def __init__(self, settings: Settings):
        super().__init__(
            settings, "minio", "MinIO", settings.minio_endpoint, "WEBGYM_MINIO_ENDPOINT"
        )

    def preflight(self) -> None:
        if not binary_cached(self.settings) and shutil.which("go") is None:
            build_binary(self.settings)  # raises the Go message

    def start(self, binary: Path) -> None:
        access_key, secret_key = ensure_credentials(self.settings)
        data = self.home / "data"
        data.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update(
            {
                "MINIO_ROOT_USER": access_key,
                "MINIO_ROOT_PASSWORD": secret_key,
                "MINIO_BROWSER": "off",  # no web console: one port, nothing else listening
                "MINIO_UPDATE": "off",  # never phone home for updates
            }
        )
        command = [str(binary), "server", str(data), "--address", self.address, "--quiet"]
        self.process.start(command, env, self.address, self.home)

    def healthy(self) -> bool:
        url = f"http://{self.address}/minio/health/live"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False
