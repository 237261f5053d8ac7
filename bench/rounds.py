"""The order in which a benchmark runs its variants, round by round."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def rotated(variants: Sequence[T], round_index: int) -> list[T]:
    """``variants`` rotated left by ``round_index``: over as many rounds as there are variants,
    each variant runs once in each position (first, second, ...), so a drift of the machine
    within a round does not always fall on the same one. (Who runs just before a variant still
    repeats: with three, ``a`` always follows ``c`` when it is not first.)"""
    if not variants:
        return []
    shift = round_index % len(variants)
    return [*variants[shift:], *variants[:shift]]
