"""A page set-up as a navigate operation names it: ``<name>`` or ``<name>?seed=<n>``.

The orchestrator writes it (from the task's ``extra_json``: ``setup`` and, for a seeded instance,
``seed``); the browser worker reads it and runs the named set-up with the seed after the page
loaded. The seed is part of the navigate operation itself, so a rebuilt or replayed episode sets
its page up exactly as the logged one.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs


class SetupSpecError(ValueError):
    """A set-up spec that does not parse; the message names it."""


def setup_spec(name: str | None, seed: Any = None) -> str | None:
    """The spec of set-up ``name`` (None: no set-up), seeded with ``seed`` when it is not None."""
    if not name:
        return None
    if seed is None:
        return name
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SetupSpecError(f"set-up {name!r}: seed {seed!r} is not an integer")
    return f"{name}?seed={seed}"


def task_setup(extra: dict[str, Any]) -> str | None:
    """The spec a navigate operation carries for a task's ``extra_json`` (``setup``, ``seed``).

    Never raises: a seed that is not an integer is written as given, and the browser worker
    reports it as the set-up's action error (data the episode records, not a stalled stream).
    """
    name, seed = extra.get("setup"), extra.get("seed")
    if not name or not isinstance(name, str):
        return None
    if seed is None:
        return name
    if isinstance(seed, int) and not isinstance(seed, bool):
        return setup_spec(name, seed)
    return f"{name}?seed={seed}"


def parse_setup(spec: str) -> tuple[str, int | None]:
    """(name, seed or None) of a spec :func:`setup_spec` wrote."""
    name, _, query = spec.partition("?")
    if not query:
        return name, None
    params = parse_qs(query, keep_blank_values=True, strict_parsing=False)
    seeds = params.pop("seed", [])
    if params or len(seeds) != 1:
        raise SetupSpecError(f"page set-up {spec!r}: expected <name> or <name>?seed=<integer>")
    try:
        return name, int(seeds[0])
    except ValueError:
        raise SetupSpecError(f"page set-up {spec!r}: seed {seeds[0]!r} is not an integer") from None
