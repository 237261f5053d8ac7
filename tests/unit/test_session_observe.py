"""``EpisodeSession.observe`` when the page's document is torn down under it (a navigation the
browser reported only after the observation began): it observes the new page instead of failing
the episode, a bounded number of times; any other browser error still fails the episode. And the
round trips a step saves: no signals read from a document without a convention, no mouse move
before a scroll where the mouse already is; both forgotten on a navigation. And a capture that
times out: taken again once if the renderer still runs script, else the episode fails, saying
what timed out. And a page that does not load within an action's timeout: stopped and
observed with an action error saying so while its renderer answers, else the episode fails; the
episode's start page must load. A renderer's silence is judged against the browser process: hung
when the browser answers at once, probed again (up to a grace) while the browser is slow too."""

from __future__ import annotations

import asyncio
import base64

import pytest
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeout

from agents.browser.actions import SCROLL_SETTLED
from agents.browser.page_script import PAGE_SIGNALS, PAGE_STATE, STOPPED
from agents.browser.session import (
    OBSERVE_ATTEMPTS,
    SCREENSHOT_TIMEOUT_MS,
    EpisodeFailure,
    EpisodeSession,
    step_error,
)
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
        self.stalls = 0  # this many captures never answer first
        self.detached = 0  # this many captures find the DevTools session on no active page
        self.playwright_shots: list[dict] = []  # Playwright's page.screenshot calls, options
        self.playwright_stalls = False  # Playwright's screenshot times out
        self.hung = False  # the renderer runs no script: the probe never answers
        self.probes = 0
        self.settles = 0
        self.signal_reads = 0
        self.slow_loads = 0  # this many page loads (goto, settle) time out first
        self.aborted_loads = 0  # this many goto calls fail as aborted first (chrome://crash)
        self.stopped = 0  # the documents told their loading was stopped (STOPPED)

    def _load(self, call: str, timeout) -> None:
        if self.slow_loads:
            self.slow_loads -= 1
            raise PlaywrightTimeout(f"{call}: Timeout {timeout}ms exceeded.")

    async def goto(self, url, **options) -> None:
        self._load("Page.goto", options["timeout"])
        if self.aborted_loads:
            self.aborted_loads -= 1
            raise PlaywrightError(f"Page.goto: net::ERR_ABORTED at {url}")
        self.url = url

    async def go_back(self, **options):
        self._load("Page.go_back", options["timeout"])
        return {}

    def on(self, event, handler) -> None:
        pass

    def is_closed(self) -> bool:
        return False

    async def capture(self) -> bytes:
        """What the page's DevTools session answers to Page.captureScreenshot."""
        self.screenshots += 1
        if self.stalls:
            self.stalls -= 1
            await asyncio.sleep(3600)
        if self.detached:
            self.detached -= 1
            raise PlaywrightError(
                "CDPSession.send: Protocol error (Page.captureScreenshot): "
                "Not attached to an active page"
            )
        return f"jpeg {self.screenshots}".encode()

    async def screenshot(self, **options) -> bytes:
        self.playwright_shots.append(options)
        if self.playwright_stalls:
            raise PlaywrightTimeout(
                "Page.screenshot: Timeout 15000ms exceeded.\nCall log:\n"
                "  - taking page screenshot\n  - waiting for fonts to load...\n  - fonts loaded\n"
            )
        return b"playwright jpeg"

    async def title(self) -> str:
        return "Cart"

    async def wait_for_function(self, script, timeout) -> None:
        self.settles += 1
        self._load("Page.wait_for_function", timeout)

    async def evaluate(self, script, *args):
        if script == "1":
            self.probes += 1
            if self.hung:
                await asyncio.sleep(3600)
            return 1
        if script == STOPPED:
            if self.hung:
                await asyncio.sleep(3600)
            self.stopped += 1
            return None
        if script == PAGE_STATE:
            if self.hung:
                await asyncio.sleep(3600)
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


class FakeDevTools:
    """The page's DevTools session; the browser process answers ``Browser.getVersion`` after
    ``browser_delay_s`` and then calls ``on_browser_answer`` (the machine may recover); the page
    answers captures. ``sent``: the methods sent, captures aside (the page counts those)."""

    def __init__(self, page: FakePage):
        self.page = page
        self.sent: list[str] = []
        self.browser_delay_s = 0.0
        self.on_browser_answer = lambda: None

    async def send(self, method, params=None) -> dict:
        if method == "Page.captureScreenshot":
            return {"data": base64.b64encode(await self.page.capture()).decode()}
        self.sent.append(method)
        if method == "Browser.getVersion":
            await asyncio.sleep(self.browser_delay_s)
            self.on_browser_answer()
        return {}


def session_of(page: FakePage) -> EpisodeSession:
    session = EpisodeSession(
        "ep-1",
        FakeContext(),
        page,
        UrlPolicy(("*.webgym.test",)),
        {"width": 1280, "height": 768},
        80,
    )
    session._cdp = FakeDevTools(page)
    return session


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


