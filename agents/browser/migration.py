"""Taking over an episode another browser worker served: its page rebuilt from the log.

When an episode's partition moves (a worker joined, left or died, a broker was lost), its next
operation reaches a worker that holds no browser context for it. That worker reads the episode's
own records back from the log (:func:`read_episode_log`: its navigation, its act operations and
its observations, all on the partition the operation came from), runs them again in a fresh
context exactly as they ran the first time (:meth:`EpisodeLog.rebuild_plan`), and checks every
rebuilt page against the observation logged for it with the replay tolerance
(:func:`agents.browser.page_match.page_differences`). The worker then serves the operation (see
:meth:`agents.browser.worker.BrowserWorker._take_over`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from infra.log_reader import CLOCK_MARGIN_MS, TopicReader, episode_start_bound_ms
from infra.screenshot_store import ScreenshotStore, ScreenshotUnavailable
from infra.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoggedPage:
    """An observation as :class:`agents.browser.page_match.RecordedPage` compares it."""

    url: str
    title: str
    screenshot: bytes
    failure: str | None
    ts: int

    @classmethod
    def from_record(cls, record: dict[str, Any], store: ScreenshotStore) -> LoggedPage:
        """The page of an observation, its screenshot inline or stored. A stored screenshot
        that cannot be read leaves the page without one: it then cannot match a rebuilt page,
        and the take-over fails that episode."""
        try:
            screenshot = store.image(record)
        except ScreenshotUnavailable as exc:
            log.warning("episode %s step %d: %s", record["episode_id"], record["step"], exc)
            screenshot = b""
        return cls(
            record.get("url") or "",
            record.get("title") or "",
            screenshot,
            record.get("failure"),
            record["ts"],
        )


@dataclass(frozen=True)
class EpisodeLog:
    """One episode's browser records as the log holds them (the first copy of each step)."""

    navigate: dict[str, Any] | None  # the navigate operation (step 0); None: not in the log
    acts: dict[int, dict[str, Any]] = field(default_factory=dict)  # act operations by step
    pages: dict[int, LoggedPage] = field(default_factory=dict)  # observations by step

    @property
    def failed(self) -> LoggedPage | None:
        """A failure observation, if the episode's browser side already failed (it is over)."""
        return next((page for page in self.pages.values() if page.failure), None)

    def rebuild_plan(self, step: int) -> tuple[list[tuple[str, dict[str, Any]]], int]:
        """The operations to run again before serving the act operation of ``step``, and the
        step whose page they reach.

        That is the navigation and every act operation up to the last one answered: ``step``
        itself when its observation is in the log (the previous owner answered it, and the
        operation came again because its offset was not committed: it is not served twice),
        else the last answered step before it. Steps skipped by unparseable replies have no
        operation and are skipped here too.
        """
        answered = [s for s in self.pages if s <= step]
        reached = max(answered, default=0)
        plan = [("navigate", self.navigate)] if self.navigate is not None else []
        plan += [("act", self.acts[s]) for s in sorted(self.acts) if 0 < s <= reached]
        return plan, reached


def read_episode_log(
    settings: Settings,
    episode_id: str,
    partition: int,
    op_ts_ms: int,
    store: ScreenshotStore | None = None,
) -> EpisodeLog:
    """``episode_id``'s navigation, act operations and observations on ``partition``.

    The navigation is looked for from ``episode_deadline_s`` (no episode lives longer) before
    the operation ``op_ts_ms`` stamps; the act operations and observations from the
    navigation's time on, so a take-over reads the episode's lifetime of one partition, not
    more. Reads the records that are in the log when it starts; a previous owner that left
    flushed its observations before giving the partition up, and one that died writes no more.
    """
    since = episode_start_bound_ms(settings, op_ts_ms)
    with TopicReader(settings, ["ops.navigate"], since, partitions=[partition]) as reader:
        navigations = [
            item.event
            for item in reader.read_to_end()
            if item.event.record.get("episode_id") == episode_id
            and item.event.record.get("step") == 0
        ]
    if not navigations:
        return EpisodeLog(None)
    navigate = navigations[0]
    start = (navigate.timestamp_ms or navigate.record["ts"]) - CLOCK_MARGIN_MS
    store = store or ScreenshotStore(settings)
    acts: dict[int, dict[str, Any]] = {}
    pages: dict[int, LoggedPage] = {}
    suffixes = ["ops.act", "observations"]
    with TopicReader(settings, suffixes, start, partitions=[partition]) as reader:
        for item in reader.read_to_end():
            record = item.event.record
            if item.event.event_type is None or record.get("episode_id") != episode_id:
                continue
            if item.suffix == "ops.act":
                acts.setdefault(record["step"], record)
            elif record["step"] not in pages:
                pages[record["step"]] = LoggedPage.from_record(record, store)
    return EpisodeLog(navigate.record, acts, pages)
