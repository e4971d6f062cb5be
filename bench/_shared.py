"""What the benchmarks share: where the real sessions are, and how to time a call fairly."""

from __future__ import annotations

import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from toolbudget import load_transcript  # noqa: E402
from toolbudget.model import Conversation  # noqa: E402


def trajectories() -> Path:
    """``../shared/data/trajectories``, or under ``$TOOLBUDGET_SHARED``."""
    env = os.environ.get("TOOLBUDGET_SHARED")
    return (Path(env) if env else REPO.parent / "shared") / "data" / "trajectories"


def require_trajectories() -> None:
    if not (trajectories() / "manifest.json").is_file():
        sys.exit(f"the shared trajectories are not at {trajectories()} (set TOOLBUDGET_SHARED)")


def conversations() -> list[tuple[str, Conversation]]:
    """Every conversation of every shared transcript, named ``file#id``."""
    root = trajectories()
    out = []
    for entry in orjson.loads((root / "manifest.json").read_bytes()):
        for conversation in load_transcript(root / entry["file"]).conversations:
            out.append((f"{entry['file']}#{conversation.id}", conversation))
    return out


def json_round_trip(raw: bytes) -> bytes:
    """What every comparison is measured against: orjson.loads, then orjson.dumps."""
    return orjson.dumps(orjson.loads(raw))


def timed(fn: Callable[[], Any], repeat: int) -> float:
    """The median of ``repeat`` runs, in seconds, with the garbage collector held off."""
    times = []
    for _ in range(repeat):
        gc.disable()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        gc.enable()
    return statistics.median(times)
