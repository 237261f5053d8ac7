"""The catalogue generator of each domain of the practice web.

An :class:`Item` holds every value a page shows about it, already formatted as shown: a page
never computes a displayed value the Site object does not hold, so tasks and verifiers read
ground truth from the same place the pages do. Each generator is a pure function of the
``Random`` it is given: ``(rng, count, town) -> count items`` with unique names and slugs.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from random import Random

from sites import vocab as v
from sites.forms import show_date

# The practice web's "today": every generated date is relative to it, never to the wall clock.
TODAY = datetime.date(2026, 6, 1)
BOOKABLE_FROM = TODAY + datetime.timedelta(days=1)
BOOKABLE_UNTIL = TODAY + datetime.timedelta(days=365)


@dataclass(frozen=True)
class Item:
    """One entry of a site's catalogue. ``fields`` are (label, shown text), in display order."""

    slug: str
    name: str
    category: str
    value: float  # the domain's headline number (price, salary, total time...): sort and range
    value_text: str  # ``value`` as the pages show it
    summary: str
    fields: tuple[tuple[str, str], ...]
    rating: float | None = None
    date: datetime.date | None = None
    sections: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (heading, paragraphs or list lines)

    def field(self, label: str) -> str:
        for name, text in self.fields:
            if name == label:
                return text
        raise KeyError(f"{self.name} has no field {label!r}")


def slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower().replace("'", "")).strip("-")


def money(amount: float, cents: bool = True) -> str:
    if amount == 0:
        return "Free"
    return f"${amount:,.2f}" if cents else f"${amount:,.0f}"


