"""The practice-web server, through real HTTP on a local port: every site's pages, search,
filters, pagination, forms and flows, pop-ups, and the test-support paths."""

from __future__ import annotations

import html as html_lib
import http.client
import re
import threading
import time
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from sites import generate_sites
from sites.cart import order_reference
from sites.flows import flow_reference
from sites.forms import reference
from sites.pages import PER_PAGE
from sites.server import PracticeWebServer

NAME_LINK = re.compile(r'class="name" href="/[a-z]+/([a-z0-9-]+)"')


@pytest.fixture(scope="module")
def sites():
    return generate_sites()


@pytest.fixture(scope="module")
def web(sites):
    with PracticeWebServer(sites) as server:
        yield server


def fetch(web, host, path, method="GET", form=None, cookies=None, timeout=10):
    """(status, headers, text) of one request, sent to ``host`` through the server's port."""
    connection = http.client.HTTPConnection("127.0.0.1", web.port, timeout=timeout)
    headers = {"Host": host}
    body = None
    if form is not None:
        body = urlencode(form)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    if cookies:
        headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        connection.close()


def by_domain(sites, domain):
    return next(site for site in sites if site.domain == domain)


def test_every_site_serves_its_pages(sites, web):
    for site in sites:
        item = site.items[7]
        flow = site.spec.flow
        form_path = f"/{flow.path}/{item.slug}" if flow else "/checkout"
        for path, title in [
            ("/", "Home"),
            (site.listing_path, f"All {site.spec.plural}"),
            (site.item_path(item), item.name),
            ("/contact", "Contact us"),
            ("/about", "About us"),
            (form_path, flow.title if flow else "Your cart"),
        ]:
            status, headers, html = fetch(web, site.hostname, path)
            assert status == 200, (site.site_id, path)
            assert headers["Content-Type"] == "text/html; charset=utf-8"
            shown = html_lib.unescape(re.search(r"<title>(.*?)</title>", html)[1])
            assert shown.startswith(title) and shown.endswith(f" | {site.name}"), shown
            assert 'role="search"' in html
            assert 'href="http' not in html  # links stay relative


def test_detail_page_shows_every_field(sites, web):
    for site in sites[:8]:
        item = site.items[3]
        _, _, html = fetch(web, site.hostname, site.item_path(item))
        for label, text in item.fields:
            escaped = text.replace("&", "&amp;").replace("'", "&#x27;")
            assert f"<th>{label}</th><td>{escaped}</td>" in html


def test_host_header_may_carry_a_port(sites, web):
    status, _, html = fetch(web, f"{sites[0].hostname}:{web.port}", "/")
    assert status == 200 and sites[0].name in html


def test_unknown_host_lists_the_sites(sites, web):
    status, _, html = fetch(web, "nowhere.webgym.test", "/")
    assert status == 404
    assert "nowhere.webgym.test" in html
    assert all(site.hostname in html for site in sites)


def test_unknown_path_is_the_sites_404(sites, web):
    status, _, html = fetch(web, sites[0].hostname, "/no/such/page")
    assert status == 404 and "Page not found" in html


def test_head_answers_without_body(sites, web):
    status, headers, html = fetch(web, sites[1].hostname, "/", method="HEAD")
    assert status == 200 and html == "" and int(headers["Content-Length"]) > 1000


