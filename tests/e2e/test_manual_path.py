"""The README's manual path, command by command, as a user types it: every worker in its own
process, the tasks published and the episodes started with `webgym` commands, no Python."""

from __future__ import annotations

import re
import time
from pathlib import Path

from commands.children import CLI, WORKER_CLI, Child, faust_argv, settings_env
from streams.targets import start_sampling
from tests.e2e.conftest import webgym_cli


def _served_port(child: Child, timeout_s: float = 60) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = re.search(r"serving \d+ sites on [\d.]+:(\d+)", child.text())
        if found:
            return int(found.group(1))
        child.check()
        time.sleep(0.2)
    raise AssertionError(f"`webgym sites serve` printed no address: {child.text()}")


def _loads_uvloop(pid: int) -> bool:
    return "uvloop/loop" in Path(f"/proc/{pid}/maps").read_text()


def test_the_readme_manual_path_runs_command_by_command(run_settings, tmp_path: Path):
    settings = run_settings
    assert webgym_cli(settings, "topics", "create").returncode == 0
    children: list[Child] = []
    try:
        pages = Child.start(
            "pages",
            [*CLI, "sites", "serve", "--port", "0", "--count", "5"],
            settings_env(settings),
            tmp_path,
        )
        children.append(pages)
        settings = settings.model_copy(
            update={"practice_web_address": f"127.0.0.1:{_served_port(pages)}"}
        )
        env = settings_env(settings)
        scripted = ["--backend", "scripted", "--sites-count", "5"]
        for name, argv in [
            ("browser", [*WORKER_CLI, "browser"]),
            ("policy", [*WORKER_CLI, "policy", *scripted]),
            ("streams", faust_argv()),
        ]:
            children.append(Child.start(name, argv, env, tmp_path))
        browser, policy, streams = children[1:]
        browser.wait_for("assigned", 120)
        policy.wait_for("assigned", 180)
        streams.wait_for("Ready", 120)
        # Both asyncio workers run on the event loop the settings name.
        uvloop = settings.event_loop == "uvloop"
        assert _loads_uvloop(browser.process.pid) is uvloop
        assert _loads_uvloop(streams.process.pid) is uvloop

        # Before the tasks are published: the command refuses the set, naming what exists...
        refused = webgym_cli(
            settings, "episodes", "start", "--task-set", "practice-web/seed-0", "--episodes", "2"
        )
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "practice-web/seed-0" in refused.stderr and "webgym tasks" in refused.stderr
        # ...and a target sent anyway is not silent: the sampler says the set is empty.
        start_sampling(settings, "early", "practice-web/seed-0", 1, 1, check=False)
        streams.wait_for("'practice-web/seed-0', which holds no task", 60)

        published = webgym_cli(settings, "tasks", "practice-web", "--seed", "0", "--sites", "5")
        assert published.returncode == 0, published.stderr
        assert "new" in published.stdout and "practice-web/seed-0/test" in published.stdout
        again = webgym_cli(settings, "tasks", "practice-web", "--seed", "0", "--sites", "5")
        assert "0 new, 0 changed" in again.stdout, again.stdout

        started = webgym_cli(
            settings,
            *("episodes", "start", "--task-set", "practice-web/seed-0", "--run", "manual"),
            *("--in-flight", "4", "--episodes", "8", "--wait", "--stall-timeout", "240"),
            timeout=600,
        )
        assert started.returncode == 0, started.stdout + started.stderr
        assert "run manual: 8 ended" in started.stdout, started.stdout
        stopped = webgym_cli(settings, "episodes", "stop", "early")
        assert stopped.returncode == 0 and "sampling stopped" in stopped.stdout

        checked = webgym_cli(settings, "check", "--run", "manual", timeout=300)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        for child in children:
            child.check()  # no worker died on the way
    finally:
        for child in reversed(children):
            child.stop()
