"""Browser workers on the real broker and Chromium, driven only by operation events.

Each test starts `webgym worker browser` processes of its own (its own consumer group) and
kills only those. Sites come from the practice web, served in-process on a free port.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import time
import uuid

import pytest
from PIL import Image
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import async_playwright

from agents.browser.pool import BrowserPool
from analytics.replay import episode_partition
from bench.fleet import WorkerProcess, worker_env
from infra.consumer import EventConsumer, build_consumer
from infra.dead_letters import DeadLetterRouter
from sites import generate_sites
from sites.server import PracticeWebServer
from tests.integration.browser_fleet import Episodes
from tests.integration.helpers import drain
from tests.samples import sample


@pytest.fixture(scope="module")
def practice_web():
    with PracticeWebServer(generate_sites(seed=0, count=8)) as server:
        yield server


@pytest.fixture
def group() -> str:
    return f"browser-test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def start_worker(settings, practice_web, tmp_path, group):
    started: list[WorkerProcess] = []

    def start(*extra: str) -> WorkerProcess:
        worker = WorkerProcess.start(
            worker_env(settings, practice_web.port), tmp_path, group, "--fault-injection", *extra
        )
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture
def episodes(settings, producer):
    consumer = EventConsumer(
        build_consumer(settings, group_id=f"results-{uuid.uuid4().hex[:8]}", client_id="results"),
        DeadLetterRouter(settings, producer),
    )
    consumer.subscribe([settings.topic("observations"), settings.topic("episodes")])
    yield Episodes(settings, producer, consumer)
    consumer.close()


def _episode(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def _episodes_on_every_partition(name: str, partitions: int, per_partition: int) -> list[str]:
    """Episode ids, ``per_partition`` of them in each partition, so any share of the group
    holds some (random ids leave a partition empty in about 1 run in 11 for 6 ids on 3)."""
    chosen: dict[int, list[str]] = {p: [] for p in range(partitions)}
    while any(len(ids) < per_partition for ids in chosen.values()):
        episode_id = _episode(name)
        ids = chosen[episode_partition(episode_id, partitions)]
        if len(ids) < per_partition:
            ids.append(episode_id)
    return [episode_id for ids in chosen.values() for episode_id in ids]


def _mark(observation: dict, name: str) -> dict:
    for mark in observation["set_of_marks"] or []:
        if mark["name"] == name:
            return mark
    names = [m["name"] for m in observation["set_of_marks"] or []]
    raise AssertionError(f"no mark named {name!r} on {observation['url']}; marks: {names[:40]}")


def _centre(mark: dict, observation: dict) -> dict:
    """Normalised 0-1000 coordinates of the mark's centre, as a coordinate-mode policy emits."""
    x = (mark["x"] + mark["width"] / 2) / (observation["width"] - 1) * 1000
    y = (mark["y"] + mark["height"] / 2) / (observation["height"] - 1) * 1000
    return {"x": round(x), "y": round(y)}


def test_concurrent_episodes_click_product_links(start_worker, episodes, practice_web):
    start_worker()
    sites = [s for s in practice_web.sites][:4]
    running = {}
    for site in sites:
        episode_id = _episode(site.domain)
        running[episode_id] = site
        episodes.navigate(
            episode_id,
            practice_web.base_url(site) + site.listing_path.lstrip("/"),
            set_of_marks=True,
        )
    for step, (episode_id, site) in enumerate(running.items()):
        listing = episodes.observation(episode_id, 0)
        assert listing["action_error"] is None
        assert listing["url"].startswith(f"http://{site.hostname}{site.listing_path}")
        # The first item on the page whose name is a link.
        names = {m["name"] for m in listing["set_of_marks"]}
        item = next(i for i in site.items if i.name in names)
        mark = _mark(listing, item.name)
        if step % 2:  # coordinate mode
            action = {"kind": "left_click", **_centre(mark, listing)}
        else:  # set-of-marks mode
            action = {"kind": "left_click", "element_id": mark["id"]}
        running[episode_id] = (site, item)
        episodes.act(episode_id, 1, action)
    for episode_id, (site, item) in running.items():
        detail = episodes.observation(episode_id, 1)
        assert detail["action_error"] is None, detail["action_error"]
        assert detail["url"] == f"http://{site.hostname}{site.item_path(item)}"
        assert item.name in detail["title"]
        image = Image.open(io.BytesIO(detail["screenshot"]))
        assert (image.format, image.size) == ("JPEG", (1280, 768))
        assert detail["timings_ms"]["screenshot"] > 0
    assert not episodes.failures


