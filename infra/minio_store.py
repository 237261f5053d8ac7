"""Object storage (MinIO or any S3) for weights and other large artifacts."""

from __future__ import annotations

import io

import urllib3
from minio import Minio
from minio.error import MinioException, S3Error

from infra.settings import Settings

# S3 error codes that mean "these credentials", not "this request".
_CREDENTIAL_CODES = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied")


class ObjectStoreError(RuntimeError):
    """The object store did not answer or refused these credentials; the message says which
    setting to change."""


def build_minio(settings: Settings) -> Minio:
    """A client that has been answered once: a store that is down, or refuses the credentials,
    is an :class:`ObjectStoreError` here, in one line, and not a traceback at first use."""
    access_key, secret_key = settings.minio_credentials()
    client = Minio(
        settings.minio_endpoint,
        access_key=access_key,
        secret_key=secret_key,
        secure=settings.minio_secure,
    )
    try:
        client.bucket_exists(settings.policies_bucket)
    except (MinioException, urllib3.exceptions.HTTPError, OSError) as exc:
        # Converted here: minio's S3Error cannot pass through a context manager (it is frozen,
        # and contextlib sets its __traceback__), so it must not travel.
        raise ObjectStoreError(explain(exc, settings)) from None
    return client


def explain(exc: BaseException, settings: Settings) -> str:
    """One line for an object-store failure: what went wrong and what to do."""
    where = f"{'https' if settings.minio_secure else 'http'}://{settings.minio_endpoint}"
    if isinstance(exc, S3Error) and exc.code in _CREDENTIAL_CODES:
        given = (
            "WEBGYM_MINIO_ACCESS_KEY and WEBGYM_MINIO_SECRET_KEY"
            if settings.minio_access_key
            else f"the generated pair in {settings.minio_credentials_file}"
        )
        return (
            f"MinIO at {where} refused the credentials ({exc.code}: {exc.message}); they come "
            f"from {given}. Set both variables to a pair the server knows, or unset both to use "
            "the local stack's own (`webgym up`)."
        )
    if isinstance(exc, S3Error):
        return f"MinIO at {where} answered {exc.code}: {exc.message}"
    reason = getattr(exc, "reason", None) or exc
    return (
        f"no MinIO answered at {where} ({type(reason).__name__}). Start the local stack with "
        "`webgym up`, or set WEBGYM_MINIO_ENDPOINT to your server (host:port)."
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


def remove_bucket(minio: Minio, bucket: str) -> None:
    """Delete ``bucket`` and every object in it; a missing bucket is not an error."""
    if not minio.bucket_exists(bucket):
        return
    for item in minio.list_objects(bucket, recursive=True):
        minio.remove_object(bucket, item.object_name)
    minio.remove_bucket(bucket)
