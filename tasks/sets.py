"""Named task sets: which tasks a run may draw.

Every task record names its set (``task_set``, task schema v2). A task is a member of set ``S``
when its ``task_set`` is ``S``, or when ``S`` is ``<task_set>/<split>`` (its split marker, train
or test): the split of a set is a set too. Nothing else is a member: a task with no set (a v1
record) belongs to no set. Names are compared exactly. A run names one set or several with
sampling weights (:func:`parse_weights`: ``miniwob/train=2,practice-web/seed-0=1``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

_FILE_SUFFIXES = (".jsonl.gz", ".jsonl", ".parquet", ".json", ".gz")


class TaskSetError(ValueError):
    """A set name or weights that cannot be used; the message says what to write instead."""


class UnknownTaskSet(TaskSetError):
    """A set that no published task belongs to; the message names the sets that exist."""

    def __init__(self, names: Iterable[str], sizes: Mapping[str, int]):
        self.names = tuple(names)
        known = ", ".join(f"{name} ({count})" for name, count in sorted(sizes.items())) or "none"
        super().__init__(
            f"unknown task set {', '.join(map(repr, self.names))}; the tasks topic holds: {known}. "
            "Publish it first (`webgym tasks load FILE --task-set NAME`, `webgym tasks miniwob`, "
            "`webgym tasks practice-web --seed K`) or name one of these"
        )


def is_member(task: Mapping[str, Any], name: str) -> bool:
    """Whether ``task`` belongs to set ``name`` (see the module docstring).

    The sets a run can name:

    - ``practice-web/seed-<K>`` (and ``.../train``, ``.../test``): the practice web of seed K
      with its out-of-distribution split by website (:mod:`tasks.practice_web`);
    - ``miniwob/train``, ``miniwob/heldout``: MiniWoB++ instances, page + seed
      (:mod:`tasks.miniwob`);
    - a loaded WebGym file: ``webgym tasks load FILE --task-set NAME`` (default: the file's
      name without its extensions), with ``NAME/train`` and ``NAME/test`` where the file marks a
      split.
    """
    own = task.get("task_set") or ""
    if not own:
        return False
    if name == own:
        return True
    split = task.get("split")
    return split is not None and name == f"{own}/{split}"


def members(tasks: Iterable[Mapping[str, Any]], name: str) -> list[Mapping[str, Any]]:
    return [task for task in tasks if is_member(task, name)]


def task_sets_of(task: Mapping[str, Any]) -> list[str]:
    """Every set ``task`` belongs to: its own, and its own split of it."""
    own = task.get("task_set") or ""
    if not own:
        return []
    return [own, f"{own}/{task['split']}"] if task.get("split") else [own]


def set_sizes(tasks: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Every set some task belongs to, with its number of tasks (splits included)."""
    sizes: Counter[str] = Counter()
    for task in tasks:
        sizes.update(task_sets_of(task))
    return dict(sorted(sizes.items()))


def check_known(names: Iterable[str], sizes: Mapping[str, int]) -> None:
    """Raise :class:`UnknownTaskSet` naming every set of ``names`` that holds no task."""
    unknown = [name for name in names if not sizes.get(name)]
    if unknown:
        raise UnknownTaskSet(unknown, sizes)


def parse_weights(text: str) -> dict[str, float]:
    """``NAME[=WEIGHT],...`` as set name -> sampling weight (default weight 1), in input order."""
    weights: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, has_weight, value = part.partition("=")
        name = check_name(name.strip())
        try:
            weight = float(value) if has_weight else 1.0
        except ValueError:
            raise TaskSetError(
                f"task sets: {part!r} is not NAME=WEIGHT; write e.g. "
                "miniwob/train=2,practice-web/seed-0=1"
            ) from None
        if weight < 0 or weight != weight:
            raise TaskSetError(f"task sets: the weight of {name} must be 0 or more, got {value}")
        weights[name] = weight
    if not weights:
        raise TaskSetError("name at least one task set, e.g. practice-web/seed-0 or miniwob/train")
    if not any(weight > 0 for weight in weights.values()):
        raise TaskSetError("task sets: at least one set needs a weight above 0")
    return weights


def name_for_file(path: str | Path) -> str:
    """The set a loaded file's tasks join by default: the file name without its extensions."""
    name = Path(path).name
    for suffix in _FILE_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return name or "tasks"


def check_name(name: str) -> str:
    """``name`` if it can name a set: not empty, no ``,`` or ``=``, no ``/`` at either end."""
    if not name or name != name.strip() or name.strip("/") != name or any(c in name for c in ",="):
        raise TaskSetError(
            f"task set name {name!r}: use letters, digits, '-', '_', '.', and '/' between parts, "
            "e.g. webgym-v1 or miniwob/train"
        )
    return name


def stamp(tasks: Iterable[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """Copies of ``tasks`` in set ``name``."""
    check_name(name)
    return [{**task, "task_set": name} for task in tasks]
