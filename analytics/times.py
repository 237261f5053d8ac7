"""Points in time as users write them: ``--since 10m``, ``--since 2026-11-30T01:00``."""

from __future__ import annotations

import datetime
import re
import time

from analytics.errors import AnalyticsError

_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?\s*(?:ms|s|m|h|d|w)\s*)+")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
HELP = (
    "an ISO time (2026-11-30T14:05, UTC unless it ends in Z or +hh:mm) or how long ago "
    "(90s, 10m, 2h, 1d, 1h30m)"
)


def parse_since(
    text: str | None, now_s: float | None = None, flag: str = "--since", past: bool = False
) -> int | None:
    """Epoch milliseconds for ``text``: how long ago (``90s``, ``10m``, ``2h``, ``1d``,
    ``1h30m``) or an ISO 8601 time (UTC unless it names a zone, as the log's timestamps are);
    None for None or blank (from the start of the log). With ``past``, a future time is refused.
    Errors are AnalyticsErrors that name ``flag`` and say what is accepted."""
    if text is None or not text.strip():
        return None
    text = text.strip()
    now_s = time.time() if now_s is None else now_s
    if _DURATION.fullmatch(text.lower()):
        ago_s = sum(float(n) * _UNIT_S[unit] for n, unit in _PART.findall(text.lower()))
        return int((now_s - ago_s) * 1000)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise AnalyticsError(
            f"{flag} {text!r} is neither a time nor a duration: give {HELP}; a duration ago "
            "counts back from now"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    at_ms = int(moment.timestamp() * 1000)
    if past and at_ms > now_s * 1000:
        raise AnalyticsError(
            f"{flag} {text!r} is in the future ({moment:%Y-%m-%d %H:%M:%S %Z}); give a past "
            "time, or drop it to start at offset 0"
        )
    return at_ms
