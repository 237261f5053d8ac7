"""The topic table: every Kafka topic of webgym-streams, declared once.

Episode-keyed topics (operations, observations, inferences, trajectories, episodes) all take
``settings.default_partitions`` so that a Faust table keyed by ``episode_id`` and the browser worker
holding that episode's browser context are assigned the same partition numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from infra.settings import Settings

DAY_MS = 24 * 60 * 60 * 1000
MIB = 1024 * 1024

# Screenshots ride in observation events; 16 MiB leaves room for a full-page PNG.
LARGE_MESSAGE_BYTES = 16 * MIB
DEFAULT_MESSAGE_BYTES = 1 * MIB


@dataclass(frozen=True)
class TopicSpec:
    """One row of the table. ``partitions=None`` means the shared episode partition count;
    ``event_type`` is the one Avro record type the topic carries (``schemas/avro/<event_type>/``).
    """

    suffix: str
    key: str
    what: str
    retention_ms: int
    cleanup_policy: Literal["delete", "compact"] = "delete"
    max_message_bytes: int = DEFAULT_MESSAGE_BYTES
    partitions: int | None = None
    event_type: str = field(kw_only=True)

    def name(self, settings: Settings) -> str:
        return settings.topic(self.suffix)

    def partition_count(self, settings: Settings) -> int:
        return self.partitions if self.partitions is not None else settings.default_partitions

    def config(self) -> dict[str, str]:
        """Topic-level configs as the broker expects them."""
        config = {
            "cleanup.policy": self.cleanup_policy,
            "max.message.bytes": str(self.max_message_bytes),
        }
        # Compacted topics keep the latest value per key forever; retention applies to deletes.
        config["retention.ms"] = (
            "-1" if self.cleanup_policy == "compact" else str(self.retention_ms)
        )
        return config


TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec(
        "tasks",
        "task_id",
        "the task set, with rubrics",
        -1,
        "compact",
        partitions=1,
        event_type="task",
    ),
    TopicSpec(
        "episodes",
        "episode_id",
        "episode started / finished / aborted",
        30 * DAY_MS,
        event_type="episode",
    ),
    TopicSpec(
        "ops.navigate",
        "episode_id",
        "navigate requests for browser workers",
        7 * DAY_MS,
        event_type="navigate_op",
    ),
    TopicSpec(
        "ops.act",
        "episode_id",
        "act requests (click, type, scroll...)",
        7 * DAY_MS,
        event_type="act_op",
    ),
    TopicSpec(
        "observations",
        "episode_id",
        "screenshot, url, title, set-of-marks, timings",
        30 * DAY_MS,
        max_message_bytes=LARGE_MESSAGE_BYTES,
        event_type="observation",
    ),
    TopicSpec(
        "ops.infer",
        "episode_id",
        "inference requests: the built context of one step",
        7 * DAY_MS,
        max_message_bytes=LARGE_MESSAGE_BYTES,
        event_type="infer_request",
    ),
    TopicSpec(
        "inferences",
        "episode_id",
        "model output, parsed action, memory, tokens, policy version",
        30 * DAY_MS,
        max_message_bytes=4 * MIB,
        event_type="inference",
    ),
    TopicSpec(
        "trajectories",
        "episode_id",
        "assembled trajectories",
        90 * DAY_MS,
        max_message_bytes=4 * MIB,
        event_type="trajectory",
    ),
    TopicSpec(
        "trajectories.scored",
        "episode_id",
        "reward, per-fact verdicts, judge version",
        90 * DAY_MS,
        max_message_bytes=4 * MIB,
        event_type="scored_trajectory",
    ),
    TopicSpec(
        "trajectories.success",
        "episode_id",
        "what the learner trains on (its retention is the replay buffer)",
        90 * DAY_MS,
        max_message_bytes=4 * MIB,
        event_type="scored_trajectory",
    ),
    TopicSpec(
        "curriculum",
        "sampler",
        "task sampler input: in-flight target, ended episodes, blocked sites",
        7 * DAY_MS,
        partitions=1,
        event_type="curriculum",
    ),
    TopicSpec(
        "policy.versions",
        "policy_name",
        "published weights",
        -1,
        "compact",
        partitions=1,
        event_type="policy_version",
    ),
    TopicSpec(
        "eval.results",
        "policy_name",
        "held-out evaluation: a result per episode and per policy version (the learning curve)",
        365 * DAY_MS,
        partitions=1,
        event_type="eval_result",
    ),
    TopicSpec(
        "dlq",
        "original key",
        "poison records with their source coordinates",
        30 * DAY_MS,
        max_message_bytes=LARGE_MESSAGE_BYTES + MIB,
        event_type="dead_letter",
    ),
)


def event_type(suffix: str) -> str:
    """The Avro event type the topic ``suffix`` carries (what a reader expects to decode)."""
    return topic_spec(suffix).event_type


def episode_topics() -> tuple[str, ...]:
    """The suffixes of the episode-keyed topics, in table order."""
    return tuple(spec.suffix for spec in TOPICS if spec.key == "episode_id")


def topic_spec(suffix: str) -> TopicSpec:
    """The table row for ``suffix``; a KeyError names the known suffixes."""
    for spec in TOPICS:
        if spec.suffix == suffix:
            return spec
    raise KeyError(f"no topic {suffix!r} in the table; known: {[t.suffix for t in TOPICS]}")
