"""What travels between the client and the upstream: the URL, and every header but the hop-by-hop ones.

Headers are forwarded by a deny-list, never an allow-list: clients add new
ones with every release (``anthropic-beta`` values, Codex's session and
window headers), and dropping one breaks a feature pair or the provider's
prompt cache. Credentials (``x-api-key``, ``Authorization``,
``x-goog-api-key``) go through untouched; the proxy keeps none of its own.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["HOP_BY_HOP", "forwarded", "upstream_url"]

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "expect",
        "forwarded",
        "via",
        "x-real-ip",
    }
)
"""Headers that belong to one connection, not to the request (RFC 9110 §7.6.1), and proxy traces."""


def forwarded(pairs: Iterable[tuple[str, str]], *, drop: Iterable[str] = ()) -> list[tuple[str, str]]:
    """``pairs`` in their order and case, without hop-by-hop headers, those ``Connection`` names,
    ``x-forwarded-*``, and ``drop``."""
    pairs = list(pairs)
    gone = set(HOP_BY_HOP) | {name.lower() for name in drop}
    for name, value in pairs:
        if name.lower() == "connection":
            gone.update(token.strip().lower() for token in value.split(",") if token.strip())
    return [
        (name, value)
        for name, value in pairs
        if name.lower() not in gone and not name.lower().startswith("x-forwarded-")
    ]


def upstream_url(base: str, path_qs: str) -> str:
    """The upstream's URL for a request's path and query: the base, then the path as it came."""
    return base + path_qs
