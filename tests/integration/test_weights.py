"""Publishing and fetching policy weights on the real MinIO and Kafka."""

from __future__ import annotations

import os
import uuid

import pytest

from infra.minio_store import build_minio, put_bytes, read_bytes
from infra.weights import (
    WeightsRejected,
    fetch_weights,
    latest_announced,
    prune_versions,
    publish_weights,
    read_manifest,
    remove_unannounced,
    rollback,
    stored_versions,
    version_prefix,
)
from tests.integration.helpers import drain


@pytest.fixture
def weights_dir(tmp_path):
    directory = tmp_path / "checkpoint"
    (directory / "sub").mkdir(parents=True)
    (directory / "model.safetensors").write_bytes(os.urandom(200_000))
    (directory / "sub" / "config.json").write_text('{"hidden_size": 64}')
    return directory


def test_publish_then_fetch_verifies_every_file(
    settings, producer, make_consumer, weights_dir, tmp_path
):
    client = build_minio(settings)
    name = f"tiny-{uuid.uuid4().hex[:6]}"
    event = publish_weights(client, settings, producer, name, 1, weights_dir, "tiny-qwen-vl")
    assert event["location"] == f"s3://{settings.policies_bucket}/{version_prefix(name, 1)}"

    versions = make_consumer(
        f"versions-{uuid.uuid4().hex[:6]}", [settings.topic("policy.versions")]
    )
    announced = drain(versions, 1, where=lambda e: e.record["policy_name"] == name)
    assert [e.record for e in announced] == [event]
    assert announced[0].key == name.encode()

    fetched = fetch_weights(client, event, tmp_path / "cache")
    # Named after the version and its manifest: another store's v1 never shares the copy.
    assert fetched == tmp_path / "cache" / name / f"v1-{event['manifest_sha256'][:16]}"
    for relative in ("model.safetensors", "sub/config.json"):
        assert (fetched / relative).read_bytes() == (weights_dir / relative).read_bytes()

    with pytest.raises(WeightsRejected, match="versions are immutable"):
        publish_weights(client, settings, producer, name, 1, weights_dir, "tiny-qwen-vl")


def test_a_tampered_or_missing_file_is_refused(settings, producer, weights_dir, tmp_path):
    client = build_minio(settings)
    name = f"tiny-{uuid.uuid4().hex[:6]}"
    event = publish_weights(client, settings, producer, name, 1, weights_dir, "tiny-qwen-vl")
    prefix = version_prefix(name, 1)
    put_bytes(client, settings.policies_bucket, prefix + "model.safetensors", b"evil", "x/y")
    with pytest.raises(WeightsRejected, match="model.safetensors .* has sha256"):
        fetch_weights(client, event, tmp_path / "cache")
    assert not (tmp_path / "cache" / name).exists()  # nothing half-written is left

    client.remove_object(settings.policies_bucket, prefix + "model.safetensors")
    with pytest.raises(WeightsRejected, match="is missing"):
        fetch_weights(client, event, tmp_path / "cache")

    forged = {**event, "manifest_sha256": "0" * 64}
    with pytest.raises(WeightsRejected, match="the version event says 0000"):
        fetch_weights(client, forged, tmp_path / "cache")


def test_retention_leftovers_and_rollback_keep_versions_going_up(
    settings, producer, weights_dir, tmp_path
):
    client = build_minio(settings)
    name = f"tiny-{uuid.uuid4().hex[:6]}"
    for version in (1, 2, 3, 4):
        (weights_dir / "model.safetensors").write_bytes(os.urandom(1000) + bytes([version]))
        publish_weights(client, settings, producer, name, version, weights_dir, "tiny-qwen-vl")
    assert latest_announced(settings, name)["policy_version"] == 4

    assert prune_versions(client, settings, name, latest=4, keep=2) == [1, 2]
    assert stored_versions(client, settings, name) == [3, 4]
    with pytest.raises(WeightsRejected, match=r"v1 of .* is no longer stored .* v3, v4"):
        rollback(client, settings, producer, name, 1)
    with pytest.raises(WeightsRejected, match="already the latest"):
        rollback(client, settings, producer, name, 4)

    # An interrupted upload of v5 (files, no manifest, no event) is a leftover, and goes.
    leftover = version_prefix(name, 5) + "model.safetensors"
    put_bytes(client, settings.policies_bucket, leftover, b"x", "x/y")
    assert remove_unannounced(client, settings, name, announced=4) == [5]
    assert stored_versions(client, settings, name) == [3, 4]

    event = rollback(client, settings, producer, name, 3)
    assert event["policy_version"] == 5 and latest_announced(settings, name) == event
    manifest = read_manifest(client, settings, name, 5)
    assert manifest.training["rollback_of"] == 3 and manifest.parent_version == 4
    assert manifest.files == read_manifest(client, settings, name, 3).files
    served = fetch_weights(client, event, tmp_path / "cache")  # verified like any version
    stored = version_prefix(name, 3) + "model.safetensors"
    original = read_bytes(client, settings.policies_bucket, stored)
    assert (served / "model.safetensors").read_bytes() == original


def test_two_fetches_of_one_version_at_once_both_succeed(settings, producer, weights_dir, tmp_path):
    """A pinned build and the followed version's swap may fetch the same version together: the
    one that finishes second finds the first one's copy and uses it."""
    import infra.weights as weights

    client = build_minio(settings)
    name = f"tiny-{uuid.uuid4().hex[:6]}"
    event = publish_weights(client, settings, producer, name, 1, weights_dir, "tiny-qwen-vl")
    cache = tmp_path / "cache"
    original, reads = weights.read_bytes, []

    def read_then_race(client_, bucket, object_name):
        data = original(client_, bucket, object_name)
        reads.append(object_name)
        if object_name.endswith("sub/config.json") and len(reads) < 10:
            # The other fetch completes while this one holds its files in scratch.
            assert fetch_weights(client, event, cache).is_dir()
        return data

    weights.read_bytes = read_then_race
    try:
        fetched = fetch_weights(client, event, cache)
    finally:
        weights.read_bytes = original
    assert (fetched / "model.safetensors").read_bytes() == (
        weights_dir / "model.safetensors"
    ).read_bytes()
    assert [p.name for p in cache.iterdir() if p.name.startswith(".fetch-")] == []
