"""The round trips a step saves, in real Chromium: a page without a signals convention is not
asked for its signals, and scrolls where the mouse already is wheel without moving it; a
navigation makes the session forget both, and the page still scrolls as asked every step. A
MiniWoB++ page (which has the convention) reports its signals every step. And a page an action
opens that does not load within the action's timeout: stopped where it was, the agent told so,
the episode going on; even when the whole browser froze meanwhile (a starved machine), while a
page whose renderer alone froze fails its episode. And the capture, one DevTools round trip
instead of Playwright's screenshot: the same image, no blinking caret in it, taken once the web
fonts the page was loading have arrived."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import signal
import time

import psutil
import pytest

from agents.browser.page_script import PAGE_SIGNALS
from agents.browser.session import STALL_GRACE_S, EpisodeFailure, EpisodeSession
from agents.browser.url_policy import UrlPolicy
from agents.browser.worker import BrowserWorkerConfig
from infra.chromium import launch_options
from infra.settings import load_settings
from sites import generate_sites
from sites.server import PracticeWebServer
from tasks import miniwob

VIEWPORT = {"width": 1280, "height": 768}
PAGES = "pages.webgym.test"
TALL = "<!doctype html><title>{0}</title><body style='margin:0'><div style='height:6000px'>{0}"
SCROLL = {"kind": "scroll", "direction": "down", "amount": 300}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("pages")
    for name in ("one", "two"):
        (root / f"{name}.html").write_text(TALL.format(name))
    (root / "three.html").write_text(SLOW_IMAGE)
    (root / "caret.html").write_text(CARET)
    (root / "font.html").write_text(LATE_FONT)
    settings = load_settings()
    server = PracticeWebServer(
        generate_sites(count=1),
        host="127.0.0.1",
        port=0,
        static_hosts={PAGES: root, miniwob.HOST: miniwob.html_root()},
    )
    with server:
        yield settings.model_copy(update={"practice_web_address": f"127.0.0.1:{server.port}"})


class Counted:
    """Counts the session's reads of the page's signals and its mouse moves."""

    def __init__(self, session: EpisodeSession):
        self.signal_reads = 0
        self.moves = 0
        page = session.page
        evaluate, move = page.evaluate, page.mouse.move

        async def counted_evaluate(script, *args, **kwargs):
            self.signal_reads += script == PAGE_SIGNALS
            return await evaluate(script, *args, **kwargs)

        async def counted_move(*args, **kwargs):
            self.moves += 1
            return await move(*args, **kwargs)

        page.evaluate = counted_evaluate
        page.mouse.move = counted_move


def in_session(settings, url: str, body):
    """Open an episode on ``url``'s host, run ``body(session, counted)``, return its result."""

    async def main():
        from playwright.async_api import async_playwright

        args = BrowserWorkerConfig.from_settings(settings).chromium_args
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(**launch_options(settings, args))
            try:
                policy = UrlPolicy.for_episode(url, [url.split("/")[2]])
                session = await EpisodeSession.open(browser, "ep-steps", policy, VIEWPORT, 80)
                try:
                    return await body(session, Counted(session))
                finally:
                    await session.close()
            finally:
                await browser.close()

    return asyncio.run(main())


def test_scrolls_before_and_after_a_navigation_land_where_asked(served):
    async def body(session: EpisodeSession, counted: Counted):
        offsets, signals = [], []
        for name in ("one", "two"):
            assert await session.navigate(f"http://{PAGES}/{name}.html", 30_000) is None
            for _ in range(3):
                assert await session.act(SCROLL, 30_000) is None
                snapshot = await session.observe(False, "jpeg")
                assert snapshot.title == name
                signals.append(snapshot.page_signals)
                offsets.append(await session.page.evaluate("window.scrollY"))
        return offsets, signals, counted.moves, counted.signal_reads

    offsets, signals, moves, reads = in_session(served, f"http://{PAGES}/one.html", body)
    assert offsets == [300, 600, 900, 300, 600, 900]
    assert signals == [{}] * 6 and reads == 0
    assert moves == 2  # once per document