def test_pagination_covers_the_catalogue_once(sites, web):
    site = sites[0]
    pages = -(-len(site.items) // PER_PAGE)
    seen = []
    for page in range(1, pages + 1):
        _, _, html = fetch(web, site.hostname, f"{site.listing_path}?page={page}")
        assert f"Page {page} of {pages}" in html
        seen += NAME_LINK.findall(html)
    assert seen == [item.slug for item in site.items]
    _, _, html = fetch(web, site.hostname, f"{site.listing_path}?page=999")
    assert f"Page {pages} of {pages}" in html


def test_category_filter_range_and_sort(sites, web):
    for domain in ("shopping", "jobs"):
        site = by_domain(sites, domain)
        category = site.categories[1]
        members = [item for item in site.items if item.category == category]
        low = sorted(item.value for item in members)[len(members) // 3]
        query = urlencode({"category": category, "min": low, "sort": "value_asc"})
        _, _, html = fetch(web, site.hostname, f"{site.listing_path}?{query}")
        expected = sorted((i for i in members if i.value >= low), key=lambda i: i.value)
        assert NAME_LINK.findall(html) == [item.slug for item in expected[:PER_PAGE]]


def test_search_finds_an_item_by_name(sites, web):
    site = sites[2]
    item = site.items[11]
    _, _, html = fetch(web, site.hostname, f"{site.listing_path}?{urlencode({'q': item.name})}")
    assert item.slug in NAME_LINK.findall(html)
    _, _, html = fetch(web, site.hostname, f"{site.listing_path}?q=zzzzqqq")
    assert "No " in html and NAME_LINK.findall(html) == []


def test_contact_form_rejects_bad_input(sites, web):
    site = sites[3]
    form = {"name": "", "email": "not-an-email", "topic": "nonsense", "message": "Hello"}
    status, _, html = fetch(web, site.hostname, "/contact", "POST", form)
    assert status == 200
    assert "There is a problem" in html
    assert "Full name is required." in html
    assert "Email address must look like name@example.com." in html
    assert "Choose one of the options for Topic." in html
    assert 'value="not-an-email"' in html  # the form keeps what was typed


def test_contact_form_confirms_with_a_deterministic_reference(sites, web):
    site = sites[3]
    form = {
        "name": " Ada  Park ",
        "email": "Ada@Example.com",
        "topic": site.spec.contact_topics[0],
        "message": "Where is my parcel?",
    }
    status, headers, _ = fetch(web, site.hostname, "/contact", "POST", form)
    assert status == 303
    location = headers["Location"]
    assert location.startswith("/contact/sent?")
    status, _, html = fetch(web, site.hostname, location)
    cleaned = {**form, "name": "Ada Park", "email": "ada@example.com"}
    expected = reference(site.reference_prefix, site.site_id, "contact", cleaned)
    assert status == 200 and expected in html
    assert fetch(web, site.hostname, location)[2] == html  # the same on every visit


@pytest.mark.parametrize(
    "domain", ["travel", "news", "government", "recipes", "jobs", "real_estate", "events"]
)
def test_item_flow_form_review_confirmation(sites, web, domain):
    site = by_domain(sites, domain)
    flow = site.spec.flow
    item = site.items[0]
    base = f"/{flow.path}/{item.slug}"
    good = {
        "checkin": "2026-09-01", "nights": "3", "guests": "2", "name": "Ben Novak",
        "email": "ben@example.com", "town": site.town, "age": "40", "letter": "Well said.",
        "birth_date": "1980-02-29", "household": "3", "postcode": "ab1 2cd", "stars": "5",
        "cooked_for": "4", "experience": "6", "date": "2026-10-10", "people": "2", "tickets": "2",
    }  # fmt: skip
    values = {spec.name: good.get(spec.name, "") for spec in flow.fields}
    int_field = next(spec for spec in flow.fields if spec.kind == "int")
    status, _, html = fetch(web, site.hostname, base, "POST", {**values, int_field.name: "999"})
    assert status == 200
    assert f"{int_field.label} must be between {int_field.low} and {int_field.high}." in html

    status, headers, _ = fetch(web, site.hostname, base, "POST", values)
    assert status == 303 and headers["Location"].startswith(f"{base}/review?")
    status, _, html = fetch(web, site.hostname, headers["Location"])
    assert status == 200 and flow.review_title in html
    confirm = re.search(r'<form method="get" action="([^"]+)">(.*?)</form>', html)
    hidden = dict(re.findall(r'name="([a-z_]+)" value="([^"]*)"', confirm[2]))
    status, _, html = fetch(web, site.hostname, f"{confirm[1]}?{urlencode(hidden)}")
    cleaned = (
        {**values, "postcode": values.get("postcode", "").upper()}
        if values.get("postcode")
        else values
    )
    assert status == 200 and flow.done_title in html
    assert flow_reference(site, item, cleaned) in html

    status, _, html = fetch(web, site.hostname, f"{base}/confirmed?name=x")
    assert status == 200 and "There is a problem" in html  # a tampered URL confirms nothing


def test_shopping_cart_checkout(sites, web):
    site = by_domain(sites, "shopping")
    items = [i for i in site.items if i.field("Availability") != "Out of stock"][:2]
    status, _, html = fetch(web, site.hostname, "/cart/add", "POST",
                            {"slug": items[0].slug, "quantity": "11"})  # fmt: skip
    assert status == 200 and "Quantity must be between 1 and 10." in html

    cookies = {}
    for item, quantity in zip(items, ("2", "1"), strict=True):
        form = {"slug": item.slug, "quantity": quantity}
        status, headers, _ = fetch(web, site.hostname, "/cart/add", "POST", form, cookies)
        assert status == 303 and headers["Location"] == "/cart"
        name, _, rest = headers["Set-Cookie"].partition("=")
        cookies[name] = rest.split(";")[0]
    _, _, html = fetch(web, site.hostname, "/cart", cookies=cookies)
    assert items[0].name in html and items[1].name in html and "Cart (3)" in html

    details = {"name": "Ada Park", "email": "ada@example.com", "address": "1 Mill Lane",
               "city": site.town, "postcode": "AB1 2CD"}  # fmt: skip
    status, _, html = fetch(web, site.hostname, "/checkout", "POST",
                            {**details, "postcode": "!"}, cookies)  # fmt: skip
    assert status == 200 and "Postcode must be 3 to 10 letters" in html
    status, headers, _ = fetch(web, site.hostname, "/checkout", "POST", details, cookies)
    assert status == 303 and "Max-Age=0" in headers["Set-Cookie"]  # the cart is emptied
    location = headers["Location"]
    status, _, html = fetch(web, site.hostname, location)
    query = dict(parse_qsl(urlsplit(location).query))
    assert status == 200 and order_reference(site, query["items"], details) in html
    reversed_cart = ".".join(reversed(query["items"].split(".")))
    assert order_reference(site, reversed_cart, details) == order_reference(
        site, query["items"], details
    )
    total = items[0].value * 2 + items[1].value
    assert f"Order total: ${total:,.2f}" in html


def test_cookie_banner_until_consent(sites, web):
    with_banner = [site for site in sites if site.cookie_banner]
    without = [site for site in sites if not site.cookie_banner]
    assert with_banner and without
    for site in (with_banner[0], with_banner[-1]):
        assert 'id="cookie-banner"' in fetch(web, site.hostname, site.listing_path)[2]
        html = fetch(web, site.hostname, "/", cookies={"cookie_consent": "accepted"})[2]
        assert 'id="cookie-banner"' not in html
    assert 'id="cookie-banner"' not in fetch(web, without[0].hostname, "/")[2]


def test_newsletter_pop_up_on_home_only(sites, web):
    site = next(site for site in sites if site.newsletter_popup)
    assert 'id="newsletter"' in fetch(web, site.hostname, "/")[2]
    assert 'id="newsletter"' not in fetch(web, site.hostname, site.listing_path)[2]
    assert (
        'id="newsletter"'
        not in fetch(web, site.hostname, "/", cookies={"newsletter_closed": "1"})[2]
    )
    other = next(site for site in sites if not site.newsletter_popup)
    assert 'id="newsletter"' not in fetch(web, other.hostname, "/")[2]


def test_addresses_for_the_browser(sites, web):
    assert web.base_url(sites[0]) == f"http://{sites[0].hostname}/"
    assert web.host_resolver_rules == f"MAP *.webgym.test 127.0.0.1:{web.port}"


def test_slow_page_waits(sites, web):
    started = time.monotonic()
    status, _, html = fetch(web, sites[0].hostname, "/__webgym/slow?ms=300")
    assert status == 200 and "300 ms" in html
    assert time.monotonic() - started >= 0.3


def test_download_and_popup_pages(sites, web):
    status, headers, body = fetch(web, sites[0].hostname, "/__webgym/download")
    assert status == 200 and headers["Content-Disposition"].startswith("attachment;")
    assert sites[0].site_id in body
    status, _, html = fetch(web, sites[0].hostname, "/__webgym/popup")
    assert status == 200 and 'target="_blank"' in html
    assert "alert(" in html and "confirm(" in html


def test_stop_releases_a_hung_request(sites):
    server = PracticeWebServer(sites[:2]).start()
    outcome = {}

    def hang():
        try:
            outcome["status"] = fetch(server, sites[0].hostname, "/__webgym/hang", timeout=30)[0]
        except (OSError, http.client.HTTPException) as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=hang)
    thread.start()
    time.sleep(0.3)
    assert thread.is_alive()  # the request hangs
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 2
    thread.join(timeout=2)
    assert not thread.is_alive() and outcome
    server.stop()  # idempotent
