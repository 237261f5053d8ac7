"""Screenshots kept once in object storage, the observation event carrying their key and digest.

An observation holds its screenshot one of two ways (``Settings.screenshot_storage``): inline,
the image bytes in the event (the default), or stored: the bytes in the artifacts bucket under a
key made of their SHA-256 (``screenshots/<sha256>.<format>``), the event's ``screenshot`` empty
and its ``screenshot_key`` naming the object. Whatever the setting, every reader takes an
observation's image through :meth:`ScreenshotStore.image`, so replay, re-scoring, the learner,
the judge, the checker and a worker taking an episode over read both kinds, and events written
before either existed (no digest).

Guarantees: the browser writes the object before it produces the observation naming it, so a
reader never sees a key before its object. An object's bytes are checked against the event's
digest when read: a missing, changed or truncated object is :class:`ScreenshotUnavailable`,
never another image. Objects are immutable (the same bytes have the same key), so a retried
write or a later run changes nothing already stored. Objects outlive the events: the log's
retention deletes events, not the screenshots they name (a bucket lifecycle rule on
``screenshots/`` does that).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from typing import Any

import urllib3
from minio import Minio
from minio.error import MinioException, S3Error

from infra.log_reader import EventUnavailable
from infra.minio_store import ObjectStoreError, build_minio, explain, put_bytes, read_bytes
from infra.settings import Settings

PREFIX = "screenshots/"
# After the store refused a screenshot, further ones are refused at once for this long (the
# browser keeps them inline), so an object store that is down does not cost every step a
# connection timeout.
RETRY_AFTER_S = 30.0


class ScreenshotUnavailable(EventUnavailable):
    """A stored screenshot could not be read, or its bytes are not the ones the event names.
    An :class:`~infra.log_reader.EventUnavailable`: to its reader, part of the event is gone."""


def object_key(digest: str, screenshot_format: str) -> str:
    return f"{PREFIX}{digest}.{screenshot_format}"


class ScreenshotStore:
    """Writes and reads stored screenshots; thread-safe.

    Builds its MinIO client at the first stored screenshot it meets, so a run that keeps every
    screenshot inline never contacts the object store. Keeps the last ``cache_size`` images it
    read: a policy context and a replay page repeat recent ones.
    """

    def __init__(
        self,
        settings: Settings,
        client: Minio | None = None,
        cache_size: int = 64,
        retry_after_s: float = RETRY_AFTER_S,
    ):
        self._settings = settings
        self._client = client
        self._bucket_ready = False
        self._retry_after_s = retry_after_s
        self._refused: tuple[float, str] | None = None  # when the store last refused, and why
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._cache_size = cache_size
        self.puts = 0
        self.fetches = 0

    @property
    def bucket(self) -> str:
        return self._settings.artifacts_bucket

    def _minio(self) -> Minio:
        with self._lock:
            if self._client is None:
                self._client = build_minio(self._settings)
            return self._client

    def put(self, image: bytes, screenshot_format: str, digest: str | None = None) -> str:
        """Store ``image`` (once: its key is its digest) and return its key. Raises
        :class:`~infra.minio_store.ObjectStoreError` when the store does not take it, and for
        ``retry_after_s`` after that without trying."""
        if self._refused is not None:
            since, reason = self._refused
            if time.monotonic() - since < self._retry_after_s:
                raise ObjectStoreError(
                    f"{reason} (not tried again for {self._retry_after_s:.0f} s)"
                )
        digest = digest or hashlib.sha256(image).hexdigest()
        key = object_key(digest, screenshot_format)
        try:
            self._put(key, image, screenshot_format)
        except ObjectStoreError as exc:
            self._refused = (time.monotonic(), str(exc))
            raise
        self._refused = None
        self.puts += 1
        return key

    def _put(self, key: str, image: bytes, screenshot_format: str) -> None:
        client = self._minio()
        try:
            if not self._bucket_ready:
                if not client.bucket_exists(self.bucket):
                    try:
                        client.make_bucket(self.bucket)
                    except S3Error as exc:  # another writer made it first
                        if exc.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                            raise
                self._bucket_ready = True
            put_bytes(client, self.bucket, key, image, f"image/{screenshot_format}")
        except (MinioException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise ObjectStoreError(explain(exc, self._settings)) from None

    def fetch(self, key: str, digest: str) -> bytes:
        """The stored image at ``key``, checked against ``digest`` (when one is given)."""
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None:
            return cached
        try:
            image = read_bytes(self._minio(), self.bucket, key)
        except ObjectStoreError as exc:
            raise ScreenshotUnavailable(f"screenshot {key}: {exc}") from None
        except (MinioException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise ScreenshotUnavailable(
                f"screenshot {key}: {explain(exc, self._settings)}"
            ) from None
        if digest and hashlib.sha256(image).hexdigest() != digest:
            raise ScreenshotUnavailable(
                f"screenshot {key} in bucket {self.bucket} does not match the SHA-256 its "
                f"observation names ({digest[:12]}...): the object was changed or cut short"
            )
        self.fetches += 1
        with self._lock:
            self._cache[key] = image
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return image

    def image(self, record: dict[str, Any]) -> bytes:
        """An observation's screenshot, inline or stored; empty when it has none (a failure
        observation). Raises :class:`ScreenshotUnavailable` for a stored one it cannot read."""
        inline = record.get("screenshot")
        if inline:
            return inline
        key = record.get("screenshot_key")
        if not key:
            return b""
        return self.fetch(key, record.get("screenshot_sha256") or "")

    def with_image(self, record: dict[str, Any]) -> dict[str, Any]:
        """``record`` with its screenshot inline: itself when it already is (or has none), else
        a copy holding the stored bytes. Raises :class:`ScreenshotUnavailable` as
        :meth:`image` does."""
        if record.get("screenshot") or not record.get("screenshot_key"):
            return record
        return {**record, "screenshot": self.image(record)}
