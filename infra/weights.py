"""Published policy weights: immutable versions in object storage, announced on Kafka.

Layout: ``s3://<policies bucket>/policies/<name>/v<N>/`` holds the weight files and a
``manifest.json`` naming every file with its sha256; ``learner-state/<name>/v<N>/`` holds what only
the learner needs to resume (optimiser state), written before the version. Guarantees: a version
is never overwritten and an event never points at partial weights (:func:`publish_weights`); a
fetched directory is verified against the event and its manifest, else :class:`WeightsRejected`
and nothing left behind (:func:`fetch_weights`); the versions topic is the truth about what is
published (:func:`latest_announced`, :func:`remove_unannounced`).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from minio import Minio
from minio.error import S3Error

from infra.log_reader import read_topic
from infra.minio_store import put_bytes, read_bytes
from infra.producer import EventProducer, now_ms
from infra.settings import Settings
from schemas.event_ids import policy_version_event_id

MANIFEST = "manifest.json"
STATE_ROOT = "learner-state"
_FETCHED = re.compile(r"^v(\d+)-([0-9a-f]{16})$")


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
    parent_version: int | None = None  # the version training continued from (None: the base)
    training: dict[str, Any] = field(default_factory=dict)  # the learner's record, see learner/

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), indent=2, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Manifest:
        fields = json.loads(data)
        known = {k: v for k, v in fields.items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass(frozen=True)
class FetchedVersion:
    """The version a directory :func:`fetch_weights` returned holds, read from its path."""

    policy_name: str
    version: int
    manifest_sha256: str  # its first 16 hex digits

    @property
    def adapter_name(self) -> str:
        """A name for this version that is the same in every process and on every host (the
        manifest digest tells two stores' ``v<N>`` apart), as servers name loaded adapters."""
        return f"{self.policy_name}-v{self.version}-{self.manifest_sha256[:8]}"


def fetched_version(path: Path) -> FetchedVersion | None:
    """Which version ``path`` holds, if it is a directory :func:`fetch_weights` returned."""
    match = _FETCHED.match(Path(path).name)
    if match is None:
        return None
    return FetchedVersion(Path(path).parent.name, int(match.group(1)), match.group(2))


def version_prefix(policy_name: str, version: int) -> str:
    return f"policies/{policy_name}/v{version}/"


def state_prefix(policy_name: str, version: int) -> str:
    return f"{STATE_ROOT}/{policy_name}/v{version}/"


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
    parent_version: int | None = None,
    training: dict[str, Any] | None = None,
    after_file: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Upload ``directory`` as ``v<version>`` of ``policy_name``; return the version event.

    ``after_file(n)`` runs after the n-th weight file is stored (progress, and the learner's
    crash-test hook); the manifest and the event follow only when every file is stored.

    Never overwrites a version (an existing ``v<N>/`` is refused), uploads every file before the
    manifest, and writes the ``policy_version`` event only after the manifest is stored and
    acknowledged, so an event never points at partial weights.
    """
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
        if after_file is not None:
            after_file(len(files))
    if not files:
        raise WeightsRejected(f"{directory} holds no files to publish")
    manifest = Manifest(
        policy_name,
        version,
        base_model,
        files,
        samples_seen,
        dict(input_offsets or {}),
        parent_version,
        dict(training or {}),
    ).to_bytes()
    put_bytes(client, bucket, prefix + MANIFEST, manifest, "application/json")
    event = {
        "event_id": policy_version_event_id(policy_name, version),
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
    """Download and verify the version ``event`` announces into ``destination/<name>/v<N>``.
    Safe to call from several threads or processes for one version: the first complete copy
    stays, later ones are discarded.

    Returns a directory only if the manifest's sha256 matches the event and every file matches
    the manifest, and the manifest names the base model the event names; anything else raises
    :class:`WeightsRejected` and leaves nothing behind. The local copy is named after the
    manifest's sha256 too (``<name>/v<N>-<sha256[:16]>``), so two stores that both hold a ``v1``
    never share a cached copy, and :func:`fetched_version` tells from the directory alone which
    version it holds (a stable identity across processes and hosts).
    """
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
    if "base_model" in event and manifest.get("base_model") != event["base_model"]:
        raise WeightsRejected(
            f"manifest of {event['policy_name']} v{event['policy_version']} names base model "
            f"{manifest.get('base_model')!r}, the version event says {event['base_model']!r}"
        )
    name = f"v{event['policy_version']}-{event['manifest_sha256'][:16]}"
    target = destination / event["policy_name"] / name
    if target.exists():
        return target  # verified when it was fetched; this manifest names these exact bytes
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
        try:
            scratch.rename(target)
        except OSError:
            # Another fetch of the same version (a pinned build beside the followed swap)
            # finished first: its copy holds these very bytes, verified the same way.
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def announced_versions(settings: Settings, policy_name: str) -> dict[int, dict[str, Any]]:
    """The version events of ``policy_name`` on the versions topic now, by version (the topic
    is compacted: long-superseded versions may be gone)."""
    versions = {}
    for logged in read_topic(settings, "policy.versions"):
        record = logged.record
        if logged.event_type == "policy_version" and record["policy_name"] == policy_name:
            versions[record["policy_version"]] = record
    return versions


def latest_announced(settings: Settings, policy_name: str) -> dict[str, Any] | None:
    """The newest version event of ``policy_name`` on the versions topic now (None: none yet)."""
    versions = announced_versions(settings, policy_name)
    return versions[max(versions)] if versions else None


def read_manifest(client: Minio, settings: Settings, policy_name: str, version: int) -> Manifest:
    """The stored manifest of ``v<version>``; :class:`WeightsRejected` when it is not there."""
    name = version_prefix(policy_name, version) + MANIFEST
    return Manifest.from_bytes(_read(client, settings.policies_bucket, name))


def stored_versions(client: Minio, settings: Settings, policy_name: str) -> list[int]:
    """Version numbers with any object under ``policies/<name>/``, ascending."""
    versions = set()
    for root in (f"policies/{policy_name}/", f"{STATE_ROOT}/{policy_name}/"):
        for item in client.list_objects(settings.policies_bucket, prefix=root):
            label = item.object_name[len(root) :].strip("/")
            if label.startswith("v") and label[1:].isdigit():
                versions.add(int(label[1:]))
    return sorted(versions)


def remove_version(client: Minio, settings: Settings, policy_name: str, version: int) -> int:
    """Delete every object of ``v<version>`` (weights and learner state); returns how many."""
    removed = 0
    for prefix in (version_prefix(policy_name, version), state_prefix(policy_name, version)):
        objects = client.list_objects(settings.policies_bucket, prefix=prefix, recursive=True)
        for item in objects:
            client.remove_object(settings.policies_bucket, item.object_name)
            removed += 1
    return removed


def remove_unannounced(
    client: Minio, settings: Settings, policy_name: str, announced: int
) -> list[int]:
    """Delete versions above ``announced``: uploads a crash interrupted, never announced.

    The versions topic is the truth about what is published (:func:`latest_announced` reads
    it): objects of a version no event announces are leftovers of an interrupted upload.
    """
    leftovers = [v for v in stored_versions(client, settings, policy_name) if v > announced]
    for version in leftovers:
        remove_version(client, settings, policy_name, version)
    return leftovers


def prune_versions(
    client: Minio, settings: Settings, policy_name: str, latest: int, keep: int
) -> list[int]:
    """Delete versions older than the newest ``keep`` (``latest`` is always kept)."""
    old = [v for v in stored_versions(client, settings, policy_name) if v <= latest - max(keep, 1)]
    for version in old:
        remove_version(client, settings, policy_name, version)
    return old


def rollback(
    client: Minio, settings: Settings, producer: EventProducer, policy_name: str, target: int
) -> dict[str, Any]:
    """Serve ``v<target>``'s weights again, as a new, higher version (versions only go up).

    The files are read back and verified against ``v<target>``'s manifest, then published as
    ``v<latest + 1>`` with ``parent_version`` the latest and ``training.rollback_of`` the target.
    Its input offsets and samples seen are the latest version's, so a learner resuming from it
    goes on with new data; it starts a fresh optimiser (no optimiser state is copied).
    """
    latest = latest_announced(settings, policy_name)
    if latest is None:
        raise WeightsRejected(f"{policy_name} has no published version to roll back")
    current = latest["policy_version"]
    if target <= 0:
        raise WeightsRejected(
            f"v{target} of {policy_name} is the base model: it has no files to serve again. To "
            "serve the base model, restart the policy worker on the base checkpoint (without "
            f"--policy-name); to roll back, name a published version (v1..v{current - 1})"
        )
    if target > current:
        raise WeightsRejected(
            f"v{target} of {policy_name} does not exist: the latest is v{current} (list them with "
            "`webgym policy versions`)"
        )
    if target == current:
        raise WeightsRejected(
            f"v{target} is already the latest version of {policy_name}: roll back to an earlier "
            + (f"one (v1..v{current - 1})" if current > 1 else "one once there is one")
        )
    stored = stored_versions(client, settings, policy_name)
    if target not in stored:
        raise WeightsRejected(
            f"v{target} of {policy_name} is no longer stored (retention); stored: "
            + (", ".join(f"v{v}" for v in stored) or "none")
        )
    source = read_manifest(client, settings, policy_name, target)
    newest = read_manifest(client, settings, policy_name, current)
    source_event = {
        "policy_name": policy_name,
        "policy_version": target,
        "location": f"s3://{settings.policies_bucket}/{version_prefix(policy_name, target)}",
        "manifest_sha256": _sha256(
            _read(client, settings.policies_bucket, version_prefix(policy_name, target) + MANIFEST)
        ),
    }
    with tempfile.TemporaryDirectory(prefix="webgym-rollback-") as scratch:
        directory = fetch_weights(client, source_event, Path(scratch))
        training = {
            key: value
            for key, value in newest.training.items()
            if key not in ("steps", "losses", "trained_samples", "dropped_samples", "refused_eval")
        }
        return publish_weights(
            client,
            settings,
            producer,
            policy_name,
            current + 1,
            directory,
            source.base_model,
            samples_seen=newest.samples_seen,
            input_offsets=newest.input_offsets,
            parent_version=current,
            training={**training, "rollback_of": target},
        )
