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


def test_cluster_ids_never_start_with_a_dash(monkeypatch):
    import uuid as uuid_module

    from infra.stack import kafka

    # Bytes whose base64url form starts with '-' (0xfb...), then ordinary ones.
    draws = iter([uuid_module.UUID(bytes=b"\xfb" + b"\x00" * 15), uuid_module.UUID(int=1)])
    monkeypatch.setattr(kafka.uuid, "uuid4", lambda: next(draws))
    cluster_id = kafka.new_cluster_id()
    assert not cluster_id.startswith("-")
    assert len(cluster_id) == 22
