"""Points in time as users write them: ``--since 10m``, ``--since 2026-11-30T01:00``."""

from __future__ import annotations

import datetime
import re
import time

from analytics.errors import AnalyticsError

UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(text: str | None, now_s: float | None = None) -> int | None:
    """Epoch milliseconds for ``text``: a duration ago (``90s``, ``10m``, ``2h``, ``1d``) or an
    ISO 8601 time (UTC unless it names a zone); None for None (from the start of the log)."""
    if text is None or not text.strip():
        return None
    text = text.strip()
    now_s = time.time() if now_s is None else now_s
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd])", text)
    if match:
        return int((now_s - float(match.group(1)) * UNITS_S[match.group(2)]) * 1000)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise AnalyticsError(
            f"cannot read the time {text!r}: write a duration ago (90s, 10m, 2h, 1d) or an ISO "
            "time (2026-11-30T01:00, UTC unless a zone is given)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)