def test_a_miniwob_page_reports_its_signals_every_step(served):
    url = f"http://{miniwob.HOST}/miniwob/click-link.html"

    async def body(session: EpisodeSession, counted: Counted):
        assert await session.navigate(url, 30_000) is None
        assert await session.set_up("miniwob?seed=3") is None
        seen = [(await session.observe(False, "jpeg")).page_signals]
        for _ in range(2):
            assert await session.act({"kind": "wait", "seconds": 0.05}, 30_000) is None
            seen.append((await session.observe(False, "jpeg")).page_signals)
        return seen, counted.signal_reads

    seen, reads = in_session(served, url, body)
    assert reads == 3
    assert all(s["utterance"] and s["done"] == "false" for s in seen)


SLOW_MS = 4000  # how long the server takes to answer the slow page; the actions wait 1000 ms
# A page that commits at once but whose load waits on an image the server answers late.
SLOW_IMAGE = f"<!doctype html><title>three</title><img src='/__webgym/slow?ms={SLOW_MS}'>three"
LINK = (
    "document.body.insertAdjacentHTML('afterbegin', '<a href=\"/three.html\" style=\""
    "position:fixed;left:0;top:0;width:400px;height:200px;display:block\">three</a>')"
)


def test_a_page_that_loads_too_slowly_is_stopped_and_the_agent_told(served):
    one, three = f"http://{PAGES}/one.html", f"http://{PAGES}/three.html"

    async def body(session: EpisodeSession, counted: Counted):
        assert await session.navigate(one, 30_000) is None
        started = time.monotonic()
        slow = {"kind": "navigate", "url": f"http://{PAGES}/__webgym/slow?ms={SLOW_MS}"}
        typed = await session.act(slow, 1000)
        typed_page = await session.observe(False, "jpeg")
        await session.page.evaluate(LINK)
        assert await session.act({"kind": "left_click", "x": 100, "y": 100}, 1000) is None
        clicked_page = await session.observe(False, "jpeg")
        await asyncio.sleep(max(0.0, SLOW_MS / 1000 + 0.5 - (time.monotonic() - started)))
        later = await session.observe(False, "jpeg")
        return typed, typed_page, clicked_page, later

    typed, typed_page, clicked_page, later = in_session(served, one, body)
    # The typed URL's server has not answered in time: the navigation is cancelled, the page
    # stays where it was, and the agent reads why.
    assert typed == "navigate did not complete within 1000 ms"
    assert (typed_page.url, typed_page.title, typed_page.action_error) == (one, "one", None)
    assert typed_page.timings_ms["load_stopped"] >= 1000  # counted where `webgym stats` sees it
    # The followed link's page showed up but its image had not loaded: observed as it stands.
    assert (clicked_page.url, clicked_page.title) == (three, "three")
    assert clicked_page.action_error == "the page did not finish loading within 1000 ms; stopped"
    assert clicked_page.timings_ms["load_stopped"] >= 1000
    # Stopped, not left loading: the slow answers that came since changed nothing.
    assert (later.url, later.title, later.action_error) == (three, "three", None)


CARET = "<!doctype html><title>caret</title><input style='font:40px sans-serif;width:600px'>"


def test_the_capture_is_playwrights_image_without_a_blinking_caret(served):
    url = f"http://{PAGES}/caret.html"

    async def body(session: EpisodeSession, counted: Counted):
        assert await session.navigate(url, 30_000) is None
        typing = {"kind": "type", "x": 100, "y": 30, "text": "hello"}
        assert await session.act(typing, 30_000) is None
        images = []
        for _ in range(4):  # Chromium's caret blinks every 500 ms
            images.append((await session.observe(False, "jpeg")).screenshot)
            await asyncio.sleep(0.3)
        focused = await session.page.evaluate("document.activeElement.value")
        return images, await session.page.screenshot(type="jpeg", quality=80), focused

    images, playwrights, focused = in_session(served, url, body)
    assert focused == "hello"  # typed into the focused field, where the caret stands
    assert len({hashlib.sha256(image).digest() for image in images}) == 1
    assert images[0] == playwrights


