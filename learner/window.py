"""The learner's window: a bounded set of recently trained samples, drawn with recency weighting.

Guarantees:

- at most ``capacity`` samples are held; adding beyond it forgets the oldest;
- :meth:`SampleWindow.draw` is deterministic for a given window and seed, draws without
  replacement, and weights a sample by ``0.5 ** (age / half_life)``, where age counts the samples
  added after it (the paper weights recent data more);
- :meth:`SampleWindow.drop_stale` removes samples whose policy version is more than
  ``max_staleness`` versions behind the current one (the staleness bound).

Kafka's retention is the replay buffer behind it: each entry remembers where its trajectory lies
in ``webgym.trajectories.success``, so a restarted learner rebuilds the window from the log.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass

from learner.samples import Sample


@dataclass(frozen=True)
class WindowEntry:
    sample: Sample
    partition: int  # of the success record in webgym.trajectories.success
    offset: int
    seq: int  # how many samples were added before this one

    @property
    def key(self) -> str:
        return sample_key(self.sample)


def sample_key(sample: Sample) -> str:
    return f"{sample.episode_id}:{sample.step}"


def is_stale(policy_version: int | None, current: int, max_staleness: int) -> bool:
    """Whether a sample of ``policy_version`` is too far behind ``current`` to train on.

    A sample with no learner version (a teacher: scripted, heuristic) is never stale: the warm
    start trains on it by design, whatever version the learner has reached."""
    if policy_version is None:
        return False
    return policy_version < current - max_staleness


class SampleWindow:
    def __init__(self, capacity: int, half_life: float):
        if capacity < 1:
            raise ValueError(f"the window holds at least one sample, got capacity {capacity}")
        if half_life <= 0:
            raise ValueError(f"the recency half-life must be positive, got {half_life}")
        self.capacity = capacity
        self.half_life = half_life
        self._entries: deque[WindowEntry] = deque(maxlen=capacity)
        self._added = 0

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[WindowEntry]:
        """Oldest first."""
        return list(self._entries)

    def add(self, sample: Sample, partition: int, offset: int) -> None:
        self._entries.append(WindowEntry(sample, partition, offset, self._added))
        self._added += 1

    def drop_stale(self, current: int, max_staleness: int) -> int:
        kept = [
            e
            for e in self._entries
            if not is_stale(e.sample.policy_version, current, max_staleness)
        ]
        dropped = len(self._entries) - len(kept)
        self._entries = deque(kept, maxlen=self.capacity)
        return dropped

    def draw(self, count: int, seed: int) -> list[WindowEntry]:
        """Up to ``count`` distinct entries, recent ones more likely (see the module docstring)."""
        if count <= 0 or not self._entries:
            return []
        rng = random.Random(seed)
        newest = self._added - 1
        keyed = []
        for entry in self._entries:
            weight = 0.5 ** ((newest - entry.seq) / self.half_life)
            # Efraimidis-Spirakis: the k largest log(u) / w are a weighted draw without
            # replacement (the log form never underflows for old, light entries).
            keyed.append((math.log(1.0 - rng.random()) / weight, entry.seq, entry))
        keyed.sort(key=lambda item: (item[0], item[1]), reverse=True)
        return [entry for _, _, entry in keyed[:count]]
