"""One episode's browser: a fresh context and page, the URL policy, and observations.

Two kinds of failure, kept apart as BrowserGym does: an action the page refuses becomes data
(the action error, :func:`step_error`) that the agent sees next step; a page that hangs, crashes
or vanishes raises :class:`EpisodeFailure`, which ends only this episode (aborted, with the
reason). A page that loads slowly is the first kind: an action's page that has not loaded within
the action's timeout is stopped, as the browser's Stop button does, and observed as it stands
with the error saying so, as long as its renderer still answers (on a loaded machine a page of
the practice web once took more than 10 s); only the episode's start page must load.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from playwright.async_api import (
    Browser,
    BrowserContext,
    CDPSession,
    Dialog,
    Download,
    Frame,
    Page,
    Request,
    Route,
)
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeout

from agents.browser.actions import ActionRefused, Point, perform
from agents.browser.page_script import (
    FONTS_LOADED,
    INIT_SCRIPT,
    MARKS,
    PAGE_SIGNALS,
    PAGE_STATE,
    REMOVE_OVERLAY,
    SETTLED,
    SETUPS,
    STOPPED,
)
from agents.browser.url_policy import UrlPolicy, host_of
from infra.producer import now_ms
from schemas.event_ids import step_event_id
from schemas.observation import PageCapture
from tasks.page_setup import SetupSpecError, parse_setup

SCREENSHOT_TIMEOUT_MS = 15_000
SCREENSHOT_ATTEMPTS = 3
# A capture waits this long at most for web fonts the last page state saw loading: Chromium itself
# draws fallback text once a font has kept it waiting 3 s (the block period of font-display).
FONTS_WAIT_MS = 3_000
# A capture that times out on a page whose renderer still runs script (seen once in CI, under
# load, after a click's navigation) is taken again, once; a renderer that does not answer this
# probe in time is hung, and the episode fails, unless the browser is slow as well (below).
PROBE_TIMEOUT_S = 2.0
# A page that does not answer a probe is judged against the browser's own process, asked on the
# page's DevTools session a question its renderer takes no part in: answered within
# BROWSER_PROMPT_S, the machine runs and the renderer alone is stuck (one more probe decides);
# slower, every process is starved (seen once in CI: a Kafka node restarting beside the run froze
# the machine for seconds, and two live pages were judged hung), and the page is probed again,
# for up to STALL_GRACE_S.
BROWSER_PROMPT_S = 0.5
STALL_GRACE_S = 20.0
# A navigation the browser reports only after the observation began (a late redirect, a script's
# location change) tears the page's document down under it: observe the new page, this often.
OBSERVE_ATTEMPTS = 3
RESOLVE_TIMEOUT_S = 5.0  # a host name's look-up before its first request (url_policy)


class EpisodeFailure(Exception):
    """The environment failed (hang, crash, closed browser): abort the episode with ``reason``."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Snapshot(PageCapture):
    """What the page shows after an operation, as the browser worker sends it."""

    marks: list[dict[str, Any]] | None
    action_error: str | None  # what observing the page found (a load stopped, a dialog)
    timings_ms: dict[str, float]
    page_signals: dict[str, str] = field(default_factory=dict)


def step_error(error: str | None, snapshot: Snapshot) -> str | None:
    """A step's action error as its observation carries it: the operation's own (``apply``'s),
    then what observing its page found."""
    return "; ".join(filter(None, [error, snapshot.action_error])) or None


def _navigated_away(error: BaseException) -> bool:
    """Did the page's document go away under a call (a navigation), not the page itself?"""
    text = str(error)
    return "Execution context was destroyed" in text or "because of a navigation" in text


def _last_step(error: BaseException) -> str:
    """The last step of Playwright's call log in ``error`` (where a timed-out call waited), as
    `` (at: …)``; empty if it has none."""
    lines = str(error).strip().splitlines()
    if "Call log:" not in [line.strip() for line in lines]:
        return ""
    step = lines[-1].strip().lstrip("- ").strip()
    return f" (at: {step[:120]})" if step and step != "Call log:" else ""


