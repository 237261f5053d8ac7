"""Each episode's last step a worker took from its partition: the reference that tells an
out-of-order operation (poison) from the next one or a re-sent copy.

Guarantees: a step behind the reference, or more than ``most_ahead`` past it, is refused with
the reason; a refused step never moves the reference; an accepted step never moves it back. An
episode with no reference (first seen since its partition was assigned) is accepted, so a worker
that joins mid-episode serves it. Forgetting a partition's episodes is the caller's duty when the
partition is assigned or revoked (its next operations may follow ones another worker took). At
most ``capacity`` episodes are remembered, the least recently seen forgotten first.
"""

from __future__ import annotations

from collections import OrderedDict

DEFAULT_CAPACITY = 100_000


class StepReference:
    def __init__(self, what: str, capacity: int = DEFAULT_CAPACITY):
        self.what = what  # e.g. "act op", for the refusal's text
        self.capacity = capacity
        # episode -> (step of the last one taken, its partition)
        self.last: OrderedDict[str, tuple[int, int]] = OrderedDict()

    def refusal(self, episode_id: str, step: int, partition: int, most_ahead: int) -> str | None:
        """Why ``step`` cannot come next for ``episode_id``, or None (and it is taken)."""
        last = self.last.get(episode_id)
        if last is not None:
            most = last[0] + most_ahead
            if step < last[0] or step > most:
                return (
                    f"out-of-order {self.what}: step {step}, but the last one of episode "
                    f"{episode_id} was at step {last[0]} (the next is at most step {most})"
                )
        self.take(episode_id, step, partition)
        return None

    def take(self, episode_id: str, step: int, partition: int) -> None:
        """Record ``step`` as taken (never moving the reference back)."""
        last = self.last.get(episode_id)
        self.last[episode_id] = (max(step, last[0]) if last else step, partition)
        self.last.move_to_end(episode_id)
        while len(self.last) > self.capacity:
            self.last.popitem(last=False)

    def forget(self, partitions: set[int]) -> None:
        """Drop the references of episodes on ``partitions``."""
        for episode_id, (_, partition) in list(self.last.items()):
            if partition in partitions:
                del self.last[episode_id]
