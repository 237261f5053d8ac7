"""Filters between the judge and the learner: blocked sites out, only real successes through.

Environment failures are never training data. A trajectory is *blocked* when a page it saw was a
bot wall or a captcha (matched on page titles and addresses, case-insensitively); its site is then
kept out of sampling for a while (``site_blocked`` notice to the sampler). A trajectory goes to
``webgym.trajectories.success`` only when it was not aborted, the judge gave reward 1 without a
judge error (a verifier gives 1 only to a right answer, a page only to the task done right), and
it is not blocked, and it is a training trajectory: an evaluation (``purpose`` "eval") trajectory
never goes there, whatever its reward, so held-out tasks stay held out (the learner refuses one
too, as a second line of defence). Repetition marks are set by the assembler
(``streams.assembler``); the learner trains on the steps marked ``trainable``.
"""

from __future__ import annotations

import re
from typing import Any

from schemas.purpose import is_eval

# The fields a judge adds to a trajectory (a scored trajectory is its trajectory plus these).
SCORE_FIELDS = (
    "reward",
    "verdicts",
    "judge_name",
    "judge_version",
    "judge_error",
    "blocked",
    "block_reason",
)

BLOCK_PATTERNS = (
    r"captcha",
    r"are you (?:a )?(?:human|robot)",
    r"verify (?:that )?you are (?:a )?human",
    r"unusual traffic",
    r"access denied",
    r"attention required",
    r"just a moment\.\.\.",
    r"bot (?:detection|check|wall)",
    r"/cdn-cgi/challenge",
    r"/sorry/index",
)
_BLOCKED = re.compile("|".join(BLOCK_PATTERNS), re.IGNORECASE)


def detect_block(trajectory: dict[str, Any]) -> str | None:
    """Why the trajectory counts as blocked, or None."""
    for step in trajectory["steps"]:
        for where in ("title", "url"):
            text = step.get(where) or ""
            match = _BLOCKED.search(text)
            if match:
                return f"step {step['step']}: {where} {text[:120]!r} matches {match[0]!r}"
    return None


def is_success(scored: dict[str, Any]) -> bool:
    return (
        scored["reward"] >= 1.0
        and not scored["aborted"]
        and scored.get("judge_error") is None
        and not scored.get("blocked", False)
    )


def reaches_learner(scored: dict[str, Any]) -> bool:
    """Whether a scored trajectory goes to ``webgym.trajectories.success``: a training success."""
    return is_success(scored) and not is_eval(scored)


def trainable_steps(scored: dict[str, Any]) -> int:
    return sum(1 for step in scored["steps"] if step.get("trainable", True))
