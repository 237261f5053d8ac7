"""``webgym dashboard``: the live web page over the log."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from aiohttp import web
from rich.console import Console

from analytics.dashboard import DashboardState, LogFeeder, build_app
from analytics.errors import AnalyticsError
from analytics.times import parse_since
from infra.settings import load_settings


def dashboard(
    port: Annotated[int, typer.Option(min=0, max=65535, help="HTTP port (0: any free one)")] = 8050,
    host: Annotated[
        str, typer.Option(help="address to listen on; keep 127.0.0.1 unless behind a proxy")
    ] = "127.0.0.1",
    since: Annotated[
        str | None, typer.Option(help="read the log from this time: ISO time or 10m, 2h, 1d")
    ] = None,
) -> None:
    """Serve the live dashboard: episodes in flight and their state, success over time and by
    policy version, throughput, recent trajectories (each opens in the replay viewer).

    Reads only from Kafka, from the start of the log (or --since), with a reader that never
    commits: attaching it changes nothing for the running system. Ctrl-C to stop.
    """

    since_ms = parse_since(since)
    settings = load_settings()
    state = DashboardState()
    feeder = LogFeeder(settings, state, since_ms)
    console = Console()

    async def serve() -> None:
        runner = web.AppRunner(build_app(settings, state))
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise AnalyticsError(
                f"cannot listen on {host}:{port} ({exc.strerror or exc}). Stop what uses the "
                "port or pick another with --port (0 picks a free one)"
            ) from None
        bound = runner.addresses[0][1] if runner.addresses else port
        console.print(
            f"dashboard of {settings.topic('*')} on [bold]http://{host}:{bound}/[/] "
            "(Ctrl-C to stop)",
            highlight=False,
        )
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    feeder.start()
    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    finally:
        feeder.stop()
