"""The catalogue pages of a site: home, listing (search, filters, sort, pagination), detail and
about. Each function returns the ``main`` part of a page and its title; :mod:`sites.layout`
frames it. Everything shown comes from the Site object.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from sites.catalogues import Item
from sites.data import Site
from sites.layout import esc, href, rating_html, thumb, value_html

PER_PAGE = 12


@dataclass(frozen=True)
class ListingQuery:
    """The listing's URL parameters, cleaned: anything unusable falls back to its default."""

    q: str = ""
    category: str = ""
    low: float | None = None
    high: float | None = None
    sort: str = "featured"
    page: int = 1

    @classmethod
    def parse(cls, site: Site, query: Mapping[str, str]) -> ListingQuery:
        def number(key: str) -> float | None:
            try:
                value = float(query.get(key, "").replace(",", "").lstrip("$"))
            except ValueError:
                return None
            return value if math.isfinite(value) else None

        page = query.get("page", "1")
        sort = query.get("sort", "featured")
        return cls(
            q=" ".join(query.get("q", "").split())[:100],
            category=query.get("category", "") if query.get("category") in site.categories else "",
            low=number("min"),
            high=number("max"),
            sort=sort if sort in sort_options(site) else "featured",
            page=int(page) if page.isdigit() and 0 < len(page) < 6 else 1,
        )

    def params(self, **changes: object) -> dict[str, object]:
        """URL parameters of this query with some changed; defaults are left out."""
        params: dict[str, object] = {
            "q": self.q,
            "category": self.category,
            "min": _plain(self.low),
            "max": _plain(self.high),
            "sort": "" if self.sort == "featured" else self.sort,
            "page": "" if self.page == 1 else self.page,
        }
        params.update(changes)
        return params


def _plain(number: float | None) -> str:
    if number is None:
        return ""
    return str(int(number)) if number == int(number) else str(number)


def sort_options(site: Site) -> dict[str, str]:
    spec = site.spec
    options = {"featured": "Featured", "name": "Name (A to Z)"}
    options["value_asc"] = f"{spec.value_label}: low to high"
    options["value_desc"] = f"{spec.value_label}: high to low"
    if spec.rating_scale:
        options["rating"] = "Rating: best first"
    if spec.date_sort:
        options["date"] = spec.date_sort[0]
    return options


def search(site: Site, query: ListingQuery) -> list[Item]:
    """The items a listing query selects, in its order (every filter, no pagination)."""
    needle = query.q.casefold()
    items = [
        item
        for item in site.items
        if (not query.category or item.category == query.category)
        and (query.low is None or item.value >= query.low)
        and (query.high is None or item.value <= query.high)
        and (
            not needle
            or needle in item.name.casefold()
            or needle in item.category.casefold()
            or needle in item.summary.casefold()
        )
    ]
    keys = {
        "name": lambda item: item.name.casefold(),
        "value_asc": lambda item: item.value,
        "value_desc": lambda item: -item.value,
        "rating": lambda item: -(item.rating or 0),
    }
    if query.sort == "date" and site.spec.date_sort:
        newest_first = site.spec.date_sort[1]
        items.sort(key=lambda item: item.date, reverse=newest_first)
    elif query.sort in keys:
        items.sort(key=keys[query.sort])  # stable: ties keep catalogue order
    return items


