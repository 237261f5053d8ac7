"""Tasks about the practice web, as records of the ``task`` Avro schema, with rubrics from ground
truth.

Guarantees of :func:`generate_tasks`: a pure function of its arguments (one seeded ``Random`` per
site; ``ts`` is the practice web's fixed "today", not the clock); task ids are unique and stable;
every fact is a string shown verbatim on a page of ``extra_json["solution_urls"]`` (listing and
detail pages, or the confirmation page a form flow ends on, whose reference is a hash of the
inputs the instruction dictates); ``definite_answer`` passes :func:`sites.verifier.verify` once
the pages of ``extra_json["required_paths"]`` are visited. Every answer is unambiguous: a
superlative is only asked where no tie exists. Every task carries its task set
(:func:`task_set_name`).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from random import Random
from typing import Any

from schemas.difficulty import DIFFICULTIES
from schemas.event_ids import task_event_id
from sites import vocab as v
from sites.cart import CHECKOUT_FIELDS, encode_cart, order_reference, order_total
from sites.catalogues import BOOKABLE_FROM, Item
from sites.data import Site
from sites.flows import flow_reference, flow_total
from sites.forms import FieldSpec, validate
from sites.layout import url

TASK_SET_PREFIX = "practice-web"
# Tasks carry the practice web's "today" as their timestamp: generation never reads the clock.
TASK_TS = int(datetime.datetime(2026, 6, 1, tzinfo=datetime.UTC).timestamp() * 1000)


@dataclass
class Draft:
    """A task before it becomes a record: the instruction, its rubric and where to find it."""

    instruction: str
    groups: list[dict[str, Any]]
    answer: str
    required_paths: list[str]
    solution_urls: list[str]
    template: str
    subdomain: str
    extra: dict[str, Any] = field(default_factory=dict)


def _group(number: int, description: str, facts: Iterable[str]) -> dict[str, Any]:
    unique = list(dict.fromkeys(facts))  # a fact stated twice is still one fact
    return {"id": f"g{number}", "description": description, "facts": unique}


def _label(text: str) -> str:
    return text if text.isupper() else text.lower()


def _facts_of(value: str) -> list[str]:
    """A list-valued field ("Photo ID, Payslip") is one fact per element."""
    return [part.strip() for part in value.split(", ")] if ", " in value else [value]


def _pick(rng: Random, items: Iterable[Item], used: set[str]) -> Item:
    pool = [item for item in items if item.slug not in used] or list(items)
    item = rng.choice(pool)
    used.add(item.slug)
    return item


def _quoted(site: Site, item: Item) -> str:
    return f'the {site.spec.noun} "{item.name}"'


# Easy: one fact on one detail page.


def _easy(site: Site, rng: Random, variant: int, used: set[str]) -> Draft:
    spec = site.spec
    item = _pick(rng, site.items, used)
    kind = ("value", "field", "category")[(variant + rng.randrange(3)) % 3]
    if kind == "value":
        label, facts = spec.value_label, [item.value_text]
        instruction = f"What is the {_label(label)} of {_quoted(site, item)} on {site.name}?"
    elif kind == "field":
        label = rng.choice(spec.askable)
        facts = _facts_of(item.field(label))
        instruction = f"On {site.name}, what is the {_label(label)} of {_quoted(site, item)}?"
    else:
        label, facts = spec.category_label, [item.category]
        instruction = f"On {site.name}, in which {_label(label)} is {_quoted(site, item)} listed?"
    path = site.item_path(item)
    return Draft(
        instruction,
        [_group(1, f"{label} of {item.name}", facts)],
        ", ".join(facts),
        [path],
        [path],
        f"easy-{kind}",
        item.category,
    )


# Medium: a filter or sort of the listing, then the detail page.


def _extreme(items: list[Item], key: Callable[[Item], float], highest: bool) -> Item | None:
    """The item with the lowest (highest) key, or None when two share it."""
    ordered = sorted(items, key=key, reverse=highest)
    if len(ordered) > 1 and key(ordered[0]) == key(ordered[1]):
        return None
    return ordered[0] if ordered else None


def _medium(site: Site, rng: Random, variant: int, used: set[str]) -> Draft:
    spec = site.spec
    categories = list(site.categories)
    rng.shuffle(categories)
    by_rating = spec.rating_scale is not None and variant % 2 == 1
    plans = [("rating", True)] if by_rating else []
    first = rng.random() < 0.5
    plans += [("value", first), ("value", not first)]
    for what, highest in plans:
        for category in categories:
            members = [item for item in site.items if item.category == category]
            if what == "rating":
                item = _extreme(members, lambda item: item.rating or 0, True)
            else:
                item = _extreme(members, lambda item: item.value, highest)
            if item is not None and item.slug not in used:
                used.add(item.slug)
                return _medium_draft(site, item, what, highest)
    return _two_fields(site, rng, used)


def _medium_draft(site: Site, item: Item, what: str, highest: bool) -> Draft:
    spec = site.spec
    where = f'in the {_label(spec.category_label)} "{item.category}"'
    if what == "rating":
        instruction = (
            f"On {site.name}, which {spec.noun} {where} has the best rating? "
            "Give its name and its rating."
        )
        second = _group(2, f"rating of {item.name}", [f"{item.rating:.1f}"])
        sort = "rating"
        answer = f"{item.name}, rated {item.rating:.1f}"
    else:
        superlative = spec.superlatives[highest]
        instruction = (
            f"On {site.name}, find the {superlative} {spec.noun} {where} "
            f"(by {_label(spec.value_label)}) and give its name and {_label(spec.value_label)}."
        )
        second = _group(2, f"{spec.value_label} of {item.name}", [item.value_text])
        sort = "value_desc" if highest else "value_asc"
        answer = f"{item.name}, {item.value_text}"
    listing = url(site.listing_path, category=item.category, sort=sort)
    return Draft(
        instruction,
        [_group(1, f"name of the {spec.noun}", [item.name]), second],
        answer,
        [site.listing_path, site.item_path(item)],
        [listing, site.item_path(item)],
        f"medium-{what}",
        item.category,
    )


def _two_fields(site: Site, rng: Random, used: set[str]) -> Draft:
    """The fallback when every category ties: two facts of one detail page."""
    spec = site.spec
    item = _pick(rng, site.items, used)
    label = rng.choice(spec.askable)
    instruction = (
        f"On {site.name}, find {_quoted(site, item)} and give its {_label(spec.value_label)} "
        f"and its {_label(label)}."
    )
    groups = [
        _group(1, f"{spec.value_label} of {item.name}", [item.value_text]),
        _group(2, f"{label} of {item.name}", _facts_of(item.field(label))),
    ]
    path = site.item_path(item)
    answer = f"{item.value_text}; {item.field(label)}"
    return Draft(instruction, groups, answer, [path], [path], "medium-fields", item.category)


# Hard: the whole catalogue, or a whole form flow.


def _top_three(site: Site, rng: Random, used: set[str]) -> Draft | None:
    spec = site.spec
    first = rng.random() < 0.5
    for highest in (first, not first):
        ordered = sorted(site.items, key=lambda item: item.value, reverse=highest)
        if len(ordered) < 4 or ordered[2].value == ordered[3].value:
            continue
        top = ordered[:3]
        superlative = spec.superlatives[highest]
        label = next((x for x in spec.askable if ", " not in top[0].field(x)), spec.askable[0])
        instruction = (
            f"On {site.name}, list the three {superlative} {spec.plural} of the whole catalogue "
            f"(by {_label(spec.value_label)}) with their {_label(spec.value_label)}, and give "
            f"the {_label(label)} of the {superlative} one."
        )
        groups = [
            _group(1, f"the three {superlative} {spec.plural}", [item.name for item in top]),
            _group(2, f"their {spec.value_label}", [item.value_text for item in top]),
            _group(3, f"{label} of {top[0].name}", _facts_of(top[0].field(label))),
        ]
        answer = "; ".join(f"{item.name}: {item.value_text}" for item in top)
        answer += f". {label} of {top[0].name}: {top[0].field(label)}"
        listing = url(site.listing_path, sort="value_desc" if highest else "value_asc")
        used.update(item.slug for item in top)
        return Draft(
            instruction,
            groups,
            answer,
            [site.listing_path, site.item_path(top[0])],
            [listing, site.item_path(top[0])],
            "hard-top-three",
            top[0].category,
        )
    return None


def _person(rng: Random) -> tuple[str, str]:
    first, last = rng.choice(v.PEOPLE_FIRST), rng.choice(v.PEOPLE_LAST)
    return f"{first} {last}", f"{first}.{last}@example.com".lower()


def _postcode(rng: Random) -> str:
    letters = "ABCDEFGHJKLMNPRSTUWXYZ"
    return (
        f"{rng.choice(letters)}{rng.choice(letters)}{rng.randint(1, 9)} "
        f"{rng.randint(1, 9)}{rng.choice(letters)}{rng.choice(letters)}"
    )


def _input(spec: FieldSpec, rng: Random, site: Site, item: Item, person: tuple[str, str]) -> str:
    """A valid value for one form field, as the instruction dictates it."""
    if spec.name == "name":
        return person[0]
    if spec.kind == "email":
        return person[1]
    if not spec.required:
        return ""  # the instruction says to leave optional fields empty
    if spec.name == "age":
        return str(rng.randint(25, 70))
    if spec.kind == "int":
        low = int(spec.low or 0)
        return str(rng.randint(max(low, 1), min(int(spec.high or 9), max(low, 1) + 3)))
    if spec.kind == "date":
        if spec.name == "birth_date":
            return datetime.date(
                rng.randint(1950, 2000), rng.randint(1, 12), rng.randint(1, 28)
            ).isoformat()
        return (BOOKABLE_FROM + datetime.timedelta(days=rng.randint(7, 200))).isoformat()
    if spec.kind == "postcode":
        return _postcode(rng)
    if spec.kind == "textarea":
        return f"Thank you for the piece about {item.name.lower()}"
    if spec.name == "town":
        return site.town
    return f"{rng.randint(2, 180)} {rng.choice(v.STREETS)}"


def _dictated(fields: tuple[FieldSpec, ...], values: dict[str, str]) -> str:
    parts = [f'{spec.label}: "{values[spec.name]}"' for spec in fields if values[spec.name]]
    return "; ".join(parts)


def _checkout(site: Site, rng: Random, used: set[str]) -> Draft:
    in_stock = [item for item in site.items if item.field("Availability") != "Out of stock"]
    first = _pick(rng, in_stock, used)
    second = _pick(rng, [item for item in in_stock if item != first], used)
    lines = [(first.slug, rng.randint(1, 3)), (second.slug, rng.randint(1, 2))]
    person = _person(rng)
    raw = {spec.name: _input(spec, rng, site, first, person) for spec in CHECKOUT_FIELDS}
    raw["city"] = site.town
    values, errors = validate(CHECKOUT_FIELDS, raw)
    assert not errors, errors
    items = encode_cart(lines)
    code = order_reference(site, items, values)
    total = order_total([(first, lines[0][1]), (second, lines[1][1])])
    instruction = (
        f'On {site.name}, add {lines[0][1]} × "{first.name}" and {lines[1][1]} × "{second.name}" '
        f"to the cart, then check out with these delivery details: "
        f"{_dictated(CHECKOUT_FIELDS, values)}. Report the order reference, the order total "
        f'and the unit price of "{first.name}".'
    )
    groups = [
        _group(1, "order reference", [code]),
        _group(2, "order summary", [first.name, second.name, total]),
        _group(3, f"unit price of {first.name}", [first.value_text]),
    ]
    answer = (
        f"Order reference {code}; order total {total} for {first.name} and {second.name}; "
        f"unit price of {first.name}: {first.value_text}"
    )
    confirmed = url("/checkout/confirmed", items=items, **values)
    return Draft(
        instruction,
        groups,
        answer,
        ["/checkout/confirmed"],
        [site.item_path(first), confirmed],
        "hard-checkout",
        first.category,
        {"inputs": values, "cart": lines},
    )


def _flow(site: Site, rng: Random, used: set[str]) -> Draft:
    spec = site.spec
    flow = spec.flow
    if flow is None:
        return _checkout(site, rng, used)
    item = _pick(rng, site.items, used)
    person = _person(rng)
    raw = {field.name: _input(field, rng, site, item, person) for field in flow.fields}
    values, errors = validate(flow.fields, raw)
    assert not errors, errors
    code = flow_reference(site, item, values)
    total = flow_total(flow, item, values)
    label = next(
        (x for x in spec.askable if x not in spec.card_fields and ", " not in item.field(x)),
        spec.askable[0],
    )
    ask_total = f", the {_label(flow.total_label)}" if total else ""
    instruction = (
        f'On {site.name}, open {_quoted(site, item)}, choose "{flow.button}" and fill in '
        f"{_dictated(flow.fields, values)}. Leave the other fields empty and confirm. Report the "
        f"{_label(flow.reference_label)}{ask_total}, the {_label(spec.value_label)} shown on "
        f"the confirmation and the {_label(label)} of the {spec.noun}."
    )
    # A bare number ("3" bedrooms) would be found in almost any answer: not a useful fact.
    shown = [item.field(x) for x in spec.card_fields if not item.field(x).isdigit()]
    summary = [item.name, item.value_text, *shown]
    groups = [
        _group(1, flow.reference_label, [code]),
        _group(2, "confirmation summary", summary + ([total] if total else [])),
        _group(3, f"{label} of {item.name}", _facts_of(item.field(label))),
    ]
    answer = f"{flow.reference_label}: {code}. {item.name}: {item.value_text}"
    answer += f"; {', '.join(shown)}" if shown else ""
    answer += f"; {flow.total_label}: {total}" if total else ""
    answer += f". {label}: {item.field(label)}"
    base = f"/{flow.path}/{item.slug}"
    return Draft(
        instruction,
        groups,
        answer,
        [f"{base}/confirmed", site.item_path(item)],
        [site.item_path(item), url(f"{base}/confirmed", **values)],
        "hard-flow",
        item.category,
        {"inputs": values},
    )


def _hard(site: Site, rng: Random, variant: int, used: set[str]) -> Draft:
    if variant % 2 == 1:
        draft = _top_three(site, rng, used)
        if draft is not None:
            return draft
    return _flow(site, rng, used)


# Difficulties: easy, one fact group of one fact on a detail page; medium, two groups that need a
# filter or sort and a detail page; hard, three groups, one of three or more facts, that need the
# whole catalogue and a detail page, or a complete multi-step form flow.
_MAKERS = {"easy": _easy, "medium": _medium, "hard": _hard}


def task_set_name(seed: int) -> str:
    """The task set of the practice web of ``seed``: ``practice-web/seed-<seed>``.

    Every task carries it. The sites of a seed are the same whatever their count (site ``i`` of
    ``generate_sites(seed, n)`` does not depend on ``n``), so a set of more sites contains the
    set of fewer.
    """
    return f"{TASK_SET_PREFIX}/seed-{seed}"


def _record(site: Site, task_id: str, difficulty: str, draft: Draft, seed: int) -> dict[str, Any]:
    extra = {
        "source": "practice-web",
        "site_id": site.site_id,
        "seed": seed,
        "template": draft.template,
        "required_paths": draft.required_paths,
        "solution_urls": draft.solution_urls,
        **draft.extra,
    }
    return {
        "event_id": task_event_id(task_id),
        "ts": TASK_TS,
        "task_id": task_id,
        "task_name": draft.instruction,
        "website": site.hostname,
        "start_url": f"http://{site.hostname}/",
        "domain": site.domain,
        "subdomain": draft.subdomain,
        "difficulty": difficulty,
        "evaluator_reference": draft.groups,
        "definite_answer": draft.answer,
        "split": None,
        "parent_task_id": None,
        "extra_json": json.dumps(extra, sort_keys=True, ensure_ascii=False),
        "task_set": task_set_name(seed),
    }


def generate_tasks(sites: Iterable[Site], per_site: int = 6, seed: int = 0) -> list[dict]:
    """``per_site`` tasks per site, difficulties cycling easy, medium, hard (see ``_MAKERS``);
    guarantees in the module docstring.

    Task ids are ``<site_id>-<n:03d>-<difficulty>`` (with ``-s<seed>`` after the site id when
    ``seed`` is not 0, so task sets of different seeds never share an id).
    """
    if per_site < 0:
        raise ValueError(f"per_site must be 0 or more, got {per_site}")
    tasks = []
    for site in sites:
        rng = Random(f"webgym-tasks:{seed}:{site.site_id}")
        used: set[str] = set()
        prefix = site.site_id if seed == 0 else f"{site.site_id}-s{seed}"
        for number in range(per_site):
            difficulty = DIFFICULTIES[number % 3]
            draft = _MAKERS[difficulty](site, rng, number // 3, used)
            tasks.append(
                _record(site, f"{prefix}-{number:03d}-{difficulty}", difficulty, draft, seed)
            )
    return tasks
