"""The frame of every page of a site: head, header with navigation and search, footer, and the
cookie banner and newsletter pop-up of the sites that have them.

:class:`Frame` renders everything that does not depend on the request once, when it is built;
wrapping a page is then string joining. Every text from the Site object is HTML-escaped here or
by the caller through :func:`esc`; links are relative.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from html import escape
from urllib.parse import urlencode

from sites.catalogues import Item
from sites.data import Site
from sites.themes import stylesheet

CONSENT_COOKIE = "cookie_consent"
NEWSLETTER_COOKIE = "newsletter_closed"
CART_COOKIE = "cart"


def esc(text: object) -> str:
    return escape(str(text), quote=True)


def url(path: str, **query: object) -> str:
    """A relative URL with the non-empty query parameters."""
    params = {key: value for key, value in query.items() if value not in (None, "")}
    return f"{path}?{urlencode(params)}" if params else path


def href(path: str, **query: object) -> str:
    """:func:`url`, escaped for an HTML attribute."""
    return esc(url(path, **query))


def thumb(item: Item, css_class: str = "thumb") -> str:
    """A placeholder picture: the item's initials on a colour derived from its name."""
    hue = zlib.crc32(item.name.encode()) % 360
    letters = "".join(word[0] for word in item.name.split()[:2]).upper()
    style = f"background:linear-gradient(135deg,hsl({hue},55%,45%),hsl({(hue + 40) % 360},60%,32%))"
    return f'<div class="{css_class}" style="{style}" aria-hidden="true">{esc(letters)}</div>'


def value_html(site: Site, item: Item) -> str:
    suffix = f' <span class="muted">{esc(site.spec.value_suffix)}</span>'
    return f'<span class="value">{esc(item.value_text)}</span>' + (
        suffix if site.spec.value_suffix else ""
    )


def rating_html(site: Site, item: Item) -> str:
    if item.rating is None:
        return ""
    scale = f'<span class="muted">/{site.spec.rating_scale}</span>'
    return f'<span class="rating">★ {item.rating:.1f}{scale}</span>'


_BANNER = """<div id="cookie-banner" role="dialog" aria-label="Cookie consent">
<p><strong>We value your privacy.</strong> We use cookies to remember your preferences, keep your
basket and understand how our site is used. You can accept all cookies or keep only the essential
ones.</p>
<button type="button" onclick="wgConsent('accepted')">Accept all</button>
<button type="button" class="ghost" onclick="wgConsent('essential')">Essential only</button>
</div>
<script>function wgConsent(v){document.cookie='cookie_consent='+v+'; path=/; max-age=31536000';
document.getElementById('cookie-banner').remove()}</script>"""

_NEWSLETTER = """<div id="newsletter" role="dialog" aria-modal="true" aria-labelledby="nl-title">
<div class="modal">
<button type="button" class="close" aria-label="Close" onclick="wgClose()">×</button>
<h2 id="nl-title">Stay in the loop</h2>
<p>Sign up to the {name} newsletter for news, offers and new arrivals, once a week.</p>
<form onsubmit="wgClose();return false"><input type="email" name="email" aria-label="Email"
placeholder="you@example.com"> <button type="submit">Subscribe</button></form>
<p><a href="#" onclick="wgClose();return false">No thanks</a></p></div></div>
<script>function wgClose(){document.cookie='newsletter_closed=1; path=/; max-age=31536000';
document.getElementById('newsletter').remove()}</script>"""


def cart_lines(cookies: Mapping[str, str]) -> list[tuple[str, int]]:
    """The cart cookie, ``slug:qty.slug:qty``, as (slug, quantity) pairs; junk is dropped."""
    lines: list[tuple[str, int]] = []
    for part in cookies.get(CART_COOKIE, "").split("."):
        slug, _, quantity = part.partition(":")
        if slug and quantity.isdigit() and 0 < int(quantity) <= 99:
            lines.append((slug, int(quantity)))
    return lines


class Frame:
    """Head, header and footer of one site, rendered once."""

    def __init__(self, site: Site):
        self.site = site
        spec = site.spec
        theme = site.theme
        self._head = (
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<style>{stylesheet(theme)}</style><title>"
        )
        links = [("/", "Home"), (site.listing_path, f"All {spec.plural}")]
        links += [
            (href(site.listing_path, category=category), category)
            for category in site.categories[:3]
        ]
        links += [("/about", "About"), ("/contact", "Contact")]
        self._nav = "".join(f'<a href="{path}">{esc(label)}</a>' for path, label in links)
        self._logo = f'<a class="logo" href="/"><span class="mark"></span>{esc(site.name)}</a>'
        self._search = (
            f'<form class="search" role="search" action="{site.listing_path}" method="get">'
            f'<input type="search" name="q" placeholder="Search {spec.plural}" '
            f'aria-label="Search {spec.plural}"><button type="submit">Search</button></form>'
        )
        self._body_open = (
            f'</title></head><body class="hdr-{theme.header} filters-{theme.filters}">'
        )
        self._footer = (
            '<footer class="site"><div class="wrap">'
            f'<p><a href="/about">About {esc(site.name)}</a> · <a href="/contact">Contact us</a>'
            f' · <a href="{site.listing_path}">All {spec.plural}</a></p>'
            f"<p>© 2026 {esc(site.name)}, {esc(site.town)}. A practice website of WebGym: "
            "nothing here is real.</p></div></footer>"
        )
        self._newsletter = _NEWSLETTER.replace("{name}", esc(site.name))

    def render(
        self, title: str, main: str, cookies: Mapping[str, str], *, home: bool = False
    ) -> str:
        """A whole page: ``main`` framed, titled "<title> | <site name>"."""
        nav = self._nav
        if self.site.domain == "shopping":
            count = sum(quantity for _, quantity in cart_lines(cookies))
            nav += f'<a href="/cart">Cart ({count})</a>'
        header = (
            f'<header class="site"><div class="bar">{self._logo}<nav class="main" '
            f'aria-label="Main">{nav}</nav>{self._search}</div></header>'
        )
        extras = ""
        if self.site.cookie_banner and CONSENT_COOKIE not in cookies:
            extras += _BANNER
        if home and self.site.newsletter_popup and NEWSLETTER_COOKIE not in cookies:
            extras += self._newsletter
        return "".join(
            (
                self._head,
                esc(f"{title} | {self.site.name}"),
                self._body_open,
                header,
                f'<main><div class="wrap">{main}</div></main>',
                self._footer,
                extras,
                "</body></html>",
            )
        )
