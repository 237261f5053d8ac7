import json
import stat

import pytest

from infra.settings import Settings, SettingsError
from infra.stack.minio import ensure_credentials


def test_environment_overrides_with_the_webgym_prefix(monkeypatch):
    monkeypatch.setenv("WEBGYM_BOOTSTRAP_SERVERS", "kafka-1:9092,kafka-2:9092")
    monkeypatch.setenv("WEBGYM_DEFAULT_PARTITIONS", "24")
    settings = Settings()
    assert settings.bootstrap_servers == "kafka-1:9092,kafka-2:9092"
    assert settings.default_partitions == 24


def test_bad_topic_prefix_is_refused_with_the_rule():
    with pytest.raises(ValueError, match="may only use letters"):
        Settings(topic_prefix="web gym")


def test_missing_local_credentials_say_what_to_do(tmp_path):
    settings = Settings(state_dir=tmp_path)
    with pytest.raises(SettingsError, match="webgym up"):
        settings.minio_credentials()


def test_local_credentials_are_generated_once_and_private(tmp_path):
    settings = Settings(state_dir=tmp_path)
    first = ensure_credentials(settings)
    second = ensure_credentials(settings)
    assert first == second
    mode = stat.S_IMODE(settings.minio_credentials_file.stat().st_mode)
    assert mode == 0o600
    assert json.loads(settings.minio_credentials_file.read_text())["access_key"] == first[0]
    assert Settings(state_dir=tmp_path / "other").minio_credentials_file.exists() is False


def test_explicit_credentials_win(tmp_path):
    settings = Settings(state_dir=tmp_path, minio_access_key="ak", minio_secret_key="sk")
    assert settings.minio_credentials() == ("ak", "sk")
