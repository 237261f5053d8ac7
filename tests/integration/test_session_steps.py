"""The round trips a step saves, in real Chromium: a page without a signals convention is not
asked for its signals, and scrolls where the mouse already is wheel without moving it; a
navigation makes the session forget both, and the page still scrolls as asked every step. A
MiniWoB++ page (which has the convention) reports its signals every step."""

from __future__ import annotations

import asyncio

import pytest

from agents.browser.page_script import PAGE_SIGNALS
from agents.browser.session import EpisodeSession
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