def test_hanging_and_crashing_pages_fail_only_their_episode(start_worker, episodes, practice_web):
    start_worker()
    site = practice_web.sites[0]
    home = practice_web.base_url(site)
    hanging, crashing, healthy = _episode("hang"), _episode("crash"), _episode("healthy")
    episodes.navigate(healthy, home)
    episodes.navigate(hanging, home + "__webgym/hang", timeout_ms=3000)
    episodes.navigate(crashing, home)
    assert episodes.observation(crashing, 0)["url"] == home
    episodes.act(crashing, 1, {"kind": "navigate", "url": "chrome://crash"})
    episodes.collect(lambda e: hanging in e.failures and crashing in e.failures, timeout=60)
    hang, crash = episodes.failures[hanging][0], episodes.failures[crashing][0]
    # Each failure takes the place of the observation of the operation that failed.
    assert hang["event_id"] == f"{hanging}:0:observation"
    assert "navigation timed out after 3000 ms" in hang["failure"]
    assert hang["url"] == ""  # nothing was ever shown
    assert crash["event_id"] == f"{crashing}:1:observation"
    assert crash["failure"] == "renderer crashed"
    assert crash["url"] == home  # as the last observation showed it
    assert (crash["screenshot"], crash["width"], crash["height"]) == (b"", 0, 0)
    assert crash["timings_ms"]["total"] > 0
    # The healthy episode, on the same worker, goes on.
    assert episodes.observation(healthy, 0)["action_error"] is None
    episodes.act(healthy, 1, {"kind": "scroll", "direction": "down", "amount": 400})
    assert episodes.observation(healthy, 1)["action_error"] is None
    assert healthy not in episodes.failures
    # Exactly one failure each, never a normal observation in its place, and no terminal event:
    # the orchestrator, not the browser worker, ends episodes.
    assert [len(episodes.failures[e]) for e in (hanging, crashing)] == [1, 1]
    assert 0 not in episodes.observations.get(hanging, {})
    assert 1 not in episodes.observations[crashing]
    assert not {hanging, crashing, healthy} & set(episodes.episode_events)


def test_forbidden_urls_and_browser_surprises_are_data(start_worker, episodes, practice_web):
    start_worker()
    site = practice_web.sites[1]
    home = practice_web.base_url(site)
    episode_id = _episode("policy")
    episodes.navigate(episode_id, home)
    assert episodes.observation(episode_id, 0)["url"] == home
    episodes.act(episode_id, 1, {"kind": "navigate", "url": "file:///etc/passwd"})
    refused = episodes.observation(episode_id, 1)
    assert "scheme 'file' is not allowed" in refused["action_error"]
    assert refused["url"] == home
    episodes.act(episode_id, 2, {"kind": "navigate", "url": "http://169.254.169.254/latest"})
    assert "not allowed" in episodes.observation(episode_id, 2)["action_error"]
    # Pop-ups, dialogs and downloads do not stop the episode either.
    episodes.act(
        episode_id, 3, {"kind": "navigate", "url": home + "__webgym/popup"}, set_of_marks=True
    )
    popup_page = episodes.observation(episode_id, 3)
    dialog_button = next(m for m in popup_page["set_of_marks"] if m["role"] == "button")
    episodes.act(episode_id, 4, {"kind": "left_click", "element_id": dialog_button["id"]})
    assert (
        "dialog appeared and was dismissed" in episodes.observation(episode_id, 4)["action_error"]
    )
    new_tab = next(m for m in popup_page["set_of_marks"] if m["name"] == "Open a page in a new tab")
    episodes.act(episode_id, 5, {"kind": "left_click", "element_id": new_tab["id"]})
    folded = episodes.observation(episode_id, 5)  # the tab opened in the episode's one page
    assert folded["url"] == home + "__webgym/slow?ms=0"
    assert folded["action_error"] is None
    episodes.act(episode_id, 6, {"kind": "go_back"})
    assert episodes.observation(episode_id, 6)["url"] == home + "__webgym/popup"
    episodes.act(episode_id, 7, {"kind": "navigate", "url": home + "__webgym/download"})
    after_download = episodes.observation(episode_id, 7)
    assert after_download["action_error"] is not None
    episodes.act(episode_id, 8, {"kind": "go_back"})
    assert episodes.observation(episode_id, 8)["action_error"] is None
    assert episode_id not in episodes.failures


def _scroll_all(episodes, names: list[str], step: int) -> None:
    """Step ``step`` of every episode of ``names`` (a scroll), answered, none failed."""
    for episode_id in names:
        episodes.act(episode_id, step, {"kind": "scroll", "direction": "down", "amount": 300})
    episodes.collect(lambda e: all(step in e.observations.get(n, {}) for n in names), timeout=120)
    episodes.drain(2)
    assert not [n for n in names if n in episodes.failures], episodes.failures


