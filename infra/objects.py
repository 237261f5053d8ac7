"""Object storage (MinIO or any S3) for weights and other large artifacts."""

from __future__ import annotations

import io

from minio import Minio

from infra.settings import Settings


def build_minio(settings: Settings) -> Minio:
    access_key, secret_key = settings.minio_credentials()
    return Minio(
        settings.minio_endpoint,
        access_key=access_key,
        secret_key=secret_key,
        secure=settings.minio_secure,
    )


def ensure_buckets(client: Minio, settings: Settings) -> list[str]:
    """Create the project's buckets if missing; returns the ones created. Idempotent."""
    created = []
    for bucket in (settings.policies_bucket, settings.artifacts_bucket):
        if not client.bucket_exists(bucket):
            client.make_bucket(bucket)
            created.append(bucket)
    return created


def put_bytes(client: Minio, bucket: str, name: str, data: bytes, content_type: str) -> None:
    client.put_object(bucket, name, io.BytesIO(data), len(data), content_type=content_type)


def read_bytes(client: Minio, bucket: str, name: str) -> bytes:
    """The whole object; the HTTP connection goes back to the pool either way."""
    response = client.get_object(bucket, name)
    try:
        return response.read()
    finally:
        response.close()
        response.release_conn()
