"""Serving one episode's replay page on loopback: ``webgym replay EPISODE --serve``.

``GET /`` renders the page from the log at each request (a running episode shows its newer steps
on reload); rendering reads Kafka, so it runs in a thread, never on the event loop. Blocks until
Ctrl-C.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from analytics.errors import AnalyticsError
from analytics.replay import render_replay_html
from infra.settings import Settings


def serve_replay(
    settings: Settings,
    episode_id: str,
    host: str,
    port: int,
    announce: Callable[[str], None],
) -> None:
    from aiohttp import web  # about 0.4 s to import: only for --serve

    async def page(request: web.Request) -> web.Response:
        try:
            html = await asyncio.to_thread(render_replay_html, settings, episode_id)
        except AnalyticsError as problem:
            return web.Response(status=404, text=str(problem))
        return web.Response(text=html, content_type="text/html", charset="utf-8")

    app = web.Application()
    app.router.add_get("/", page)
    try:
        web.run_app(
            app,
            host=host,
            port=port,
            print=lambda *_: announce(f"http://{host}:{port}/"),
            handle_signals=True,
        )
    except OSError as exc:
        raise AnalyticsError(
            f"cannot serve on {host}:{port} ({exc.strerror or exc}): choose another --port"
        ) from exc
