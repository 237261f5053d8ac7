"""Which URLs an agent may open: the hosts its task allows, over http(s), nothing private.

A refusal is data (a string the agent sees as the action's error), never an exception: the
browser worker turns it into an error observation and the episode goes on.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

ALLOWED_SCHEMES = frozenset({"http", "https"})
# Blank pages and in-page navigations the browser makes on its own are not agent navigations.
HARMLESS_URLS = frozenset({"about:blank"})
# Chromium's own fault pages, for chaos tests of the fleet; refused unless fault injection is on.
FAULT_URLS = frozenset({"chrome://crash", "chrome://crash/", "chrome://hang", "chrome://hang/"})


def host_of(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def _host_matches(host: str, pattern: str) -> bool:
    pattern = pattern.lower()
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) or host == pattern[2:]
    return host == pattern


def _private_address(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False  # a name: resolved by the browser, policed by the host list
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
