"""The Kafka broker stopped and started again during a run: clients reconnect, nothing is lost,
and no episode waits so long for an answer that its lease expires (a client that did not come
back would leave its episodes to be aborted: see ``infra.kafka_config.REBOOTSTRAP_AFTER_MS``).

The broker is the local stack's own (`webgym up`, started by the test session); it is stopped
with SIGTERM by its pid file, as `webgym down` does, and started again with `webgym up`.
"""

from __future__ import annotations

import time

from infra import stack
from infra.stack.kafka import LocalKafka
from tests.chaos.conftest import Fault, assert_none_aborted, chaos_options, chaos_run

EPISODES = 32


def test_a_broker_restart_mid_run_loses_nothing(run_settings, request):
    fault = Fault("stop and restart the Kafka broker")
    broker = LocalKafka(run_settings)

    def strike(summary, children):
        if summary.ended >= 6 and not fault.struck_ms:
            fault.mark()
            assert broker.process.stop(), "the local broker was not running"
            time.sleep(5.0)  # every client sees the broker gone
            stack.up(run_settings, report=lambda line: None)

    options = chaos_options("br", episodes=EPISODES, seed=4, stall_timeout_s=300.0)
    try:
        result = chaos_run(run_settings, options, fault, strike, request)
    finally:
        stack.up(run_settings, report=lambda line: None)  # never leave the session without one
    assert fault.struck_ms
    assert_none_aborted(result, EPISODES)
