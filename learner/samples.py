"""Training samples from successful trajectories: exactly what the policy saw, and what it said.

Each trainable step of a ``trajectories.success`` record becomes one :class:`Sample`: the messages
of the step's inference request, read back from ``webgym.ops.infer`` at the position the
trajectory names (the exact context, not a rebuild), with every image reference replaced by the
screenshot bytes of that observation (read from ``webgym.observations`` at its recorded
position), and the raw reply of the step's inference event. Steps marked repeated, unparseable
or without an action are left out (``trainable`` false). Blocking reads; a step whose events are
gone from the log (retention) is reported, never guessed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from infra.log_reader import EventUnavailable, OffsetFetcher
from infra.screenshot_store import ScreenshotStore
from infra.settings import Settings
from schemas.event_ids import step_event_id


@dataclass(frozen=True)
class Sample:
    episode_id: str
    step: int
    policy_version: int | None
    messages: list[dict[str, Any]]  # images as {"type": "image", "image": bytes}
    reply: str
    phase: str | None = None  # what produced it ("warm_start", "on_policy"; None: unlabelled)


@dataclass
class Samples:
    samples: list[Sample] = field(default_factory=list)
    unavailable: list[tuple[str, int, str]] = field(default_factory=list)  # episode, step, why


class SampleBuilder:
    def __init__(self, settings: Settings):
        self.requests = OffsetFetcher(settings, "ops.infer")
        self.inferences = OffsetFetcher(settings, "inferences")
        self.observations = OffsetFetcher(settings, "observations")
        self.screenshots = ScreenshotStore(settings)  # observations that keep theirs in MinIO

    def build(self, success: dict[str, Any]) -> Samples:
        episode_id = success["episode_id"]
        positions = {
            s["observation_event_id"]: (s["observation_partition"], s["observation_offset"])
            for s in success["steps"]
        }
        out = Samples()
        for step in success["steps"]:
            if not step.get("trainable", False):
                continue
            try:
                out.samples.append(self._sample(episode_id, step, positions, success.get("phase")))
            except EventUnavailable as error:
                out.unavailable.append((episode_id, step["step"], str(error)))
        return out

    def _sample(
        self,
        episode_id: str,
        step: dict[str, Any],
        positions: dict[str, tuple[int, int]],
        phase: str | None,
    ) -> Sample:
        request = self.requests.fetch(
            step["request_partition"],
            step["request_offset"],
            step_event_id(episode_id, step["step"], "infer"),
        )
        inference = self.inferences.fetch(
            step["inference_partition"], step["inference_offset"], step["inference_event_id"]
        )
        messages = json.loads(request["messages_json"])
        for message in messages:
            if not isinstance(message["content"], list):
                continue
            for part in message["content"]:
                if part.get("type") == "image":
                    ref = part.pop("observation_event_id")
                    if ref not in positions:
                        raise EventUnavailable(f"no position for image {ref} in the trajectory")
                    partition, offset = positions[ref]
                    observation = self.observations.fetch(partition, offset, ref)
                    part["image"] = self.screenshots.image(observation)
        return Sample(
            episode_id,
            step["step"],
            inference["policy_version"],
            messages,
            inference["raw_text"],
            phase,
        )

    def close(self) -> None:
        for reader in (self.requests, self.inferences, self.observations):
            reader.close()
