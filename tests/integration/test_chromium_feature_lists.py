"""A real Chromium given a feature list in the settings gets it joined with Playwright's own:
one ``--disable-features`` switch holding both, since Chromium keeps only the last of each."""

from __future__ import annotations

import asyncio
import uuid

from playwright.async_api import async_playwright

from infra.chromium import launch_options
from infra.processes import all_stats, command_line
from infra.settings import load_settings


def test_a_feature_list_from_the_settings_keeps_playwrights_list():
    settings = load_settings().model_copy(
        update={"chromium_args": "--disable-features=SpareRendererForSitePerProcess"}
    )
    marker = f"--webgym-test-{uuid.uuid4().hex[:8]}"

    async def run() -> tuple[list[str], bytes]:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(**launch_options(settings, [marker]))
            try:
                page = await browser.new_page()
                await page.set_content("<p>features</p>")
                shot = await page.screenshot(type="jpeg")
                browsers = [command_line(pid) for pid in all_stats()]
                return next(argv for argv in browsers if marker in argv), shot
            finally:
                await browser.close()

    argv, shot = asyncio.run(run())
    assert shot[:2] == b"\xff\xd8"  # the browser works with the joined list
    lists = [arg for arg in argv if arg.startswith("--disable-features=")]
    assert len(lists) == 1, lists
    features = lists[0].split("=", 1)[1].split(",")
    # Playwright's own (it turns HTTPS upgrades off for plain-http test sites) and ours.
    assert {"HttpsUpgrades", "SpareRendererForSitePerProcess"} <= set(features), features
    assert len([arg for arg in argv if arg.startswith("--enable-features=")]) <= 1