def _migrated(observation: dict) -> bool:
    timings = observation["timings_ms"]
    return "migration" in timings and "migration_pause" in timings


@pytest.mark.parametrize("settle_s", [1.5, 0.0], ids=["committed", "maybe-uncommitted"])
def test_a_killed_worker_s_episodes_continue_on_its_replacement(
    start_worker, episodes, practice_web, settle_s: float
):
    """Killed once its step-1 offsets are committed, or at once (step 1 may come again to the
    replacement, answered already: it is not served twice, and the page is rebuilt at step 2)."""
    first = start_worker()
    names = [_episode(f"kill{i}") for i in range(4)]
    for i, episode_id in enumerate(names):
        episodes.navigate(episode_id, practice_web.base_url(practice_web.sites[i]))
    for episode_id in names:
        episodes.observation(episode_id, 0)
    for episode_id in names:
        episodes.act(episode_id, 1, {"kind": "scroll", "direction": "down", "amount": 300})
    before = {n: episodes.observation(n, 1) for n in names}
    time.sleep(settle_s)  # the worker commits acknowledged work every 500 ms
    first.kill()
    start_worker()  # takes over every partition of the group
    _scroll_all(episodes, names, 2)
    for episode_id in names:
        # The page was rebuilt (navigation, then step 1's scroll) and served step 2 from there.
        after = episodes.observations[episode_id][2]
        assert _migrated(after), after["timings_ms"]
        assert after["url"] == before[episode_id]["url"]
        assert after["screenshot"] != before[episode_id]["screenshot"]  # scrolled on
        assert episodes.observations[episode_id][1]["ts"] == before[episode_id]["ts"]  # once


def test_a_navigation_answered_before_a_kill_is_not_run_again(start_worker, episodes, practice_web):
    """Killed as soon as its navigations are answered: they may come again to the replacement
    (offsets not committed yet). It does not navigate again (the observation stays the first);
    the page is rebuilt from the log at step 1."""
    first = start_worker()
    names = [_episode(f"renav{i}") for i in range(4)]
    for i, episode_id in enumerate(names):
        episodes.navigate(episode_id, practice_web.base_url(practice_web.sites[i]))
    before = {n: episodes.observation(n, 0) for n in names}
    first.kill()
    start_worker()
    _scroll_all(episodes, names, 1)
    for episode_id in names:
        assert episodes.observations[episode_id][0]["ts"] == before[episode_id]["ts"]  # once
        assert _migrated(episodes.observations[episode_id][1])


def test_moved_episodes_continue_on_their_new_owner(start_worker, episodes, practice_web):
    start_worker()
    names = _episodes_on_every_partition("move", episodes.settings.default_partitions, 2)
    for i, episode_id in enumerate(names):
        episodes.navigate(episode_id, practice_web.base_url(practice_web.sites[i]))
    for episode_id in names:
        episodes.observation(episode_id, 0)
    second = start_worker()  # the group now splits the partitions
    second.wait_for("assigned", timeout=60)
    time.sleep(2)
    for step in (1, 2):
        for episode_id in names:
            episodes.act(episode_id, step, {"kind": "scroll", "direction": "down"})
        episodes.collect(
            lambda e, step=step: all(step in e.observations.get(n, {}) for n in names),
            timeout=90,
        )
    episodes.drain(2)
    assert not [n for n in names if n in episodes.failures], episodes.failures
    moved = [n for n in names if _migrated(episodes.observations[n][1])]
    assert moved, "the second worker took no episode"
    assert len(moved) < len(names), "the first worker kept no episode"
    for episode_id in names:
        assert not _migrated(episodes.observations[episode_id][2])  # once, not at every step
        assert episodes.observations[episode_id][1]["action_error"] is None


def test_a_page_that_differs_from_the_log_ends_the_migration(settings, episodes, tmp_path):
    group = f"browser-test-{uuid.uuid4().hex[:8]}"
    sites = generate_sites(seed=0, count=2)
    served = PracticeWebServer(sites)
    served.start()
    port = served.port
    worker = WorkerProcess.start(worker_env(settings, port), tmp_path, group)
    episode_id = _episode("diverge")
    try:
        episodes.navigate(episode_id, served.base_url(sites[0]))
        episodes.observation(episode_id, 0)
        time.sleep(1.5)
        worker.kill()
        served.stop()
        # The site changed under the episode: the same address now serves other content.
        with PracticeWebServer(generate_sites(seed=5, count=2), port=port):
            worker = WorkerProcess.start(worker_env(settings, port), tmp_path, group)
            episodes.act(episode_id, 1, {"kind": "scroll", "direction": "down"})
            episodes.collect(lambda e: episode_id in e.failures, timeout=90)
            episodes.drain(2)
    finally:
        worker.stop()
    (failure,) = episodes.failures[episode_id]
    assert failure["event_id"] == f"{episode_id}:1:observation"
    assert failure["failure"].startswith("migration diverged at step 0: ")
    assert 1 not in episodes.observations.get(episode_id, {})