# A font the page starts loading as it finishes (so the load event does not wait for it), from
# a server that answers late; the first capture after the navigation waits until it is done.
LATE_FONT = (
    "<!doctype html><title>font</title><style>@font-face{font-family:Late;"
    f"src:url(/__webgym/slow?ms={SLOW_MS // 4})}}</style><p style='font:40px serif'>late</p>"
    "<script>addEventListener('load', () => {document.fonts.load('40px Late');"
    " document.querySelector('p').style.fontFamily = 'Late';})</script>"
)


def test_a_capture_waits_for_the_fonts_a_page_was_loading(served):
    url = f"http://{PAGES}/font.html"

    async def body(session: EpisodeSession, counted: Counted):
        assert await session.navigate(url, 30_000) is None
        loading = session._fonts_loading
        started = time.monotonic()
        await session.observe(False, "jpeg")
        waited = time.monotonic() - started
        return loading, waited, await session.page.evaluate("document.fonts.status")

    loading, waited, status = in_session(served, url, body)
    assert loading and status == "loaded"
    assert waited >= SLOW_MS / 4 / 1000 * 0.5  # the font's answer, less the navigation's share


def _chromium(renderers_only: bool = False) -> list[psutil.Process]:
    """This test's Chromium processes (children of its Playwright driver), or its renderers."""
    found = [p for p in psutil.Process().children(recursive=True) if "chrom" in p.name()]
    if renderers_only:
        found = [p for p in found if "--type=renderer" in p.cmdline()]
    assert found
    return found


def _signal_all(processes: list[psutil.Process], sig: signal.Signals) -> None:
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.send_signal(sig)


FROZEN_S = 4.0  # longer than a probe (2 s): a frozen page misses one


async def _slow_navigation_frozen(
    session: EpisodeSession, renderers_only: bool
) -> tuple[asyncio.Task, list[psutil.Process]]:
    """Open page one, start a navigation its server answers too late for the action's 1 s
    timeout, and half a second in stop (SIGSTOP) this test's Chromium processes, or only its
    renderers. Returns the action's task and the processes stopped (to SIGCONT)."""
    assert await session.navigate(f"http://{PAGES}/one.html", 30_000) is None
    slow = {"kind": "navigate", "url": f"http://{PAGES}/__webgym/slow?ms={SLOW_MS}"}
    acting = asyncio.create_task(session.act(slow, 1000))
    await asyncio.sleep(0.5)
    frozen = _chromium(renderers_only)
    _signal_all(frozen, signal.SIGSTOP)
    return acting, frozen


def test_a_page_that_froze_with_the_whole_browser_is_not_judged_hung(served):
    """Every Chromium process stopped (SIGSTOP) for FROZEN_S, from before the action's timeout
    until after the first probe gave up: the browser process was slow too, so the page was
    probed again and answered; the agent reads an action error, the episode goes on."""
    one = f"http://{PAGES}/one.html"

    async def body(session: EpisodeSession, counted: Counted):
        acting, frozen = await _slow_navigation_frozen(session, renderers_only=False)
        try:
            await asyncio.sleep(FROZEN_S)
        finally:
            _signal_all(frozen, signal.SIGCONT)
        return await acting, await session.observe(False, "jpeg")

    error, page = in_session(served, one, body)
    assert error == "navigate did not complete within 1000 ms"
    assert (page.url, page.title, page.action_error) == (one, "one", None)
    assert page.timings_ms["page_silent"] >= 2000  # at least one probe went unanswered


def test_a_page_whose_renderer_alone_froze_fails_its_episode(served):
    """The renderers stopped, the browser process running: it answers at once, so the page is
    hung after two probes, long before the grace a starved machine gets."""
    one = f"http://{PAGES}/one.html"

    async def body(session: EpisodeSession, counted: Counted):
        acting, frozen = await _slow_navigation_frozen(session, renderers_only=True)
        started = time.monotonic()
        try:
            with pytest.raises(EpisodeFailure) as failure:
                await acting
            return failure.value.reason, time.monotonic() - started
        finally:
            _signal_all(frozen, signal.SIGCONT)

    reason, waited_s = in_session(served, one, body)
    assert reason == "page stopped answering: navigate timed out after 1000 ms"
    assert waited_s < STALL_GRACE_S
