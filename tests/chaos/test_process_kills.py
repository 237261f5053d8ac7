"""Workers SIGKILLed during a run: the loop goes on, and the log keeps every invariant.

(A browser worker killed mid-run is a row of the scale-out battery, on the three-node cluster:
``tests/chaos/test_cluster.py``.)

Each run keeps 16 episodes in flight with the scripted policy (30% of steps wrong) on the
practice web; the fault strikes once episodes are mid-flight, by pid, on a child process this
run started; a killed worker is started again the way a user (or systemd) would.
"""

from __future__ import annotations

import time

from commands.local_run import RunOptions
from tests.chaos.conftest import Fault, assert_none_aborted, chaos_options, chaos_run

IN_FLIGHT = 16
EPISODES = 32


def _options(tag: str, **extra) -> RunOptions:
    return chaos_options(tag, episodes=EPISODES, in_flight=IN_FLIGHT, seed=3, **extra)


def _restart(children, name: str, marker: str, timeout_s: float = 180.0) -> None:
    restarted = children[name].restart(f"restarted{len(name)}-{time.monotonic_ns()}")
    children[name] = restarted  # the run checks its children: the new one from now on
    restarted.wait_for(marker, timeout_s)


def _kill_once(fault: Fault, name: str, marker: str, after_ended: int, pause_s: float = 0.0):
    """A strike: once ``after_ended`` episodes ended, SIGKILL the child ``name``, mark the fault,
    wait ``pause_s`` and start it again (back when its log says ``marker``); only once."""

    def strike(summary, children):
        if summary.ended >= after_ended and not fault.struck_ms:
            children[name].kill()
            fault.mark()
            if pause_s:
                time.sleep(pause_s)
            _restart(children, name, marker)

    return strike


def test_the_stream_processors_killed_three_times_lose_nothing(run_settings, request):
    fault = Fault("SIGKILL Faust worker x3")

    def strike(summary, children):
        due = (4, 12, 20)
        if len(fault.struck_ms) < 3 and summary.ended >= due[len(fault.struck_ms)]:
            children["stream processors"].kill()
            fault.mark()
            _restart(children, "stream processors", "Ready")

    result = chaos_run(run_settings, _options("fa"), fault, strike, request)
    assert len(fault.struck_ms) == 3
    assert_none_aborted(result, EPISODES)


def test_a_policy_worker_killed_and_restarted_loses_nothing(run_settings, request):
    fault = Fault("SIGKILL policy worker, restarted")
    # Two seconds dead: requests pile up unanswered meanwhile.
    strike = _kill_once(fault, "policy worker", "assigned", after_ended=4, pause_s=2.0)
    result = chaos_run(run_settings, _options("pw"), fault, strike, request)
    assert fault.struck_ms
    # Requests the dead worker had taken were served again by the new one: no step of any
    # trajectory holds two inferences (the checker's trajectory and step invariants), and none
    # had to be aborted for want of an answer.
    assert_none_aborted(result, EPISODES)
