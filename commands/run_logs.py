"""The runs' log directories under ``<state_dir>/logs/``: one per run, the newest kept.

Every ``webgym run`` (and every benchmark or test that starts a :class:`LocalLoop`) writes its
workers' logs to ``logs/<run id>/``. Without a bound they pile up, one per run, for as long as the
stack's state directory lives; :func:`keep_newest` is called as a run begins.
"""

from __future__ import annotations

import shutil
from pathlib import Path


def _last_written(directory: Path) -> float:
    """The newest modification time of ``directory`` and the files directly in it (a running
    worker appends to its log, which does not touch the directory's own time)."""
    times = [directory.stat().st_mtime]
    for entry in directory.iterdir():
        try:
            times.append(entry.stat().st_mtime)
        except FileNotFoundError:  # removed meanwhile
            continue
    return max(times)


def keep_newest(logs_dir: Path, keep: int) -> list[Path]:
    """Remove the run directories under ``logs_dir`` beyond the ``keep`` last written; returns
    those removed.

    Guarantees: only directories are touched (the stack's own ``kafka.log`` and ``minio.log`` sit
    beside them as files); a directory counts as written when any file in it last was, so a run
    still writing its logs keeps them however many runs started after it (unless ``keep`` others
    wrote since); a directory that vanishes or cannot be removed meanwhile (another run pruning
    at the same time) is skipped.
    """
    if not logs_dir.is_dir():
        return []
    dated = []
    for entry in logs_dir.iterdir():
        try:
            if entry.is_dir() and not entry.is_symlink():
                dated.append((_last_written(entry), entry))
        except FileNotFoundError:
            continue
    dated.sort(reverse=True)
    removed = []
    for _, directory in dated[keep:]:
        shutil.rmtree(directory, ignore_errors=True)
        if not directory.exists():
            removed.append(directory)
    return removed