def _cards(site: Site, items: list[Item]) -> str:
    layout = site.theme.listing
    spec = site.spec
    if layout == "table":
        head = "".join(
            f"<th>{esc(label)}</th>"
            for label in (spec.noun.capitalize(), spec.category_label, *spec.card_fields)
        )
        rating_head = "<th>Rating</th>" if spec.rating_scale else ""
        rows = "".join(
            f'<tr><td><a class="name" href="{site.item_path(item)}">{esc(item.name)}</a></td>'
            f"<td>{esc(item.category)}</td>"
            + "".join(f"<td>{esc(item.field(label))}</td>" for label in spec.card_fields)
            + f"<td>{value_html(site, item)}</td>"
            + (f"<td>{rating_html(site, item)}</td>" if spec.rating_scale else "")
            + "</tr>"
            for item in items
        )
        return (
            f'<table class="items"><thead><tr>{head}<th>{esc(spec.value_label)}</th>'
            f"{rating_head}</tr></thead><tbody>{rows}</tbody></table>"
        )
    blocks = []
    for item in items:
        facts = " · ".join(esc(item.field(label)) for label in spec.card_fields)
        info = (
            f'<a class="name" href="{site.item_path(item)}">{esc(item.name)}</a>'
            f'<span class="muted">{esc(item.category)} · {facts}</span>'
            f"<span>{value_html(site, item)} {rating_html(site, item)}</span>"
        )
        if layout == "list":
            blocks.append(
                f'<div class="row">{thumb(item)}<div class="info">{info}'
                f'<div class="muted">{esc(item.summary)}</div></div></div>'
            )
        else:
            blocks.append(f'<div class="card">{thumb(item)}{info}</div>')
    return f'<div class="{"rows" if layout == "list" else "cards"}">{"".join(blocks)}</div>'


def _featured(site: Site) -> list[Item]:
    if site.spec.date_sort:
        return search(site, ListingQuery(sort="date"))[:6]
    if site.spec.rating_scale:
        return search(site, ListingQuery(sort="rating"))[:6]
    step = len(site.items) // 6
    return [site.items[i * step] for i in range(6)]


def home(site: Site) -> tuple[str, str]:
    spec = site.spec
    chips = " ".join(
        f'<a class="button ghost" href="{href(site.listing_path, category=category)}">'
        f"{esc(category)}</a>"
        for category in site.categories
    )
    heading = "Latest" if spec.date_sort else "Featured"
    main = (
        f'<section class="hero"><h1>{esc(site.tagline)}</h1>'
        f"<p>Welcome to {esc(site.name)}: {len(site.items)} {spec.plural} in "
        f"{len(site.categories)} {spec.category_label.lower()} groups, all in one place.</p>"
        f'<a class="button" href="{site.listing_path}">Browse all {spec.plural}</a></section>'
        f"<h2>{heading} {spec.plural}</h2>{_cards(site, _featured(site))}"
        f"<h2>Browse by {esc(spec.category_label.lower())}</h2><p>{chips}</p>"
    )
    return "Home", main


def _filters(site: Site, query: ListingQuery) -> str:
    spec = site.spec
    categories = "".join(
        f'<option value="{esc(c)}"{" selected" if c == query.category else ""}>{esc(c)}</option>'
        for c in site.categories
    )
    sorts = "".join(
        f'<option value="{key}"{" selected" if key == query.sort else ""}>{esc(label)}</option>'
        for key, label in sort_options(site).items()
    )
    return (
        f'<aside><form class="filters" action="{site.listing_path}" method="get">'
        f'<input type="hidden" name="q" value="{esc(query.q)}">'
        f'<div><label for="f-category">{esc(spec.category_label)}</label>'
        f'<select id="f-category" name="category"><option value="">All</option>{categories}'
        f"</select></div>"
        f'<div><label for="f-min">{esc(spec.value_label)} from</label><input id="f-min" '
        f'name="min" inputmode="decimal" value="{esc(_plain(query.low))}"></div>'
        f'<div><label for="f-max">{esc(spec.value_label)} up to</label><input id="f-max" '
        f'name="max" inputmode="decimal" value="{esc(_plain(query.high))}"></div>'
        f'<div><label for="f-sort">Sort by</label><select id="f-sort" name="sort">{sorts}'
        f'</select></div><div><button type="submit">Apply filters</button> '
        f'<a href="{site.listing_path}">Clear</a></div></form></aside>'
    )


def _pagination(site: Site, query: ListingQuery, pages: int) -> str:
    if pages <= 1:
        return ""
    links = []
    if query.page > 1:
        links.append(f'<a href="{href(site.listing_path, **query.params(page=query.page - 1))}"'
                     ' rel="prev">‹ Previous</a>')  # fmt: skip
    for number in range(1, pages + 1):
        if number == query.page:
            links.append(f'<span class="on" aria-current="page">{number}</span>')
        else:
            target = href(site.listing_path, **query.params(page=number if number > 1 else ""))
            links.append(f'<a href="{target}">{number}</a>')
    if query.page < pages:
        links.append(f'<a href="{href(site.listing_path, **query.params(page=query.page + 1))}"'
                     ' rel="next">Next ›</a>')  # fmt: skip
    return f'<nav class="pages" aria-label="Pages">{"".join(links)}</nav>'


