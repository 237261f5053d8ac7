"""An object written to and read back from the real MinIO server."""

from __future__ import annotations

import hashlib
import os
import uuid

from infra.minio_store import build_minio, ensure_buckets, put_bytes, read_bytes


def test_object_round_trip(settings):
    client = build_minio(settings)
    assert ensure_buckets(client, settings) == []  # `webgym up` made them already
    payload = os.urandom(3 * 1024 * 1024 + 17)  # crosses a multipart boundary of the client
    name = f"tests/{uuid.uuid4().hex}/weights.bin"
    put_bytes(client, settings.artifacts_bucket, name, payload, "application/octet-stream")
    try:
        assert client.stat_object(settings.artifacts_bucket, name).size == len(payload)
        stored = read_bytes(client, settings.artifacts_bucket, name)
        assert hashlib.sha256(stored).digest() == hashlib.sha256(payload).digest()
    finally:
        client.remove_object(settings.artifacts_bucket, name)
