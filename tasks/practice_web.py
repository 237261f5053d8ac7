"""The practice web as a task set: ``practice-web/seed-<seed>``, with its out-of-distribution split.

The tasks are ``sites.tasks.generate_tasks`` of the first ``count`` sites of the seed, each with
``split`` set by :func:`tasks.split.split_by_website`, so the set's ``/train`` and ``/test``
subsets (``practice-web/seed-0/train``, ``.../test``) share no website. The split is drawn per
block of 10 sites (sites ``0-9``, ``10-19``, ...: 2 websites of each block go to test) from the
whole block's websites, so a site's split never depends on how many sites a run serves: the set of
more sites extends the set of fewer, and no website moves between train and test.
"""

from __future__ import annotations

from typing import Any

from sites import generate_sites
from sites.tasks import generate_tasks, task_set_name
from tasks.split import split_by_website

BLOCK = 10  # sites per split block
TEST_FRACTION = 0.2


def practice_web_tasks(seed: int = 0, count: int = 50) -> list[dict[str, Any]]:
    """The tasks of the first ``count`` sites of ``seed``, in the set of the seed, split stamped."""
    sites = generate_sites(seed=seed, count=count)
    blocks = -(-count // BLOCK) * BLOCK
    hosts = [site.hostname for site in generate_sites(seed=seed, count=blocks)]
    test_hosts: set[str] = set()
    for start in range(0, blocks, BLOCK):
        block = [{"task_id": host, "website": host} for host in hosts[start : start + BLOCK]]
        _, test = split_by_website(block, TEST_FRACTION, seed=seed * 1_000_003 + start)
        test_hosts |= {task["website"] for task in test}
    return [
        {**task, "split": "test" if task["website"] in test_hosts else "train"}
        for task in generate_tasks(sites, seed=seed)
    ]


def practice_web_seed(name: str) -> int | None:
    """The seed of a practice-web set name (``practice-web/seed-<K>[/train|/test]``), else None."""
    parts = name.split("/")
    if len(parts) not in (2, 3) or task_set_name(0).split("/")[0] != parts[0]:
        return None
    if len(parts) == 3 and parts[2] not in ("train", "test"):
        return None
    number = parts[1].removeprefix("seed-")
    if number == parts[1] or not number.isdigit():
        return None
    return int(number) if task_set_name(int(number)) == "/".join(parts[:2]) else None
