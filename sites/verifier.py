"""The deterministic verifier of practice-web tasks: facts in the answer, required pages visited.

A fact is satisfied when its normalised text occurs in the normalised final answer as whole
words (``"12"`` is not found in ``"112"`` nor in ``"4.12"``). Normalisation, the same on both
sides: Unicode NFKC and casefold; currency symbols and thousands separators dropped and trailing
decimal zeros trimmed (``"$1,299.00"``, ``"1299.00"`` and ``"$1299"`` all read ``1299``);
"minutes"/"mins" read "min"; hyphens, apostrophes and list punctuation dropped; whitespace
collapsed. Dates must be written as the page shows them.

Reward is 1.0 only when every fact of every group is satisfied and every path in the task's
``extra_json["required_paths"]`` was visited on the task's host (a visited path matches a
required one when equal to it or below it: ``/products`` matches ``/products/kettle``). Pure and
deterministic: the same arguments always give the same verdict.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import unquote, urlsplit

JUDGE_NAME = "practice-web-verifier"
JUDGE_VERSION = "1"

_APOSTROPHES = re.compile(r"['’‘`´]")
_CURRENCY = re.compile(r"[$€£¥]")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_DECIMAL_ZEROS = re.compile(r"(\d)\.(\d*?)0+(?!\d)")
_MINUTES = re.compile(r"\b(?:minutes?|mins)\b")
_SEPARATORS = re.compile(r"[,;!?()\[\]{}\"“”«»*_|•·…\-–—/\\]")


def normalise(text: str) -> str:
    """The comparable form of a fact, an answer or a page's text (see the module docstring)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _APOSTROPHES.sub("", text)
    text = _CURRENCY.sub("", text)
    text = _THOUSANDS.sub("", text)
    text = _DECIMAL_ZEROS.sub(lambda m: m[1] + ("." + m[2] if m[2] else ""), text)
    text = _MINUTES.sub("min", text)
    text = _SEPARATORS.sub(" ", text)
    return " ".join(text.split())


def contains_fact(answer: str, fact: str) -> bool:
    """Whether the normalised ``fact`` occurs as whole words in the normalised ``answer``."""
    needle = normalise(fact)
    if not needle:
        return False
    pattern = rf"(?<!\w)(?<!\d\.){re.escape(needle)}(?!\w)(?!\.\d)"
    return re.search(pattern, normalise(answer)) is not None


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script"):
            self._skip += 1
        elif tag == "input":
            # Form values are shown to the user, so they count as page text.
            value = dict(attrs).get("value")
            if value and dict(attrs).get("type") != "hidden":
                self.parts.append(value)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def visible_text(html: str) -> str:
    """The text a person reads on a page (no markup, styles or scripts), space-separated."""
    extractor = _TextExtractor()
    extractor.feed(html)
    extractor.close()
    return " ".join(" ".join(extractor.parts).split())


@dataclass(frozen=True)
class Verdict:
    """``verdicts`` are ``FactVerdict`` records of the scored_trajectory schema."""

    reward: float
    verdicts: list[dict[str, Any]]
    reason: str


def _path_visited(required: str, host: str, visited_urls: list[str]) -> bool:
    required = "/" + required.strip("/")
    for visited in visited_urls:
        parts = urlsplit(visited)
        if (parts.hostname or "") != host:
            continue
        path = "/" + unquote(parts.path).strip("/")
        if required == "/" or path == required or path.startswith(required + "/"):
            return True
    return False


def _host(website: str) -> str:
    return (urlsplit(website).hostname if "://" in website else website).lower().rstrip(".")


def verify(task: dict[str, Any], final_answer: str | None, visited_urls: list[str]) -> Verdict:
    """Score one answer to one task; see the module docstring for the rules."""
    answer = (final_answer or "").strip()
    verdicts = []
    for group in task["evaluator_reference"]:
        for fact in group["facts"]:
            satisfied = bool(answer) and contains_fact(answer, fact)
            if not answer:
                rationale = "no final answer"
            elif satisfied:
                rationale = f"{fact!r} is in the answer"
            else:
                rationale = f"{fact!r} is not in the answer"
            verdicts.append(
                {
                    "fact_group_id": group["id"],
                    "fact": fact,
                    "satisfied": satisfied,
                    "rationale": rationale,
                }
            )
    required = json.loads(task.get("extra_json") or "{}").get("required_paths", [])
    host = _host(task["website"])
    unvisited = [path for path in required if not _path_visited(path, host, visited_urls)]
    missing = [v for v in verdicts if not v["satisfied"]]
    problems = []
    if not answer:
        problems.append("no final answer")
    elif missing:
        facts = "; ".join(f"{v['fact_group_id']}: {v['fact']!r}" for v in missing)
        problems.append(f"{len(missing)} of {len(verdicts)} facts missing ({facts})")
    if unvisited:
        problems.append(f"required pages not visited on {host}: {', '.join(unvisited)}")
    if problems:
        return Verdict(0.0, verdicts, "; ".join(problems))
    reason = f"all {len(verdicts)} facts found and all {len(required)} required pages visited"
    return Verdict(1.0, verdicts, reason)
