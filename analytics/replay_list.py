"""Finding episodes in the log: ``webgym replay --list``.

:func:`list_episodes` folds the log's episode-level topics with :class:`EpisodeFold` (screenshots
and inference requests are not read: a list stays cheap on a long log) and keeps the episodes
that pass an :class:`EpisodeFilter`. Steps are the policy's replies seen so far. Times filter on
when an episode started; with ``since`` the episode topics are read from that time on (the tasks
topic, compacted, always from the start). Times are read by :func:`analytics.times.parse_since`
(as every view reads them); the reward test is read here, with an error that says what would
have been understood.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from analytics.episodes import EpisodeFold, EpisodeView
from analytics.errors import AnalyticsError
from infra.log_reader import TopicReader
from infra.settings import Settings

EPISODE_TOPICS = (
    "episodes",
    "ops.navigate",
    "ops.act",
    "inferences",
    "trajectories.scored",
    "trajectories.success",
)
CLOCK_MARGIN_MS = 60_000  # producers' clocks; the same margin as the replay loader
_COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "==": operator.eq,
    "=": operator.eq,
}


def parse_reward(text: str) -> Callable[[float], bool]:
    """A test of a reward: ``1`` (equal), ``>=0.5``, ``<1``, ``>0``..."""
    match = re.fullmatch(r"\s*(>=|<=|==|=|>|<)?\s*(-?\d+(?:\.\d+)?)\s*", text)
    if not match:
        raise AnalyticsError(
            f"cannot read the reward filter {text!r}: write a number (1, 0.5) or a comparison "
            "(>=0.5, <1, >0)"
        )
    compare = _COMPARISONS[match.group(1) or "=="]
    bound = float(match.group(2))
    return lambda reward: compare(reward, bound)


@dataclass(frozen=True)
class EpisodeFilter:
    task: str | None = None  # substring of the task id, case-insensitive
    site: str | None = None  # substring of the website
    reward: str | None = None  # see parse_reward; episodes without a reward never pass
    success: bool | None = None  # on the success stream (True) or judged and not (False)
    since_ms: int | None = None  # started at or after
    until_ms: int | None = None  # started before

    def check(self) -> Callable[[EpisodeView], bool]:
        """The predicate; raises :class:`AnalyticsError` for filter text it cannot read."""
        reward_ok = parse_reward(self.reward) if self.reward is not None else None
        if (
            self.since_ms is not None
            and self.until_ms is not None
            and self.since_ms >= self.until_ms
        ):
            raise AnalyticsError("--since is not before --until: nothing can match")

        def passes(view: EpisodeView) -> bool:
            if self.task and self.task.lower() not in view.task_id.lower():
                return False
            if self.site and self.site.lower() not in view.website.lower():
                return False
            if reward_ok is not None and (view.reward is None or not reward_ok(view.reward)):
                return False
            if self.success is True and not view.success:
                return False
            if self.success is False and (view.success or view.state != "judged"):
                return False
            started = view.started_ts
            if self.since_ms is not None and (started is None or started < self.since_ms):
                return False
            if self.until_ms is not None and (started is None or started >= self.until_ms):
                return False
            return True

        return passes


def list_episodes(settings: Settings, wanted: EpisodeFilter) -> list[EpisodeView]:
    """The episodes of the log (as it is now) that pass ``wanted``, oldest start first."""
    passes = wanted.check()
    fold = EpisodeFold()
    since = None if wanted.since_ms is None else wanted.since_ms - CLOCK_MARGIN_MS
    suffixes = ["tasks", *EPISODE_TOPICS]
    with TopicReader(settings, suffixes, since, from_start=["tasks"]) as reader:
        for batch in reader.batches_to_end():
            for item in batch:
                if item.event.event_type is not None:
                    fold.apply(item.suffix, item.event.record)
    views = [v for v in fold.episodes.values() if passes(v)]
    return sorted(views, key=lambda v: (v.started_ts or 0, v.episode_id))


def list_row(view: EpisodeView) -> dict:
    """``EpisodeView.summary()``: steps as every view counts them (``analytics.rates``)."""
    return view.summary()
