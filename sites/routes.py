"""The router of one site: a request in, a response out, no I/O.

Paths (``{plural}`` is the domain's listing path, e.g. ``products``; ``{flow}`` its flow path):
``/``, ``/{plural}``, ``/{plural}/{slug}``, ``/about``, ``/contact``, ``/contact/sent``; shopping
sites ``/cart``, ``/cart/add`` (POST), ``/cart/update`` (POST), ``/checkout``,
``/checkout/confirmed``; the other sites ``/{flow}/{slug}``, ``/{flow}/{slug}/review`` and
``/{flow}/{slug}/confirmed``. Pages that do not depend on the request are rendered once and
kept, so a :class:`SiteApp` is cheap to call from many threads (it holds no mutable state but
that cache, whose entries are written whole).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote

from sites import cart, flows, pages
from sites.data import Site
from sites.layout import Frame, esc


@dataclass(frozen=True)
class Request:
    method: str  # GET, HEAD or POST
    path: str
    query: Mapping[str, str] = field(default_factory=dict)
    form: Mapping[str, str] = field(default_factory=dict)
    cookies: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()


class SiteApp:
    """Answers every request for one site."""

    def __init__(self, site: Site):
        self.site = site
        self.frame = Frame(site)
        self._static: dict[str, tuple[str, str]] = {}

    def _page(self, request: Request, title: str, main: str, status: int = 200) -> Response:
        html = self.frame.render(title, main, request.cookies, home=not request.path.strip("/"))
        return Response(status, html.encode())

    def _outcome(self, request: Request, outcome: flows.Outcome) -> Response:
        if outcome.location is not None:
            headers = [("Location", outcome.location)]
            headers += [("Set-Cookie", cookie) for cookie in outcome.set_cookies]
            return Response(outcome.status, b"", headers=tuple(headers))
        return self._page(request, outcome.title, outcome.main, outcome.status)

    def _cached(self, key: str, render) -> tuple[str, str]:
        page = self._static.get(key)
        if page is None:
            page = self._static[key] = render()
        return page

    def _detail(self, slug: str) -> tuple[str, str] | None:
        item = self.site.by_slug.get(slug)
        if item is None:
            return None
        flow = self.site.spec.flow
        if flow is None:
            action = cart.buy_box(item)
        else:
            action = (
                f'<p><a class="button" href="/{flow.path}/{item.slug}">{esc(flow.button)}</a></p>'
            )
        return self._cached(f"detail:{slug}", lambda: pages.detail(self.site, item, action))

    def handle(self, request: Request) -> Response:
        """The response to ``request``; unknown paths get the site's 404 page."""
        parts = [unquote(part) for part in request.path.split("/") if part]
        post = request.method == "POST"
        outcome = self._route(request, parts, post)
        if outcome is None:
            title, main = pages.not_found(self.site, request.path)
            return self._page(request, title, main, 404)
        if isinstance(outcome, tuple):
            return self._page(request, *outcome)
        return self._outcome(request, outcome)

    def _route(self, request: Request, parts: list[str], post: bool):
        site, spec = self.site, self.site.spec
        data = request.form if post else request.query
        if post and parts not in (["contact"], ["cart", "add"], ["cart", "update"], ["checkout"]):
            if not (spec.flow and len(parts) == 2 and parts[0] == spec.flow.path):
                return flows.Outcome("Method not allowed", "<h1>Method not allowed</h1>", 405)
        match parts:
            case []:
                return self._cached("home", lambda: pages.home(site))
            case ["about"]:
                return self._cached("about", lambda: pages.about(site))
            case [spec.plural]:
                return pages.listing(site, request.query)
            case [spec.plural, slug]:
                return self._detail(slug)
            case ["contact"]:
                return flows.contact(site, data, request.method)
            case ["contact", "sent"]:
                return flows.contact_sent(site, request.query)
        if spec.flow is None:
            return self._shop(request, parts)
        if len(parts) in (2, 3) and parts[0] == spec.flow.path:
            item = site.by_slug.get(parts[1])
            if item is None:
                return None
            if len(parts) == 2:
                return flows.flow_form(site, item, data, request.method)
            if parts[2] in ("review", "confirmed"):
                return flows.flow_submitted(site, item, parts[2], request.query)
        return None

    def _shop(self, request: Request, parts: list[str]):
        match parts:
            case ["cart"]:
                return cart.view(self.site, request.cookies)
            case ["cart", "add"] if request.method == "POST":
                return cart.add(self.site, request.form, request.cookies)
            case ["cart", "update"] if request.method == "POST":
                return cart.update(self.site, request.form, request.cookies)
            case ["checkout"]:
                data = request.form if request.method == "POST" else request.query
                return cart.checkout(self.site, data, request.cookies, request.method)
            case ["checkout", "confirmed"]:
                return cart.confirmed(self.site, request.query)
        return None