def _log_uniform(rng: Random, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def _person(rng: Random) -> str:
    return f"{rng.choice(v.PEOPLE_FIRST)} {rng.choice(v.PEOPLE_LAST)}"


def _a(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def _unique(count: int, make_one: Callable[[], Item]) -> list[Item]:
    """``count`` items with distinct names and slugs; fails loudly if the vocabulary runs out."""
    items: list[Item] = []
    names: set[str] = set()
    slugs: set[str] = set()
    for _ in range(count * 60):
        item = make_one()
        if item.name in names or item.slug in slugs:
            continue
        names.add(item.name)
        slugs.add(item.slug)
        items.append(item)
        if len(items) == count:
            return items
    raise RuntimeError(f"vocabulary too small for {count} unique items")


def shopping(rng: Random, count: int, town: str) -> list[Item]:
    brands = rng.sample(v.BRANDS, 6)

    def one() -> Item:
        category = rng.choice(sorted(v.PRODUCTS))
        nouns, (low, high) = v.PRODUCTS[category]
        noun, brand = rng.choice(nouns), rng.choice(brands)
        name = f"{brand} {rng.choice(v.PRODUCT_STYLES)} {noun}"
        price = round(round(_log_uniform(rng, low, high)) - rng.choice((0.01, 0.51, 0.05, 0)), 2)
        rating = round(rng.uniform(2.6, 5.0), 1)
        stock = 0 if rng.random() < 0.08 else rng.randint(1, 140)
        colour = rng.choice(v.COLOURS)
        first, second = rng.sample(v.PRODUCT_TRAITS, 2)
        return Item(
            slugify(name), name, category, price, money(price),
            summary=f"{colour} {noun.lower()}, {first}.",
            fields=(
                ("Brand", brand), ("Category", category), ("Price", money(price)),
                ("Rating", f"{rating:.1f} out of 5"), ("Reviews", f"{rng.randint(2, 2400):,}"),
                ("Availability", f"In stock ({stock} left)" if stock else "Out of stock"),
                ("Colour", colour), ("SKU", f"{brand[:3].upper()}-{rng.randint(1000, 9999)}"),
            ),
            rating=rating,
            sections=(("Description", (f"The {name} is {first} and {second}.",)),),
        )  # fmt: skip

    return _unique(count, one)


def travel(rng: Random, count: int, town: str) -> list[Item]:
    cities = rng.sample(v.CITIES, rng.randint(4, 6))

    def one() -> Item:
        city = rng.choice(cities)
        name = rng.choice(v.HOTEL_PATTERNS).format(w=rng.choice(v.HOTEL_WORDS))
        stars = rng.randint(2, 5)
        price = round(_log_uniform(rng, 40 + stars * 15, 90 + stars * 90))
        rating = round(rng.uniform(6.0, 9.8), 1)
        area = rng.choice(v.NEIGHBOURHOODS)
        distance = f"{rng.uniform(0.2, 9.5):.1f} km"
        amenities = ", ".join(sorted(rng.sample(v.AMENITIES, rng.randint(3, 5))))
        return Item(
            slugify(name), name, city, price, money(price, cents=False),
            summary=f"{stars}-star hotel in {area}, {city}, {distance} from the centre.",
            fields=(
                ("City", city), ("Neighbourhood", area), ("Price per night", money(price, False)),
                ("Stars", f"{stars}-star"), ("Guest rating", f"{rating:.1f} out of 10"),
                ("Distance to centre", distance), ("Amenities", amenities),
                ("Check-in time", rng.choice(("14:00", "15:00", "16:00"))),
                ("Cancellation", rng.choice(("Free cancellation up to 48 hours before arrival",
                                             "Non-refundable"))),
            ),
            rating=rating,
        )  # fmt: skip

    return _unique(count, one)


def news(rng: Random, count: int, town: str) -> list[Item]:
    authors = [_person(rng) for _ in range(6)]

    def one() -> Item:
        section = rng.choice(v.SECTIONS)
        subject = rng.choice(v.HEADLINE_SUBJECTS[section])
        name = f"{subject} {rng.choice(v.HEADLINE_VERBS)} {rng.choice(v.HEADLINE_OBJECTS)}"
        published = TODAY - datetime.timedelta(days=rng.randint(0, 120))
        minutes = rng.randint(2, 18)
        author = rng.choice(authors)
        body = (
            f"{subject} in {town} spoke to reporters this week about the plans.",
            f"Supporters say the change could reach {rng.randint(2, 90) * 100:,} households "
            f"within {rng.randint(2, 18)} months.",
            f"Critics asked for a public consultation before any final decision in {town}.",
        )
        return Item(
            slugify(name), name, section, minutes, f"{minutes} minutes",
            summary=body[0],
            fields=(("Section", section), ("Author", author), ("Published", show_date(published)),
                    ("Read time", f"{minutes} minutes")),
            date=published,
            sections=(("Article", body),),
        )  # fmt: skip

    return _unique(count, one)


def government(rng: Random, count: int, town: str) -> list[Item]:
    def one() -> Item:
        department = rng.choice(sorted(v.SERVICES))
        actions, objects = v.SERVICES[department]
        name = f"{rng.choice(actions)} {rng.choice(objects)}"
        fee = 0 if rng.random() < 0.2 else rng.choice(range(10, 260, 5)) + rng.choice((0, 0.5))
        days = rng.randint(1, 40)
        documents = ", ".join(rng.sample(v.DOCUMENTS, rng.randint(2, 3)))
        how = rng.choice(("Online", "Online or in person", "In person only"))
        return Item(
            slugify(name), name, department, fee, money(fee),
            summary=f"{name} with {town} Council. Usually takes {days} working days.",
            fields=(
                ("Department", department), ("Fee", money(fee)),
                ("Processing time", f"{days} working days"),
                ("Eligibility", rng.choice(v.ELIGIBILITY)), ("Documents required", documents),
                ("Application method", how),
            ),
            sections=(("What you need to know", (
                f"You can use this service if you live or work in {town}.",
                f"Have your documents ready before you start: {documents.lower()}.",
            )),),
        )  # fmt: skip

    return _unique(count, one)


def recipes(rng: Random, count: int, town: str) -> list[Item]:
    def one() -> Item:
        cuisine = rng.choice(sorted(v.CUISINES))
        main = rng.choice(v.RECIPE_MAINS)
        name = f"{rng.choice(v.RECIPE_STYLES)} {main} {rng.choice(v.CUISINES[cuisine])}"
        prep, cook = rng.randint(1, 6) * 5, rng.randint(2, 30) * 5
        total = prep + cook
        rating = round(rng.uniform(3.0, 5.0), 1)
        level = "Easy" if total <= 45 else "Medium" if total <= 90 else "Challenging"
        servings = rng.randint(1, 8)
        extras = sorted(rng.sample(v.INGREDIENTS, rng.randint(5, 8)), key=v.INGREDIENTS.index)
        ingredients = (f"500 g {main.lower()}", *extras)
        method = tuple(
            sorted(rng.sample(v.METHOD_STEPS, rng.randint(4, 6)), key=v.METHOD_STEPS.index)
        )
        return Item(
            slugify(name), name, cuisine, total, f"{total} minutes",
            summary=f"{_a(level.lower()).capitalize()} {cuisine} dish for {servings}, "
            f"built on {main.lower()}.",
            fields=(
                ("Cuisine", cuisine), ("Total time", f"{total} minutes"),
                ("Prep time", f"{prep} minutes"), ("Cook time", f"{cook} minutes"),
                ("Servings", str(servings)), ("Difficulty", level),
                ("Calories per serving", f"{rng.randint(18, 95) * 10} kcal"),
                ("Rating", f"{rating:.1f} out of 5"),
            ),
            rating=rating,
            sections=(("Ingredients", ingredients), ("Method", method)),
        )  # fmt: skip

    return _unique(count, one)


def jobs(rng: Random, count: int, town: str) -> list[Item]:
    companies = list(
        {f"{rng.choice(v.NAME_FIRST)} {rng.choice(v.COMPANY_SUFFIX)}" for _ in range(9)}
    )
    companies.sort()
    locations = [town, *rng.sample(v.CITIES, 3), "Remote"]
    pay = {"Graduate": (26, 40), "Junior": (28, 48), "Associate": (38, 65), "Senior": (60, 115)}

    def one() -> Item:
        category = rng.choice(sorted(v.JOB_FIELDS))
        level = rng.choice(v.SENIORITY)
        name = f"{level} {rng.choice(v.JOB_FIELDS[category])}"
        low, high = pay.get(level, (85, 170))
        salary = rng.randint(low * 2, high * 2) * 500
        posted = TODAY - datetime.timedelta(days=rng.randint(0, 45))
        company, location = rng.choice(companies), rng.choice(locations)
        contract = rng.choice(v.CONTRACTS)
        years = {"Graduate": 0, "Junior": 1, "Associate": 2, "Senior": 5}.get(level, 7)
        return Item(
            slugify(name), name, category, salary, money(salary, cents=False),
            summary=f"{company} is hiring {_a(name.lower())} in {location}.",
            fields=(
                ("Category", category), ("Company", company), ("Location", location),
                ("Salary", money(salary, cents=False)), ("Contract type", contract),
                ("Posted", show_date(posted)), ("Experience", f"{years}+ years"),
            ),
            date=posted,
            sections=(
                ("About the role", (f"Join the {category.lower()} team at {company}.",
                                    f"This is a {contract.lower()} role based in {location}.")),
                ("Requirements", (f"At least {years} years of relevant experience",
                                  "Clear written and spoken English",
                                  "Right to work in the country")),
            ),
        )  # fmt: skip

    return _unique(count, one)


def real_estate(rng: Random, count: int, town: str) -> list[Item]:
    def one() -> Item:
        kind = rng.choice(sorted(v.PROPERTY_TYPES))
        (bed_low, bed_high), (low, high) = v.PROPERTY_TYPES[kind]
        name = f"{rng.randint(1, 240)} {rng.choice(v.STREETS)}"
        price = round(_log_uniform(rng, low, high) / 5000) * 5000
        beds = rng.randint(bed_low, bed_high)
        area = rng.choice(v.NEIGHBOURHOODS)
        features = rng.sample(v.PROPERTY_FEATURES, 3)
        return Item(
            slugify(name), name, kind, price, money(price, cents=False),
            summary=f"{beds}-bedroom {kind.lower()} in {area}, {town}, with a {features[0]}.",
            fields=(
                ("Property type", kind), ("Price", money(price, cents=False)),
                ("Bedrooms", str(beds)), ("Bathrooms", str(rng.randint(1, max(1, beds - 1)))),
                ("Floor area", f"{rng.randint(28 + beds * 20, 50 + beds * 45)} m²"),
                ("Neighbourhood", area), ("Year built", str(rng.randint(1890, 2024))),
                ("Energy rating", rng.choice(v.ENERGY_RATINGS)),
                ("Features", ", ".join(features)),
            ),
        )  # fmt: skip

    return _unique(count, one)


def events(rng: Random, count: int, town: str) -> list[Item]:
    venues = sorted(
        {f"The {rng.choice(v.NAME_FIRST)} {rng.choice(v.VENUE_WORDS)}" for _ in range(6)}
    )
    organisers = sorted({f"{rng.choice(v.NAME_SECOND)} Productions" for _ in range(4)})

    def one() -> Item:
        kind = rng.choice(sorted(v.EVENT_KINDS))
        name = f"{rng.choice(v.EVENT_ADJECTIVES)} {rng.choice(v.EVENT_KINDS[kind])}"
        day = TODAY + datetime.timedelta(days=rng.randint(3, 200))
        price = 0 if rng.random() < 0.1 else rng.randint(8, 180) + rng.choice((0, 0.5))
        venue = rng.choice(venues)
        return Item(
            slugify(name), name, kind, price, money(price),
            summary=f"{kind} at {venue}, {town}, on {show_date(day)}.",
            fields=(
                ("Type", kind), ("Date", show_date(day)),
                ("Time", f"{rng.randint(10, 21)}:{rng.choice(('00', '30'))}"),
                ("Venue", venue), ("City", town), ("Ticket price", money(price)),
                ("Tickets left", str(rng.randint(5, 400))), ("Organiser", rng.choice(organisers)),
            ),
            date=day,
            sections=(("About this event", (
                f"{name} comes to {venue} in {town} this season.",
                "Doors open 30 minutes before the start. Step-free access is available.",
            )),),
        )  # fmt: skip

    return _unique(count, one)
