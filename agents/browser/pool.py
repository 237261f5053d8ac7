"""Chromium processes shared by episodes, replaced after a number of contexts.

A browser that has served ``recycle_after`` contexts takes no new ones; it is closed when its
last context closes, so a long-running worker's memory stays bounded by what a fresh browser
and the live episodes use. A browser that died (one that we did not close) is named in the log,
as a warning, and replaced on the next request.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from playwright.async_api import Browser, Playwright

from infra.chromium import launch_options
from infra.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class PooledBrowser:
    browser: Browser
    served: int = 0
    open: int = 0
    retired: bool = False
    closing: bool = False  # we close it: its going away is no news


class BrowserPool:
    def __init__(self, playwright: Playwright, settings: Settings, extra_args: list[str]):
        self._playwright = playwright
        self._settings = settings
        self._extra_args = extra_args
        self._current: PooledBrowser | None = None
        self._all: list[PooledBrowser] = []
        self._launching = asyncio.Lock()  # concurrent navigations must share one new browser
        self.launched = 0

    async def warm(self) -> None:
        """Launch the first browser now, so that the first episode (or the first taken over
        when this worker joins a running group) does not wait for Chromium to start."""
        async with self._launching:
            if self._current is None:
                pooled = await self._acquire()
                pooled.served -= 1
                pooled.open -= 1

    async def acquire(self) -> PooledBrowser:
        """The browser a new context should use (one context is counted as opened)."""
        async with self._launching:
            return await self._acquire()

    async def _acquire(self) -> PooledBrowser:
        current = self._current
        if current is None or current.retired or not current.browser.is_connected():
            if current is not None:
                await self._retire(current)
            browser = await self._playwright.chromium.launch(
                **launch_options(self._settings, self._extra_args)
            )
            current = self._current = PooledBrowser(browser)
            browser.on("disconnected", lambda _, pooled=current: self._on_disconnected(pooled))
            self._all.append(current)
            self.launched += 1
        current.served += 1
        current.open += 1
        if current.served >= self._settings.browser_recycle_after:
            current.retired = True
        return current

    @staticmethod
    def _on_disconnected(pooled: PooledBrowser) -> None:
        if not pooled.closing:
            log.warning(
                "a browser went away (Chromium exited or crashed; contexts open: %d): their "
                "episodes fail, the next episode starts a fresh browser",
                pooled.open,
            )

    async def release(self, pooled: PooledBrowser) -> None:
        """One context of ``pooled`` was closed."""
        pooled.open -= 1
        if pooled.retired and pooled.open <= 0:
            await self._retire(pooled)

    async def _retire(self, pooled: PooledBrowser) -> None:
        pooled.retired = True
        if pooled.open > 0 and pooled.browser.is_connected():
            return  # closed by release() once its last context is done
        if pooled in self._all:
            self._all.remove(pooled)
        if self._current is pooled:
            self._current = None
        if pooled.browser.is_connected():
            pooled.closing = True
            await pooled.browser.close()

    async def close(self) -> None:
        for pooled in list(self._all):
            if pooled.browser.is_connected():
                pooled.closing = True
                await pooled.browser.close()
        self._all.clear()
        self._current = None
