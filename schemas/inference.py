"""Why an inference event has no action, read the same way from every schema version.

Since inference v5 a backend that gave no reply (it failed, timed out, or could not load the
pinned version) is recorded in ``backend_error`` and ``parse_error`` is left empty. Events
written before v5 carried it in ``parse_error`` behind the prefix ``backend error: ``; these
readers take both apart, so no reader looks at the prefix itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LEGACY_BACKEND_ERROR_PREFIX = "backend error: "  # only in parse_error of events before v5


def backend_error(record: Mapping[str, Any]) -> str | None:
    """The backend's error when it gave no reply, else None."""
    if record.get("backend_error") is not None:
        return record["backend_error"]
    legacy = record.get("parse_error")
    if legacy is not None and legacy.startswith(LEGACY_BACKEND_ERROR_PREFIX):
        return legacy[len(LEGACY_BACKEND_ERROR_PREFIX) :]
    return None


def parse_error(record: Mapping[str, Any]) -> str | None:
    """Why the model's reply did not parse, else None (a backend error is not a parse error)."""
    error = record.get("parse_error")
    if error is None or error.startswith(LEGACY_BACKEND_ERROR_PREFIX):
        return None
    return error


def no_action_reason(record: Mapping[str, Any]) -> str | None:
    """For people: why the step has no action (``backend error: ...`` or the parse error)."""
    failed = backend_error(record)
    if failed is not None:
        return f"backend error: {failed}"
    return parse_error(record)
