import pytest

from agents.browser.url_policy import UrlPolicy


@pytest.fixture
def policy():
    return UrlPolicy.for_episode("http://kettles.webgym.test/", [])


def test_the_start_host_is_allowed_by_default(policy):
    assert policy.refusal("http://kettles.webgym.test/products?page=2") is None
    assert policy.refusal("https://kettles.webgym.test/") is None
    assert policy.refusal("about:blank") is None


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://other.webgym.test/", "host 'other.webgym.test' is not allowed"),
        ("file:///etc/passwd", "scheme 'file' is not allowed"),
        ("chrome://settings", "scheme 'chrome' is not allowed"),
        ("chrome://crash", "scheme 'chrome' is not allowed"),
        ("javascript:alert(1)", "scheme 'javascript' is not allowed"),
        ("kettles.webgym.test/no-scheme", "scheme '(none)' is not allowed"),
    ],
)
def test_refusals_say_why(policy, url, reason):
    assert reason in policy.refusal(url)


def test_wildcards_and_private_addresses():
    policy = UrlPolicy.for_episode(
        "http://a.webgym.test/", ["*.webgym.test", "127.0.0.1", "10.1.2.3"]
    )
    assert policy.refusal("http://b.webgym.test/") is None
    assert policy.refusal("http://webgym.test/") is None
    assert "private" in policy.refusal("http://127.0.0.1:8080/")
    assert "private" in policy.refusal("http://10.1.2.3/")
    opened = UrlPolicy(policy.allowed_hosts, allow_private=True)
    assert opened.refusal("http://127.0.0.1:8080/") is None
    for link_local in ("http://169.254.169.254/", "http://[fe80::1]/", "http://localhost/"):
        everything = UrlPolicy(("169.254.169.254", "fe80::1", "localhost"))
        assert "private" in everything.refusal(link_local)


def test_fault_pages_only_with_fault_injection():
    policy = UrlPolicy(("x.webgym.test",), fault_injection=True)
    assert policy.refusal("chrome://crash") is None
    assert policy.refusal("chrome://settings") is not None


def test_subresources_are_policed_for_private_addresses_only(policy):
    assert policy.private_refusal("http://cdn.example.com/app.js") is None
    assert "private" in policy.private_refusal("http://169.254.169.254/latest/meta-data")
    assert UrlPolicy(("x",), allow_private=True).private_refusal("http://10.0.0.1/") is None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://docs.example.org/a", "docs.example.org"),
        ("wss://Docs.Example.org/socket", "docs.example.org"),  # websockets go over the network
        ("http://127.0.0.1/", None),  # an IP literal: judged by private_refusal, no look-up
        ("http://[::1]:8080/", None),
        ("http://localhost/", None),  # private by name already
        ("http://shop.webgym.test/", None),  # the browser maps the practice web itself
        ("file:///etc/passwd", None),  # not a network scheme
        ("data:text/html,hi", None),
        ("https:///nohost", None),
    ],
)
def test_which_host_names_are_looked_up(url, expected):
    assert UrlPolicy(("*",)).host_to_resolve(url) == expected


def test_nothing_is_looked_up_when_private_hosts_are_allowed():
    assert UrlPolicy(("*",), allow_private=True).host_to_resolve("https://a.example.org") is None


@pytest.mark.parametrize(
    "address", ["127.0.0.1", "10.1.2.3", "192.168.0.10", "169.254.169.254", "::1", "fe80::1%eth0"]
)
def test_a_name_resolving_to_a_private_address_is_refused(address):
    refusal = UrlPolicy(("*",)).resolved_refusal("metadata.example", ["93.184.216.34", address])
    assert refusal is not None
    assert "'metadata.example' resolves to" in refusal and address.split("%")[0] in refusal


def test_a_name_resolving_only_to_public_addresses_is_allowed():
    policy = UrlPolicy(("*",))
    assert policy.resolved_refusal("example.org", ["93.184.216.34", "2606:2800:220:1::1"]) is None
    assert policy.resolved_refusal("example.org", []) is None
