"""`webgym worker browser`: run one browser worker until SIGINT or SIGTERM.

Reads like a recipe: settings, config, worker, serve, leave the group cleanly.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time

from rich.console import Console

from agents.browser.worker import BrowserWorker, BrowserWorkerConfig
from infra import event_loop
from infra.settings import Settings

STATS_EVERY_S = 10.0


async def serve(settings: Settings, config: BrowserWorkerConfig, console: Console) -> None:
    worker = BrowserWorker(settings, config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    ready = asyncio.Event()
    serving = asyncio.ensure_future(worker.run(stop, ready))
    await asyncio.wait(
        [serving, asyncio.ensure_future(ready.wait())], return_when="FIRST_COMPLETED"
    )
    console.print(
        f"browser worker in group [bold]{config.group_id}[/] on {settings.bootstrap_servers}: "
        f"navigate x{config.navigate_concurrency}, act x{config.act_concurrency}; "
        f"*.webgym.test -> {settings.practice_web_address}. Ctrl-C to stop."
    )
    last = time.monotonic()
    while not serving.done():
        await asyncio.wait([serving], timeout=1.0)
        if time.monotonic() - last >= STATS_EVERY_S:
            last = time.monotonic()
            console.print(
                f"episodes held {len(worker.held)}, observations {worker.stats['observations']}, "
                f"failures {worker.stats['failures']}, dead letters {worker.stats['dead_letters']}"
            )
    await serving  # re-raises a fatal error


def run_browser_worker(settings: Settings, config: BrowserWorkerConfig) -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    event_loop.run(serve(settings, config, Console()), settings)
