"""librdkafka's own log lines go through Python logging (``webgym.kafka``), not raw stderr, and
a broker that cannot be reached is not reported several times a second."""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaException, Producer

from infra.consumer import build_consumer
from infra.kafka_config import (
    KAFKA_LOGGER,
    OUTAGE_GAP_S,
    REBOOTSTRAP_AFTER_MS,
    KafkaLog,
    client_config,
)
from infra.settings import Settings
from infra.topic_admin import build_admin

UNREACHABLE = "127.0.0.1:1"  # nothing listens on port 1: every connection is refused at once


def test_a_consumer_of_an_unreachable_broker_logs_through_python_not_stderr(capfd, caplog):
    caplog.set_level(logging.DEBUG, logger=KAFKA_LOGGER)
    settings = Settings(bootstrap_servers=UNREACHABLE)
    consumer = build_consumer(settings, group_id="unit-unreachable", client_id="unit")

    def failures() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.name == KAFKA_LOGGER and "FAIL" in r.getMessage()]

    try:
        deadline = time.monotonic() + 5
        while len(failures()) < 2 and time.monotonic() < deadline:
            consumer.poll(0.2)  # librdkafka's log lines are served here
    finally:
        consumer.close()

    assert "FAIL" not in capfd.readouterr().err
    found = failures()
    assert found, "no librdkafka line reached the webgym.kafka logger"
    assert "Connect to" in found[0].getMessage()
    # Nothing a command would show by default (WARNING and above).
    assert all(r.levelno < logging.WARNING for r in found)


def test_an_admin_client_of_an_unreachable_broker_writes_nothing_to_stderr(capfd):
    admin = build_admin(Settings(bootstrap_servers=UNREACHABLE))
    try:
        admin.list_topics(timeout=1)
    except KafkaException:
        pass  # the caller's error; what matters is what reached stderr meanwhile

    assert capfd.readouterr().err == ""


def _line(log: KafkaLog, level: int, facility: str, text: str) -> None:
    log.log(level, "%s [%s] %s", facility, "rdkafka#consumer-1", text)


def test_the_first_connection_failure_of_an_outage_is_info_its_repeats_debug(caplog, monkeypatch):
    caplog.set_level(logging.DEBUG, logger=KAFKA_LOGGER)
    now = [1000.0]
    monkeypatch.setattr("infra.kafka_config.time.monotonic", lambda: now[0])
    log = KafkaLog(logging.getLogger(KAFKA_LOGGER))
    refused = "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused"

    for _ in range(3):
        _line(log, logging.ERROR, "FAIL", refused)
        now[0] += 1
    now[0] += OUTAGE_GAP_S + 1  # a later outage is news again
    _line(log, logging.ERROR, "FAIL", refused)

    levels = [r.levelno for r in caplog.records]
    assert levels == [logging.INFO, logging.DEBUG, logging.DEBUG, logging.INFO]
    assert caplog.records[0].getMessage() == f"FAIL [rdkafka#consumer-1] {refused}"


def test_retried_coordinator_loading_is_info_and_other_lines_keep_their_level(caplog):
    caplog.set_level(logging.DEBUG, logger=KAFKA_LOGGER)
    log = KafkaLog(logging.getLogger(KAFKA_LOGGER))

    _line(
        log,
        logging.WARNING,
        "GETPID",
        "Failed to acquire transactional PID from broker TxnCoordinator/1: "
        "Coordinator load in progress: retrying",
    )
    _line(log, logging.ERROR, "MSGSIZE", "Message size too large")
    _line(log, logging.DEBUG, "FAIL", "never raised above its own level")

    assert [r.levelno for r in caplog.records] == [logging.INFO, logging.ERROR, logging.DEBUG]


def test_client_config_sets_the_logger_and_keeps_the_callers_settings():
    config = client_config("kafka-1:9092", {"group.id": "g", "socket.timeout.ms": 2000})

    assert config["bootstrap.servers"] == "kafka-1:9092"
    assert config["group.id"] == "g" and config["socket.timeout.ms"] == 2000
    assert isinstance(config["logger"], KafkaLog)
    assert config["logger"].logger.name == KAFKA_LOGGER


def test_client_config_bootstraps_again_soon_and_a_caller_may_say_otherwise():
    config = client_config("kafka-1:9092")
    assert config["metadata.recovery.strategy"] == "rebootstrap"
    assert config["metadata.recovery.rebootstrap.trigger.ms"] == REBOOTSTRAP_AFTER_MS < 300_000

    own = client_config("kafka-1:9092", {"metadata.recovery.rebootstrap.trigger.ms": 300_000})
    assert own["metadata.recovery.rebootstrap.trigger.ms"] == 300_000


def test_librdkafka_accepts_the_rebootstrap_settings():
    # An unknown or out-of-range property raises here, when the client is built (no broker
    # needed: building does not connect).
    Producer(client_config("127.0.0.1:1")).flush(0)
