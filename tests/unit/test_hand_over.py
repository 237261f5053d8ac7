"""A hand-over stops its episodes within a bound, and names where one that does not is stuck."""

from __future__ import annotations

import asyncio

from agents.browser import worker
from agents.browser.worker import awaiting, stop_all


async def _stubborn(never: asyncio.Event) -> None:
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        await _cleanup(never)  # a clean-up step that does not end (a context that never closes)
        raise


async def _cleanup(never: asyncio.Event) -> None:
    await never.wait()


def test_stop_all_returns_within_its_bound_naming_where_a_stuck_task_waits():
    async def scenario() -> tuple[list[str], bool, bool]:
        never = asyncio.Event()
        obedient = asyncio.ensure_future(asyncio.sleep(3600))
        stuck = asyncio.ensure_future(_stubborn(never))
        await asyncio.sleep(0)  # both started
        still = await stop_all([obedient, stuck], timeout_s=0.2)
        outcome = still, obedient.cancelled(), stuck.done()
        never.set()
        await asyncio.gather(stuck, return_exceptions=True)
        return outcome

    still, obedient_cancelled, stuck_done = asyncio.run(scenario())
    assert obedient_cancelled and not stuck_done
    [where] = still
    assert where.startswith("_stubborn:") and " > _cleanup:" in where and " > wait:" in where


def test_stop_all_of_nothing_and_awaiting_a_task_not_yet_started():
    async def scenario() -> tuple[list[str], str]:
        none = await stop_all([], timeout_s=0.1)
        task = asyncio.ensure_future(asyncio.sleep(0))
        where = awaiting(task)
        await task
        return none, where

    none, where = asyncio.run(scenario())
    assert none == []
    assert where.startswith("sleep:")  # created, not yet run: its own frame, at its first line


def test_a_context_that_does_not_close_is_let_go_after_the_bound(monkeypatch, caplog):
    monkeypatch.setattr(worker, "HAND_OVER_WAIT_S", 0.2)

    async def scenario() -> float:
        started = asyncio.get_running_loop().time()
        await worker._let_go("ep-1", "its browser context", asyncio.Event().wait())
        await worker._let_go("ep-1", "its browser's release", asyncio.sleep(0))
        return asyncio.get_running_loop().time() - started

    with caplog.at_level("WARNING", logger=worker.log.name):
        took = asyncio.run(scenario())
    assert 0.2 <= took < 2.0
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        "hand-over of episode ep-1: its browser context did not finish within 0 s; left behind"
    ]
