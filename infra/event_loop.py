"""The event loop an asyncio worker runs on, as the settings choose (``event_loop``).

uvloop (libuv's loop, written in C) spends less CPU per wake-up, socket read and write than
Python's own loop, and each worker wakes several times for every event of a step; on the 2-core
machine of ``bench/results/event_loop.json`` the rollout showed no clear gain from it, so
asyncio is the default. Faust picks its loop when ``faust`` is imported, from ``-L`` or
``FAUST_LOOP``: :func:`faust_env` gives the environment that starts it on the chosen one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from infra.settings import Settings

T = TypeVar("T")

FAUST_NAMES = {"uvloop": "uvloop", "asyncio": "aio"}


def run(main: Coroutine[Any, Any, T], settings: Settings) -> T:
    """``asyncio.run(main)`` on the loop ``settings.event_loop`` names."""
    if settings.event_loop == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)


def faust_env(settings: Settings) -> dict[str, str]:
    """The variable a ``faust`` process reads its loop from, for ``settings.event_loop``."""
    return {"FAUST_LOOP": FAUST_NAMES[settings.event_loop]}
