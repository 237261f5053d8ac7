"""Which offsets of a partition may be committed when records finish out of order.

Records of different episodes in one partition are processed concurrently, so they finish in
any order. The committable position is just past the longest finished prefix: committing it
never skips a record that is still in flight (at least once).
"""

from __future__ import annotations

from collections import OrderedDict

TopicPartition = tuple[str, int]


class OffsetTracker:
    def __init__(self) -> None:
        self._pending: dict[TopicPartition, OrderedDict[int, bool]] = {}

    def started(self, tp: TopicPartition, offset: int) -> None:
        self._pending.setdefault(tp, OrderedDict())[offset] = False

    def finished(self, tp: TopicPartition, offset: int) -> int | None:
        """Mark done; return the new position to commit if the finished prefix grew."""
        pending = self._pending.get(tp)
        if pending is None or offset not in pending:
            return None
        pending[offset] = True
        position = None
        while pending and next(iter(pending.values())):
            done, _ = pending.popitem(last=False)
            position = done + 1
        return position

    def forget(self, tp: TopicPartition) -> None:
        """The partition was revoked: its in-flight records belong to the next owner."""
        self._pending.pop(tp, None)

    def in_flight(self, tp: TopicPartition) -> int:
        return sum(1 for done in self._pending.get(tp, {}).values() if not done)
