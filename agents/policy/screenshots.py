"""Screenshots from ``webgym.observations``, for the inference requests that refer to them.

A request names each image by observation event id; the worker keeps recent screenshots in a
bounded cache and puts the bytes into the request's messages before a backend sees them.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

CACHE_IMAGES = 2048


class ImageCache:
    """Screenshots by observation event id; the oldest are dropped beyond ``capacity``."""

    def __init__(self, capacity: int = CACHE_IMAGES):
        self._images: OrderedDict[str, bytes] = OrderedDict()
        self._capacity = capacity

    def put(self, event_id: str, image: bytes) -> None:
        self._images[event_id] = image
        self._images.move_to_end(event_id)
        while len(self._images) > self._capacity:
            self._images.popitem(last=False)

    def get(self, event_id: str) -> bytes | None:
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
