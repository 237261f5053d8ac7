"""Benchmark: Avro single-object encode / decode of one observation with a 1280x768 JPEG.

The screenshot is a real Chromium render of a busy local page (text, colours, a table), taken
the way browser workers take them (JPEG, quality 80). Writes bench/results/serde_observation.json.
Run: `make bench` or `.venv/bin/python -m bench.serde_observation`.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from urllib.parse import quote

from commands.smoke import screenshot
from infra.provenance import write_result
from infra.settings import Settings
from schemas.serde import default_catalog

RESULTS = Path(__file__).parent / "results" / "serde_observation.json"
ROUNDS = 2000


def _data_url(html: str) -> str:
    return "data:text/html," + quote(html)


BUSY_PAGE = _data_url(
    "".join(
        [
            "<html><body style='font-family:sans-serif;margin:20px'><h1>Results for kettles</h1>",
            "<table border=1 cellpadding=6>",
            *(
                f"<tr style='background:hsl({i * 37 % 360},70%,85%)'><td>Kettle model {i}</td>"
                f"<td>${10 + i * 1.37:.2f}</td><td>{'&#9733;' * (i % 5 + 1)}</td>"
                f"<td>In stock at store #{i * 7}</td></tr>"
                for i in range(40)
            ),
            "</table></body></html>",
        ]
    )
)


# Photo-like content compresses badly: random pixels on half the viewport give a heavy JPEG.
IMAGE_PAGE = _data_url(
    "<html><body style='margin:0'><canvas id=c width=1280 height=384></canvas>"
    "<h1 style='font-family:sans-serif'>Gallery</h1><script>"
    "const c=document.getElementById('c').getContext('2d');const d=c.createImageData(1280,384);"
    "let s=7;for(let i=0;i<d.data.length;i++){s=(s*1103515245+12345)%2147483648;"
    "d.data[i]=i%4==3?255:s%256;}c.putImageData(d,0,0);</script></body></html>"
)


def _timed(function, rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        function()
        samples.append((time.perf_counter() - started) * 1e6)
    return samples


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_us": round(statistics.median(ordered), 1),
        "p99_us": round(ordered[int(len(ordered) * 0.99) - 1], 1),
        "mean_us": round(statistics.fmean(ordered), 1),
    }


def _measure(catalog, image: bytes) -> dict:
    record = {
        "event_id": "bench:1:observation",
        "episode_id": "bench",
        "step": 1,
        "ts": int(time.time() * 1000),
        "screenshot": image,
        "width": 1280,
        "height": 768,
        "url": "http://kettles.webgym.test/search?q=kettle",
        "title": "Results for kettles",
        "timings_ms": {"action": 12.0, "settle": 80.0, "screenshot": 35.0},
    }
    encoded = catalog.encode("observation", record)
    assert catalog.decode(encoded).record["screenshot"] == image
    for _ in range(200):  # warm up
        catalog.decode(catalog.encode("observation", record))
    return {
        "screenshot_bytes": len(image),
        "event_bytes": len(encoded),
        "encode": _summary(_timed(lambda: catalog.encode("observation", record), ROUNDS)),
        "decode": _summary(_timed(lambda: catalog.decode(encoded), ROUNDS)),
    }


def main() -> None:
    settings = Settings()
    catalog = default_catalog()
    cases = {}
    for name, page in (("text_page", BUSY_PAGE), ("image_page", IMAGE_PAGE)):
        image, _, _ = screenshot(settings, page)
        cases[name] = _measure(catalog, image)
    result = {
        "benchmark": "avro single-object encode/decode of one observation",
        "screenshot": {"format": "jpeg", "quality": 80, "width": 1280, "height": 768},
        "rounds": ROUNDS,
        "cases": cases,
    }
    write_result(RESULTS, result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
