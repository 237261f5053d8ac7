"""Task difficulty: the one list of levels every layer shares (task files, the sampler's ratios,
the orchestrator's horizons, the views' ordering)."""

from __future__ import annotations

DIFFICULTIES = ("easy", "medium", "hard")
