"""Sites of the practice web and their generator.

Guarantees of :func:`generate_sites`: a pure function of ``(seed, count)`` (one
``random.Random`` per site, seeded from the seed and the site's index; no global random, clock or
network), so the same arguments give equal sites and byte-identical pages; site ids are unique
DNS labels; item names and slugs are unique within a site; the domains cycle so every domain has
``count // 8`` or more instances; exactly 3 in every 10 consecutive sites show a cookie banner
and 2 in 10 a newsletter pop-up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from random import Random

from sites import vocab as v
from sites.catalogues import Item
from sites.domains import DOMAINS, DomainSpec
from sites.themes import LAYOUTS, Theme, make_theme

DOMAIN_ORDER = (
    "shopping", "travel", "news", "government", "recipes", "jobs", "real_estate", "events",
)  # fmt: skip
TLD = "webgym.test"
MIN_ITEMS, MAX_ITEMS = 30, 80


@dataclass(frozen=True)
class Site:
    """One generated website: its identity, its look and its catalogue (the ground truth)."""

    site_id: str
    hostname: str
    domain: str
    name: str
    town: str
    tagline: str
    reference_prefix: str
    theme: Theme
    items: tuple[Item, ...]
    cookie_banner: bool
    newsletter_popup: bool

    @property
    def spec(self) -> DomainSpec:
        return DOMAINS[self.domain]

    @cached_property
    def categories(self) -> tuple[str, ...]:
        return tuple(sorted({item.category for item in self.items}))

    @cached_property
    def by_slug(self) -> dict[str, Item]:
        return {item.slug: item for item in self.items}

    def item_path(self, item: Item) -> str:
        return f"/{self.spec.plural}/{item.slug}"

    @property
    def listing_path(self) -> str:
        return f"/{self.spec.plural}"


def _label(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _identity(rng: Random, spec: DomainSpec, town: str) -> tuple[str, str]:
    """(site_id, name) for a new site of ``spec``'s domain."""
    if spec.domain == "news":
        return f"{_label(town)}-news", f"The {town} {rng.choice(spec.name_suffixes)}"
    if spec.domain == "government":
        return f"{_label(town)}-gov", f"{town} Council"
    first, second = rng.choice(v.NAME_FIRST), rng.choice(v.NAME_SECOND)
    while second == first:
        second = rng.choice(v.NAME_SECOND)
    name = f"{first} {second} {rng.choice(spec.name_suffixes)}"
    return f"{_label(first + second)}-{spec.label}", name


def _site(seed: int, index: int, layout_order: list[int], taken: set[str], flags: dict) -> Site:
    rng = Random(f"webgym-sites:{seed}:{index}")
    spec = DOMAINS[DOMAIN_ORDER[index % len(DOMAIN_ORDER)]]
    for _ in range(200):
        town = rng.choice(v.TOWN_PREFIX) + rng.choice(v.TOWN_SUFFIX)
        site_id, name = _identity(rng, spec, town)
        if site_id not in taken:
            break
    else:  # the word lists are exhausted: keep ids unique with the index
        site_id = f"{site_id}{index}"
    taken.add(site_id)
    theme = make_theme(rng, index, layout_order)
    items = spec.make(rng, rng.randint(MIN_ITEMS, MAX_ITEMS), town)
    initials = "".join(word[0] for word in name.split() if word != "The").upper()
    return Site(
        site_id=site_id,
        hostname=f"{site_id}.{TLD}",
        domain=spec.domain,
        name=name,
        town=town,
        tagline=rng.choice(spec.heroes),
        reference_prefix=initials[:3],
        theme=theme,
        items=tuple(items),
        cookie_banner=index in flags["banner"],
        newsletter_popup=index in flags["newsletter"],
    )


def _popup_flags(seed: int, count: int) -> dict[str, set[int]]:
    """3 in each block of 10 sites get the cookie banner, 2 in 10 the newsletter pop-up."""
    banner: set[int] = set()
    newsletter: set[int] = set()
    for block in range(0, count, 10):
        rng = Random(f"webgym-popups:{seed}:{block}")
        indices = list(range(block, block + 10))
        banner.update(rng.sample(indices, 3))
        newsletter.update(rng.sample(indices, 2))
    return {"banner": banner, "newsletter": newsletter}


def generate_sites(seed: int = 0, count: int = 50) -> list[Site]:
    """``count`` sites, cycling through the eight domains; see the module docstring."""
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    layout_order = list(range(len(LAYOUTS)))
    Random(f"webgym-layouts:{seed}").shuffle(layout_order)
    flags = _popup_flags(seed, count)
    taken: set[str] = set()
    return [_site(seed, index, layout_order, taken, flags) for index in range(count)]
