"""What produced a result file: the commit, the date, the machine and the command line.

Every result file (the benchmarks' ``bench/results/*.json``, ``webgym experiment learn``'s,
``webgym bench rollout``'s) is written by :func:`write_result`, which stamps a ``provenance``
object into it, so a figure in the README can be traced to the code and the machine that
measured it. The commit is read with ``git`` from the checkout this module lives in; outside a
checkout (an installed wheel) it is ``"unknown"``. It carries ``+uncommitted`` when a tracked
file differs from the commit, except the result files themselves: ``make bench`` runs one
benchmark after another, and a result the previous one wrote changes no code the next one runs.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CHECKOUT = Path(__file__).resolve().parent.parent
RESULTS_DIR = "bench/results"  # written by the benchmarks; not code, so never "uncommitted"


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=CHECKOUT, capture_output=True, text=True, check=True
    ).stdout.strip()


def _commit() -> str:
    try:
        commit = _git("rev-parse", "HEAD")
        dirty = _git(
            "status", "--porcelain", "--untracked-files=no", "--", ".", f":(exclude){RESULTS_DIR}"
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+uncommitted" if dirty else "")


def _memory_gib() -> float | None:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return round(pages * size / 2**30, 1)


def provenance(command: Sequence[str] | None = None) -> dict[str, Any]:
    """The ``provenance`` object of a result file, as of now.

    ``command`` is the command line that produces the result (default: this process's
    ``sys.argv``). Take it when a long run begins if the code may change while it runs.
    """
    argv = sys.argv if command is None else command
    return {
        "commit": _commit(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cores": os.cpu_count(),
            "memory_gib": _memory_gib(),
            "cpu": platform.processor() or platform.machine(),
            "python": platform.python_version(),
        },
        "command": shlex.join(argv),
    }


def write_result(
    path: Path,
    payload: Mapping[str, Any],
    command: Sequence[str] | None = None,
    *,
    produced_by: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``payload`` and its ``provenance`` to ``path`` as indented JSON; return what was
    written.

    The provenance is ``produced_by`` when given (a :func:`provenance` taken when the run
    began), else taken now for ``command`` (default: this process's command line). Parent
    directories are created. A payload that carries its own ``provenance`` is refused: there is
    one way to say what produced a result.
    """
    if "provenance" in payload:
        raise ValueError("the payload has a 'provenance' key; pass it as produced_by instead")
    document = {**payload, "provenance": dict(produced_by or provenance(command))}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # default=str: figures may hold paths or timestamps, written as their text.
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    return document
