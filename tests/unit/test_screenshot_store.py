"""Screenshots stored once (content-addressed) and read back through one door, inline or stored.

The object store here is a fake with MinIO's put/get calls; tests/e2e/test_screenshot_storage.py
and tests/integration/test_policy_worker.py run these paths against the local stack's MinIO.
"""

from __future__ import annotations

import hashlib
import io
import time

import pytest
from minio.error import S3Error

from agents.browser.migration import LoggedPage
from agents.policy.screenshots import ImageCache, StoredScreenshots
from infra.log_reader import EventUnavailable
from infra.minio_store import ObjectStoreError
from infra.screenshot_store import ScreenshotStore, ScreenshotUnavailable, object_key
from infra.settings import Settings
from schemas.observation import digest_of
from schemas.serde import default_catalog
from tests.samples import sample

IMAGE = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8


class _Response:
    def __init__(self, data: bytes):
        self._data = data

    def read(self) -> bytes:
        return self._data

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


class FakeMinio:
    """The four calls the store makes, over a dict."""

    def __init__(self):
        self.buckets: set[str] = set()
        self.objects: dict[tuple[str, str], bytes] = {}
        self.gets = 0

    def bucket_exists(self, bucket: str) -> bool:
        return bucket in self.buckets

    def make_bucket(self, bucket: str) -> None:
        self.buckets.add(bucket)

    def put_object(self, bucket, name, stream: io.BytesIO, length, content_type=None) -> None:
        assert bucket in self.buckets
        self.objects[(bucket, name)] = stream.read(length)

    def get_object(self, bucket: str, name: str) -> _Response:
        self.gets += 1
        if (bucket, name) not in self.objects:
            raise S3Error(None, "NoSuchKey", "The specified key does not exist.", name, "", "")
        return _Response(self.objects[(bucket, name)])


def _stored(store: ScreenshotStore) -> dict:
    record = sample("observation")
    digest = hashlib.sha256(IMAGE).hexdigest()
    key = store.put(IMAGE, "jpeg", digest)
    return {**record, "screenshot": b"", "screenshot_sha256": digest, "screenshot_key": key}


def test_a_stored_screenshot_is_kept_once_under_its_digest_and_read_back_checked():
    client = FakeMinio()
    store = ScreenshotStore(Settings(), client=client)
    record = _stored(store)
    digest = hashlib.sha256(IMAGE).hexdigest()
    assert record["screenshot_key"] == object_key(digest, "jpeg") == f"screenshots/{digest}.jpeg"
    assert store.put(IMAGE, "jpeg") == record["screenshot_key"]  # the same bytes, the same key
    assert len(client.objects) == 1
    assert store.image(record) == IMAGE
    assert store.with_image(record)["screenshot"] == IMAGE
    assert record["screenshot"] == b""  # with_image copies; the record read stays as it was
    # An inline record is its own image, read from no store.
    inline = {**sample("observation"), "screenshot": IMAGE}
    assert store.with_image(inline) is inline
    assert client.gets == 1


def test_a_changed_or_missing_object_is_unavailable_never_another_image():
    client = FakeMinio()
    store = ScreenshotStore(Settings(), client=client, cache_size=0)
    record = _stored(store)
    client.objects[(Settings().artifacts_bucket, record["screenshot_key"])] = IMAGE[:-10]
    with pytest.raises(ScreenshotUnavailable, match="does not match the SHA-256"):
        store.image(record)
    del client.objects[(Settings().artifacts_bucket, record["screenshot_key"])]
    with pytest.raises(EventUnavailable, match="NoSuchKey"):  # what readers already handle
        store.image(record)


def test_a_store_is_contacted_only_for_a_stored_screenshot():
    settings = Settings(minio_endpoint="127.0.0.1:1")  # nothing listens there
    store = ScreenshotStore(settings)
    failure = {**sample("observation"), "screenshot": b"", "failure": "crash"}
    assert store.image({**sample("observation"), "screenshot": IMAGE}) == IMAGE
    assert store.image(failure) == b""
    with pytest.raises(ScreenshotUnavailable, match="no MinIO answered"):
        store.image({**failure, "failure": None, "screenshot_key": "screenshots/x.jpeg"})


def test_the_digest_is_the_browsers_stamp_or_the_inline_bytes_hashed():
    digest = hashlib.sha256(IMAGE).hexdigest()
    assert digest_of({"screenshot": IMAGE}) == digest  # an event from before the stamp
    assert digest_of({"screenshot": b"", "screenshot_sha256": digest}) == digest


def test_a_stored_observation_decodes_with_its_key_and_digest():
    catalog = default_catalog()
    record = _stored(ScreenshotStore(Settings(), client=FakeMinio()))
    decoded = catalog.decode(catalog.encode("observation", record)).record
    assert (decoded["screenshot"], decoded["screenshot_key"], decoded["screenshot_sha256"]) == (
        b"",
        record["screenshot_key"],
        hashlib.sha256(IMAGE).hexdigest(),
    )


def test_the_policy_worker_reads_stored_screenshots_in_the_background():
    client = FakeMinio()
    store = ScreenshotStore(Settings(), client=client)
    record = _stored(store)
    images = ImageCache()
    stored = StoredScreenshots(store, images)
    stored.want(record)
    deadline = time.monotonic() + 5
    while stored.waiting_for([record["event_id"]]) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert images.get(record["event_id"]) == IMAGE
    gone = {**record, "event_id": "gone", "screenshot_key": "screenshots/none.jpeg"}
    stored.want(gone)
    while stored.waiting_for(["gone"]) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert images.get("gone") is None
    assert (stored.fetched, stored.failed) == (1, 1)
    stored.close()


def test_a_take_over_compares_against_the_stored_page_or_fails_without_it():
    client = FakeMinio()
    store = ScreenshotStore(Settings(), client=client, cache_size=0)
    record = _stored(store)
    assert LoggedPage.from_record(record, store).screenshot == IMAGE
    client.objects.clear()
    page = LoggedPage.from_record(record, store)
    # No screenshot to match: the rebuilt page cannot be checked, so the take-over fails the
    # episode (agents.browser.page_match); the page is not a failure observation.
    assert (page.screenshot, page.failure) == (b"", None)


def test_a_store_that_refused_is_not_asked_again_for_a_while():
    client = FakeMinio()
    calls = []

    def refuse(bucket, name, stream, length, content_type=None):
        calls.append(name)
        raise OSError("connection refused")

    client.put_object = refuse
    store = ScreenshotStore(Settings(), client=client, retry_after_s=60)
    for _ in range(3):  # the browser keeps these inline; only the first costs a try
        with pytest.raises(ObjectStoreError, match="no MinIO answered"):
            store.put(IMAGE, "jpeg")
    assert len(calls) == 1
    again = ScreenshotStore(Settings(), client=client, retry_after_s=0)
    for _ in range(2):
        with pytest.raises(ObjectStoreError):
            again.put(IMAGE, "jpeg")
    assert len(calls) == 3  # no pause: each put tries
    del client.put_object  # the store is back
    assert again.put(IMAGE, "jpeg") == object_key(hashlib.sha256(IMAGE).hexdigest(), "jpeg")
