"""Where a benchmark run's CPU and memory go: every process of the run, sampled from ``/proc``.

:class:`ProcessProfile` samples, in a process of its own, every ``interval_s``: the processes
below the benchmark's own (the workers it starts, Playwright's driver, Chromium and its helpers,
the Faust worker, the Kafka probe) and the local stack's Kafka broker and MinIO server wherever
they run. Each process gets a role from its command line (:func:`role_of`); its CPU time inside
the window is its CPU time at the last sample minus at the first (0 for a process born inside the
window), and a role's memory is the peak, over the samples, of its processes' summed resident set
size (``rss_mb``: shared pages count once per process, so it overstates a role of many processes
such as Chromium's renderers) and of their summed proportional set size (``pss_mb``: each shared
page split among its sharers, so the roles add up to what the run holds; read from
``smaps_rollup``, which makes the kernel walk each process's page tables: about 0.1 s of CPU
for 30 Chromium pages. :class:`PssSchedule` reads it at the first and last samples, and between
them at a role's new resident peak or every ``PSS_EVERY`` samples, but only while its reads so
far took at most ``PSS_SHARE`` of one core over the window). A process that exits between
two samples used CPU that no sample saw (after its last one; all of it if it was born since
the one before): its parent's time of children it waited for (``cutime`` and ``cstime``) grows
by all that the child used, so what the parent reaped beyond the child's last sample is counted
too (``exited_cpu_s``, overall and per role: the role of the children that exited, or the
parent's for a child no sample saw): Chromium's renderers end with their episodes, and
closing a page is work. The whole machine's busy CPU
time over the same window gives ``coverage``: the share of the machine's CPU the profile
accounts for (the rest is the kernel, other programs, and what processes reaped by one
outside the run used after their last sample).

Guarantees: sampling never raises for a process that exits meanwhile; the profiler's own CPU is
reported under ``profiler`` and left out of ``pipeline_cpu_s_per_step``, as are Chromium and the
benchmark's helpers (its Kafka probe). The benchmark process itself (``bench``) counts as the
pipeline's: it runs the orchestrator of ``webgym run`` (and serves the practice web).
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import PurePath
from typing import Any

from infra.processes import (
    ProcStat,
    all_stats,
    command_line,
    descendants,
    machine_busy_s,
    pss_mb,
)

INTERVAL_S = 0.5
PSS_EVERY = 10  # samples: proportional set sizes every 5 s, and at the last sample
# Of one core, at most, on average over a window: what reading proportional set sizes may take.
# Read at every new resident peak (nearly every sample while pages load) they took 0.2 of a
# core on this 2-core machine, from the run they measured.
PSS_SHARE = 0.02
CHROMIUM_TYPES = {
    "renderer": "renderer",
    "gpu-process": "gpu",
    "utility": "utility",
    "zygote": "zygote",
}
# Not the pipeline's own cost: the browser's work, and the measuring.
NOT_PIPELINE = ("chromium", "profiler", "bench helper")


def role_of(argv: list[str], pid: int, root: int, profiler: int) -> str | None:
    """What the process is, from its command line; ``None`` for a process outside the run.

    ``root`` is the benchmark's pid and ``profiler`` the sampler's. A Python process of
    ``multiprocessing`` below ``root`` is a ``bench helper`` (the Kafka probe, the resource
    tracker); any other program is ``other <name>`` and counts as the pipeline's.
    """
    if pid == profiler:
        return "profiler"
    if pid == root:
        return "bench"
    if not argv:
        return None
    if len(argv) == 1 and " " in argv[0]:  # a process title rewritten in place (Chromium's)
        argv = argv[0].split()
    program = PurePath(argv[0]).name
    if "kafka.Kafka" in argv:
        return "kafka broker"
    if program == "minio" and "server" in argv:
        return "minio"
    # Chromium starts its helpers by exec'ing /proc/self/exe with their --type (and renames
    # them after); read at that moment, they are Chromium's all the same.
    helper = argv[0] == "/proc/self/exe" and any(a.startswith("--type=") for a in argv)
    if "chrom" in program or program == "headless_shell" or helper:
        kind = next((a.split("=", 1)[1] for a in argv if a.startswith("--type=")), None)
        return f"chromium {CHROMIUM_TYPES.get(kind, kind or 'browser')}"
    if program == "node" and "run-driver" in argv:
        return "playwright driver"
    if program == "faust" or ("streams.app" in argv and "worker" in argv):
        return "faust worker"
    if "commands.main" in argv:
        rest = argv[argv.index("commands.main") + 1 :]
        if rest[:2] == ["worker", "browser"]:
            return "browser worker"
        if rest[:2] == ["worker", "policy"]:
            return "policy worker"
        if rest[:1] == ["learner"]:
            return "learner"
        return "webgym " + " ".join(rest[:1])
    if any("multiprocessing" in a for a in argv):
        return "bench helper"
    return f"other {program}"


@dataclass
class _Seen:
    role: str
    first_cpu_s: float
    last_cpu_s: float = 0.0
    ppid: int = 0
    first_children_s: float = 0.0  # CPU of its children that exited and it waited for: at the
    last_children_s: float = 0.0  # first sample (0 if born since), and at the last
    vanished_s: float = 0.0  # what its children that exited had used at their last sample
    vanished_roles: dict[str, float] = field(default_factory=dict)  # their CPU by role

    def unreaped_s(self) -> float:
        """What it was told its exited children used (:attr:`vanished_s`) beyond the growth of
        its children's CPU by its last sample: children it had not yet waited for then, whose
        CPU its parent will find in it when it, in turn, is waited for."""
        return max(0.0, self.vanished_s - (self.last_children_s - self.first_children_s))

    def exited_cpu_s(self) -> float:
        """CPU its children used after their last sample (or, born and gone between two
        samples, all of theirs): what it reaped beyond what the samples saw of them."""
        return max(0.0, self.last_children_s - self.first_children_s - self.vanished_s)

    def exited_role(self) -> str:
        """Whose that CPU is: the role of the children that used most of it, else its own (a
        child no sample saw)."""
        if not self.vanished_roles:
            return self.role
        return max(self.vanished_roles.items(), key=lambda item: item[1])[0]


@dataclass
class ProfileAccount:
    """The samples of one window, kept per process identity (pid and start time).

    Pure bookkeeping (no ``/proc``), so it is tested with made-up samples.
    """

    seen: dict[tuple[int, int], _Seen] = field(default_factory=dict)
    rss_peak: dict[str, int] = field(default_factory=dict)
    rss_sums: dict[str, list[int]] = field(default_factory=dict)
    pss_peak: dict[str, float] = field(default_factory=dict)
    pss_samples: int = 0
    samples: int = 0
    first_busy_s: float | None = None
    last_busy_s: float = 0.0
    started: float = 0.0
    ended: float = 0.0
    _live: set[tuple[int, int]] = field(default_factory=set)  # the processes of the last sample

    def add(
        self,
        at: float,
        busy_s: float,
        processes: list[tuple[str, ProcStat]],
        pss_mb: dict[int, float] | None = None,
    ) -> None:
        """One sample: the time, the machine's busy seconds, each run process's stat, and (some
        samples) each one's proportional set size in MB by pid."""
        first = self.samples == 0
        if first:
            self.first_busy_s, self.started = busy_s, at
        self.last_busy_s, self.ended = busy_s, at
        self.samples += 1
        rss: dict[str, int] = {}
        now: set[tuple[int, int]] = set()
        for role, stat in processes:
            key = (stat.pid, stat.start_ticks)
            now.add(key)
            entry = self.seen.get(key)
            if entry is None:  # there at the start: from here on; born since: all of its time
                entry = self.seen[key] = _Seen(
                    role,
                    stat.cpu_s if first else 0.0,
                    first_children_s=stat.children_cpu_s if first else 0.0,
                )
            # What it is now: a process that exec'd since (Debian's `chromium` is a shell
            # script until it execs the browser) counts, all of it, as what it became.
            entry.role = role
            entry.last_cpu_s = stat.cpu_s
            entry.ppid = stat.ppid
            entry.last_children_s = stat.children_cpu_s
            rss[role] = rss.get(role, 0) + stat.rss_bytes
        self._vanish([key for key in self._live if key not in now], now)
        self._live = now
        for role, total in rss.items():
            self.rss_peak[role] = max(self.rss_peak.get(role, 0), total)
            self.rss_sums.setdefault(role, []).append(total)
        if pss_mb is not None:
            self.pss_samples += 1
            pss: dict[str, float] = {}
            for role, stat in processes:
                pss[role] = pss.get(role, 0.0) + pss_mb.get(stat.pid, 0.0)
            for role, total in pss.items():
                self.pss_peak[role] = max(self.pss_peak.get(role, 0.0), total)

    def _vanish(self, gone: list[tuple[int, int]], now: set[tuple[int, int]]) -> None:
        """Processes sampled before and gone now: what they had used at their last sample (with
        what they had been told of their own exited children and not yet waited for) is told
        to their parent, whose children's CPU will include all of theirs once it has waited
        for them; or, if the parent is gone too, to the nearest ancestor of the run that
        is live (whose children's CPU includes its children's).

        What a process is told but never waits for (a child that outlived it, such as the
        Chromium helpers that outlive their browser and go to the init process) is passed on
        too, and only lowers the unseen CPU its ancestor counts, by at most what that
        ancestor's own children used after their last samples (tenths of a second as the
        workers stop): told too little instead, the ancestor counted CPU the samples had seen
        a second time (29 s, in rounds of a546a46's comparison)."""
        live = {pid: (pid, start) for pid, start in now}
        was = {pid: (pid, start) for pid, start in gone}
        for key in gone:
            child = self.seen[key]
            up, parent = child.ppid, None
            for _ in range(len(gone) + 1):  # up through the parents gone with it
                if up in live:
                    parent = self.seen[live[up]]
                    break
                if up not in was:
                    break
                up = self.seen[was[up]].ppid
            if parent is None:
                continue
            # A child that waited for its own children after its last sample (a browser worker
            # for Playwright's driver, as it stops) passes their CPU on to the parent too: the
            # parent is told it here, or it would count CPU the samples saw as CPU none saw.
            used = child.last_cpu_s + child.last_children_s + child.unreaped_s()
            parent.vanished_s += used
            parent.vanished_roles[child.role] = parent.vanished_roles.get(child.role, 0.0) + used

    def new_peak(self, processes: list[tuple[str, ProcStat]]) -> bool:
        """Whether these processes take some role's resident size above its peak so far."""
        rss: dict[str, int] = {}
        for role, stat in processes:
            rss[role] = rss.get(role, 0) + stat.rss_bytes
        return any(total > self.rss_peak.get(role, 0) for role, total in rss.items())

    def figures(self, steps: int) -> dict[str, Any]:
        """Per role: processes, CPU seconds (of which ``exited_cpu_s`` after processes' last
        samples), CPU seconds per step, share of the profiled CPU, peak and mean resident MB,
        peak proportional MB (None if never read); and the totals."""
        cpu: dict[str, float] = {}
        exited: dict[str, float] = {}
        count: dict[str, int] = {}
        for entry in self.seen.values():
            cpu[entry.role] = cpu.get(entry.role, 0.0) + max(
                0.0, entry.last_cpu_s - entry.first_cpu_s
            )
            count[entry.role] = count.get(entry.role, 0) + 1
            after = entry.exited_cpu_s()
            if after > 0:
                role = entry.exited_role()
                exited[role] = exited.get(role, 0.0) + after
        for role, seconds in exited.items():
            cpu[role] = cpu.get(role, 0.0) + seconds
        total = sum(cpu.values())
        busy = self.last_busy_s - (self.first_busy_s or 0.0)
        per_step = steps or 1
        pipeline = sum(s for role, s in cpu.items() if not role.startswith(NOT_PIPELINE))
        chromium = sum(s for role, s in cpu.items() if role.startswith("chromium"))
        return {
            "interval_s": INTERVAL_S,
            "samples": self.samples,
            "pss_samples": self.pss_samples,
            "wall_s": round(self.ended - self.started, 1),
            "steps": steps,
            "machine_busy_s": round(busy, 1),
            "profiled_cpu_s": round(total, 1),
            "exited_cpu_s": round(sum(exited.values()), 2),
            "coverage": round(total / busy, 3) if busy > 0 else None,
            "chromium_cpu_s_per_step": round(chromium / per_step, 4),
            "pipeline_cpu_s_per_step": round(pipeline / per_step, 4),
            "by_role": {
                role: {
                    "processes": count[role],
                    "cpu_s": round(seconds, 2),
                    "exited_cpu_s": round(exited.get(role, 0.0), 2),
                    "cpu_s_per_step": round(seconds / per_step, 4),
                    "cpu_share": round(seconds / total, 3) if total else 0.0,
                    "rss_mb": round(self.rss_peak.get(role, 0) / 2**20, 1),
                    "rss_mean_mb": round(statistics.fmean(self.rss_sums[role]) / 2**20, 1)
                    if self.rss_sums.get(role)
                    else 0.0,
                    "pss_mb": round(self.pss_peak[role], 1) if role in self.pss_peak else None,
                }
                for role, seconds in sorted(cpu.items(), key=lambda item: -item[1])
            },
        }


