"""Screenshots from ``webgym.observations``, for the inference requests that refer to them.

A request names each image by observation event id; the worker keeps recent screenshots in a
bounded cache and puts the bytes into the request's messages before a backend sees them. A
screenshot the worker never consumed (the episode's partition moved here from another worker, or
a restart resumed past it) is read back from the log (:class:`ScreenshotBackfill`). A screenshot
kept in the object store (``screenshot_storage`` minio: the observation carries its key) is
read from there as its observation arrives (:class:`StoredScreenshots`).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from infra.log_reader import TopicReader, episode_start_bound_ms
from infra.screenshot_store import ScreenshotStore, ScreenshotUnavailable
from infra.settings import Settings

log = logging.getLogger(__name__)

CACHE_IMAGES = 2048


class ImageCache:
    """Screenshots by observation event id; the oldest are dropped beyond ``capacity``.
    Thread-safe: the consumer and the background readers fill it."""

    def __init__(self, capacity: int = CACHE_IMAGES):
        self._images: OrderedDict[str, bytes] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def put(self, event_id: str, image: bytes) -> None:
        with self._lock:
            self._images[event_id] = image
            self._images.move_to_end(event_id)
            while len(self._images) > self._capacity:
                self._images.popitem(last=False)

    def get(self, event_id: str) -> bytes | None:
        with self._lock:
            return self._images.get(event_id)


def resolve_images(messages: list[dict[str, Any]], images: ImageCache) -> list[dict[str, Any]]:
    """The request's messages with each image reference replaced by its screenshot bytes."""
    resolved = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            content = [
                {"type": "image", "image": images.get(part["observation_event_id"])}
                if part["type"] == "image"
                else part
                for part in content
            ]
        resolved.append({**message, "content": content})
    return resolved


def episode_start_ms(settings: Settings, request: dict[str, Any]) -> int:
    """The earliest time the request's episode can have started: its deadline less
    ``episode_deadline_s`` (or, for a request without a deadline, its own time less that)."""
    return episode_start_bound_ms(settings, request.get("deadline_ts") or request["ts"])


class ScreenshotBackfill:
    """Reads screenshots this worker never consumed back from the log into ``images``.

    :meth:`want` asks for event ids on one partition of ``observations``, read from a time on
    (the episode's start, :func:`episode_start_ms`): one read at a time, in the background, each
    id asked for once. :meth:`waiting_for` says whether some of them are still being read, so a
    request waits for its read rather than being answered with an error; an id the read did not
    find is given up (the request is answered as before, with an error naming it).
    """

    def __init__(self, settings: Settings, images: ImageCache, store: ScreenshotStore):
        self._settings = settings
        self._images = images
        self._store = store
        self._asked: OrderedDict[str, None] = OrderedDict()  # every id asked for (bounded)
        self._reading: set[str] = set()  # ids whose read has not finished
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="backfill")
        self.reads = 0
        self.found = 0

    def want(self, partition: int, since_ms: int, event_ids: Iterable[str]) -> None:
        with self._lock:
            new = [i for i in event_ids if i not in self._asked]
            for event_id in new:
                self._asked[event_id] = None
                self._reading.add(event_id)
            while len(self._asked) > CACHE_IMAGES:
                self._asked.popitem(last=False)
        if new:
            self._pool.submit(self._read, partition, since_ms, set(new))

    def waiting_for(self, event_ids: Iterable[str]) -> bool:
        with self._lock:
            return any(i in self._reading for i in event_ids)

    def _read(self, partition: int, since_ms: int, wanted: set[str]) -> None:
        found = 0
        try:
            suffixes = ["observations"]
            with TopicReader(self._settings, suffixes, since_ms, partitions=[partition]) as reader:
                for item in reader.read_to_end():
                    record = item.event.record
                    if item.event.event_type and record.get("event_id") in wanted:
                        try:
                            image = self._store.image(record)  # inline or stored
                        except ScreenshotUnavailable as exc:  # this one only; read on
                            log.warning("observation %s: %s", record["event_id"], exc)
                            continue
                        if image:
                            self._images.put(record["event_id"], image)
                            found += 1
        except Exception as exc:  # noqa: BLE001 - a failed read leaves the requests to their error
            log.warning("reading screenshots back from partition %d: %s", partition, exc)
        finally:
            with self._lock:
                self._reading -= wanted
                self.reads += 1
                self.found += found
        log.info(
            "read %d of %d screenshots back from the log (partition %d)",
            found,
            len(wanted),
            partition,
        )

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class StoredScreenshots:
    """Reads the screenshots that observations keep in the object store into ``images``.

    :meth:`want` takes an observation whose screenshot is stored and reads it in the background
    (``threads`` at a time, so the consumer never waits on the store); :meth:`waiting_for` says
    whether some of the given ids are still being read, so a request waits for its image rather
    than being answered without it. An image that cannot be read (object gone, digest wrong) is
    logged and given up: its request is answered as for any missing screenshot.
    """

    def __init__(self, store: ScreenshotStore, images: ImageCache, threads: int = 4):
        self._store = store
        self._images = images
        self._reading: set[str] = set()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="stored-shots")
        self.fetched = 0
        self.failed = 0

    def want(self, record: dict[str, Any]) -> None:
        with self._lock:
            self._reading.add(record["event_id"])
        self._pool.submit(self._fetch, record)

    def waiting_for(self, event_ids: Iterable[str]) -> bool:
        with self._lock:
            return any(i in self._reading for i in event_ids)

    def _fetch(self, record: dict[str, Any]) -> None:
        try:
            self._images.put(record["event_id"], self._store.image(record))
            self.fetched += 1
        except ScreenshotUnavailable as exc:
            self.failed += 1
            log.warning("observation %s: %s", record["event_id"], exc)
        finally:
            with self._lock:
                self._reading.discard(record["event_id"])

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
