"""The rollout benchmark's workload: how long each inference takes and how long each episode runs.

A VLM's inference time is heavy-tailed: :func:`inference_latency_s` draws it from a lognormal
with median ``median_s`` and shape ``sigma`` (defaults 1.5 s and 0.7). An episode answers at the
step its task needs: :func:`episode_length` draws that step from its difficulty's horizon (easy
10, medium 20, hard 30), ``1 + floor(u * horizon)`` with ``u ~ Beta(2, 2)``, so lengths spread
over the whole horizon with most near its middle, as the paper's trajectories do.

Guarantees: every draw is a pure function of (seed, episode key, step) - the same in the
asynchronous run, the synchronous run and the simulation, whatever order episodes run in - and
lengths never exceed the horizon (the orchestrator would end the episode there).
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field

HORIZONS = {"easy": 10, "medium": 20, "hard": 30}


@dataclass(frozen=True)
class WorkloadSpec:
    seed: int = 0
    median_s: float = 1.5
    sigma: float = 0.7
    horizons: dict[str, int] = field(default_factory=lambda: dict(HORIZONS))

    def __post_init__(self) -> None:
        if self.median_s < 0 or self.sigma < 0:
            raise ValueError("the latency median and sigma must be >= 0")
        if any(h < 1 for h in self.horizons.values()):
            raise ValueError(f"horizons must be >= 1, got {self.horizons}")


def _rng(spec: WorkloadSpec, *parts: object) -> random.Random:
    digest = hashlib.sha256(":".join(map(str, (spec.seed, *parts))).encode()).digest()
    return random.Random(digest)


def inference_latency_s(spec: WorkloadSpec, episode_key: str, step: int) -> float:
    """Seconds the model takes at ``step`` of the episode (lognormal, see the module doc)."""
    if spec.median_s == 0:
        return 0.0
    return _rng(spec, "latency", episode_key, step).lognormvariate(
        math.log(spec.median_s), spec.sigma
    )


def episode_length(spec: WorkloadSpec, episode_key: str, difficulty: str) -> int:
    """The step at which the episode answers (1 .. the difficulty's horizon)."""
    horizon = spec.horizons.get(difficulty)
    if horizon is None:
        raise ValueError(
            f"no horizon for difficulty {difficulty!r}; known: {sorted(spec.horizons)}"
        )
    u = _rng(spec, "length", episode_key).betavariate(2.0, 2.0)
    return min(horizon, 1 + math.floor(u * horizon))


def difficulty_of(spec: WorkloadSpec, episode_key: str) -> str:
    """A difficulty drawn uniformly for an episode (the simulation's own task mix)."""
    return _rng(spec, "difficulty", episode_key).choice(sorted(spec.horizons))
