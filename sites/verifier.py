"""The deterministic verifier of practice-web tasks: facts in the answer, required pages visited,
and no credit for answers that game the fact check.

:func:`verify` takes a task, a final answer and the visited URLs and returns a :class:`Verdict`.
Reward is 1.0 only when no rule refuses the answer (:func:`length_refusal`,
:func:`catalogue_refusal`), every fact of every group is satisfied (:func:`contains_fact`) and
every required path was visited (:func:`verify`); otherwise 0, and a refusal is named in every
fact's rationale. Pure and deterministic: the same arguments always give the same verdict.
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import unquote, urlsplit

from sites.data import Site, generate_sites

JUDGE_NAME = "practice-web-verifier"
# 2: the length, candidate and copy rules.
JUDGE_VERSION = "2"
# The length rule's constants. Measured on the tasks of ``generate_tasks`` for seeds 0 to 5:
# LENGTH_SLACK = 150 is more than the longest easy or medium instruction (140 characters), so a
# short answer may restate the whole question around its facts; LENGTH_FACTOR = 2 lets the long
# multi-fact answers of hard tasks (84 to 257 characters) be rewritten in full sentences. The
# shortest solution page of a generated task shows more than 600 characters of text, at least
# 3.9 times its definite answer, so no page dump fits.
LENGTH_FACTOR = 2
LENGTH_SLACK = 150
# The copy rule's limit: the definite answers of the generated tasks name no other value.
MAX_OTHER_VALUES = 2

_APOSTROPHES = re.compile(r"['’‘`´]")
_CURRENCY = re.compile(r"[$€£¥]")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_DECIMAL_ZEROS = re.compile(r"(\d)\.(\d*?)0+(?!\d)")
_MINUTES = re.compile(r"\b(?:minutes?|mins)\b")
_SEPARATORS = re.compile(r"[,;!?()\[\]{}\"“”«»*_|•·…\-–—/\\]")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SMALL_NUMBER = re.compile(r"\d{1,2}")


def normalise(text: str) -> str:
    """The comparable form of a fact, an answer or a page's text.

    The same on both sides: Unicode NFKC and casefold; currency symbols and thousands separators
    dropped and trailing decimal zeros trimmed (``"$1,299.00"``, ``"1299.00"`` and ``"$1299"``
    all read ``1299``); "minutes"/"mins" read "min"; hyphens, apostrophes and list punctuation
    dropped; whitespace collapsed. Dates must be written as the page shows them.
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _APOSTROPHES.sub("", text)
    text = _CURRENCY.sub("", text)
    text = _THOUSANDS.sub("", text)
    text = _DECIMAL_ZEROS.sub(lambda m: m[1] + ("." + m[2] if m[2] else ""), text)
    text = _MINUTES.sub("min", text)
    text = _SEPARATORS.sub(" ", text)
    return " ".join(text.split())


def _whole(needle: str) -> str:
    """A pattern for the normalised ``needle`` as whole words, not part of a longer number."""
    return rf"(?<!\w)(?<!\d\.){re.escape(needle)}(?!\w)(?!\.\d)"


def _occurs(needle: str, text: str) -> bool:
    """Whether the normalised ``needle`` occurs in the normalised ``text`` as whole words."""
    # The substring test first: most candidates are absent, and it is far cheaper than a regex.
    return needle in text and re.search(_whole(needle), text) is not None


def contains_fact(answer: str, fact: str) -> bool:
    """Whether the normalised ``fact`` occurs as whole words in the normalised ``answer``
    (``"12"`` is not found in ``"112"`` nor in ``"4.12"``)."""
    needle = normalise(fact)
    if not needle:
        return False
    return re.search(_whole(needle), normalise(answer)) is not None


def _collapsed_length(text: str) -> int:
    return len(" ".join(text.split()))


def answer_length_limit(definite_answer: str) -> int:
    """The most characters an answer may have: ``max(LENGTH_FACTOR * n, n + LENGTH_SLACK)``.

    ``n`` is the length of ``definite_answer``; both lengths count a run of whitespace as one
    space. See the comment above ``LENGTH_FACTOR`` for why these constants.
    """
    n = _collapsed_length(definite_answer)
    return max(LENGTH_FACTOR * n, n + LENGTH_SLACK)


