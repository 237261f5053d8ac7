"""The practice-web generator: enough distinct sites, deterministic, with unique ground truth."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from typer.testing import CliRunner

from commands.sites import sites_app
from sites import DOMAINS, generate_sites
from sites.routes import Request, SiteApp
from sites.themes import FONTS, contrast


@pytest.fixture(scope="module")
def sites():
    return generate_sites()


def test_fifty_sites_over_eight_domains(sites):
    assert len(sites) == 50
    per_domain = Counter(site.domain for site in sites)
    assert set(per_domain) == set(DOMAINS) and len(per_domain) == 8
    assert min(per_domain.values()) >= 6


def test_site_ids_are_unique_dns_labels(sites):
    ids = [site.site_id for site in sites]
    assert len(set(ids)) == len(ids)
    assert len({site.name for site in sites}) == len(sites)
    for site in sites:
        assert re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", site.site_id)
        assert site.hostname == f"{site.site_id}.webgym.test"


def test_items_are_many_and_uniquely_named(sites):
    for site in sites:
        assert 30 <= len(site.items) <= 80
        assert len({item.name for item in site.items}) == len(site.items)
        assert len({item.slug for item in site.items}) == len(site.items)
        assert len(site.categories) >= 3
        for item in site.items:
            assert item.field(site.spec.value_label) == item.value_text
            assert item.field(site.spec.category_label) == item.category


def test_same_seed_same_sites_and_pages():
    first, second = generate_sites(seed=3, count=16), generate_sites(seed=3, count=16)
    assert first == second
    for a, b in zip(first, second, strict=True):
        for path in ("/", a.listing_path, a.item_path(a.items[5]), "/contact"):
            page_a = SiteApp(a).handle(Request("GET", path)).body
            page_b = SiteApp(b).handle(Request("GET", path)).body
            assert page_a == page_b


def test_different_seeds_differ():
    first, second = generate_sites(seed=0, count=8), generate_sites(seed=1, count=8)
    assert [s.site_id for s in first] != [s.site_id for s in second]
    assert [s.items for s in first] != [s.items for s in second]


def test_more_sites_than_words_keep_unique_ids():
    ids = [site.site_id for site in generate_sites(count=400)]
    assert len(set(ids)) == 400


def test_themes_look_distinct_and_readable(sites):
    layouts = {
        (t.header, t.listing, t.filters, t.density, t.font) for t in (s.theme for s in sites)
    }
    assert len(layouts) == len(sites)
    assert len({site.theme.accent for site in sites}) == len(sites)
    for site in sites:
        theme = site.theme
        assert theme.font in FONTS
        assert contrast(theme.text, theme.background) >= 4.5
        assert contrast(theme.accent, theme.background) >= 4.5  # links
        assert contrast(theme.accent, theme.accent_text) >= 4.0  # buttons
    for attribute in ("header", "listing", "filters", "density", "font"):
        assert len({getattr(site.theme, attribute) for site in sites}) > 1


def test_some_sites_have_banners_and_pop_ups(sites):
    assert sum(site.cookie_banner for site in sites) == 15
    assert sum(site.newsletter_popup for site in sites) == 10


def test_count_must_be_positive():
    with pytest.raises(ValueError, match="count"):
        generate_sites(count=0)


def test_cli_lists_sites_and_explains_serve():
    runner = CliRunner()
    result = runner.invoke(sites_app, ["list", "--count", "3"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert all(site.site_id in result.output for site in generate_sites(count=3))
    for command in (["serve", "--help"], ["list", "--help"]):
        result = runner.invoke(sites_app, command)
        assert result.exit_code == 0 and "Usage" in result.output
    assert "--host-resolver-rules" in runner.invoke(sites_app, ["serve", "--help"]).output
