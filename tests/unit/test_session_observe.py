"""``EpisodeSession.observe`` when the page's document is torn down under it (a navigation the
browser reported only after the observation began): it observes the new page instead of failing
the episode, a bounded number of times; any other browser error still fails the episode."""

from __future__ import annotations

import asyncio

import pytest
from playwright.async_api import Error as PlaywrightError

from agents.browser.page_script import PAGE_SIGNALS, PAGE_STATE
from agents.browser.session import OBSERVE_ATTEMPTS, EpisodeFailure, EpisodeSession
from agents.browser.url_policy import UrlPolicy

DESTROYED = "Page.evaluate: Execution context was destroyed, most likely because of a navigation"


class FakeBrowser:
    def is_connected(self) -> bool:
        return True


class FakeContext:
    browser = FakeBrowser()

    def on(self, event, handler) -> None:
        pass


class FakePage:
    """Answers like a loaded page; the first ``failures`` reads of the page's signals raise."""

    def __init__(self, failures: int, error: str = DESTROYED):
        self.failures = failures
        self.error = error
        self.url = "http://shop.webgym.test/cart"
        self.screenshots = 0
        self.settles = 0

    def on(self, event, handler) -> None:
        pass

    def is_closed(self) -> bool:
        return False

    async def screenshot(self, **options) -> bytes:
        self.screenshots += 1
        return f"jpeg {self.screenshots}".encode()

    async def title(self) -> str:
        return "Cart"

    async def wait_for_function(self, script, timeout) -> None:
        self.settles += 1

    async def evaluate(self, script, *args):
        if script == PAGE_STATE:
            return {"nav": False, "ready": "complete", "doc": f"doc{self.settles}", "title": "Cart"}
        if script == PAGE_SIGNALS:
            if self.failures:
                self.failures -= 1
                raise PlaywrightError(self.error)
            return {"dialogs": 0}
        raise AssertionError(f"unexpected script {script[:40]}")


def observe(page: FakePage):
    session = EpisodeSession(
        "ep-1",
        FakeContext(),
        page,
        UrlPolicy(("*.webgym.test",)),
        {"width": 1280, "height": 768},
        80,
    )
    return asyncio.run(session.observe(False, "jpeg"))


def test_a_document_torn_down_mid_observation_is_observed_again():
    page = FakePage(failures=1)
    snapshot = observe(page)
    assert page.screenshots == 2 and snapshot.screenshot == b"jpeg 2"  # the new page's
    assert snapshot.title == "Cart" and snapshot.page_signals == {"dialogs": "0"}


def test_a_page_that_never_stops_navigating_fails_after_bounded_tries():
    page = FakePage(failures=100)
    with pytest.raises(EpisodeFailure, match="screenshot failed: .*Execution context"):
        observe(page)
    assert page.screenshots == OBSERVE_ATTEMPTS


def test_other_browser_errors_fail_the_episode_at_once():
    page = FakePage(failures=1, error="Page.evaluate: Protocol error: Internal error")
    with pytest.raises(EpisodeFailure, match="screenshot failed: .*Internal error"):
        observe(page)
    assert page.screenshots == 1
