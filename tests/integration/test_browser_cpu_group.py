"""A real Chromium started with a CPU weight runs, with every process it forks, in the
browsers' cgroup. (Not at one niceness: Chromium sets its processes' priorities itself, by role;
as root, the browser and GPU processes at -8. A group's weight holds whatever they set.)"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from playwright.async_api import async_playwright

from infra.chromium import launch_options
from infra.cpu_group import CpuGroupUnavailable, browsers_group, group_of
from infra.processes import all_stats, command_line, descendants
from infra.settings import load_settings


def _browser_pid(marker: str) -> int:
    for pid in all_stats():
        if marker in command_line(pid):
            return pid
    raise AssertionError(f"no process with {marker} in its command line")


def test_every_chromium_process_runs_in_the_weighted_group():
    settings = load_settings().model_copy(update={"browser_cpu_weight": 50})
    try:
        group = browsers_group(settings.browser_cpu_weight)
    except CpuGroupUnavailable as exc:  # not root here: the worker refuses to start, clearly
        assert "WEBGYM_BROWSER_NICE" in str(exc)
        with pytest.raises(CpuGroupUnavailable):
            launch_options(settings)
        return
    marker = f"--webgym-test-{uuid.uuid4().hex[:8]}"

    async def run() -> dict[int, str | None]:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(**launch_options(settings, [marker]))
            try:
                page = await browser.new_page()
                await page.set_content("<p>weighted</p>")
                await page.screenshot()
                groups = {pid: group_of(pid, group.version) for pid in descendants(
                    _browser_pid(marker))}  # fmt: skip
                return {pid: path for pid, path in groups.items() if path is not None}  # alive
            finally:
                await browser.close()

    seen = asyncio.run(run())
    assert len(seen) >= 4, seen  # the browser, its zygotes, a renderer at least
    assert set(seen.values()) == {f"/{group.path.name}"}, seen
    assert group.weight_file.read_text().strip() == str(group.weight)
