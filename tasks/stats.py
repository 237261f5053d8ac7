"""Counts of a task set by domain, subdomain, difficulty, split and source, and their tables.

A missing value counts as ``(none)``. Subdomains are counted per domain (two domains may share a
subdomain name). The source is ``extra_json["source"]`` (the loader sets ``webgym`` by default).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rich.table import Table

from schemas.difficulty import DIFFICULTIES
from tasks.split import website_key

NONE = "(none)"
_SPLITS = ("train", "test", NONE)


@dataclass(frozen=True)
class TaskStats:
    tasks: int
    websites: int
    by_domain: Counter[str]
    by_subdomain: Counter[tuple[str, str]]  # (domain, subdomain)
    by_difficulty: Counter[str]
    by_split: Counter[str]
    by_source: Counter[str]


def task_stats(tasks: Iterable[Mapping[str, Any]]) -> TaskStats:
    count = 0
    websites: set[str] = set()
    by_domain: Counter[str] = Counter()
    by_subdomain: Counter[tuple[str, str]] = Counter()
    by_difficulty: Counter[str] = Counter()
    by_split: Counter[str] = Counter()
    by_source: Counter[str] = Counter()
    for task in tasks:
        count += 1
        websites.add(website_key(task["website"]))
        domain = task.get("domain") or NONE
        by_domain[domain] += 1
        by_subdomain[(domain, task.get("subdomain") or NONE)] += 1
        by_difficulty[task["difficulty"]] += 1
        by_split[task.get("split") or NONE] += 1
        source = json.loads(task.get("extra_json") or "{}").get("source")
        by_source[str(source) if source is not None else NONE] += 1
    return TaskStats(
        count, len(websites), by_domain, by_subdomain, by_difficulty, by_split, by_source
    )


def stats_tables(stats: TaskStats) -> list[Table]:
    """One rich table per dimension, each with counts and shares of all tasks."""
    return [
        _table("domain", _by_count(stats.by_domain), stats.tasks),
        _subdomain_table(stats),
        _table("difficulty", _in_order(stats.by_difficulty, DIFFICULTIES), stats.tasks),
        _table("split", _in_order(stats.by_split, _SPLITS), stats.tasks),
        _table("source", _by_count(stats.by_source), stats.tasks),
    ]


def _table(name: str, rows: list[tuple[str, int]], total: int) -> Table:
    table = Table(title=f"tasks by {name}", title_justify="left")
    table.add_column(name)
    table.add_column("tasks", justify="right")
    table.add_column("share", justify="right")
    for value, count in rows:
        table.add_row(value, str(count), f"{count / total:.1%}" if total else "-")
    return table


def _subdomain_table(stats: TaskStats) -> Table:
    table = Table(title="tasks by subdomain", title_justify="left")
    table.add_column("domain")
    table.add_column("subdomain")
    table.add_column("tasks", justify="right")
    ordered = sorted(stats.by_subdomain.items(), key=lambda item: (item[0][0], -item[1], item[0]))
    for (domain, subdomain), count in ordered:
        table.add_row(domain, subdomain, str(count))
    return table


def _by_count(counter: Counter[str]) -> list[tuple[str, int]]:
    return sorted(counter.items(), key=lambda item: (-item[1], item[0]))


def _in_order(counter: Counter[str], order: tuple[str, ...]) -> list[tuple[str, int]]:
    known = [(value, counter[value]) for value in order if counter[value]]
    rest = [(value, n) for value, n in _by_count(counter) if value not in order]
    return known + rest
