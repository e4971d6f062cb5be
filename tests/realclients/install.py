"""Where the real clients are installed, and whether a test may run without them.

``scripts/setup.sh`` installs the packages pinned in ``package.json`` (next to
this file) with npm into :func:`clients_dir`, outside the tracked tree: the
native binaries are hundreds of MB and belong to no commit. The tests look
only there, never on ``PATH``, so the version a test proves is the pinned one.

A machine without npm skips these tests and says what is missing. Under CI,
or when ``scripts/test.sh`` found npm (it exports ``REALCLIENTS_REQUIRED``),
a missing client is a failure: a harness that silently skips proves nothing.

The two variables (``REALCLIENTS_DIR``, ``REALCLIENTS_REQUIRED``) carry no
``TOOLBUDGET_`` prefix: toolbudget warns of every ``TOOLBUDGET_`` variable that is
not one of its settings, and these belong to the tests alone.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

__all__ = ["PACKAGE_JSON", "Client", "clients_dir", "pinned", "require_client", "required"]

PACKAGE_JSON = Path(__file__).with_name("package.json")


@dataclass(frozen=True, slots=True)
class Client:
    """One installed client: the binary a test runs and the version it reports."""

    name: str
    package: str
    version: str
    binary: Path


BINARIES = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex"}


def clients_dir() -> Path:
    """``$REALCLIENTS_DIR``, else ``~/.cache/toolbudget-tests/npm``, as setup.sh installs.

    Not under ``$XDG_CACHE_HOME``: the test session points that at a temporary directory.
    """
    env = os.environ.get("REALCLIENTS_DIR")
    return Path(env) if env else Path.home() / ".cache" / "toolbudget-tests" / "npm"


def pinned() -> dict[str, str]:
    """Package name to the exact version the tests were proved with."""
    deps: dict[str, str] = orjson.loads(PACKAGE_JSON.read_bytes())["dependencies"]
    return deps


def required() -> bool:
    """Whether a missing client fails the test instead of skipping it."""
    return bool(os.environ.get("CI")) or bool(os.environ.get("REALCLIENTS_REQUIRED"))


def _missing(what: str) -> None:
    if required():
        pytest.fail(f"{what}; CI (and scripts/test.sh with npm present) must run the real clients")
    pytest.skip(what)


def require_client(name: str) -> Client:
    """The installed client ``name`` (``claude`` or ``codex``) at its pinned version.

    Skips naming what is missing, or fails under CI (see :func:`required`).
    """
    package = BINARIES[name]
    version = pinned()[package]
    root = clients_dir()
    binary = root / "node_modules" / ".bin" / name
    manifest = root / "node_modules" / package / "package.json"
    if not binary.exists() or not manifest.is_file():
        hint = "run scripts/setup.sh" if shutil.which("npm") else "npm is not installed"
        _missing(f"{package}@{version} is not installed in {root} ({hint})")
    found = orjson.loads(manifest.read_bytes()).get("version")
    if found != version:
        _missing(f"{package} in {root} is {found}, the tests are pinned to {version} (run scripts/setup.sh)")
    if name == "codex" and shutil.which("node") is None:
        _missing("node is not installed; the codex launcher is a node script")
    return Client(name, package, version, binary)