def length_refusal(answer: str, definite_answer: str | None) -> str | None:
    """Why the length rule refuses ``answer``, or None when it does not (or there is no
    definite answer to measure against). The reason names the rule and both numbers.

    Because a fact only has to *occur* in the answer, an answer that pastes a whole page, or
    lists every value of the listing, would contain every fact. Three rules refuse such answers
    (reward 0, and every fact's rationale names the rule, so ``webgym rescore`` and replay show
    why): this length rule (:func:`answer_length_limit`; a task without a definite answer has no
    limit), and the candidate and copy rules (:func:`catalogue_refusal`).
    """
    if not definite_answer or not definite_answer.strip():
        return None
    length, limit = _collapsed_length(answer), answer_length_limit(definite_answer)
    if length <= limit:
        return None
    n = _collapsed_length(definite_answer)
    return (
        f"length rule: the answer has {length} characters, over the limit of {limit} "
        f"(max({LENGTH_FACTOR} x {n}, {n} + {LENGTH_SLACK}) for a definite answer of {n})"
    )


def _shown_values(text: str) -> list[str]:
    """A shown value and, for a list-valued one ("Gym, Pool, Spa"), each of its elements."""
    parts = [part.strip() for part in text.split(", ")] if ", " in text else []
    return [text, *parts]


@dataclass(frozen=True)
class Catalogue:
    """What one site shows about its items, normalised: the candidates an answer could name
    instead of a fact. ``fields`` maps a field ("Price", "Colour", the item name...) to the values
    items show for it; ``items`` maps each item's normalised name to all its values. Build it
    with :meth:`of`."""

    hostname: str
    site_name: str
    town: str
    fields: dict[str, frozenset[str]]
    items: dict[str, frozenset[str]]
    values: tuple[str, ...]  # every value any item shows, in any field, longest first

    @classmethod
    def of(cls, site: Site) -> Catalogue:
        spec = site.spec
        fields: dict[str, set[str]] = {}
        items: dict[str, frozenset[str]] = {}
        for item in site.items:
            shown = [
                (f"{spec.noun} name", item.name),
                (spec.category_label, item.category),
                (spec.value_label, item.value_text),
                *item.fields,
            ]
            if item.rating is not None:
                shown.append(("Rating", f"{item.rating:.1f}"))
            values: set[str] = set()
            for label, text in shown:
                for shown_value in _shown_values(text):
                    value = normalise(shown_value)
                    if value:
                        fields.setdefault(label, set()).add(value)
                        values.add(value)
            items[normalise(item.name)] = frozenset(values)
        return cls(
            hostname=site.hostname,
            site_name=normalise(site.name),
            town=normalise(site.town),
            fields={label: frozenset(values) for label, values in fields.items()},
            items=items,
            values=tuple(sorted(frozenset().union(*items.values()), key=lambda v: (-len(v), v))),
        )

    def fields_of(self, value: str) -> list[str]:
        """The fields whose shown values include the normalised ``value``, sorted."""
        return sorted(label for label, values in self.fields.items() if value in values)

    def subjects(self, text: str) -> list[str]:
        """The normalised names of the items that the normalised ``text`` names."""
        return [name for name in self.items if _occurs(name, text)]


def _strike(text: str, phrases: Iterable[str]) -> str:
    """``text`` with every whole-word occurrence of ``phrases`` replaced by a mark, longest
    first, so that a shorter candidate is not found inside a longer phrase that was said."""
    for phrase in sorted({p for p in phrases if p and p in text}, key=len, reverse=True):
        text = re.sub(_whole(phrase), " # ", text)
    return text


def _listed(values: list[str]) -> str:
    shown = ", ".join(repr(value) for value in values[:5])
    return shown + (f" and {len(values) - 5} more" if len(values) > 5 else "")


