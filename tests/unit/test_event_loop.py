"""``infra.event_loop``: a worker's loop and Faust's, as the settings choose."""

from __future__ import annotations

import asyncio

import pytest

from infra import event_loop
from infra.settings import Settings


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


@pytest.mark.parametrize(("name", "module"), [("uvloop", "uvloop"), ("asyncio", "asyncio")])
def test_a_worker_runs_on_the_loop_the_settings_name(name: str, module: str):
    ran = event_loop.run(_loop_module(), Settings(event_loop=name))
    assert ran.split(".")[0] == module


def test_faust_is_told_the_same_loop_in_its_own_words():
    assert event_loop.faust_env(Settings(event_loop="uvloop")) == {"FAUST_LOOP": "uvloop"}
    assert event_loop.faust_env(Settings(event_loop="asyncio")) == {"FAUST_LOOP": "aio"}


def test_an_unknown_loop_is_refused():
    with pytest.raises(ValueError, match="event_loop"):
        Settings(event_loop="trio")


def test_a_run_starts_its_faust_worker_on_the_settings_loop():
    from commands.children import settings_env

    assert settings_env(Settings(event_loop="asyncio"))["FAUST_LOOP"] == "aio"
    assert settings_env(Settings(event_loop="uvloop"))["FAUST_LOOP"] == "uvloop"
