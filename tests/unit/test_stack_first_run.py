"""A first `webgym up` says what it fetches or builds, and about how long it takes, before it
starts; later runs say nothing (the cache has it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from infra.settings import Settings
from infra.stack import kafka, minio


def _recording(monkeypatch, module, said: list[str], make_output) -> None:
    """``module``'s tool is installed; running it records the moment and makes its output."""
    monkeypatch.setattr(module.shutil, "which", lambda name: f"/usr/bin/{name}")

    def run(argv, **kwargs):
        said.append("<tool runs>")
        make_output(argv, kwargs)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(module.subprocess, "run", run)


def test_the_minio_build_is_announced_with_its_duration_before_it_starts(monkeypatch, tmp_path):
    said: list[str] = []

    def go_install(argv, kwargs):
        (Path(kwargs["env"]["GOBIN"]) / "minio").write_bytes(b"binary")

    _recording(monkeypatch, minio, said, go_install)
    settings = Settings(state_dir=tmp_path, cache_dir=tmp_path / "cache")

    binary = minio.build_binary(settings, said.append)

    assert binary.read_bytes() == b"binary"
    announce, ran, done = said
    assert "building MinIO" in announce and "Go module proxy" in announce
    assert "first time only" in announce and minio.BUILD_TAKES in announce
    assert ran == "<tool runs>"
    assert done.startswith("built MinIO in ")
    said.clear()
    minio.build_binary(settings, said.append)
    assert said == []  # cached: nothing to say


def test_the_kafka_jar_fetch_is_announced_with_its_duration_before_it_starts(monkeypatch, tmp_path):
    said: list[str] = []

    def copy_dependencies(argv, kwargs):
        output = next(a for a in argv if a.startswith("-DoutputDirectory="))
        Path(output.split("=", 1)[1]).mkdir(parents=True)

    _recording(monkeypatch, kafka, said, copy_dependencies)
    settings = Settings(state_dir=tmp_path, cache_dir=tmp_path / "cache")

    kafka.fetch_jars(settings, said.append)

    announce, ran, done = said
    assert f"Apache Kafka {kafka.kafka_version()} jars from Maven Central" in announce
    assert "first time only" in announce and kafka.FETCH_TAKES in announce
    assert ran == "<tool runs>"
    assert done.startswith("fetched the Kafka jars in ")
    said.clear()
    kafka.fetch_jars(settings, said.append)
    assert said == []