def catalogue_refusal(task: dict[str, Any], answer: str, catalogue: Catalogue) -> str | None:
    """Why the candidate rule or the copy rule refuses ``answer`` to ``task``, or None. The
    reason names the rule, the field and the values the answer names.

    - **Candidate rule** (applied when the site's :class:`Catalogue` is given): for every field a
      fact of the task belongs to (name, price, rating, colour...: the fields whose shown value,
      on some item of the site, equals the fact), the answer may name no other value of that
      field from the site's catalogue: "$12.99, $15.49 or $19.00" and "Alder Kettle $12.99;
      Birch Kettle $14.49" get 0 where "Alder Kettle, $12.99" passes. A value of that kind counts
      even when the item the task is about shows it in another field (asked the total time,
      "130 minutes, 20 of them prep" names two times); its other values do not.
    - **Copy rule**: the answer may name at most ``MAX_OTHER_VALUES`` (2) values of any field
      shown on the site besides the facts: "$12.99, red, 14 left" passes, the item's table of
      fields pasted whole (3 or more) and most page excerpts that fit the length rule get 0. The
      definite answers of the generated tasks name none.

    Both rules ignore the facts themselves, the site's name and town, values the instruction
    contains, values of one or two digits (copy rule only: servings, bedrooms), and numbers that
    stand inside a longer value of an item the task is about (an answer may say "14 left" though
    another product costs $14.00).
    """
    facts = {normalise(f) for group in task["evaluator_reference"] for f in group["facts"]}
    facts.discard("")
    instruction = normalise(task.get("task_name") or "")
    about = " ".join(
        [instruction, *(normalise(g.get("description") or "") for g in task["evaluator_reference"])]
        + sorted(facts)
    )
    subjects = catalogue.subjects(about)
    # A number inside a longer value of an item the task is about ("in stock 14 left") may be
    # quoted alone; it is that item's, not a candidate price "$14.00".
    quoted = {
        number
        for name in subjects
        for value in catalogue.items[name]
        if not _NUMBER.fullmatch(value)
        for number in _NUMBER.findall(value)
    }
    rest = _strike(normalise(answer), facts | {catalogue.site_name, catalogue.town})

    def counts(value: str) -> bool:
        return value not in facts and value not in quoted and not _occurs(value, instruction)

    asked = sorted({label for fact in facts for label in catalogue.fields_of(fact)})
    candidates = frozenset().union(*(catalogue.fields[label] for label in asked))
    # The items' other values are context, read as whole phrases (the type "Theatre" inside the
    # venue "The Juniper Theatre" is not named); one that is itself a candidate ("140 minutes"
    # cook time, asked the total time) is named like any other. Longest first, so a phrase is
    # read once, as the longest value it spells.
    context = {v for name in subjects for v in catalogue.items[name]} - candidates
    named, text = set(), rest
    for value in sorted(context | candidates, key=lambda v: (-len(v), v)):
        if _occurs(value, text):
            if value in candidates and counts(value):
                named.add(value)
            text = _strike(text, [value])
    problems = []
    for label in asked:
        others = sorted(named & catalogue.fields[label])
        if others:
            problems.append(f"{len(others)} other {label} value(s) of the site ({_listed(others)})")
    if problems:
        return (
            "candidate rule: besides the facts the answer names "
            + "; ".join(problems)
            + ": listing candidates earns no credit"
        )
    copied = []
    for value in catalogue.values:  # longest first: "The Juniper Theatre" is one value, not two
        if _occurs(value, rest):
            # Values that one or two digits spell are everywhere (servings, bedrooms): no sign.
            if counts(value) and not _SMALL_NUMBER.fullmatch(value):
                copied.append(value)
            rest = _strike(rest, [value])
    if len(copied) > MAX_OTHER_VALUES:
        return (
            f"copy rule: the answer names {len(copied)} values shown on the site that are not "
            f"facts of the task ({_listed(sorted(copied))}), more than {MAX_OTHER_VALUES}: "
            "copying a page's values earns no credit"
        )
    return None


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
    """Whether ``required`` was visited on ``host``: a visited path matches a required one when
    equal to it or below it (``/products`` matches ``/products/kettle``)."""
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


