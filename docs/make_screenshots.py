"""Regenerates docs/practice-web-*.png: three generated sites as the agent sees them.

Run: `.venv/bin/python docs/make_screenshots.py` (needs Chromium, not the Kafka stack).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from playwright.async_api import async_playwright

from infra.chromium import launch_options
from infra.settings import Settings
from sites import generate_sites
from sites.server import PracticeWebServer

DOCS = Path(__file__).parent
# Three different domains and looks: a shop's listing, a recipe page, a job board's home.
PICKS = (("shopping", "listing"), ("recipes", "detail"), ("jobs", "home"))


async def main() -> None:
    sites = generate_sites(seed=0, count=50)
    with PracticeWebServer(sites) as server:
        async with async_playwright() as playwright:
            rules = f"--host-resolver-rules={server.host_resolver_rules}"
            browser = await playwright.chromium.launch(**launch_options(Settings(), [rules]))
            page = await browser.new_page(viewport={"width": 1280, "height": 768})
            for domain, view in PICKS:
                site = next(s for s in sites if s.domain == domain)
                path = {
                    "home": "",
                    "listing": site.listing_path.lstrip("/"),
                    "detail": site.item_path(site.items[0]).lstrip("/"),
                }[view]
                await page.goto(server.base_url(site) + path, wait_until="load")
                target = DOCS / f"practice-web-{domain}-{view}.png"
                await page.screenshot(path=str(target))
                print(f"{target.name}: {page.url} ({await page.title()})")
            await browser.close()


if __name__ == "__main__":
    asyncio.run(main())
