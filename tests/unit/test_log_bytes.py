"""The log's bytes per topic, from segment files laid out as a Kafka node lays them out."""

from __future__ import annotations

from pathlib import Path

from bench.log_bytes import growth, topic_bytes
from infra.settings import Settings


def _segment(home: Path, directory: str, size: int) -> None:
    path = home / "data" / directory
    path.mkdir(parents=True, exist_ok=True)
    (path / "00000000000000000000.log").write_bytes(b"x" * size)
    (path / "00000000000000000000.index").write_bytes(b"i" * 999)  # not the log's bytes


def test_every_topic_of_the_prefix_is_summed_over_its_partitions(tmp_path: Path):
    settings = Settings(state_dir=tmp_path, topic_prefix="bench-1")
    home = tmp_path / "kafka"
    _segment(home, "bench-1.observations-0", 3000)
    _segment(home, "bench-1.observations-1", 1000)
    _segment(home, "bench-1-streams-episodes-changelog-0", 500)
    _segment(home, "bench-1.ops.act-0.0123abcd-delete", 7000)  # being deleted
    _segment(home, "bench-10.observations-0", 9000)  # another prefix
    _segment(home, "bench-2.observations-0", 9000)
    sizes, replicas = topic_bytes(settings)
    assert sizes == {"observations": 4000, "streams-episodes-changelog": 500}
    assert replicas == 1


def test_growth_is_per_step_per_hour_and_per_million_steps():
    figures = growth({"observations": 40_000, "ops.act": 1_000}, 10, 2.0, 1)
    assert figures["bytes_per_step"] == 4100
    assert figures["by_topic_bytes_per_step"] == {"observations": 4000, "ops.act": 100}
    assert figures["mb_per_hour"] == round(4100 * 2 * 3600 / 1e6, 1)
    assert figures["gb_per_million_steps"] == 4.1