@dataclass
class PssSchedule:
    """When the sampler reads proportional set sizes.

    Guarantee: at the first sample and at the last; between them at a sample that takes some
    role's resident size to a new peak, or when ``every`` samples have passed without a read,
    but never while the reads so far have taken more than ``share`` of one core's time since
    the first sample (CPU seconds of the sampler, as :meth:`took` is told). So the profile's
    cost stays bounded however often the resident peaks move, and a read that is due waits
    until the budget allows it.
    """

    share: float = PSS_SHARE
    every: int = PSS_EVERY
    started: float | None = None
    spent_s: float = 0.0
    unread: int = 0  # samples since the last read

    def due(self, at: float, new_peak: Callable[[], bool], last: bool) -> bool:
        """Whether the sample at time ``at`` (seconds) reads proportional set sizes. A query:
        ``new_peak`` is asked only when the budget allows a read, and nothing is recorded
        until :meth:`took`."""
        if self.started is None or last:
            return True
        if self.spent_s > self.share * (at - self.started):
            return False
        return self.unread + 1 >= self.every or new_peak()

    def took(self, at: float, read: bool, cpu_s: float = 0.0) -> None:
        """Record the sample at time ``at``: whether it read them, and the CPU seconds the
        read took. The first sample recorded starts the budget's clock."""
        if self.started is None:
            self.started = at
        if read:
            self.spent_s += cpu_s
            self.unread = 0
        else:
            self.unread += 1


