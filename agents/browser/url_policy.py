"""Which URLs an agent may open: the hosts its task allows, over http(s), nothing private.

A refusal is data (a string the agent sees as the action's error), never an exception: the
browser worker turns it into an error observation and the episode goes on.

A host name is private when it resolves to a private address (a task's own host, or a name such
as ``metadata.google.internal``, may point at loopback or a cloud metadata endpoint):
:meth:`UrlPolicy.host_to_resolve` says which names the browser session looks up before it lets a
request go, and :meth:`UrlPolicy.resolved_refusal` judges the addresses found. The names the
browser maps itself (``--host-resolver-rules``: the practice web) are trusted and never looked up.
The look-up is best effort: the browser resolves again, so a name that changes its answer in
between (DNS rebinding) is not caught here; only egress filtering on the host stops that.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

ALLOWED_SCHEMES = frozenset({"http", "https"})
# Schemes whose requests go to a host over the network (a page's websockets too).
NETWORK_SCHEMES = frozenset({"http", "https", "ws", "wss"})
# Blank pages and in-page navigations the browser makes on its own are not agent navigations.
HARMLESS_URLS = frozenset({"about:blank"})
# Chromium's own fault pages, for chaos tests of the fleet; refused unless fault injection is on.
FAULT_URLS = frozenset({"chrome://crash", "chrome://crash/", "chrome://hang", "chrome://hang/"})
# Names the browser worker maps to an address itself (``--host-resolver-rules``): the practice web.
MAPPED_HOSTS = ("*.webgym.test",)


def host_of(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def _host_matches(host: str, pattern: str) -> bool:
    pattern = pattern.lower()
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) or host == pattern[2:]
    return host == pattern


def _ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _private_address(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        return False  # a name: see UrlPolicy.host_to_resolve
    return (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_reserved
        or address.is_multicast
        or address.is_unspecified
    )


@dataclass(frozen=True)
class UrlPolicy:
    """``allowed_hosts`` entries are exact hosts or ``*.suffix`` wildcards."""

    allowed_hosts: tuple[str, ...]
    allow_private: bool = False
    fault_injection: bool = False
    mapped_hosts: tuple[str, ...] = MAPPED_HOSTS

    @classmethod
    def for_episode(
        cls,
        start_url: str,
        allowed_hosts: list[str],
        allow_private: bool = False,
        fault_injection: bool = False,
    ) -> UrlPolicy:
        """The task's hosts; with none given, only the start URL's host."""
        hosts = tuple(allowed_hosts) or (host_of(start_url),)
        return cls(hosts, allow_private, fault_injection)

    def refusal(self, url: str) -> str | None:
        """Why ``url`` may not be opened, or None when it may."""
        if url in HARMLESS_URLS or (self.fault_injection and url in FAULT_URLS):
            return None
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ALLOWED_SCHEMES:
            return f"URL refused: scheme '{scheme or '(none)'}' is not allowed ({url[:200]})"
        host = (parts.hostname or "").lower()
        if not host:
            return f"URL refused: no host in {url[:200]}"
        if not any(_host_matches(host, pattern) for pattern in self.allowed_hosts):
            return (
                f"URL refused: host '{host}' is not allowed for this task "
                f"(allowed: {', '.join(self.allowed_hosts)})"
            )
        return self.private_refusal(url)

    def private_refusal(self, url: str) -> str | None:
        """Refusal for private, loopback and link-local hosts only (for a page's subresources)."""
        host = host_of(url)
        if host and _private_address(host) and not self.allow_private:
            return f"URL refused: '{host}' is a private, loopback or link-local address"
        return None

    def host_to_resolve(self, url: str) -> str | None:
        """The host name of ``url`` to look up before opening it. None for an IP literal (see
        :meth:`private_refusal`), a name the browser maps itself, or when private hosts are
        allowed."""
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if parts.scheme.lower() not in NETWORK_SCHEMES or not host or self.allow_private:
            return None
        if _ip_literal(host) or _private_address(host):
            return None
        if any(_host_matches(host, pattern) for pattern in self.mapped_hosts):
            return None
        return host

    def resolved_refusal(self, host: str, addresses: list[str]) -> str | None:
        """Refusal for a name that resolves to any private, loopback or link-local address."""
        for address in addresses:
            if _private_address(address):
                return (
                    f"URL refused: '{host}' resolves to {address.split('%')[0]}, a private, "
                    "loopback or link-local address"
                )
        return None
