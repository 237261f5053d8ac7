"""Form specifications, server-side validation and confirmation references.

Guarantees: :func:`validate` is pure; the cleaned values it returns are canonical (whitespace
trimmed, emails lower-cased, numbers without leading zeros), so :func:`reference` gives the same
reference for the same submission however it was typed. References depend on nothing but the
site, the form and the cleaned values: a task can know the reference before anyone submits.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")
POSTCODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 -]{2,9}$")
MAX_TEXT = 200
MAX_TEXTAREA = 2000


@dataclass(frozen=True)
class FieldSpec:
    """One form field. ``low``/``high`` bound numbers (ints) or dates (ISO strings)."""

    name: str
    label: str
    kind: str = "text"  # text, email, int, date, select, textarea, postcode
    required: bool = True
    low: int | str | None = None
    high: int | str | None = None
    options: tuple[str, ...] = ()
    hint: str = ""


@dataclass(frozen=True)
class FlowSpec:
    """A domain's multi-step flow on one item: form, review, confirmation.

    ``multiplier`` names the int field that multiplies the item's value into a total (nights,
    tickets); ``None`` when the flow has no price.
    """

    path: str  # URL segment: /{path}/{slug}, /{path}/{slug}/review, /{path}/{slug}/confirmed
    button: str  # the call to action on the detail page
    title: str
    review_title: str
    done_title: str
    reference_label: str
    fields: tuple[FieldSpec, ...]
    multiplier: str | None = None
    total_label: str = "Total"


def _date(text: str) -> datetime.date | None:
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return None
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        return None


def show_date(day: datetime.date) -> str:
    """The one date format of the practice web, e.g. ``4 May 2026``."""
    return f"{day.day} {day:%B %Y}"


def _check(field: FieldSpec, raw: str) -> tuple[str, str | None]:
    """(cleaned value, error message or None) for one field."""
    value = " ".join(raw.split()) if field.kind != "textarea" else raw.strip()
    if not value:
        return "", f"{field.label} is required." if field.required else None
    if field.kind == "email":
        value = value.lower()
        if not EMAIL.match(value):
            return value, f"{field.label} must look like name@example.com."
    elif field.kind == "int":
        if not re.fullmatch(r"[+-]?\d{1,9}", value):
            return value, f"{field.label} must be a whole number."
        number = int(value)
        value = str(number)
        if (field.low is not None and number < int(field.low)) or (
            field.high is not None and number > int(field.high)
        ):
            return value, f"{field.label} must be between {field.low} and {field.high}."
    elif field.kind == "date":
        day = _date(value)
        if day is None:
            return value, f"{field.label} must be a real date written as YYYY-MM-DD."
        low = datetime.date.fromisoformat(str(field.low)) if field.low else None
        high = datetime.date.fromisoformat(str(field.high)) if field.high else None
        if (low and day < low) or (high and day > high):
            return value, (
                f"{field.label} must be between {show_date(low or day)} "
                f"and {show_date(high or day)}."
            )
    elif field.kind == "select":
        if value not in field.options:
            return value, f"Choose one of the options for {field.label}."
    elif field.kind == "postcode":
        value = value.upper()
        if not POSTCODE.match(value):
            return value, f"{field.label} must be 3 to 10 letters, digits or spaces."
    limit = MAX_TEXTAREA if field.kind == "textarea" else MAX_TEXT
    if len(value) > limit:
        return value[:limit], f"{field.label} must be at most {limit} characters."
    return value, None


def validate(
    fields: tuple[FieldSpec, ...], data: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """(cleaned values, error message by field name); no errors means the submission is valid."""
    cleaned: dict[str, str] = {}
    problems: dict[str, str] = {}
    for field in fields:
        value, error = _check(field, data.get(field.name, ""))
        cleaned[field.name] = value
        if error:
            problems[field.name] = error
    return cleaned, problems


def reference(prefix: str, site_id: str, form_id: str, values: Mapping[str, str]) -> str:
    """A deterministic confirmation reference like ``BK-4F7A2C91`` for one submission."""
    payload = json.dumps([site_id, form_id, sorted(values.items())], ensure_ascii=False)
    digest = hashlib.sha256(payload.encode()).hexdigest()[:8].upper()
    return f"{prefix}-{digest}"