class Roles:
    """The role of each process (:func:`role_of`), read from its command line when first seen
    and kept by pid and start time; ``None`` for a process outside the run that is not the
    stack's broker or MinIO.

    A process may not be what it will be yet, so two kinds are read again at each sample until
    they are something else: one seen as a shell (Debian's ``chromium`` is a script until it
    execs the browser), and one whose command line is its parent's (a fork that has not exec'd
    yet: Playwright's driver spawns Chromium so, and a sample in between would otherwise count
    the browser as the driver for the whole window). A process of the run whose command line
    reads empty (read while it execs, as the browsers' wrapper script execs Chromium) is read
    again too, instead of being left out for the whole window."""

    def __init__(self, root: int, profiler: int, read_argv=command_line):
        self._root, self._profiler, self._read_argv = root, profiler, read_argv
        self._roles: dict[tuple[int, int], str | None] = {}
        self._unsettled: set[tuple[int, int]] = set()

    def of(self, stat: ProcStat, run: set[int]) -> str | None:
        key = (stat.pid, stat.start_ticks)
        if key not in self._roles or key in self._unsettled:
            argv = self._read_argv(stat.pid)
            role = role_of(argv, stat.pid, self._root, self._profiler)
            if stat.pid not in run and role not in ("kafka broker", "minio"):
                role = None
            self._roles[key] = role
            if (not argv and stat.pid in run) or (
                role is not None
                and (role.startswith("other sh") or argv == self._read_argv(stat.ppid))
            ):
                self._unsettled.add(key)
            else:
                self._unsettled.discard(key)
        return self._roles[key]


