"""What produced a result file: the commit, the date, the machine and the command.

Every benchmark writes ``provenance()`` into its JSON, so a figure in the README can be traced to
the code and the machine that measured it.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _commit() -> str:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+uncommitted" if dirty else "")


def _memory_gib() -> float | None:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return round(pages * size / 2**30, 1)


def provenance(argv: list[str] | None = None) -> dict[str, Any]:
    """The ``provenance`` object of a result file (``argv`` defaults to this process's)."""
    argv = sys.argv if argv is None else argv
    return {
        "commit": _commit(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cores": os.cpu_count(),
            "memory_gib": _memory_gib(),
            "cpu": platform.processor() or platform.machine(),
            "python": platform.python_version(),
        },
        "command": " ".join(shlex.quote(a) for a in argv),
    }
