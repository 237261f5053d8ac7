"""infra/docker-compose.yml must serve what the default settings expect (Docker is not run here)."""

from pathlib import Path

import yaml

from infra.settings import Settings
from infra.stack.kafka import kafka_version

COMPOSE = yaml.safe_load((Path(__file__).parents[2] / "infra" / "docker-compose.yml").read_text())


def test_same_ports_as_the_default_settings():
    settings = Settings()
    kafka_port = settings.bootstrap_servers.rsplit(":", 1)[1]
    minio_port = settings.minio_endpoint.rsplit(":", 1)[1]
    assert f"127.0.0.1:{kafka_port}:9092" in COMPOSE["services"]["kafka"]["ports"]
    assert f"127.0.0.1:{minio_port}:9000" in COMPOSE["services"]["minio"]["ports"]


def test_same_kafka_version_and_no_auto_created_topics():
    kafka = COMPOSE["services"]["kafka"]
    assert kafka["image"] == f"apache/kafka:{kafka_version()}"
    assert kafka["environment"]["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert kafka["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"


def test_minio_credentials_come_from_the_settings_variables():
    environment = COMPOSE["services"]["minio"]["environment"]
    assert environment["MINIO_ROOT_USER"].startswith("${WEBGYM_MINIO_ACCESS_KEY")
    assert environment["MINIO_ROOT_PASSWORD"].startswith("${WEBGYM_MINIO_SECRET_KEY")
    assert "minio_access_key" in Settings.model_fields