def _short(error: BaseException) -> str:
    return str(error).strip().splitlines()[0][:300] if str(error).strip() else type(error).__name__


class EpisodeSession:
    """Owns one context; not shared between episodes; closed exactly once."""

    def __init__(
        self,
        episode_id: str,
        context: BrowserContext,
        page: Page,
        policy: UrlPolicy,
        viewport: dict[str, int],
        jpeg_quality: int,
    ):
        self.episode_id = episode_id
        self.context = context
        self.page = page
        self.policy = policy
        self.viewport = viewport
        self.jpeg_quality = jpeg_quality
        self.crashed = False
        self.closed = False
        self._notes: list[str] = []
        # Timings an action noted, reported with the next observation's timings_ms:
        # load_stopped (from the start of the wait for a load, the action's or the settling's,
        # to its stop) and page_silent (a page that answered only after missing a probe).
        self._noted_ms: dict[str, float] = {}
        self._marks: list[dict[str, Any]] | None = None
        self._doc: str | None = None
        self._title: str | None = None
        # Main-frame navigations seen (requests and same-document commits), and the count when
        # the last action began: a difference means the action navigated and must settle.
        self._navigations = 0
        self._action_mark: int | None = None
        # Whether the document PAGE_STATE last read follows a page-signals convention, and the
        # navigation count before that read: with no navigation since and no convention, the
        # observation skips PAGE_SIGNALS (one round trip a step on most pages).
        self._signals = True
        self._state_at: int | None = None
        self._fonts_loading = False  # web fonts were loading at the last PAGE_STATE read
        # The last navigation failed: its renderer may be crashing (chrome://crash fails as
        # aborted a moment, seconds under load, before its crash is reported), and a capture in
        # flight when a renderer crashes takes the whole browser down (Chromium 156 dies of
        # SIGSEGV, its other episodes with it). So the next capture is Playwright's, whose
        # scripts in the page run first and fail with the crash before any capture is sent.
        self._navigation_failed = False
        self._navigated: asyncio.Future[None] | None = None  # set while a capture is in flight
        # Where the mouse is on this document, and the navigation count it was put there at.
        self._pointer: Point | None = None
        self._pointer_at: int | None = None
        self._action_timeout_ms = 10_000
        self._resolved: dict[str, str | None] = {}  # host name -> refusal (None: public)
        self._breach: str | None = None  # a refused redirect hop that was not stopped in time
        self._cdp: CDPSession | None = None  # our DevTools session (_guard_redirects)
        page.on("crash", self._on_crash)
        page.on("request", self._on_request)
        page.on("framenavigated", self._on_frame_navigated)
        page.on("dialog", self._on_dialog)
        page.on("download", self._on_download)
        context.on("page", self._on_new_page)

    @classmethod
    async def open(
        cls,
        browser: Browser,
        episode_id: str,
        policy: UrlPolicy,
        viewport: dict[str, int],
        jpeg_quality: int,
    ) -> EpisodeSession:
        context = await browser.new_context(viewport=viewport, accept_downloads=False)
        try:
            await context.add_init_script(INIT_SCRIPT)
            page = await context.new_page()
            session = cls(episode_id, context, page, policy, viewport, jpeg_quality)
            await context.route("**/*", session._guard)
            await session._guard_redirects()
        except BaseException:
            await context.close()
            raise
        return session

    # -- operations ---------------------------------------------------------------------------

    async def navigate(self, url: str, timeout_ms: int) -> str | None:
        """Open ``url`` as the episode's start page; a refused URL is an action error, a page
        that does not load within ``timeout_ms``, hangs or crashes an EpisodeFailure."""
        try:
            return await self._open(url, timeout_ms)
        except PlaywrightTimeout as exc:
            raise EpisodeFailure(f"navigation timed out after {timeout_ms} ms: {url}") from exc

    async def _open(self, url: str, timeout_ms: int) -> str | None:
        """Open ``url``; raises PlaywrightTimeout when it does not load within ``timeout_ms``."""
        refusal = await self.refusal(url)
        if refusal:
            return refusal
        try:
            await self.page.goto(url, timeout=timeout_ms, wait_until="load")
            await self._read_state()
        except PlaywrightTimeout:
            raise
        except PlaywrightError as exc:
            self._raise_if_gone(exc)
            failure = f"navigation failed: {_short(exc)}"
            if "ERR_ABORTED" in failure or "Download is starting" in failure:
                # A download or a blocked request: its event trails the failed navigation a bit.
                await asyncio.sleep(0.2)
            self._navigation_failed = True
            return "; ".join(filter(None, [failure, self._take_notes()]))
        return self._take_notes()

    async def apply(self, kind: str, record: dict[str, Any]) -> str | None:
        """Run one browser operation event (``kind`` navigate: open its URL and run its page
        set-up; act: perform its action); returns the action error, as the observation carries
        it. The one way the worker, a migration's rebuild and a rerun run an operation."""
        if kind == "navigate":
            error = await self.navigate(record["url"], record["timeout_ms"])
            if error is None and record.get("setup"):
                error = await self.set_up(record["setup"])
            return error
        return await self.act(record["action"], record["timeout_ms"])

    async def observe_for(self, record: dict[str, Any]) -> Snapshot:
        """:meth:`observe` with the screenshot settings the operation event asks for."""
        return await self.observe(
            record.get("set_of_marks", False), record.get("screenshot_format", "jpeg")
        )

    async def set_up(self, spec: str) -> str | None:
        """Run the page set-up ``spec`` names (``tasks.page_setup``: ``<name>[?seed=<n>]``, one
        of ``page_script.SETUPS``), seeded when it names a seed; a problem is an action error."""
        try:
            name, seed = parse_setup(spec)
        except SetupSpecError as exc:
            return str(exc)
        script = SETUPS.get(name)
        if script is None:
            return f"unknown page set-up {name!r}; known: {', '.join(sorted(SETUPS))}"
        try:
            if not await self.page.evaluate(script, seed):
                return f"page set-up {spec!r}: this page does not support it"
        except PlaywrightError as exc:
            self._raise_if_gone(exc)
            return f"page set-up {spec!r} failed: {_short(exc)}"
        return None

    async def act(self, action: dict[str, Any], timeout_ms: int) -> str | None:
        """Perform one action; :meth:`observe` waits for any navigation it started. An action
        that does not complete within ``timeout_ms`` is an action error (a page it was loading
        is stopped) unless the page's renderer no longer answers: an EpisodeFailure."""
        kind, started = action["kind"], time.perf_counter()
        try:
            if kind == "navigate":
                return await self._open(action.get("url") or "", timeout_ms)
            if kind == "go_back":
                response = await self.page.go_back(timeout=timeout_ms, wait_until="load")
                await self._read_state()
                if response is None and self.page.url in ("about:blank", ""):
                    return "go_back: there is no previous page"
                return self._take_notes()
            self._action_mark, self._action_timeout_ms = self._navigations, timeout_ms
            pointer = self._pointer if self._pointer_at == self._navigations else None
            self._pointer = None  # unknown until the action completes
            self._pointer = await asyncio.wait_for(
                perform(self.page, action, self.viewport, pointer), timeout_ms / 1000
            )
            self._pointer_at = self._action_mark
        except ActionRefused as exc:
            return str(exc)
        except (TimeoutError, PlaywrightTimeout) as exc:
            self._raise_if_gone(exc)
            if kind in ("navigate", "go_back"):
                if not await self._stop_loading():
                    raise EpisodeFailure(
                        f"page stopped answering: {kind} timed out after {timeout_ms} ms"
                    ) from exc
                self._note_ms("load_stopped", started)
            return f"{kind} did not complete within {timeout_ms} ms"
        except PlaywrightError as exc:
            self._raise_if_gone(exc)
            return f"{kind} failed: {_short(exc)}"
        return self._take_notes()

    async def observe(self, set_of_marks: bool, screenshot_format: str) -> Snapshot:
        """Screenshot (and marks) of the page once any navigation of the last action loaded.

        The fast path costs one round trip: the screenshot is taken at once, and only if the
        browser reported a navigation since the action began (it reports one within
        milliseconds, long before a screenshot is done) do we wait for the new page and take
        it again. With marks, which need the page's DOM anyway, we settle first. A navigation
        reported only after the observation began (a late redirect, a script's location change)
        tears the document down under it: then the new page is settled and observed instead, up
        to ``OBSERVE_ATTEMPTS`` times in all; any other browser error fails the episode.
        The page's signals (``PAGE_SIGNALS``) are read unless the document was last seen to
        follow no signals convention and has not navigated since (then they are empty).
        """
        timings: dict[str, float] = {}
        for attempt in range(OBSERVE_ATTEMPTS):
            try:
                if attempt:  # the last try's document was torn down: wait for the new one
                    await self._settle(self._action_timeout_ms)
                image, marks, title, signals = await self._observe_once(
                    set_of_marks, screenshot_format, timings
                )
                break
            except PlaywrightTimeout as exc:
                # A renderer that hangs (chrome://hang, a script in an endless loop) stops here.
                self._raise_if_gone(exc)
                raise EpisodeFailure(
                    f"page stopped answering: {_short(exc)}{_last_step(exc)}"
                ) from exc
            except PlaywrightError as exc:
                self._raise_if_gone(exc)
                if not _navigated_away(exc) or attempt + 1 == OBSERVE_ATTEMPTS:
                    raise EpisodeFailure(f"screenshot failed: {_short(exc)}") from exc
        timings.update(self._noted_ms)  # noted since the last observation, during this one too
        self._noted_ms = {}
        return Snapshot(
            screenshot=image,
            screenshot_format=screenshot_format,
            width=self.viewport["width"],
            height=self.viewport["height"],
            url=self.page.url,
            title=title,
            marks=marks,
            action_error=self._take_notes(),
            timings_ms=timings,
            page_signals={str(k): str(v) for k, v in (signals or {}).items()},
        )

    async def _observe_once(
        self, set_of_marks: bool, screenshot_format: str, timings: dict[str, float]
    ) -> tuple[bytes, Any, str, Any]:
        if set_of_marks and self._action_mark is not None:
            await self._settle(self._action_timeout_ms)
            self._action_mark = None
        image = await self._capture(set_of_marks, screenshot_format, timings)
        if self._action_mark is not None and self._navigations != self._action_mark:
            started = time.perf_counter()
            await self._settle(self._action_timeout_ms)
            timings["settle"] = (time.perf_counter() - started) * 1000
            image = await self._capture(set_of_marks, screenshot_format, timings)
        self._action_mark = None
        marks = self._marks
        title = self._title if self._title is not None else await self.page.title()
        signals = {}
        if self._signals or self._state_at != self._navigations:
            signals = await self.page.evaluate(PAGE_SIGNALS)
        return image, marks, title, signals

    async def _capture(
        self, set_of_marks: bool, screenshot_format: str, timings: dict[str, float]
    ) -> bytes:
        await self._close_breach()
        self._marks = None
        if set_of_marks:
            started = time.perf_counter()
            self._marks = await self.page.evaluate(MARKS, True)
            timings["marks"] = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        await self._fonts_loaded()
        stalled = False
        for attempt in range(SCREENSHOT_ATTEMPTS):
            try:
                image = await self._screenshot(screenshot_format)
                break
            except PlaywrightTimeout:
                if stalled or attempt + 1 == SCREENSHOT_ATTEMPTS or not await self._answers():
                    raise
                stalled = True
                timings["screenshot_stalled"] = (time.perf_counter() - started) * 1000
            except PlaywrightError as exc:
                # Chromium refuses a capture now and then under load; retry only that error.
                if (
                    "Unable to capture screenshot" not in str(exc)
                    or attempt + 1 == SCREENSHOT_ATTEMPTS
                ):
                    raise
                await asyncio.sleep(0.2 * (attempt + 1))
        timings["screenshot"] = (time.perf_counter() - started) * 1000
        if set_of_marks:
            await self.page.evaluate(REMOVE_OVERLAY)
        return image

    async def _screenshot(self, screenshot_format: str) -> bytes:
        """The viewport as ``screenshot_format``, captured on our DevTools session in one round
        trip. Playwright's screenshot makes four more around it (a style into and out of every
        frame to hide the caret, a wait for fonts, the layout metrics), which cost Chromium
        about a sixth of a screenshot-and-scroll cycle here. The image is the same: INIT_SCRIPT
        hides the caret for good, and :meth:`_fonts_loaded` waits for fonts a page was loading.
        Raises PlaywrightTimeout after ``SCREENSHOT_TIMEOUT_MS``, as Playwright's would. Needs
        the session :meth:`open` made.

        Playwright's screenshot takes it instead where ours is not safe or cannot: after a
        failed navigation (``_navigation_failed``), and when our session is on no active page
        (``Not attached to an active page``: a navigation is swapping the document, as a refused
        one does; Playwright's waits for the new document). A renderer known to have crashed, a
        page or a browser gone, fails the episode as it would there."""
        if self.crashed:
            raise EpisodeFailure("renderer crashed")
        quality = {"quality": self.jpeg_quality} if screenshot_format == "jpeg" else {}
        if self._navigation_failed:
            self._navigation_failed = False
            return await self._playwright_screenshot(screenshot_format, quality)
        try:
            reply = await self._devtools_capture({"format": screenshot_format, **quality})
        except PlaywrightTimeout:
            raise
        except PlaywrightError as exc:
            if "Unable to capture screenshot" in str(exc) or _navigated_away(exc):
                raise  # _capture retries Chromium's refusal under load; observe, a navigation
            self._raise_if_gone(exc)
            return await self._playwright_screenshot(screenshot_format, quality)
        return base64.b64decode(reply["data"])

    async def _devtools_capture(self, params: dict[str, Any]) -> dict[str, Any]:
        """``Page.captureScreenshot``'s reply on our session. A capture in flight when the main
        frame commits a new document never answers (a link's page committing under it): that
        raises a PlaywrightError :func:`_navigated_away` recognises, so :meth:`observe` settles
        the new page and captures it, as when a document is torn down under a script. No answer
        within ``SCREENSHOT_TIMEOUT_MS`` raises PlaywrightTimeout."""
        navigated = self._navigated = asyncio.get_running_loop().create_future()
        capture = asyncio.ensure_future(self._cdp.send("Page.captureScreenshot", params))
        try:
            done, _ = await asyncio.wait(
                {capture, navigated},
                timeout=SCREENSHOT_TIMEOUT_MS / 1000,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            self._navigated = None
            if not capture.done():
                capture.cancel()
        if capture in done:
            return capture.result()
        if navigated in done:
            raise PlaywrightError(
                "Page.captureScreenshot: dropped because of a navigation of the main frame"
            )
        raise PlaywrightTimeout(
            f"Page.captureScreenshot: Timeout {SCREENSHOT_TIMEOUT_MS}ms exceeded."
        )

    async def _playwright_screenshot(self, screenshot_format: str, quality: dict) -> bytes:
        return await self.page.screenshot(
            type=screenshot_format, timeout=SCREENSHOT_TIMEOUT_MS, **quality
        )

    async def _fonts_loaded(self) -> None:
        """Wait (up to ``FONTS_WAIT_MS``) for web fonts the last page state saw loading, as
        Playwright's screenshot waits for them; a font still missing then is drawn as Chromium
        draws it, with a fallback."""
        if not self._fonts_loading:
            return
        self._fonts_loading = False
        try:
            await self.page.wait_for_function(FONTS_LOADED, timeout=FONTS_WAIT_MS)
        except PlaywrightTimeout:
            pass
        except PlaywrightError as exc:
            self._raise_if_gone(exc)  # else its document went away: the capture tells

    async def _stop_loading(self) -> bool:
        """Stop the page's loading as the browser's Stop button does (a navigation not yet
        answered is cancelled, the page stays where it was) and read the page as it stands;
        False when its renderer does not answer that read (hung, as :meth:`_judged` tells)."""
        return await self._judged(self._stop_loading_once)

    async def _stop_loading_once(self) -> bool:
        """One try of :meth:`_stop_loading`: False when the renderer does not answer within
        ``PROBE_TIMEOUT_S``."""
        try:
            if self._cdp is not None:
                await asyncio.wait_for(self._cdp.send("Page.stopLoading"), PROBE_TIMEOUT_S)
            for attempt in range(2):  # a document committed as it stopped: read the new one
                try:
                    await asyncio.wait_for(self.page.evaluate(STOPPED), PROBE_TIMEOUT_S)
                    await asyncio.wait_for(self._read_state(), PROBE_TIMEOUT_S)
                    return True
                except PlaywrightError as exc:
                    self._raise_if_gone(exc)
                    if not _navigated_away(exc) or attempt:
                        return False
        except TimeoutError:
            pass
        except PlaywrightError as exc:
            self._raise_if_gone(exc)
        return False

    async def _answers(self) -> bool:
        """Does the page's renderer still run script (as :meth:`_judged` tells)?"""
        return await self._judged(self._runs_script)

    async def _runs_script(self) -> bool:
        """Does the page's renderer run script within ``PROBE_TIMEOUT_S``?"""
        try:
            await asyncio.wait_for(self.page.evaluate("1"), PROBE_TIMEOUT_S)
        except (TimeoutError, PlaywrightError):
            return False
        return True

    async def _judged(self, probe: Callable[[], Awaitable[bool]]) -> bool:
        """``probe()``'s verdict on the page, not the machine's: True once it answers. A probe
        that fails while the browser's own process answers promptly (:meth:`_browser_prompt`)
        gets one more try, whose answer is final (a hung renderer costs two probes); one that
        fails while the browser is slow too is tried again until ``STALL_GRACE_S`` has passed,
        then once more, so a starved machine that recovers within that time fails no page. A
        page that answered only after failing a probe is noted (``page_silent``: how long)."""
        started = time.perf_counter()
        if await probe():
            return True
        while True:
            final = await self._browser_prompt() or (time.perf_counter() - started >= STALL_GRACE_S)
            if await probe():
                self._note_ms("page_silent", started)
                return True
            if final:
                return False

    def _note_ms(self, name: str, since: float) -> None:
        """Add the time since ``since`` (``perf_counter``) to the next observation's
        ``timings_ms[name]``."""
        self._noted_ms[name] = self._noted_ms.get(name, 0.0) + (time.perf_counter() - since) * 1000

    async def _browser_prompt(self) -> bool:
        """Whether the browser process answers ``Browser.getVersion`` on the page's DevTools
        session (its renderer takes no part) within ``BROWSER_PROMPT_S``. Without our
        session there is no control, and the page is judged alone (True)."""
        if self._cdp is None:
            return True
        started = time.perf_counter()
        try:
            await asyncio.wait_for(self._cdp.send("Browser.getVersion"), PROBE_TIMEOUT_S)
        except TimeoutError:
            return False
        except PlaywrightError as exc:
            self._raise_if_gone(exc)
            return True
        return time.perf_counter() - started <= BROWSER_PROMPT_S

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            await self.context.close()
        except PlaywrightError:
            pass  # the browser died with it; nothing is left to close

    # -- the URL policy ------------------------------------------------------------------------

    async def refusal(self, url: str) -> str | None:
        """Why the episode may not open ``url`` (the policy, and where its host name points)."""
        return self.policy.refusal(url) or await self._resolved_refusal(url)

    async def _resolved_refusal(self, url: str) -> str | None:
        """Refusal for a host name that resolves to a private address; looked up once per
        episode. A name that does not resolve (in time) is refused too: it cannot be checked."""
        host = self.policy.host_to_resolve(url)
        if host is None:
            return None
        if host not in self._resolved:
            loop = asyncio.get_running_loop()
            try:
                found = await asyncio.wait_for(
                    loop.getaddrinfo(host, None, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT_S
                )
                refusal = self.policy.resolved_refusal(host, [info[4][0] for info in found])
            except (OSError, TimeoutError) as exc:
                reason = _short(exc) if isinstance(exc, OSError) else "timed out"
                refusal = f"URL refused: '{host}' cannot be resolved to check it ({reason})"
            self._resolved[host] = refusal
        return self._resolved[host]

    # -- settling -----------------------------------------------------------------------------

    async def _settle(self, timeout_ms: int) -> None:
        """Return once the page is loaded and no navigation the action started is pending."""
        previous = self._doc
        try:
            state = await self._read_state()
            moved = state["nav"] or state["ready"] != "complete" or state["doc"] != previous
        except PlaywrightError as exc:
            self._raise_if_gone(exc)
            moved = True  # the old document was torn down mid-evaluate: it navigated
        if not moved:
            return
        started = time.perf_counter()
        try:
            await self.page.wait_for_function(SETTLED, timeout=timeout_ms)
        except PlaywrightTimeout as exc:
            if not await self._stop_loading():
                raise EpisodeFailure(
                    f"page stopped answering: it did not finish loading within {timeout_ms} ms:"
                    f" {self.page.url}"
                ) from exc
            self._notes.append(f"the page did not finish loading within {timeout_ms} ms; stopped")
            self._note_ms("load_stopped", started)
            return
        await self._read_state()

    async def _read_state(self) -> dict[str, Any]:
        self._title = None
        at = self._navigations  # a navigation reported during the read makes the read stale
        state = await self.page.evaluate(PAGE_STATE)
        self._doc, self._title = state["doc"], state["title"]
        self._signals, self._state_at = state["signals"], at
        self._fonts_loading = state.get("fonts") == "loading"
        return state

    # -- events -------------------------------------------------------------------------------

    def _raise_if_gone(self, error: BaseException) -> None:
        if self.crashed:
            raise EpisodeFailure("renderer crashed") from error
        if (
            self.page.is_closed()
            or not self.context.browser
            or not self.context.browser.is_connected()
        ):
            raise EpisodeFailure(f"browser or page closed: {_short(error)}") from error
        text = str(error)
        if "Target crashed" in text or "Page crashed" in text:
            self.crashed = True
            raise EpisodeFailure("renderer crashed") from error
        if "has been closed" in text:
            raise EpisodeFailure(f"browser or page closed: {_short(error)}") from error

    def _take_notes(self) -> str | None:
        notes, self._notes = self._notes, []
        return "; ".join(notes) or None

    def _on_crash(self, page: Page) -> None:
        self.crashed = True

    def _on_request(self, request: Request) -> None:
        if request.is_navigation_request() and request.frame == self.page.main_frame:
            self._navigations += 1
        if request.redirected_from is not None:
            # A hop _on_paused refuses never shows up here; one that does went out (an
            # out-of-process frame's, which our DevTools session does not see): too late to
            # stop, so the page is closed before anything of it is observed.
            check = (
                self.policy.refusal
                if request.is_navigation_request()
                else self.policy.private_refusal
            )
            refusal = check(request.url) or self._resolved.get(host_of(request.url))
            if refusal:
                self._breach = refusal

    def _on_frame_navigated(self, frame: Frame) -> None:
        if frame == self.page.main_frame:
            self._navigations += 1
            if self._navigated is not None and not self._navigated.done():
                self._navigated.set_result(None)  # a capture in flight will not answer

    def _on_dialog(self, dialog: Dialog) -> None:
        self._notes.append(
            f"a {dialog.type} dialog appeared and was dismissed: {dialog.message[:200]}"
        )
        asyncio.ensure_future(dialog.dismiss())

    def _on_download(self, download: Download) -> None:
        self._notes.append(f"download blocked: {download.suggested_filename}")

    def _on_new_page(self, page: Page) -> None:
        asyncio.ensure_future(self._adopt(page))

    async def _adopt(self, popup: Page) -> None:
        """A new tab: close it and open its URL in the episode's one page, if allowed."""
        try:
            await popup.wait_for_load_state("commit", timeout=5000)
        except PlaywrightError:
            pass
        url = popup.url
        await popup.close()
        await self.page.bring_to_front()  # a hidden page would stall its screenshots
        refusal = await self.refusal(url)
        if refusal:
            self._notes.append(f"a new tab was blocked: {refusal}")
            return
        self._notes.append(f"a new tab ({url}) was opened in this page instead")
        try:
            await self.page.goto(url, wait_until="load", timeout=30_000)
        except PlaywrightError:
            self._notes.append(f"the new tab's page did not load: {url}")

    async def _guard_redirects(self) -> None:
        """Police the hops of redirects, which Playwright's route never sees (it lets them
        through, so a page of an allowed host could send the browser to a private address).

        A DevTools session of our own pauses every request of the page as well; a redirect hop
        the policy refuses fails as blocked (the refusal becomes a note of the action), anything
        else goes on at once and the route decides as before.
        """
        cdp = self._cdp = await self.context.new_cdp_session(self.page)
        cdp.on(
            "Fetch.requestPaused", lambda event: asyncio.ensure_future(self._on_paused(cdp, event))
        )
        await cdp.send(
            "Fetch.enable", {"patterns": [{"urlPattern": "*", "requestStage": "Request"}]}
        )

    async def _on_paused(self, cdp: CDPSession, event: dict[str, Any]) -> None:
        refusal = None
        if event.get("redirectedRequestId"):
            url = event["request"]["url"]
            if event.get("resourceType") == "Document":
                refusal = await self.refusal(url)
            else:
                refusal = self.policy.private_refusal(url) or await self._resolved_refusal(url)
        try:
            if refusal:
                self._notes.append(f"a redirect was refused: {refusal}")
                await cdp.send(
                    "Fetch.failRequest",
                    {"requestId": event["requestId"], "errorReason": "BlockedByClient"},
                )
            else:
                await cdp.send("Fetch.continueRequest", {"requestId": event["requestId"]})
        except PlaywrightError:
            pass  # the request, its page or the browser is gone: nothing to decide any more

    async def _close_breach(self) -> None:
        """Leave a page a refused redirect reached (see _on_request) for a blank one."""
        if self._breach is None:
            return
        self._notes.append(f"a redirect was refused, its page closed: {self._breach}")
        self._breach = None
        await self.page.goto("about:blank", timeout=SCREENSHOT_TIMEOUT_MS)
        await self._read_state()

    async def _guard(self, route: Route) -> None:
        """Refuse navigations the policy forbids (links, forms, scripts alike), and any request
        of the page to a private address."""
        request = route.request
        if request.is_navigation_request():
            refusal = await self.refusal(request.url)
            if refusal:
                self._notes.append(refusal)
                await route.abort("blockedbyclient")
                return
        elif self.policy.private_refusal(request.url) or await self._resolved_refusal(request.url):
            await route.abort("blockedbyclient")
            return
        await route.continue_()


def observation_record(
    episode_id: str,
    step: int,
    snapshot: Snapshot | None,
    *,
    action_error: str | None = None,
    timings_ms: dict[str, float] | None = None,
    failure: str | None = None,
    url: str = "",
) -> dict[str, Any]:
    """The observation event of ``step``: the page as ``snapshot`` shows it (the screenshot
    inline, its SHA-256 stamped once here for every consumer) or, with no snapshot, a failure
    observation (``failure`` says why; no screenshot, the last ``url``)."""
    return {
        "event_id": step_event_id(episode_id, step, "observation"),
        "episode_id": episode_id,
        "step": step,
        "ts": now_ms(),
        "screenshot": snapshot.screenshot if snapshot else b"",
        "screenshot_format": snapshot.screenshot_format if snapshot else "jpeg",
        "screenshot_sha256": (hashlib.sha256(snapshot.screenshot).hexdigest() if snapshot else ""),
        "screenshot_key": None,
        "width": snapshot.width if snapshot else 0,
        "height": snapshot.height if snapshot else 0,
        "url": snapshot.url if snapshot else url,
        "title": snapshot.title if snapshot else "",
        "action_error": action_error,
        "set_of_marks": snapshot.marks if snapshot else None,
        "timings_ms": timings_ms or {},
        "failure": failure,
        "page_signals": snapshot.page_signals if snapshot else {},
    }