def test_a_capture_during_a_document_swap_is_taken_by_playwright_instead():
    page = FakePage()
    page.detached = 1  # a refused navigation's error page commits in another process
    assert observe(page).screenshot == b"playwright jpeg"
    assert page.playwright_shots == [
        {"type": "jpeg", "quality": 80, "timeout": SCREENSHOT_TIMEOUT_MS}
    ]
    assert observe(page).screenshot == b"jpeg 2"  # the next capture is our session's again


def test_a_capture_the_main_frame_navigates_under_is_dropped_and_the_new_page_observed():
    page = FakePage()
    page.stalls = 1  # a capture in flight when a new document commits never answers
    session = session_of(page)

    async def navigate_during_the_capture():
        observing = asyncio.ensure_future(session.observe(False, "jpeg"))
        while page.screenshots == 0:
            await asyncio.sleep(0.01)
        session._on_frame_navigated(page.main_frame)
        return await observing

    snapshot = asyncio.run(asyncio.wait_for(navigate_during_the_capture(), 5))
    assert (page.screenshots, snapshot.screenshot) == (2, b"jpeg 2")  # the new page's


def test_the_capture_after_a_failed_navigation_is_playwrights():
    # The renderer may be crashing under it: a capture of ours in flight then would take the
    # whole browser down; Playwright's runs a script first, which fails with the crash.
    page = FakePage()
    page.aborted_loads = 1
    session = session_of(page)

    async def navigate_and_observe_twice():
        error = await session.navigate("http://shop.webgym.test/crash", 5000)
        return error, [(await session.observe(False, "jpeg")).screenshot for _ in range(2)]

    error, images = asyncio.run(navigate_and_observe_twice())
    assert (
        error == "navigation failed: Page.goto: net::ERR_ABORTED at http://shop.webgym.test/crash"
    )
    assert images == [b"playwright jpeg", b"jpeg 1"]  # then our session's captures again


def test_a_playwright_capture_that_stalls_on_a_hung_renderer_names_where_it_waited(monkeypatch):
    monkeypatch.setattr("agents.browser.session.PROBE_TIMEOUT_S", 0.05)
    page = FakePage(wob=False)
    page.aborted_loads, page.playwright_stalls = 1, True
    session = session_of(page)

    async def navigate_and_observe():
        await session.navigate("http://shop.webgym.test/hang", 5000)
        page.hung = True
        await session.observe(False, "jpeg")

    with pytest.raises(EpisodeFailure, match=r"Page.screenshot: Timeout .*\(at: fonts loaded\)$"):
        asyncio.run(navigate_and_observe())


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


def test_a_capture_that_stalls_on_a_live_page_is_taken_again_once(monkeypatch):
    monkeypatch.setattr("agents.browser.session.SCREENSHOT_TIMEOUT_MS", 50)
    page = FakePage(wob=False)
    page.stalls = 1
    snapshot = observe(page)
    assert (page.screenshots, page.probes) == (2, 1) and snapshot.screenshot == b"jpeg 2"
    assert snapshot.timings_ms["screenshot_stalled"] >= 0
    page = FakePage(wob=False)
    page.stalls = 2  # stalls again: the page is not answering in a way a retry mends
    with pytest.raises(
        EpisodeFailure, match=r"page stopped answering: Page.captureScreenshot: Timeout 50ms"
    ):
        observe(page)
    assert (page.screenshots, page.probes) == (2, 1)


def test_a_capture_that_stalls_on_a_hung_renderer_fails_after_the_probe(monkeypatch):
    monkeypatch.setattr("agents.browser.session.PROBE_TIMEOUT_S", 0.05)
    monkeypatch.setattr("agents.browser.session.SCREENSHOT_TIMEOUT_MS", 50)
    page = FakePage(wob=False)
    page.stalls, page.hung = 1, True
    session = session_of(page)
    with pytest.raises(
        EpisodeFailure, match="page stopped answering: Page.captureScreenshot: Timeout"
    ):
        asyncio.run(session.observe(False, "jpeg"))
    # The browser answered at once between the probes: the renderer alone is stuck.
    assert (page.screenshots, page.probes) == (1, 2)
    assert session._cdp.sent == ["Browser.getVersion"]


@pytest.mark.parametrize(
    "action", [{"kind": "navigate", "url": "http://shop.webgym.test/slow"}, {"kind": "go_back"}]
)
def test_an_action_whose_page_loads_too_slowly_is_stopped_and_an_action_error(action):
    page = FakePage(wob=False)
    page.slow_loads = 1
    session = session_of(page)

    async def run():
        error = await session.act(action, 1000)
        return error, await session.observe(False, "jpeg")

    error, snapshot = asyncio.run(run())
    assert error == f"{action['kind']} did not complete within 1000 ms"
    assert session._cdp.sent == ["Page.stopLoading"] and page.stopped == 1
    assert snapshot.screenshot == b"jpeg 1" and snapshot.action_error is None
    assert snapshot.timings_ms["load_stopped"] >= 0  # counted with the observation
    assert "page_silent" not in snapshot.timings_ms  # it answered the first probe


