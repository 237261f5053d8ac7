"""Missing tools give a message that says what to install; nothing starts."""

import pytest

from infra.settings import Settings
from infra.stack.kafka import LocalKafka
from infra.stack.minio import LocalMinio
from infra.stack.process import StackError


@pytest.fixture
def bare_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))


def test_missing_java(bare_path, tmp_path):
    kafka = LocalKafka(Settings(state_dir=tmp_path, cache_dir=tmp_path / "cache"))
    with pytest.raises(StackError, match="Java is not installed.*apt-get install openjdk-17"):
        kafka.preflight()


def test_missing_maven_when_jars_are_not_cached(monkeypatch, tmp_path):
    monkeypatch.setattr(
        "infra.stack.kafka.shutil.which", lambda name: None if name == "mvn" else "/usr/bin/java"
    )
    kafka = LocalKafka(Settings(state_dir=tmp_path, cache_dir=tmp_path / "cache"))
    with pytest.raises(StackError, match="Maven .mvn. is not installed.*apt-get install maven"):
        kafka.preflight()


def test_missing_go_when_minio_is_not_built(bare_path, tmp_path):
    minio = LocalMinio(Settings(state_dir=tmp_path, cache_dir=tmp_path / "cache"))
    with pytest.raises(StackError, match="Go is not installed"):
        minio.preflight()
