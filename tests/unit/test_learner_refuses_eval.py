"""The learner's second line of defence: an eval-marked success is never trained. No Kafka."""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from infra.consumer import ConsumedEvent
from learner.loop import Learner, LearnerConfig, Ledger
from learner.samples import Samples


class CountingBuilder:
    """Stands in for the sample builder: one sample per record it is asked to build."""

    def __init__(self):
        self.built: list[str] = []

    def build(self, success: dict[str, Any]) -> Samples:
        self.built.append(success["episode_id"])
        out = Samples()
        out.samples.append(f"sample of {success['episode_id']}")
        return out


def a_learner(runs: tuple[str, ...] = ()) -> Learner:
    """A learner with only what ingesting needs (no broker, no MinIO, no model)."""
    learner = Learner.__new__(Learner)
    learner.config = LearnerConfig(runs=runs)
    learner._run_prefixes = tuple(f"{run}-" for run in runs)
    learner.topic = "test.trajectories.success"
    learner.builder = CountingBuilder()
    learner.stats = {"refused_eval": 0, "other_runs_skipped": 0}
    learner.ledger = Ledger()
    learner.pending = deque()
    learner.positions = {}
    return learner


def success(offset: int, episode_id: str, **marks: Any) -> ConsumedEvent:
    record = {"episode_id": episode_id, "steps": [], **marks}
    return ConsumedEvent("t", 0, offset, None, "scored_trajectory", record, [])


def test_eval_successes_are_skipped_counted_and_logged_once(caplog):
    learner = a_learner()
    with caplog.at_level(logging.ERROR, logger="learner.loop"):
        learner._ingest(success(10, "train-000000", purpose="train", phase="on_policy"))
        learner._ingest(success(11, "eval-000000", purpose="eval"))
        learner._ingest(success(12, "eval-000001", purpose="eval"))
        learner._ingest(success(13, "old-000000"))  # written before purposes: train
    assert learner.builder.built == ["train-000000", "old-000000"]
    assert [r.offset for r in learner.pending] == [10, 13]
    assert learner.stats["refused_eval"] == 2
    assert learner.ledger.refused == ["eval-000000", "eval-000001"]
    assert learner.positions == {0: 14}  # skipped as read: the group moves past them
    assert len([r for r in caplog.records if "evaluation episode" in r.getMessage()]) == 1


def test_a_learner_of_some_runs_trains_only_their_successes():
    """What an earlier run left on the success stream never reaches an experiment's learner."""
    learner = a_learner(runs=("exp1-warm", "exp1-on"))
    for offset, episode_id in enumerate(
        ["old-run-000000", "exp1-warm-000000", "exp1-warmer-000000", "exp1-on-000003"]
    ):
        learner._ingest(success(offset, episode_id, purpose="train"))
    assert learner.builder.built == ["exp1-warm-000000", "exp1-on-000003"]
    assert learner.stats["other_runs_skipped"] == 2
    assert learner.positions == {0: 4}  # skipped as read
