"""The smoke job that ``webgym run`` performs until the rollout loop lands.

It proves each piece of the stack end to end, the way the loop will use it: Chromium renders a
page served on loopback and takes a 1280x768 JPEG screenshot; the screenshot travels as an Avro
``observation`` event through Kafka and is read back by a consumer group; the same bytes are
stored in and read back from MinIO. Any mismatch raises :class:`SmokeFailure`.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler

from confluent_kafka import KafkaException
from playwright.sync_api import sync_playwright

from infra.chromium import launch_options
from infra.consumer import EventConsumer, build_consumer
from infra.dead_letters import DeadLetterRouter
from infra.leftovers import remove_groups
from infra.minio_store import build_minio, put_bytes, read_bytes
from infra.ports import loopback_server
from infra.producer import EventProducer, now_ms
from infra.settings import Settings
from infra.topic_admin import build_admin
from schemas.event_ids import step_event_id

VIEWPORT = {"width": 1280, "height": 768}
PAGE = b"""<!doctype html><html><head><title>webgym smoke</title>
<style>body{font-family:sans-serif;background:linear-gradient(#e8f0ff,#fff);margin:40px}
button{font-size:20px;padding:10px 20px}</style></head>
<body><h1>webgym-streams</h1><p>The local stack answers.</p>
<button>Continue</button></body></html>"""


class SmokeFailure(RuntimeError):
    """A round trip returned something other than what was sent."""


@dataclass(frozen=True)
class SmokeResult:
    episode_id: str
    screenshot_bytes: int
    title: str
    kafka_round_trip_s: float
    minio_object: str


class _PageHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep the terminal for the job's own progress


def smoke_group(episode_id: str) -> str:
    """The consumer group that reads the smoke observation back; removed when the check ends."""
    return f"webgym-smoke-{episode_id}"


@contextmanager
def serve_page() -> Iterator[str]:
    """Serve the smoke page on an ephemeral loopback port; yields its URL."""
    with loopback_server(_PageHandler) as url:
        yield url


def screenshot(settings: Settings, url: str) -> tuple[bytes, str, str]:
    """JPEG screenshot, final URL and title of ``url`` in a fresh Chromium context."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(**launch_options(settings))
        try:
            context = browser.new_context(viewport=VIEWPORT)
            page = context.new_page()
            page.goto(url, wait_until="load", timeout=30_000)
            image = page.screenshot(type="jpeg", quality=80)
            return image, page.url, page.title()
        finally:
            browser.close()


def run_smoke(settings: Settings, progress: Callable[[str], None] = print) -> SmokeResult:
    episode_id = f"smoke-{uuid.uuid4().hex[:12]}"
    with serve_page() as url:
        progress("Chromium: screenshot of a local page")
        image, final_url, title = screenshot(settings, url)

    progress("Kafka: observation event through a consumer group")
    topic = settings.topic("observations")
    record = {
        "event_id": step_event_id(episode_id, 0, "observation"),
        "episode_id": episode_id,
        "step": 0,
        "ts": now_ms(),
        "screenshot": image,
        "width": VIEWPORT["width"],
        "height": VIEWPORT["height"],
        "url": final_url,
        "title": title,
        "timings_ms": {},
    }
    producer = EventProducer.connect(settings, client_id="webgym-smoke")
    started = time.monotonic()
    producer.produce(topic, episode_id, "observation", record)
    producer.flush()
    group = smoke_group(episode_id)
    consumer = EventConsumer(
        build_consumer(settings, group_id=group, client_id="webgym-smoke"),
        DeadLetterRouter(settings, producer),
    )
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            event = consumer.poll(1.0)
            if event is not None and event.record["event_id"] == record["event_id"]:
                consumer.commit()
                break
        else:
            raise SmokeFailure(f"the observation for {episode_id} did not come back within 60 s")
    finally:
        consumer.close()
        # The commit was part of the check; the group has no further use, and each run's own
        # would stay on the broker. Failing to remove it fails nothing the smoke checks.
        with contextlib.suppress(KafkaException):
            remove_groups(build_admin(settings), [group])
    round_trip = time.monotonic() - started
    if event.record["screenshot"] != image:
        raise SmokeFailure("the screenshot read back from Kafka differs from the one sent")

    progress("MinIO: screenshot stored and read back")
    client = build_minio(settings)
    name = f"smoke/{episode_id}.jpg"
    put_bytes(client, settings.artifacts_bucket, name, image, content_type="image/jpeg")
    if read_bytes(client, settings.artifacts_bucket, name) != image:
        raise SmokeFailure(f"s3://{settings.artifacts_bucket}/{name} differs from what was written")
    return SmokeResult(
        episode_id, len(image), title, round_trip, f"s3://{settings.artifacts_bucket}/{name}"
    )