def verify(
    task: dict[str, Any],
    final_answer: str | None,
    visited_urls: list[str],
    catalogue: Catalogue | None = None,
) -> Verdict:
    """Score one answer to one task.

    Reward is 1.0 only when no rule refuses the answer, every fact of every group is satisfied
    (:func:`contains_fact`) and every path in the task's ``extra_json["required_paths"]`` was
    visited on the task's host (:func:`_path_visited`). The candidate rule applies only with the
    ``catalogue`` of the task's site (:meth:`SiteCatalogues.for_task` finds it); the length rule
    always does.
    """
    answer = (final_answer or "").strip()
    refusal = None
    if answer:
        refusal = length_refusal(answer, task.get("definite_answer"))
        if refusal is None and catalogue is not None:
            refusal = catalogue_refusal(task, answer, catalogue)
    verdicts = []
    for group in task["evaluator_reference"]:
        for fact in group["facts"]:
            if not answer:
                satisfied, rationale = False, "no final answer"
            elif refusal is not None:
                # A refused answer is never matched: a page dump "contains" every fact.
                rationale = f"{fact!r} not credited: answer refused by the {refusal}"
                satisfied = False
            elif contains_fact(answer, fact):
                satisfied, rationale = True, f"{fact!r} is in the answer"
            else:
                satisfied, rationale = False, f"{fact!r} is not in the answer"
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
    elif refusal is not None:
        problems.append(f"answer refused by the {refusal}")
    elif missing:
        facts = "; ".join(f"{v['fact_group_id']}: {v['fact']!r}" for v in missing)
        problems.append(f"{len(missing)} of {len(verdicts)} facts missing ({facts})")
    if unvisited:
        problems.append(f"required pages not visited on {host}: {', '.join(unvisited)}")
    if problems:
        return Verdict(0.0, verdicts, "; ".join(problems))
    reason = f"all {len(verdicts)} facts found and all {len(required)} required pages visited"
    return Verdict(1.0, verdicts, reason)


class SiteCatalogues:
    """Finds the :class:`Catalogue` of the site a practice-web task was generated on.

    The sites are a pure function of their seed, and a site's place in
    ``generate_sites(seed, count)`` does not depend on ``count``; so the sites of the task's
    ``extra_json["seed"]`` are generated (64, then twice as many, up to ``max_sites``) until one
    has the task's ``site_id``. That assumes the task set's seed is its sites' seed, as every
    generator here does; the task itself confirms it (the site's hostname is the task's website,
    and its instruction names the site or the task names one of the site's items), else there is
    no catalogue. Results, misses
    included, are kept for the life of this object; safe to call from several threads.
    """

    def __init__(self, max_sites: int = 1024):
        if max_sites < 1:
            raise ValueError(f"max_sites must be at least 1, got {max_sites}")
        self.max_sites = max_sites
        self._sites: dict[int, tuple[int, dict[str, Site]]] = {}
        self._catalogues: dict[tuple[int, str], Catalogue | None] = {}
        # Generating sites takes a fraction of a second per 100: once per seed, not per caller.
        self._lock = threading.Lock()

    def for_task(self, task: dict[str, Any]) -> Catalogue | None:
        """The catalogue of ``task``'s site, or None when the task is not a practice-web task
        whose site can be found and confirmed (see the class docstring)."""
        try:
            extra = json.loads(task.get("extra_json") or "{}")
        except json.JSONDecodeError:
            return None
        site_id, seed = extra.get("site_id"), extra.get("seed")
        if extra.get("source") != "practice-web" or not isinstance(site_id, str):
            return None
        if not isinstance(seed, int):
            return None
        with self._lock:
            key = (seed, site_id)
            if key not in self._catalogues:
                site = self._site(seed, site_id)
                self._catalogues[key] = Catalogue.of(site) if site is not None else None
            catalogue = self._catalogues[key]
        if catalogue is None or _host(task.get("website") or "") != catalogue.hostname:
            return None
        if _occurs(catalogue.site_name, normalise(task.get("task_name") or "")):
            return catalogue
        text = " ".join(
            [normalise(task.get("task_name") or "")]
            + [normalise(g.get("description") or "") for g in task["evaluator_reference"]]
            + [normalise(f) for g in task["evaluator_reference"] for f in g["facts"]]
        )
        return catalogue if catalogue.subjects(text) else None

    def _site(self, seed: int, site_id: str) -> Site | None:
        count, by_id = self._sites.get(seed, (0, {}))
        while site_id not in by_id and count < self.max_sites:
            count = min(self.max_sites, max(64, 2 * count))
            by_id = {site.site_id: site for site in generate_sites(seed=seed, count=count)}
            self._sites[seed] = (count, by_id)
        return by_id.get(site_id)
