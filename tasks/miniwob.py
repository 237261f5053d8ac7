"""MiniWoB++ tasks: the ``miniwob`` package's pages, served locally, as webgym tasks.

The pages are served as plain files under ``http://miniwob.webgym.test/`` by the practice-web
server (browsers map ``*.webgym.test`` there). Each task opens one page; the browser worker starts
the MiniWoB++ episode the way MiniWoB++'s own environment does (``setup: miniwob`` on the navigate
operation: no START cover, a 120 s limit instead of 10 s), and every observation carries the
page's own signals (done, reward, raw reward, reason, and the instruction it shows). The episode
ends when the page says it is done; the judge reads the reward from the page's signal: reward 1
when the page's raw reward is 1 (the task done right), 0 otherwise. The instruction is generated
by the page at each episode, so the task's own ``task_name`` only says to follow it, and the
orchestrator adds the page's words to the context. Policies act on set-of-marks (element ids).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HOST = "miniwob.webgym.test"
JUDGE_NAME = "miniwob-page-reward"
JUDGE_VERSION = "1"

# Tasks whose instruction names the elements to act on: solvable from the marks table alone
# (by ``agents.policy.backends.heuristic``). The others need vision, or plans longer than the
# easy horizon (click-checkboxes-large: up to 12 clicks).
MARKS_SOLVABLE = (
    "click-button",
    "click-button-sequence",
    "click-checkboxes",
    "click-checkboxes-transfer",
    "click-collapsible",
    "click-dialog",
    "click-dialog-2",
    "click-link",
    "click-option",
    "click-tab",
    "click-test",
    "click-test-2",
    "click-test-transfer",
    "click-widget",
    "enter-password",
    "enter-text",
    "enter-text-2",
    "enter-text-dynamic",
    "focus-text",
    "focus-text-2",
    "login-user",
    "unicode-test",
)


def html_root() -> Path:
    """The directory of the installed ``miniwob`` package's pages."""
    import miniwob

    return Path(miniwob.__file__).parent / "html"


def available() -> list[str]:
    return sorted(path.stem for path in (html_root() / "miniwob").glob("*.html"))


def task_record(name: str) -> dict[str, Any]:
    """The ``task`` event of one MiniWoB++ page."""
    if not (html_root() / "miniwob" / f"{name}.html").is_file():
        raise ValueError(f"no MiniWoB++ task {name!r}; known: {', '.join(available())}")
    extra = {"source": "miniwob", "setup": "miniwob", "mode": "set_of_marks", "miniwob": name}
    return {
        "event_id": f"task:miniwob-{name}",
        "ts": 0,
        "task_id": f"miniwob-{name}",
        "task_name": f"MiniWoB++ {name}: do what the instruction at the top of the page says.",
        "website": HOST,
        "start_url": f"http://{HOST}/miniwob/{name}.html",
        "domain": "miniwob",
        "subdomain": name,
        "difficulty": "easy",
        "evaluator_reference": [
            {
                "id": "g1",
                "description": "the page's own reward signal",
                "facts": ["the MiniWoB++ page reports the task done right (raw reward 1)"],
            }
        ],
        "definite_answer": None,
        "split": None,
        "parent_task_id": None,
        "extra_json": json.dumps(extra, sort_keys=True),
    }


def miniwob_tasks(names: tuple[str, ...] | list[str] = MARKS_SOLVABLE) -> list[dict[str, Any]]:
    return [task_record(name) for name in names]


def page_reward(signals: dict[str, str]) -> tuple[float, str]:
    """(reward 0/1, rationale) from an observation's page signals."""
    if signals.get("done") != "true":
        return 0.0, "the page never reported the episode done"
    try:
        raw = float(signals.get("raw_reward", "nan"))
    except ValueError:
        raw = float("nan")
    reason = signals.get("reason") or ""
    rationale = f"page reported raw reward {signals.get('raw_reward')}" + (
        f" ({reason})" if reason and reason != "null" else ""
    )
    return (1.0 if raw >= 1.0 else 0.0), rationale
