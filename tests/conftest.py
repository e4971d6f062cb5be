"""Shared test fixtures: where the shared trajectories are, and how to skip without them."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import orjson
import pytest

from toolbudget import load_transcript
from toolbudget.model import Conversation

REPO = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    # The default archive lives in the user's cache directory: tests (and the processes they
    # start) keep theirs in a private temp dir instead of the real one.
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="toolbudget-test-cache-")


def shared_dir() -> Path:
    """``../shared`` next to the repository, or ``$TOOLBUDGET_SHARED``."""
    env = os.environ.get("TOOLBUDGET_SHARED")
    return Path(env) if env else REPO.parent / "shared"


def trajectories_dir() -> Path:
    return shared_dir() / "data" / "trajectories"


SKIP_REASON = (
    "../shared/data/trajectories is absent (a fresh clone has no shared data); "
    "set TOOLBUDGET_SHARED to the shared folder to run these tests"
)


@pytest.fixture(scope="session")
def trajectories() -> Path:
    path = trajectories_dir()
    if not (path / "manifest.json").is_file():
        pytest.skip(SKIP_REASON)
    return path


@pytest.fixture(scope="session")
def real(trajectories: Path) -> list[tuple[str, Conversation]]:
    """Every conversation of every shared transcript, named ``file#id``."""
    manifest = orjson.loads((trajectories / "manifest.json").read_bytes())
    out = []
    for entry in manifest:
        for conversation in load_transcript(trajectories / entry["file"]).conversations:
            out.append((f"{entry['file']}#{conversation.id}", conversation))
    assert len(out) >= 260
    return out
