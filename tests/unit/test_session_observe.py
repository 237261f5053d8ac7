"""``EpisodeSession.observe`` when the page's document is torn down under it (a navigation the
browser reported only after the observation began): it observes the new page instead of failing
the episode, a bounded number of times; any other browser error still fails the episode. And the
round trips a step saves: no signals read from a document without a convention, no mouse move
before a scroll where the mouse already is; both forgotten on a navigation."""

from __future__ import annotations

import asyncio

import pytest
from playwright.async_api import Error as PlaywrightError

from agents.browser.actions import SCROLL_SETTLED
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


class FakeMouse:
    def __init__(self):
        self.calls: list[tuple] = []
        self.fail = False

    async def move(self, x, y) -> None:
        self.calls.append(("move", x, y))

    async def wheel(self, dx, dy) -> None:
        if self.fail:
            raise PlaywrightError("Mouse.wheel: Protocol error: Internal error")
        self.calls.append(("wheel", dx, dy))


class FakePage:
    """Answers like a loaded page; the first ``failures`` reads of the page's signals raise.
    ``wob``: whether the page follows MiniWoB++'s signals convention."""

    def __init__(self, failures: int = 0, error: str = DESTROYED, wob: bool = True):
        self.failures = failures
        self.error = error
        self.wob = wob
        self.url = "http://shop.webgym.test/cart"
        self.main_frame = object()
        self.mouse = FakeMouse()
        self.screenshots = 0
        self.settles = 0
        self.signal_reads = 0

    async def goto(self, url, **options) -> None:
        self.url = url

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
            return {
                "nav": False,
                "ready": "complete",
                "doc": f"doc{self.settles}",
                "title": "Cart",
                "signals": self.wob,
            }
        if script == SCROLL_SETTLED:
            return True
        if script == PAGE_SIGNALS:
            self.signal_reads += 1
            if self.failures:
                self.failures -= 1
                raise PlaywrightError(self.error)
            return {"dialogs": 0}
        raise AssertionError(f"unexpected script {script[:40]}")


def session_of(page: FakePage) -> EpisodeSession:
    return EpisodeSession(
        "ep-1",
        FakeContext(),
        page,
        UrlPolicy(("*.webgym.test",)),
        {"width": 1280, "height": 768},
        80,
    )


def observe(page: FakePage):
    return asyncio.run(session_of(page).observe(False, "jpeg"))


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


SCROLL = {"kind": "scroll", "direction": "down", "amount": 300}


async def steps(session: EpisodeSession, page: FakePage, count: int) -> list:
    """``count`` scrolls with an observation after each; the snapshots' page signals."""
    seen = []
    for _ in range(count):
        assert await session.act(SCROLL, 5000) is None
        seen.append((await session.observe(False, "jpeg")).page_signals)
    return seen


def test_a_page_without_signals_is_not_asked_for_them_until_it_navigates():
    page = FakePage(wob=False)
    session = session_of(page)

    async def run() -> None:
        assert await session.navigate("http://shop.webgym.test/", 5000) is None
        assert await steps(session, page, 3) == [{}, {}, {}]
        assert page.signal_reads == 0
        session._on_frame_navigated(page.main_frame)  # e.g. a link the last action followed
        await session.observe(False, "jpeg")
        assert page.signal_reads == 1  # the new document's convention is not known yet

    asyncio.run(run())


def test_a_page_with_signals_reports_them_every_step():
    page = FakePage(wob=True)
    session = session_of(page)

    async def run() -> None:
        assert await session.navigate("http://shop.webgym.test/", 5000) is None
        assert await steps(session, page, 3) == [{"dialogs": "0"}] * 3
        assert page.signal_reads == 3

    asyncio.run(run())


def test_scrolls_move_the_mouse_once_and_again_after_a_navigation_or_a_failure():
    page = FakePage(wob=False)
    session = session_of(page)

    async def run() -> None:
        await session.navigate("http://shop.webgym.test/", 5000)
        await steps(session, page, 2)
        assert [c[0] for c in page.mouse.calls] == ["move", "wheel", "wheel"]
        session._on_frame_navigated(page.main_frame)
        await steps(session, page, 1)
        assert [c[0] for c in page.mouse.calls[3:]] == ["move", "wheel"]
        page.mouse.fail = True
        assert "failed" in await session.act(SCROLL, 5000)
        page.mouse.fail = False
        await steps(session, page, 1)
        assert [c[0] for c in page.mouse.calls[5:]] == ["move", "wheel"]

    asyncio.run(run())
