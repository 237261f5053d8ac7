"""Published policy weights: immutable versions in object storage, announced on Kafka.

Layout: ``s3://<policies bucket>/policies/<name>/v<N>/`` holds the weight files and a
``manifest.json`` naming every file with its sha256. Guarantees:

- :func:`publish_weights` never overwrites a version (an existing ``v<N>/`` is refused), uploads
  every file before the manifest, and writes the ``policy_version`` event only after the manifest
  is stored and acknowledged, so an event never points at partial weights;
- :func:`fetch_weights` returns a directory only if the manifest's sha256 matches the event and
  every file matches the manifest; anything else raises :class:`WeightsRejected` and leaves
  nothing behind.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from minio import Minio
from minio.error import S3Error

from infra.objects import put_bytes, read_bytes
from infra.producer import EventProducer, now_ms
from infra.settings import Settings

MANIFEST = "manifest.json"


class WeightsRejected(RuntimeError):
    """Weights that must not be served: bad checksum, missing file, or an existing version."""


@dataclass(frozen=True)
class Manifest:
    policy_name: str
    version: int
    base_model: str
    files: dict[str, str]  # relative path -> sha256
    samples_seen: int = 0
    input_offsets: dict[str, int] = field(default_factory=dict)  # "topic:partition" -> offset

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), indent=2, sort_keys=True).encode()


def version_prefix(policy_name: str, version: int) -> str:
    return f"policies/{policy_name}/v{version}/"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def publish_weights(
    client: Minio,
    settings: Settings,
    producer: EventProducer,
    policy_name: str,
    version: int,
    directory: Path,
    base_model: str,
    samples_seen: int = 0,
    input_offsets: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Upload ``directory`` as ``v<version>`` of ``policy_name``; return the version event."""
    bucket, prefix = settings.policies_bucket, version_prefix(policy_name, version)
    if any(True for _ in client.list_objects(bucket, prefix=prefix)):
        raise WeightsRejected(
            f"s3://{bucket}/{prefix} already exists; versions are immutable, publish v{version + 1}"
        )
    files = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        relative = path.relative_to(directory).as_posix()
        data = path.read_bytes()
        files[relative] = _sha256(data)
        put_bytes(client, bucket, prefix + relative, data, "application/octet-stream")
    if not files:
        raise WeightsRejected(f"{directory} holds no files to publish")
    manifest = Manifest(
        policy_name, version, base_model, files, samples_seen, dict(input_offsets or {})
    ).to_bytes()
    put_bytes(client, bucket, prefix + MANIFEST, manifest, "application/json")
    event = {
        "event_id": f"policy:{policy_name}:v{version}",
        "ts": now_ms(),
        "policy_version": version,
        "policy_name": policy_name,
        "location": f"s3://{bucket}/{prefix}",
        "manifest_sha256": _sha256(manifest),
        "base_model": base_model,
        "samples_seen": samples_seen,
    }
    producer.produce(settings.topic("policy.versions"), policy_name, "policy_version", event)
    producer.flush()
    return event


def _read(client: Minio, bucket: str, name: str) -> bytes:
    try:
        return read_bytes(client, bucket, name)
    except S3Error as exc:
        if exc.code in ("NoSuchKey", "NoSuchBucket"):
            raise WeightsRejected(f"s3://{bucket}/{name} is missing") from exc
        raise


def fetch_weights(client: Minio, event: dict[str, Any], destination: Path) -> Path:
    """Download and verify the version ``event`` announces into ``destination/<name>/v<N>``."""
    location = event["location"]
    if not location.startswith("s3://"):
        raise WeightsRejected(f"unsupported weights location {location!r}")
    bucket, _, prefix = location[len("s3://") :].partition("/")
    manifest_bytes = _read(client, bucket, prefix + MANIFEST)
    if _sha256(manifest_bytes) != event["manifest_sha256"]:
        raise WeightsRejected(
            f"manifest of {event['policy_name']} v{event['policy_version']} has sha256 "
            f"{_sha256(manifest_bytes)}, the version event says {event['manifest_sha256']}"
        )
    manifest = json.loads(manifest_bytes)
    target = destination / event["policy_name"] / f"v{event['policy_version']}"
    if target.exists():
        return target  # verified when it was fetched; versions are immutable
    destination.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=destination, prefix=".fetch-"))
    try:
        for relative, expected in sorted(manifest["files"].items()):
            data = _read(client, bucket, prefix + relative)
            if _sha256(data) != expected:
                raise WeightsRejected(
                    f"{relative} of {event['policy_name']} v{event['policy_version']} has sha256 "
                    f"{_sha256(data)}, the manifest says {expected}"
                )
            path = scratch / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch.rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target
