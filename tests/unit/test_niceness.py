"""The learner's niceness: which one it takes, and that every thread of the process gets it.

``yield_cpu`` runs in a child interpreter: a niceness cannot be taken back without privileges,
and the test process must keep its own."""

import json
import subprocess
import sys

import pytest

from commands.learner import CPU_LEARNER_NICE, learner_niceness
from infra.niceness import yield_cpu

CHILD = """
import json, os, threading
from infra.niceness import yield_cpu
from infra.processes import thread_stats

release = threading.Event()
def hold():
    release.wait()
before = threading.Thread(target=hold)  # a thread a library started before the call
before.start()
proud = threading.Thread(target=lambda: (os.setpriority(os.PRIO_PROCESS, 0, 12), release.wait()))
proud.start()  # nicer already: keeps its 12
while os.getpriority(os.PRIO_PROCESS, proud.native_id) != 12:
    pass
changed = yield_cpu({nice})
after = threading.Thread(target=hold)  # started afterwards: inherits
after.start()
nices = {{s.pid: s.nice for s in thread_stats(os.getpid())}}
release.set()
print(json.dumps({{"changed": changed, "main": nices[threading.main_thread().native_id],
    "before": nices[before.native_id], "proud": nices[proud.native_id],
    "after": nices[after.native_id]}}))
"""


def _run_child(nice):
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(nice=nice)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_thread_before_and_after_the_call_yields_and_none_is_made_less_nice():
    nices = _run_child(7)
    assert (nices["main"], nices["before"], nices["after"]) == (7, 7, 7)
    assert nices["proud"] == 12
    assert nices["changed"] == 2  # main and before; proud was nicer already


def test_a_niceness_outside_0_to_19_is_refused():
    with pytest.raises(ValueError, match="0 to 19"):
        yield_cpu(20)


@pytest.mark.parametrize(
    ("setting", "device", "nice"),
    [
        (None, "cpu", CPU_LEARNER_NICE),
        (None, "cuda", 0),
        (None, "cuda:1", 0),
        (0, "cpu", 0),
        (5, "cuda:0", 5),
    ],
)
def test_the_learner_yields_on_a_cpu_unless_told_otherwise(setting, device, nice):
    assert learner_niceness(setting, device) == nice
    assert CPU_LEARNER_NICE == 19