def _sample(root: int, interval_s: float, stop: Any, ready: Any, results: Any) -> None:
    """The sampler process: every ``interval_s``, one sample of the run's processes."""
    me = os.getpid()
    roles = Roles(root, me)
    account = ProfileAccount()
    schedule = PssSchedule()
    ready.set()
    stopping = False
    while True:  # after the stop, one last sample
        began = time.monotonic()
        stats = all_stats()
        run = set(descendants(root, stats.values()))
        sampled = []
        for stat in stats.values():
            role = roles.of(stat, run)
            if role is not None:
                sampled.append((role, stat))
        pss = None
        if schedule.due(began, partial(account.new_peak, sampled), stopping):
            cpu_before = time.process_time()
            pss = {stat.pid: pss_mb(stat.pid) for _, stat in sampled}
            schedule.took(began, True, time.process_time() - cpu_before)
        else:
            schedule.took(began, False)
        account.add(began, machine_busy_s(), sampled, pss)
        if stopping:
            break
        stopping = stop.wait(max(0.0, interval_s - (time.monotonic() - began)))
    results.put(account)


class ProcessProfile:
    """Samples the run's processes from start to :meth:`stop`, in a process of its own."""

    def __init__(self, interval_s: float = INTERVAL_S):
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        ready = context.Event()
        self._results = context.Queue()
        self._process = context.Process(
            target=_sample,
            args=(os.getpid(), interval_s, self._stop, ready, self._results),
            daemon=True,
        )
        self._process.start()
        if not ready.wait(60):
            raise RuntimeError("the process profiler did not start")

    def stop(self, steps: int) -> dict[str, Any]:
        """End the window (one last sample is taken) and return its figures for ``steps``."""
        self._stop.set()
        account: ProfileAccount = self._results.get(timeout=60)
        self._process.join(timeout=10)
        return account.figures(steps)
