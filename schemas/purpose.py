"""What an event's ``purpose`` mark means: the one rule of what counts as evaluation.

The orchestrator copies a run's purpose onto every inference request and trajectory of its
episodes; the policy worker decodes evaluation greedily, and the filter and the learner keep it
out of training.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def is_eval(record: Mapping[str, Any]) -> bool:
    """Whether a record is marked held out; anything not marked "train" counts as held out, so
    an unknown purpose can never leak into training. Events written before purposes existed
    decode as "train"."""
    return (record.get("purpose") or "train") != "train"
