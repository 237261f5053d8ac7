"""Judges: a finished trajectory and its task in, a reward with per-fact verdicts out.

Every judge returns a :class:`Score` stamped with its name and version. A judge that cannot reach a
verdict (a model that keeps replying garbage, a task it cannot judge) returns a score with
``judge_error`` set and reward 0: a judge error is never a success.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Score:
    reward: float
    judge_name: str
    judge_version: str
    # FactVerdict records: {"fact_group_id", "fact", "satisfied", "rationale"}
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    judge_error: str | None = None

    @classmethod
    def error(cls, judge_name: str, judge_version: str, reason: str) -> Score:
        return cls(0.0, judge_name, judge_version, [], reason)


class Judge(Protocol):
    name: str
    version: str

    async def score(
        self, task: dict[str, Any], trajectory: dict[str, Any], screenshots: list[bytes]
    ) -> Score:
        """Judge ``trajectory`` (a ``trajectory`` event) of ``task`` (a ``task`` event).

        ``screenshots`` are the last screenshots of the episode, oldest first (JPEG or PNG).
        """
        ...
