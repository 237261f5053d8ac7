"""Re-executing an episode's recorded actions in a fresh browser: ``webgym replay --rerun``.

The browser is the browser worker's own machinery, not a copy of it (:func:`rerun_episode`); each
step's recorded observation is compared with the rerun's page (:func:`compare_page`).
Differences are data (the report says which steps differ and how); a rerun that cannot start
(no navigation in the log, a site the given ``--sites``/``--seed`` do not generate) raises
:class:`AnalyticsError`. A page that hangs or crashes in the rerun ends it, reported as a
difference at that step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from playwright.async_api import async_playwright

from agents.browser.page_match import ScreenshotDifference, page_differences
from agents.browser.session import EpisodeFailure, EpisodeSession, step_error
from agents.browser.url_policy import UrlPolicy
from agents.browser.worker import BrowserWorkerConfig
from analytics.errors import AnalyticsError
from analytics.replay import Frame, Replay
from analytics.replay_draw import describe
from infra.chromium import launch_options
from infra.settings import Settings
from sites import generate_sites
from sites.server import PracticeWebServer
from tasks import miniwob


@dataclass(frozen=True)
class StepCheck:
    """Step ``step`` (0: the first navigation) of the rerun against the recording."""

    step: int
    action: dict[str, Any] | None  # the recorded act op's action (None: the first navigation)
    recorded_url: str | None
    rerun_url: str
    recorded_title: str | None
    rerun_title: str
    screenshot: ScreenshotDifference | None  # None: nothing to compare
    recorded_action_error: str | None
    rerun_action_error: str | None
    differences: tuple[str, ...]  # empty: the page matches

    @property
    def matches(self) -> bool:
        return not self.differences


@dataclass(frozen=True)
class RerunReport:
    episode_id: str
    checks: tuple[StepCheck, ...]
    stopped: str | None = None  # why the rerun ended early (a page that hung or crashed)

    @property
    def first_difference(self) -> StepCheck | None:
        return next((check for check in self.checks if not check.matches), None)

    @property
    def all_match(self) -> bool:
        return self.first_difference is None and self.stopped is None


def compare_page(
    step: int,
    action: dict[str, Any] | None,
    recorded: Frame | None,
    url: str,
    title: str,
    screenshot: bytes,
    action_error: str | None,
) -> StepCheck:
    """One step's check (``recorded`` None: not in the log, not compared), by the replay
    tolerance (:func:`agents.browser.page_match.page_differences`)."""
    differences, difference = page_differences(recorded, url, title, screenshot)
    return StepCheck(
        step=step,
        action=action,
        recorded_url=recorded.url if recorded else None,
        rerun_url=url,
        recorded_title=recorded.title if recorded else None,
        rerun_title=title,
        screenshot=difference,
        recorded_action_error=recorded.action_error if recorded else None,
        rerun_action_error=action_error,
        differences=differences,
    )


def _sites_server(replay: Replay, sites_count: int, seed: int):
    sites = generate_sites(seed=seed, count=sites_count)
    hosts = {site.hostname for site in sites} | {miniwob.HOST}
    host = (urlsplit(replay.navigate_op["url"]).hostname or "").lower()
    if host.endswith(".webgym.test") and host not in hosts:
        raise AnalyticsError(
            f"{host} is not among the {sites_count} practice sites of seed {seed}: pass the "
            "--sites and --seed of the run that recorded the episode (`webgym run` defaults: "
            "50 and 0)"
        )
    return PracticeWebServer(
        sites, host="127.0.0.1", port=0, static_hosts={miniwob.HOST: miniwob.html_root()}
    )


async def rerun_episode(
    settings: Settings,
    replay: Replay,
    sites_count: int,
    seed: int,
    progress: Callable[[str], None] = lambda _: None,
) -> RerunReport:
    """Re-execute ``replay``'s first navigation and act ops and check each page
    (:func:`compare_page`).

    One headless Chromium launched with the worker's options and host mapping
    (``BrowserWorkerConfig.from_settings``: ``--host-resolver-rules=MAP *.webgym.test <practice
    web>``), one :class:`agents.browser.session.EpisodeSession` with the episode's URL policy and
    viewport, and per step exactly what the worker does: ``navigate`` (+ ``set_up``) for step 0,
    ``act`` for each recorded act op, then ``observe`` with the op's screenshot settings. The
    practice web is served fresh for every rerun from ``generate_sites(seed, count)`` (the sites
    are deterministic; a fresh server also starts with empty carts), on a free loopback port.
    """
    navigate = replay.navigate_op
    if navigate is None:
        raise AnalyticsError(
            f"the log has no navigation of {replay.episode_id} (gone with retention?): there is "
            "nothing to start a rerun from"
        )
    checks: list[StepCheck] = []
    stopped = None
    with _sites_server(replay, sites_count, seed) as server:
        served = settings.model_copy(update={"practice_web_address": f"127.0.0.1:{server.port}"})
        chromium_args = BrowserWorkerConfig.from_settings(served).chromium_args
        viewport = {"width": navigate["viewport_width"], "height": navigate["viewport_height"]}
        policy = UrlPolicy.for_episode(
            navigate["url"], navigate["allowed_hosts"], settings.browser_allow_private_hosts
        )
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(**launch_options(settings, chromium_args))
            try:
                session = await EpisodeSession.open(
                    browser, replay.episode_id, policy, viewport, settings.browser_jpeg_quality
                )
                operations = [(0, None, navigate)] + [
                    (step, op["action"], op) for step, op in sorted(replay.act_ops.items())
                ]
                for step, action, op in operations:
                    progress(f"step {step} of {operations[-1][0]}: {_what(action, op)}")
                    try:
                        error = await session.apply("navigate" if action is None else "act", op)
                        snapshot = await session.observe_for(op)
                        error = step_error(error, snapshot)
                    except EpisodeFailure as failure:
                        stopped = f"step {step}: {failure.reason}"
                        break
                    checks.append(
                        compare_page(
                            step,
                            action,
                            replay.frames.get(step),
                            snapshot.url,
                            snapshot.title,
                            snapshot.screenshot,
                            error,
                        )
                    )
                await session.close()
            finally:
                await browser.close()
    return RerunReport(replay.episode_id, tuple(checks), stopped)


def _what(action: dict[str, Any] | None, op: dict[str, Any]) -> str:
    return f"open {op['url']}" if action is None else describe(action)
