"""The live dashboard, opened in headless Chromium while a run is going: episode counts appear
and increase, and a recent trajectory opens in the replay viewer."""

from __future__ import annotations

import os
import re
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

from playwright.sync_api import sync_playwright

from commands.children import Child, settings_env
from commands.local_run import RunOptions, run_local

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_dashboard_shows_a_run_as_it_goes(run_settings, tmp_path):
    port = _free_port()
    dashboard = Child.start(
        "dashboard",
        [sys.executable, "-m", "commands.main", "dashboard", "--port", str(port)],
        settings_env(run_settings),
        tmp_path,
    )
    episodes = 8
    outcome: dict = {}

    def run() -> None:
        options = RunOptions(
            episodes=episodes, in_flight=2, error_rate=0.3, sites=3,
            run_id=f"e2e-d{uuid.uuid4().hex[:6]}",
        )  # fmt: skip
        try:
            outcome["summary"] = run_local(run_settings, options, start_stack=False)
        except Exception as exc:  # noqa: BLE001 - reported by the test below
            outcome["error"] = exc

    try:
        dashboard.wait_for("dashboard of", 60)
        runner = threading.Thread(target=run, daemon=True)
        runner.start()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(run_settings.chromium_path))
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/")
            seen: list[tuple[int, int]] = []  # (started, judged) as the page showed them
            write_docs = os.environ.get("WEBGYM_WRITE_DOCS") == "1"  # refresh docs/dashboard.png
            deadline = time.monotonic() + 300
            while runner.is_alive() and time.monotonic() < deadline:
                started = int(page.inner_text("#started"))
                judged = int(page.inner_text("#judged"))
                if not seen or seen[-1] != (started, judged):
                    seen.append((started, judged))
                if write_docs and judged >= 3 and int(page.inner_text("#in-flight")) > 0:
                    page.screenshot(path=str(DOCS / "dashboard.png"), full_page=True)
                    write_docs = False  # one picture, mid-run
                time.sleep(0.5)
            runner.join(timeout=5)
            assert "error" not in outcome, outcome.get("error")
            page.wait_for_function(
                f"document.getElementById('judged').textContent === '{episodes}'", timeout=30_000
            )
            assert int(page.inner_text("#started")) == episodes
            assert int(page.inner_text("#successes")) == outcome["summary"].successes
            # The counts appeared and grew while the run was going.
            assert len(seen) >= 3, seen
            assert seen[0][0] < episodes and seen[-1][0] <= episodes
            assert all(a <= b for (a, _), (b, _) in zip(seen, seen[1:], strict=False)), seen
            assert any(0 < s for s, _ in seen) and any(0 < j < episodes for _, j in seen), seen
            rows = page.locator("#recent-table tbody tr")
            assert rows.count() == episodes
            # A recent trajectory opens in the replay viewer.
            link = page.locator("#recent-table tbody tr a").first
            episode_id = link.inner_text()
            link.click()
            page.wait_for_load_state()
            assert re.search(rf"/replay/{re.escape(episode_id)}$", page.url)
            assert episode_id in page.content()
            browser.close()
    finally:
        dashboard.stop()
