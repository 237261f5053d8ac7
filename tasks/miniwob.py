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

One task is one **instance**: a page and a seed. The browser worker seeds the page's random number
generator with it (``Math.seedrandom(seed)``, as MiniWoB++'s own environment does) right before
the episode starts, so every episode of one task id shows the same problem (the same instruction,
the same layout), and instances of other seeds mostly differ. Task ids are
``miniwob-<page>-s<seed>``. Two task sets are built in: ``miniwob/train`` (seeds ``0..N-1``) and
``miniwob/heldout`` (seeds from :data:`HELDOUT_SEED_BASE` on), disjoint by construction; both
can be restricted to a list of pages. A set of any other name gets ids prefixed with its name
(``<set>:miniwob-<page>-s<seed>``), so publishing it never moves an instance out of another set.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from schemas.event_ids import task_event_id

HOST = "miniwob.webgym.test"
JUDGE_NAME = "miniwob-page-reward"
JUDGE_VERSION = "1"
SETUP = "miniwob"
TRAIN_SET = "miniwob/train"
HELDOUT_SET = "miniwob/heldout"
HELDOUT_SEED_BASE = 1_000_000  # held-out seeds start here; training seeds stay below it
DEFAULT_SEEDS = 100  # instances per page of each built-in set

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
    import miniwob  # about a second to import; the judge imports this module without it

    return Path(miniwob.__file__).parent / "html"


def available() -> list[str]:
    return sorted(path.stem for path in (html_root() / "miniwob").glob("*.html"))


def train_seeds(count: int = DEFAULT_SEEDS) -> range:
    """The seeds of the training instances: ``0 .. count-1``."""
    if not 0 < count <= HELDOUT_SEED_BASE:
        raise ValueError(f"training seeds: count must lie in 1..{HELDOUT_SEED_BASE}, got {count}")
    return range(count)


def heldout_seeds(count: int = DEFAULT_SEEDS) -> range:
    """The seeds of the held-out instances: ``HELDOUT_SEED_BASE ..``, never a training seed."""
    if count < 1:
        raise ValueError(f"held-out seeds: count must be at least 1, got {count}")
    return range(HELDOUT_SEED_BASE, HELDOUT_SEED_BASE + count)


def task_id(name: str, seed: int, task_set: str = TRAIN_SET) -> str:
    """The id of one instance in ``task_set`` (see the module docstring)."""
    instance = f"miniwob-{name}-s{seed}"
    return instance if task_set in (TRAIN_SET, HELDOUT_SET) else f"{task_set}:{instance}"


# Pages that need a click or typing at a place on the page (the learning experiment's tasks).
CLICK_AND_TYPE = ("click-button", "click-link", "click-dialog", "focus-text", "enter-text")

_INSTANCE = re.compile(r"(?:^|:)miniwob-(.+)-s\d+$")


def page_of(task_id: str) -> str | None:
    """The MiniWoB++ page of an instance's task id (any set), or None for another task."""
    match = _INSTANCE.search(task_id)
    return match.group(1) if match else None


def task_record(name: str, seed: int, task_set: str = TRAIN_SET) -> dict[str, Any]:
    """The ``task`` event of one MiniWoB++ instance: page ``name`` seeded with ``seed``."""
    if not (html_root() / "miniwob" / f"{name}.html").is_file():
        raise ValueError(f"no MiniWoB++ task {name!r}; known: {', '.join(available())}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"MiniWoB++ {name}: seed {seed!r} is not an integer of 0 or more")
    if not task_set:
        raise ValueError("a MiniWoB++ instance needs a task set name, e.g. miniwob/train")
    extra = {
        "source": "miniwob",
        "setup": SETUP,
        "seed": seed,
        "mode": "set_of_marks",
        "miniwob": name,
    }
    identifier = task_id(name, seed, task_set)
    return {
        "event_id": task_event_id(identifier),
        "ts": 0,
        "task_id": identifier,
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
        "task_set": task_set,
    }


def instance_tasks(
    names: Iterable[str] = MARKS_SOLVABLE,
    seeds: Iterable[int] = range(DEFAULT_SEEDS),
    task_set: str = TRAIN_SET,
) -> list[dict[str, Any]]:
    """One task per (page, seed), pages in the given order, seeds within each page."""
    names, seeds = list(dict.fromkeys(names)), list(dict.fromkeys(seeds))
    if not names or not seeds:
        raise ValueError("MiniWoB++ instances need at least one page name and one seed")
    if task_set == TRAIN_SET and max(seeds) >= HELDOUT_SEED_BASE:
        raise ValueError(f"{TRAIN_SET} takes seeds below {HELDOUT_SEED_BASE} (held-out seeds)")
    if task_set == HELDOUT_SET and min(seeds) < HELDOUT_SEED_BASE:
        raise ValueError(f"{HELDOUT_SET} takes seeds from {HELDOUT_SEED_BASE} on")
    return [task_record(name, seed, task_set) for name in names for seed in seeds]


def train_tasks(
    names: Iterable[str] = MARKS_SOLVABLE, count: int = DEFAULT_SEEDS
) -> list[dict[str, Any]]:
    """The ``miniwob/train`` set: ``count`` instances (seeds ``0..count-1``) of each page."""
    return instance_tasks(names, train_seeds(count), TRAIN_SET)


def heldout_tasks(
    names: Iterable[str] = MARKS_SOLVABLE, count: int = DEFAULT_SEEDS
) -> list[dict[str, Any]]:
    """The ``miniwob/heldout`` set: ``count`` instances of each page, seeds disjoint from train."""
    return instance_tasks(names, heldout_seeds(count), HELDOUT_SET)


def instance_sets(
    names: Iterable[str] = MARKS_SOLVABLE,
    train_count: int = DEFAULT_SEEDS,
    heldout_count: int = DEFAULT_SEEDS,
    prefix: str = "miniwob",
) -> list[dict[str, Any]]:
    """The sets ``<prefix>/train`` (seeds ``0..train_count-1``) and ``<prefix>/heldout``
    (``heldout_count`` seeds from :data:`HELDOUT_SEED_BASE`) of the pages ``names``: the
    held-out instances are never training instances, whatever the prefix."""
    names = list(names)
    return instance_tasks(names, train_seeds(train_count), f"{prefix}/train") + instance_tasks(
        names, heldout_seeds(heldout_count), f"{prefix}/heldout"
    )


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


_JS_LIST = re.compile(r"(?:ui_utils\.(\w+)|var (\w+))\s*=\s*\[(.*?)\];", re.S)
_JS_STRING = re.compile(r"""['"]([^'"\n]{1,40})['"]""")


def word_lists() -> dict[str, list[str]]:
    """The word lists MiniWoB++ pages draw their instances from, by name (``FIFTY_NAMES``,
    ``lorem_words``, ``COLORS``, ...; ``button_words`` for click-button's labels), read from the
    installed package's scripts. Words keep their page spelling; trailing list punctuation
    (``"amet,"``) is dropped. Deterministic: each list in its file's order, without repeats."""
    lists: dict[str, list[str]] = {}
    sources = [(html_root() / "common" / "ui_utils.js", "")]
    sources += [(html_root() / "miniwob" / "click-button.html", "button_words")]
    for path, rename in sources:
        for match in _JS_LIST.finditer(path.read_text(encoding="utf-8", errors="replace")):
            name = rename or match[1] or match[2]
            words = [w.strip(",.") for w in _JS_STRING.findall(match[3])]
            lists[name] = list(dict.fromkeys(w for w in words if w))
            if rename:
                break  # the page's first list is its button labels
    return lists
