"""Bytes a run wrote to the log, per topic, read from the local brokers' segment files.

What the log grows by is what the brokers store: record batches as written (compressed ones
compressed), with their headers, in the ``.log`` segment files of each partition's directory.
This reads those sizes from the local stack's data directories (``webgym up``), so it measures
the stack the benchmark runs on, not an external cluster. On a local cluster every replica counts,
so the figures include the replication factor (``replicas``: the nodes that hold the topics).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from infra.settings import Settings
from infra.stack.kafka import LocalKafka, cluster_size

MILLION = 1_000_000


def _homes(settings: Settings) -> list[Path]:
    """The data homes of every local node: the one-node stack's and a cluster's, if formatted."""
    nodes = cluster_size(settings) or 0
    return [LocalKafka(settings).home] + [
        LocalKafka(settings, node, nodes).home for node in range(1, nodes + 1)
    ]


def topic_bytes(settings: Settings) -> tuple[dict[str, int], int]:
    """Bytes in the segment files of every topic under ``settings.topic_prefix`` (the topic
    table's and the Faust app's own), by topic name without the prefix, summed over partitions
    and local nodes; and how many nodes hold them (the replicas). Topics being deleted are left
    out."""
    prefix = settings.topic_prefix
    sizes: dict[str, int] = defaultdict(int)
    holders = 0
    for home in _homes(settings):
        found = False
        for directory in (home / "data").glob(f"{prefix}[.-]*"):
            name, _, partition = directory.name.rpartition("-")
            if not partition.isdigit() or not directory.is_dir():
                continue  # <topic>-<partition>.<id>-delete: on its way out
            found = True
            sizes[name[len(prefix) + 1 :]] += sum(f.stat().st_size for f in directory.glob("*.log"))
        holders += found
    return dict(sorted(sizes.items())), holders


def growth(sizes: dict[str, int], steps: int, steps_per_s: float, replicas: int) -> dict[str, Any]:
    """``sizes`` (:func:`topic_bytes`) per step, and what they make per hour at ``steps_per_s``
    and per million steps. Faust's changelogs are named ``streams-<table>-changelog``."""
    total = sum(sizes.values())
    per_step = total / steps if steps else 0.0
    return {
        "replicas": replicas,
        "bytes_per_step": round(per_step),
        "by_topic_bytes_per_step": {t: round(b / steps) if steps else 0 for t, b in sizes.items()},
        "mb_per_hour": round(per_step * steps_per_s * 3600 / MILLION, 1),
        "gb_per_million_steps": round(per_step * MILLION / 1e9, 2),
    }


def measure(settings: Settings, steps: int, steps_per_s: float) -> dict[str, Any]:
    """:func:`growth` of what the run under ``settings.topic_prefix`` wrote."""
    sizes, replicas = topic_bytes(settings)
    return growth(sizes, steps, steps_per_s, replicas)
