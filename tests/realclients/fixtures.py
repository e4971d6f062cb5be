"""Pytest fixtures for the real-client tests (a test module loads them with ``pytest_plugins``).

``agent_base_url`` is the only URL a client is ever pointed at: the upstream,
through the hop of this run. Each test runs once per hop in
:data:`realclients.hops.HOPS` (see there for how to add one).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .hops import HOPS, Hop
from .install import Client, require_client
from .upstream import Upstream

__all__ = ["agent_base_url", "claude", "client_home", "codex", "hop", "upstream", "workdir"]


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    """A fresh scripted upstream; a test sets its ``script`` (and limits) before running a client."""
    with Upstream() as server:
        yield server


@pytest.fixture(params=sorted(HOPS))
def hop(request: pytest.FixtureRequest) -> Hop:
    """The hop of this run (each test runs once per hop in :data:`HOPS`)."""
    return HOPS[request.param]


@pytest.fixture
def agent_base_url(hop: Hop, upstream: Upstream) -> Iterator[str]:
    """The root URL the client is pointed at: the upstream, through the hop of this run."""
    with hop.start(upstream.url) as url:
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