def test_a_slow_navigation_does_not_hold_up_other_episodes_actions(
    start_worker, episodes, practice_web
):
    # One navigation at a time: the slow one fills the navigate budget, not the act budget.
    start_worker("--navigate-concurrency", "1")
    site = practice_web.sites[2]
    quick, slow = _episode("quick"), _episode("slow")
    episodes.navigate(quick, practice_web.base_url(site))
    episodes.observation(quick, 0)
    episodes.navigate(slow, practice_web.base_url(site) + "__webgym/slow?ms=6000")
    time.sleep(0.5)  # the slow navigation is in progress
    for step in (1, 2, 3):
        episodes.act(quick, step, {"kind": "scroll", "direction": "down", "amount": 200})
        episodes.observation(quick, step)
        # Every click of the other episode came back while the navigation still ran.
        assert 0 not in episodes.observations.get(slow, {})
    assert episodes.observation(slow, 0)["action_error"] is None


def test_browsers_are_recycled_after_their_quota_of_contexts(settings):
    async def cycle() -> tuple[int, list[bool]]:
        async with async_playwright() as playwright:
            pool = BrowserPool(
                playwright, settings.model_copy(update={"browser_recycle_after": 2}), []
            )
            seen = []
            for _ in range(5):
                pooled = await pool.acquire()
                context = await pooled.browser.new_context()
                await context.close()
                await pool.release(pooled)
                seen.append(pooled.browser)
            still_open = [browser.is_connected() for browser in seen]
            await pool.close()
            return pool.launched, still_open

    launched, still_open = asyncio.run(cycle())
    assert launched == 3  # contexts 1-2, 3-4, 5
    assert still_open == [False, False, False, False, True]  # retired browsers were closed


def test_a_browser_that_dies_is_named_in_the_log_and_replaced(settings, caplog):
    async def crash_one() -> tuple[int, bool]:
        async with async_playwright() as playwright:
            pool = BrowserPool(playwright, settings, [])
            pooled = await pool.acquire()
            gone = asyncio.Event()
            pooled.browser.on("disconnected", lambda _: gone.set())
            devtools = await pooled.browser.new_browser_cdp_session()
            with contextlib.suppress(PlaywrightError):
                await devtools.send("Browser.crash")
            await asyncio.wait_for(gone.wait(), 30)
            fresh = await pool.acquire()
            replaced = fresh.browser is not pooled.browser and fresh.browser.is_connected()
            await pool.close()  # closing our own browsers is no news
            return pool.launched, replaced

    with caplog.at_level(logging.WARNING, logger="agents.browser.pool"):
        launched, replaced = asyncio.run(crash_one())
    assert (launched, replaced) == (2, True)
    warnings = [r.getMessage() for r in caplog.records if r.name == "agents.browser.pool"]
    assert len(warnings) == 1 and "a browser went away" in warnings[0], warnings
    assert "contexts open: 1" in warnings[0]


def test_poison_operations_go_to_the_dlq_and_the_worker_goes_on(
    start_worker, episodes, practice_web, settings, producer, make_consumer
):
    start_worker()
    episode_id = _episode("poison")
    act_topic = settings.topic("ops.act")
    producer.produce_raw(act_topic, episode_id, b"\x00 not an event", None)
    wrong_type = sample("episode")  # a valid event, on the wrong topic
    producer.produce(act_topic, episode_id, "episode", {**wrong_type, "episode_id": episode_id})
    producer.flush()
    episodes.navigate(episode_id, practice_web.base_url(practice_web.sites[3]))
    assert episodes.observation(episode_id, 0)["action_error"] is None
    dlq = make_consumer(f"dlq-{uuid.uuid4().hex[:8]}", [settings.topic("dlq")])
    letters = drain(dlq, 2, where=lambda e: e.key == episode_id.encode())
    assert sorted(letter.record["error_class"] for letter in letters) == [
        "CorruptEventError",
        "CorruptEventError",
    ]
    assert any("expected a act_op event" in letter.record["error_message"] for letter in letters)
    assert {letter.record["source_topic"] for letter in letters} == {act_topic}
