"""Pytest fixtures for the real-client tests; a test module imports the ones it uses.

``agent_base_url`` is the only URL a client is ever pointed at. It is built
from :data:`HOPS`: each hop is a context manager that takes the upstream's
root URL and yields the root URL a client should use, running whatever sits
in between for as long as the test does. Today there is one hop, ``direct``
(the upstream itself). Registering another (the proxy) in :data:`HOPS` runs
every real-client test through it as well, under its own test id, with no
change to any test: the assertions read what the upstream received, which is
what the hop forwarded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from .install import Client, require_client
from .upstream import Upstream

__all__ = ["HOPS", "agent_base_url", "claude", "client_home", "codex", "direct", "upstream", "workdir"]


@contextmanager
def direct(upstream_url: str) -> Iterator[str]:
    """No hop: the client talks to the upstream."""
    yield upstream_url


Hop = Callable[[str], AbstractContextManager[str]]

HOPS: dict[str, Hop] = {"direct": direct}


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    """A fresh scripted upstream; a test sets its ``script`` (and limits) before running a client."""
    with Upstream() as server:
        yield server


@pytest.fixture(params=sorted(HOPS))
def agent_base_url(request: pytest.FixtureRequest, upstream: Upstream) -> Iterator[str]:
    """The root URL the client is pointed at: the upstream, through the hop of this run."""
    hop = HOPS[request.param]
    with hop(upstream.url) as url:
        yield url


@pytest.fixture
def claude() -> Client:
    return require_client("claude")


@pytest.fixture
def codex() -> Client:
    return require_client("codex")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The client's working directory (its project)."""
    path = tmp_path / "project"
    path.mkdir()
    return path


@pytest.fixture
def client_home(tmp_path: Path) -> Path:
    """The client's ``HOME``: its config, caches and saved outputs stay in the test."""
    path = tmp_path / "home"
    path.mkdir()
    return path
