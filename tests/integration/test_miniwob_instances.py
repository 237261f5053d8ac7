"""Seeded MiniWoB++ instances in real Chromium: one task id is always the same problem.

The browser session sets each page up exactly as the navigate operation says (the spec the
orchestrator derives from the task, ``tasks.page_setup.task_setup``): ``Math.seedrandom(seed)``,
then ``core.startEpisodeReal()``. Two episodes of one task id see the same instruction and the
same elements; instances of other seeds mostly differ.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from agents.browser.session import EpisodeSession
from agents.browser.url_policy import UrlPolicy
from agents.browser.worker import BrowserWorkerConfig
from infra.chromium import launch_options
from infra.settings import load_settings
from sites import generate_sites
from sites.server import PracticeWebServer
from tasks import miniwob
from tasks.page_setup import task_setup

VIEWPORT = {"width": 1280, "height": 768}


@pytest.fixture(scope="module")
def served():
    settings = load_settings()
    server = PracticeWebServer(
        generate_sites(count=1),
        host="127.0.0.1",
        port=0,
        static_hosts={miniwob.HOST: miniwob.html_root()},
    )
    with server:
        yield settings.model_copy(update={"practice_web_address": f"127.0.0.1:{server.port}"})


def instances(settings, tasks: list[dict]) -> list[tuple[str, tuple[str, ...]]]:
    """(instruction, names of the marked elements) of one fresh episode per task, in order."""

    async def main():
        from playwright.async_api import async_playwright

        args = BrowserWorkerConfig.from_settings(settings).chromium_args
        seen = []
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(**launch_options(settings, args))
            try:
                for n, task in enumerate(tasks):
                    policy = UrlPolicy.for_episode(task["start_url"], [task["website"]])
                    session = await EpisodeSession.open(browser, f"ep-{n}", policy, VIEWPORT, 80)
                    try:
                        assert await session.navigate(task["start_url"], 30_000) is None
                        spec = task_setup(json.loads(task["extra_json"]))
                        assert spec == f"miniwob?seed={json.loads(task['extra_json'])['seed']}"
                        assert await session.set_up(spec) is None
                        snapshot = await session.observe(True, "jpeg")
                    finally:
                        await session.close()
                    names = tuple(mark.get("name", "") for mark in snapshot.marks or [])
                    seen.append((snapshot.page_signals["utterance"], names))
            finally:
                await browser.close()
        return seen

    return asyncio.run(main())


def test_one_task_id_is_one_instance_and_other_seeds_mostly_differ(served):
    one = miniwob.task_record("click-link", 17)
    heldout = miniwob.heldout_tasks(["click-link"], 1)[0]
    others = miniwob.train_tasks(["enter-text"], 6) + miniwob.train_tasks(["click-link"], 6)
    seen = instances(served, [one, heldout, one, heldout, *others])
    assert seen[0] == seen[2]  # the same task id: the same instruction and elements
    assert seen[1] == seen[3]
    assert seen[0][0] and seen[0][0] != seen[1][0]
    instructions = [utterance for utterance, _ in seen[4:]]
    assert len(set(instructions)) >= 10, instructions  # 12 instances, 12 seeds


def test_an_unseeded_set_up_still_works_and_a_bad_one_is_an_action_error(served):
    async def main():
        from playwright.async_api import async_playwright

        args = BrowserWorkerConfig.from_settings(served).chromium_args
        task = miniwob.task_record("click-button", 1)
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(**launch_options(served, args))
            try:
                policy = UrlPolicy.for_episode(task["start_url"], [task["website"]])
                session = await EpisodeSession.open(browser, "ep", policy, VIEWPORT, 80)
                try:
                    assert await session.navigate(task["start_url"], 30_000) is None
                    return [
                        await session.set_up("miniwob"),  # as navigate ops logged before seeds
                        await session.set_up("miniwob?seed=x"),
                        await session.set_up("nothing"),
                    ]
                finally:
                    await session.close()
            finally:
                await browser.close()

    unseeded, bad_seed, unknown = asyncio.run(main())
    assert unseeded is None
    assert "not an integer" in bad_seed
    assert unknown.startswith("unknown page set-up 'nothing'")
