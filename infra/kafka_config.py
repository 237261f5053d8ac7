"""The base config of every confluent-kafka client: producers, consumers and admin clients.

Every client is built from :func:`client_config`, so librdkafka's own log lines (otherwise written
straight to stderr as ``%3|...|FAIL|...``, several a second while a broker is unreachable) go
through Python logging, under the ``webgym.kafka`` logger, where the process's logging setup
decides what is shown: a worker (logging at INFO) keeps them in its log, a command shows only
its own error. Lines about conditions librdkafka handles itself are lowered (:class:`KafkaLog`);
every other line keeps librdkafka's level.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

KAFKA_LOGGER = "webgym.kafka"

# How long a silent member of a worker group keeps its partitions (the classic protocol's client
# setting; under the consumer protocol the broker's group.consumer.session.timeout.ms, which the
# local stack sets to this).
WORKER_SESSION_TIMEOUT_MS = 10_000

# A connection failure within this many seconds of the previous one is part of the same outage
# (librdkafka's reconnect backoff tops out at 10 s).
OUTAGE_GAP_S = 60.0

# How long a client may go without metadata from any broker it knows before it starts again from
# ``bootstrap.servers`` (KIP-1102; librdkafka's default is 5 minutes). After a broker restart a
# client can be left knowing no broker at all (it logs ``new leader-1 not found in cache``:
# metadata names the node as a leader while the client no longer knows it; most likely because
# librdkafka, since 2.10, drops every broker a metadata response leaves out, and a KRaft broker
# just restarted and still fenced lists none: librdkafka issue 5301. Kafka's broker opens its
# listeners only once its controller has answered that it is unfenced, so the window is short:
# until the broker's own metadata has replayed that unfencing, slower on a loaded machine; a
# longer broker heartbeat does not widen it), and until it
# bootstraps again it reaches nothing: a consumer then fetches nothing and finds no coordinator,
# and its partitions are fenced after the session timeout. Seen in a CI run (the policy worker
# stuck over 4 minutes, its episodes aborted when their leases ran out) and in a reproduction by
# hand under load (a consumer knowing only its logical coordinator, 100 s after the restart).
# Rare: bench/broker_restart.py, 20 paired restarts, provoked it under neither trigger, and found
# that this one costs no resume time.
REBOOTSTRAP_AFTER_MS = 10_000

# Words of a line about a transient broker state that librdkafka retries on its own.
RETRIED = ("load in progress", ": retrying")


class KafkaLog(logging.LoggerAdapter):
    """One client's librdkafka log lines, at the level a reader of this process needs.

    confluent-kafka calls ``log(level, "%s [%s] %s", facility, client_name, text)``.

    Lines about conditions librdkafka handles itself are lowered:

    - a failed or dropped connection (facility ``FAIL``): librdkafka reconnects with backoff,
      and a caller that needs the broker gets the error from its own call. The first failure of
      an outage is logged at INFO, the repeats at DEBUG; an outage ends after ``OUTAGE_GAP_S``
      with none.
    - a broker busy loading a coordinator, a request it retries by itself (``GETPID ...
      Coordinator load in progress: retrying``): INFO.

    Every other line keeps librdkafka's level. Lines reach Python only when the client is served
    (poll, consume, flush, close); admin clients here are never polled, so theirs are dropped
    and their errors reach the caller as exceptions.
    """

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__(logger, {})
        self._last_failure: float | None = None

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if len(args) == 3:
            level = self._level(level, str(args[0]), str(args[2]))
        super().log(level, msg, *args, **kwargs)

    def _level(self, level: int, facility: str, text: str) -> int:
        if facility == "FAIL":
            now = time.monotonic()
            first = self._last_failure is None or now - self._last_failure > OUTAGE_GAP_S
            self._last_failure = now
            return min(level, logging.INFO if first else logging.DEBUG)
        if any(words in text for words in RETRIED):
            return min(level, logging.INFO)
        return level


def client_config(
    bootstrap_servers: str, config: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``config`` for a client of ``bootstrap_servers``, logging through ``webgym.kafka``, that
    bootstraps again after ``REBOOTSTRAP_AFTER_MS`` without metadata (``config`` may override
    either)."""
    return {
        "bootstrap.servers": bootstrap_servers,
        # librdkafka's lines go through Python logging, not straight to stderr.
        "logger": KafkaLog(logging.getLogger(KAFKA_LOGGER)),
        "metadata.recovery.strategy": "rebootstrap",
        "metadata.recovery.rebootstrap.trigger.ms": REBOOTSTRAP_AFTER_MS,
        **(config or {}),
    }
