"""The out-of-distribution split: whole websites go to test, so test websites are never trained on.

Websites are compared by :func:`website_key` (host, lower case, without scheme, port, path or a
leading ``www.``): ``https://www.amazon.com/books`` and ``amazon.com`` are one website, while
``smile.amazon.com`` is another. The split draws ``round(test_fraction * websites)`` websites
(at least one, and never all) with ``random.Random(seed)`` from the sorted website keys, so the
same tasks, fraction and seed give the same split whatever the order of the input.

A task file's own split markers (``split``, ``distribution``, ``is_ood``: the WebGym data's own
split) are honoured by default: a marked task stays in its split, and so does every task of its
website; only websites with no marked task are drawn. A website whose marked tasks sit in both
splits is refused, naming it (the file's split is not by website; ``honour_markers=False``
splits every task by website instead).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


class SplitError(ValueError):
    """The tasks or options do not allow the split; the message says what to change."""


@dataclass(frozen=True)
class SplitViolation:
    """A website with tasks in both splits."""

    website: str
    train_task_ids: tuple[str, ...]
    test_task_ids: tuple[str, ...]

    def __str__(self) -> str:
        return (
            f"{self.website}: {len(self.train_task_ids)} train tasks "
            f"(e.g. {self.train_task_ids[0]}), {len(self.test_task_ids)} test tasks "
            f"(e.g. {self.test_task_ids[0]})"
        )


def website_key(website: str) -> str:
    """The website a task belongs to, as the split compares them."""
    text = website.strip().lower()
    host = urlsplit(text if "://" in text else f"//{text}").hostname or text
    return host.removeprefix("www.")


def marked_websites(tasks: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The split each website's marked tasks give it (``train`` or ``test``)."""
    marks: dict[str, set[str]] = defaultdict(set)
    for task in tasks:
        if task.get("split") in ("train", "test"):
            marks[website_key(task["website"])].add(task["split"])
    both = sorted(website for website, splits in marks.items() if len(splits) > 1)
    if both:
        raise SplitError(
            f"the file's own split markers put tasks of {len(both)} website(s) in both train and "
            f"test ({', '.join(both[:5])}{' ...' if len(both) > 5 else ''}): that split is not by "
            "website. Use --ignore-markers to split every task by website instead."
        )
    return {website: splits.pop() for website, splits in marks.items()}


def split_by_website(
    tasks: Iterable[Mapping[str, Any]],
    test_fraction: float,
    seed: int = 0,
    honour_markers: bool = True,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Train and test tasks (copies, ``split`` set), with no website in both; input order kept.
    With ``honour_markers``, websites with marked tasks keep the file's split and only the
    others are drawn (``test_fraction`` of them)."""
    tasks = list(tasks)
    if not 0 < test_fraction < 1:
        raise SplitError(
            f"test fraction {test_fraction} must lie between 0 and 1 (exclusive), e.g. 0.2"
        )
    marked = marked_websites(tasks) if honour_markers else {}
    websites = sorted({website_key(task["website"]) for task in tasks})
    if len(websites) < 2:
        raise SplitError(
            f"the tasks come from {len(websites)} website(s); a split by website needs at least 2"
        )
    test_websites = {website for website, split in marked.items() if split == "test"}
    free = [website for website in websites if website not in marked]
    if free:
        count = round(test_fraction * len(free))
        if not marked:  # a split of the file's websites alone: at least one each side
            count = min(len(free) - 1, max(1, count))
        test_websites |= set(random.Random(seed).sample(free, count))
    train, test = [], []
    for task in tasks:
        if website_key(task["website"]) in test_websites:
            test.append({**task, "split": "test"})
        else:
            train.append({**task, "split": "train"})
    return train, test


def check_split(
    train: Iterable[Mapping[str, Any]], test: Iterable[Mapping[str, Any]]
) -> list[SplitViolation]:
    """Every website with tasks in both splits, sorted by website; empty when the split holds."""
    train_ids: dict[str, list[str]] = defaultdict(list)
    for task in train:
        train_ids[website_key(task["website"])].append(task["task_id"])
    test_ids: dict[str, list[str]] = defaultdict(list)
    for task in test:
        test_ids[website_key(task["website"])].append(task["task_id"])
    return [
        SplitViolation(website, tuple(train_ids[website]), tuple(test_ids[website]))
        for website in sorted(train_ids.keys() & test_ids.keys())
    ]