def listing(site: Site, raw_query: Mapping[str, str]) -> tuple[str, str]:
    spec = site.spec
    query = ListingQuery.parse(site, raw_query)
    found = search(site, query)
    pages = max(1, math.ceil(len(found) / PER_PAGE))
    if query.page > pages:
        query = replace(query, page=pages)
    shown = found[(query.page - 1) * PER_PAGE : query.page * PER_PAGE]
    heading = f"{query.category} {spec.plural}" if query.category else f"All {spec.plural}"
    if query.q:
        heading = f"Results for “{query.q}”"
    if shown:
        first = (query.page - 1) * PER_PAGE + 1
        count = f"Showing {first}–{first + len(shown) - 1} of {len(found)} {spec.plural}"
        results = _cards(site, shown)
    else:
        count = f"No {spec.plural} match your search."
        results = (
            f'<p class="notice">Try fewer filters or <a href="{site.listing_path}">see all.</a></p>'
        )
    main = (
        f"<h1>{esc(heading.capitalize() if query.q else heading)}</h1>"
        f'<div class="layout">{_filters(site, query)}<div class="results">'
        f'<div class="toolbar"><span class="muted">{count}</span>'
        f'<span class="muted">Page {query.page} of {pages}</span></div>'
        f"{results}{_pagination(site, query, pages)}</div></div>"
    )
    title = heading if query.page == 1 else f"{heading}, page {query.page}"
    return title, main


def detail(site: Site, item: Item, action: str) -> tuple[str, str]:
    """``action`` is the call-to-action block (add to cart, book, apply...)."""
    spec = site.spec
    rows = "".join(
        f"<tr><th>{esc(label)}</th><td>{esc(text)}</td></tr>" for label, text in item.fields
    )
    sections = ""
    for heading, lines in item.sections:
        if heading in ("Ingredients", "Requirements", "Method"):
            tag = "ol" if heading == "Method" else "ul"
            body = f"<{tag}>{''.join(f'<li>{esc(line)}</li>' for line in lines)}</{tag}>"
        else:
            body = "".join(f"<p>{esc(line)}</p>" for line in lines)
        sections += f"<h2>{esc(heading)}</h2>{body}"
    related = [other for other in site.items if other.category == item.category and other != item]
    crumbs = (
        f'<p class="muted"><a href="/">Home</a> › <a href="{site.listing_path}">'
        f"{esc(spec.plural.capitalize())}</a> › "
        f'<a href="{href(site.listing_path, category=item.category)}">'
        f"{esc(item.category)}</a></p>"
    )
    main = (
        f"{crumbs}<h1>{esc(item.name)}</h1><p>{esc(item.summary)}</p>"
        f'<div class="detail">{thumb(item)}<div class="facts-col">'
        f"<p>{value_html(site, item)} {rating_html(site, item)}</p>{action}"
        f'<table class="facts">{rows}</table></div></div>{sections}'
    )
    if related:
        main += f"<h2>More in {esc(item.category)}</h2>{_cards(site, related[:4])}"
    return item.name, main


def about(site: Site) -> tuple[str, str]:
    spec = site.spec
    main = (
        f"<h1>About {esc(site.name)}</h1>"
        f"<p>{esc(site.name)} is based in {esc(site.town)}. We list {len(site.items)} "
        f"{spec.plural} across {len(site.categories)} {spec.category_label.lower()} groups: "
        f"{esc(', '.join(site.categories))}.</p>"
        f'<p>Questions? <a href="/contact">Contact us</a> and we will answer within two working '
        "days.</p>"
    )
    return "About us", main


def not_found(site: Site, path: str) -> tuple[str, str]:
    main = (
        f"<h1>Page not found</h1><p>There is no page at {esc(path)} on {esc(site.name)}.</p>"
        f'<p><a href="/">Go to the home page</a> or <a href="{site.listing_path}">browse all '
        f"{site.spec.plural}</a>.</p>"
    )
    return "Page not found", main