@pytest.mark.parametrize(
    "action", [{"kind": "navigate", "url": "http://shop.webgym.test/slow"}, {"kind": "go_back"}]
)
def test_an_action_whose_page_hangs_its_renderer_fails_the_episode(monkeypatch, action):
    monkeypatch.setattr("agents.browser.session.PROBE_TIMEOUT_S", 0.05)
    page = FakePage(wob=False)
    page.slow_loads, page.hung = 1, True
    session = session_of(page)
    with pytest.raises(
        EpisodeFailure, match=f"page stopped answering: {action['kind']} timed out after 1000 ms"
    ):
        asyncio.run(session.act(action, 1000))
    # The browser answered at once between the two tries: the renderer alone is stuck.
    assert session._cdp.sent == ["Page.stopLoading", "Browser.getVersion", "Page.stopLoading"]


def test_the_start_page_must_load_in_time():
    page = FakePage(wob=False)
    page.slow_loads = 1
    session = session_of(page)
    with pytest.raises(EpisodeFailure, match="navigation timed out after 1000 ms: http://shop"):
        asyncio.run(session.navigate("http://shop.webgym.test/", 1000))
    assert session._cdp.sent == []


def test_a_page_an_action_opened_that_does_not_finish_loading_is_observed_stopped():
    page = FakePage(wob=False)
    session = session_of(page)

    async def run():
        assert await session.act(SCROLL, 1000) is None
        session._on_frame_navigated(page.main_frame)  # the action followed a link
        page.slow_loads = 1
        return await session.observe(False, "jpeg")

    snapshot = asyncio.run(run())
    assert snapshot.action_error == "the page did not finish loading within 1000 ms; stopped"
    assert session._cdp.sent == ["Page.stopLoading"]
    assert snapshot.timings_ms["load_stopped"] >= 0
    assert snapshot.screenshot == b"jpeg 2"  # taken again once the page was stopped
    assert step_error("click failed", snapshot) == f"click failed; {snapshot.action_error}"
    assert step_error(None, snapshot) == snapshot.action_error


def test_a_page_an_action_opened_whose_renderer_hangs_fails_the_episode(monkeypatch):
    monkeypatch.setattr("agents.browser.session.PROBE_TIMEOUT_S", 0.05)
    page = FakePage(wob=False)
    session = session_of(page)

    async def run():
        assert await session.act(SCROLL, 1000) is None
        session._on_frame_navigated(page.main_frame)
        page.slow_loads = 1
        await session.observe(False, "jpeg")

    settle = page.wait_for_function

    async def hang_while_loading(script, timeout):
        page.hung = True  # the new page's script stops answering while it loads
        await settle(script, timeout)

    page.wait_for_function = hang_while_loading

    with pytest.raises(EpisodeFailure, match="page stopped answering: it did not finish loading"):
        asyncio.run(run())


SLOW_NAVIGATION = {"kind": "navigate", "url": "http://shop.webgym.test/slow"}


def starved(monkeypatch, page: FakePage, recover_after: int | None) -> EpisodeSession:
    """A session whose page loads too slowly and whose renderer stops answering, on a machine
    where the browser process answers slowly too (every process starved); after
    ``recover_after`` of the browser's answers the machine recovers and the page answers."""
    monkeypatch.setattr("agents.browser.session.PROBE_TIMEOUT_S", 0.05)
    monkeypatch.setattr("agents.browser.session.BROWSER_PROMPT_S", 0.01)
    page.slow_loads, page.hung = 1, True
    session = session_of(page)
    session._cdp.browser_delay_s = 0.03
    answers = [0]

    def answered() -> None:
        answers[0] += 1
        if answers[0] == recover_after:
            page.hung = False

    session._cdp.on_browser_answer = answered
    return session


def test_a_page_silent_while_the_browser_is_slow_too_is_probed_until_the_machine_recovers(
    monkeypatch,
):
    page = FakePage(wob=False)
    session = starved(monkeypatch, page, recover_after=3)

    async def run():
        error = await session.act(SLOW_NAVIGATION, 1000)
        return error, await session.observe(False, "jpeg")

    error, snapshot = asyncio.run(run())
    assert error == "navigate did not complete within 1000 ms"  # an action error, not a failure
    assert session._cdp.sent.count("Browser.getVersion") == 3 and page.stopped == 1
    assert snapshot.screenshot == b"jpeg 1"
    # Three probes of 50 ms went unanswered, and three slow answers of the browser (30 ms).
    assert snapshot.timings_ms["page_silent"] >= 3 * (50 + 30)
    assert snapshot.timings_ms["load_stopped"] >= snapshot.timings_ms["page_silent"]


def test_a_page_silent_past_the_grace_of_a_starved_machine_fails_the_episode(monkeypatch):
    monkeypatch.setattr("agents.browser.session.STALL_GRACE_S", 0.3)
    page = FakePage(wob=False)
    session = starved(monkeypatch, page, recover_after=None)
    with pytest.raises(EpisodeFailure, match="page stopped answering: navigate timed out"):
        asyncio.run(session.act(SLOW_NAVIGATION, 1000))
    controls, stops = (
        session._cdp.sent.count(m) for m in ("Browser.getVersion", "Page.stopLoading")
    )
    assert controls >= 2  # tried again while starved,
    assert stops == controls + 1  # and once more after the grace
