"""What ``/proc`` says about this machine's processes: parent, start time, CPU time, memory,
command line, and the whole machine's busy time.

Linux only. A process may exit between listing ``/proc`` and reading it: every reader returns
``None`` (or leaves the process out) rather than raise, so callers can sample live process
trees at any moment. A pid is identified together with its kernel start time
(:attr:`ProcStat.start_ticks`), since the kernel reuses pids.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class ProcStat:
    """One process's line of ``/proc/<pid>/stat``, in seconds and bytes."""

    pid: int
    ppid: int
    state: str
    cpu_s: float  # user + system time of the process itself
    children_cpu_s: float  # of its children that exited and were waited for
    start_ticks: int  # when it started, in clock ticks after boot: with pid, its identity
    rss_bytes: int
    nice: int = 0  # of the thread the line is for (a process's: its main thread's)


def parse_stat(pid: int, text: str) -> ProcStat:
    """Parse the text of ``/proc/<pid>/stat`` (the command name, field 2, may hold spaces and
    parentheses; every field after its last ``)`` is space-separated)."""
    fields = text[text.rindex(")") + 2 :].split()
    ticks = [int(f) for f in fields[11:15]]  # utime, stime, cutime, cstime
    return ProcStat(
        pid=pid,
        ppid=int(fields[1]),
        state=fields[0],
        cpu_s=(ticks[0] + ticks[1]) / CLOCK_TICKS,
        children_cpu_s=(ticks[2] + ticks[3]) / CLOCK_TICKS,
        start_ticks=int(fields[19]),
        rss_bytes=int(fields[21]) * PAGE_BYTES,
        nice=int(fields[16]),
    )


def _live_stat(pid: int, path: Path) -> ProcStat | None:
    """The stat line at ``path`` parsed under ``pid``, or ``None`` if it is gone or a zombie's."""
    try:
        stat = parse_stat(pid, path.read_text())
    except (OSError, ValueError, IndexError):
        return None
    return None if stat.state == "Z" else stat


def read_stat(pid: int) -> ProcStat | None:
    """The process's stat, or ``None`` if it is gone (a zombie has exited already)."""
    return _live_stat(pid, PROC / str(pid) / "stat")


def thread_stats(pid: int) -> list[ProcStat]:
    """Each live thread's stat line of process ``pid`` (``/proc/<pid>/task/<tid>/stat``, ``pid``
    the thread id): empty when the process is gone."""
    task = PROC / str(pid) / "task"
    try:
        tids = [int(t) for t in os.listdir(task)]
    except OSError:
        return []
    stats = (_live_stat(tid, task / str(tid) / "stat") for tid in tids)
    return [stat for stat in stats if stat is not None]


def all_stats() -> dict[int, ProcStat]:
    """Every live process's stat, by pid."""
    found = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            stat = read_stat(int(entry.name))
            if stat is not None:
                found[stat.pid] = stat
    return found


def descendants(root: int, stats: Iterable[ProcStat] | None = None) -> list[int]:
    """``root`` and every process below it (children, their children...), ``root`` first."""
    children: dict[int, list[int]] = {}
    for stat in all_stats().values() if stats is None else stats:
        children.setdefault(stat.ppid, []).append(stat.pid)
    found, todo = [], [root]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def command_line(pid: int) -> list[str]:
    """The process's arguments (``[]`` if it is gone, or a kernel thread)."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def pss_mb(pid: int) -> float:
    """The process's proportional set size (shared pages split among their sharers), in MB;
    0 if it is gone."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in (PROC / str(pid) / "smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    return 0.0


def machine_busy_s() -> float:
    """CPU seconds every core of the machine spent busy since boot (``/proc/stat``: all time
    but idle and I/O wait)."""
    fields = [int(f) for f in (PROC / "stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / CLOCK_TICKS
