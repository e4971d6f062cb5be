"""What sits between a real client and the scripted upstream.

Each :class:`Hop` starts whatever sits between client and upstream, given the
upstream's root URL, and yields the root URL a client should use, for as long
as the test runs: ``direct`` (the upstream itself) and ``proxy`` (a
``toolbudget proxy`` in front of it, with a store of its own). Every
real-client test runs through each, under its own test id, with no change to
any test: the assertions read what the upstream received, which is what the
hop forwarded.
A hop that is not ``faithful`` may change what it forwards (the proxy cuts
large results); tests then accept a large result either whole or cut with a
toolbudget marker (:func:`whole_or_cut`).

This module is imported by test modules, so it holds no fixtures (those are in
:mod:`realclients.fixtures`, loaded as a plugin).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from toolbudget.marker import find_markers

__all__ = ["HOPS", "Hop", "direct", "proxy", "whole_or_cut"]


@contextmanager
def direct(upstream_url: str) -> Iterator[str]:
    """No hop: the client talks to the upstream."""
    yield upstream_url


@contextmanager
def proxy(upstream_url: str) -> Iterator[str]:
    """A ``toolbudget proxy`` in this process, forwarding every API to the upstream.

    Its store is a directory of its own, on this machine, so the paths its
    markers name are files the client's own read tool opens.
    """
    from toolbudget.proxy.config import ProxyConfig, upstreams_of
    from toolbudget.proxy.server import running

    root = tempfile.mkdtemp(prefix="toolbudget-hop-")
    try:
        config = ProxyConfig(upstreams=upstreams_of(upstream_url), store=f"dir:{root}")
        with running(config) as server:
            yield server.url
    finally:
        shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class Hop:
    """What sits between the client and the upstream."""

    start: Callable[[str], AbstractContextManager[str]]
    """Given the upstream's root URL, runs the hop and yields the root URL for the client."""
    faithful: bool
    """Whether it forwards every body unchanged (then sizes are asserted exactly)."""


HOPS: dict[str, Hop] = {"direct": Hop(direct, faithful=True), "proxy": Hop(proxy, faithful=False)}


def whole_or_cut(hop: Hop, text: str, size: int) -> bool:
    """Whether a result the client sent at ``size`` characters or more arrived as it should:
    whole through a faithful hop, else whole or cut with a marker."""
    if len(text) >= size:
        return True
    return not hop.faithful and bool(find_markers(text))
