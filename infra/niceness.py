"""This process's CPU niceness, set on every one of its threads.

Linux keeps a niceness per thread (``setpriority(PRIO_PROCESS, tid)``), and a new thread takes
its creator's. :func:`yield_cpu` sets every thread the process has at the moment, so threads a
library already started (a Kafka client's, an import's pool) yield too, and every thread started
afterwards inherits the niceness from the thread that starts it.

Used by the learner on a CPU (``WEBGYM_LEARNER_NICE``): its optimiser steps keep both cores of a
small machine busy, and the browsers' CPU group (:mod:`infra.cpu_group`) weighs a tenth of one
ordinary thread, so an unniced learner catching up on a backlog left the rollouts a few percent
of the machine (two chaos runs in CI: observations fell from about 25 to 2-7 per 10 s and page
loads timed out).
"""

from __future__ import annotations

import contextlib
import os

TASKS = "/proc/self/task"


def yield_cpu(nice: int) -> int:
    """Give every thread of this process at least niceness ``nice`` (0-19); a thread already
    nicer keeps its own, and none is made less nice (that needs privileges). Returns how many
    threads were changed; a thread that exits meanwhile is skipped."""
    if not 0 <= nice <= 19:
        raise ValueError(f"a niceness to yield the CPU is 0 to 19, not {nice}")
    changed = 0
    for tid in (int(t) for t in os.listdir(TASKS)):
        with contextlib.suppress(ProcessLookupError):
            if os.getpriority(os.PRIO_PROCESS, tid) < nice:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
                changed += 1
    return changed
