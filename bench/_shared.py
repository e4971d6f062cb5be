"""What the benchmarks share: where the real sessions are, and how to time a call fairly.

Each benchmark that reads sessions measures the shared ones by default, or the
transcript files named on its command line (your own, in any format
toolbudget reads): ``python bench/pairing.py ~/.claude/projects/x/y.jsonl``.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
# A benchmark's child process may run another tree's toolbudget beside this one (``--baseline``):
# it names that tree here, since this path comes before PYTHONPATH's.
sys.path.insert(0, os.environ.get("TB_BENCH_SRC") or str(REPO / "src"))

from toolbudget import load_transcript  # noqa: E402
from toolbudget.model import Conversation  # noqa: E402
from toolbudget.store.dir import default_dir_root  # noqa: E402


def store_scratch(prefix: str = "bench-") -> tempfile.TemporaryDirectory[str]:
    """A directory for a benchmark's ``dir:`` stores, beside the user's own archives.

    A benchmark's archives go where a user's go (``dir:`` alone is
    :func:`~toolbudget.store.dir.default_dir_root`), not under ``/tmp``: on
    some machines ``/tmp`` is a far slower place to make a file, and the
    benchmark would then measure that directory (on the 2-core VM these
    figures come from, creating a file took a median 600 us in ``/tmp``
    against 40 us in ``~/.cache``, on the same ext4 disk). ``TB_BENCH_SCRATCH``
    names another parent, to measure a store somewhere else.
    """
    return tempfile.TemporaryDirectory(prefix=prefix, dir=scratch_parent())


def scratch_parent() -> Path:
    """Where :func:`store_scratch` makes its directories (made if missing)."""
    parent = Path(os.environ.get("TB_BENCH_SCRATCH") or default_dir_root().parent)
    parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    return parent


def trajectories() -> Path:
    """``../shared/data/trajectories``, or under ``$TOOLBUDGET_SHARED``."""
    env = os.environ.get("TOOLBUDGET_SHARED")
    return (Path(env) if env else REPO.parent / "shared") / "data" / "trajectories"


def add_paths(parser: argparse.ArgumentParser) -> None:
    """The transcripts to measure, as positional arguments: a user's own sessions, any format."""
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="TRANSCRIPT",
        help="transcript files to measure (any format toolbudget reads); the shared manifest by default",
    )


def require_trajectories(paths: Sequence[str] = ()) -> None:
    """Stop with one line when neither transcripts were given nor the shared ones are there."""
    if not paths and not (trajectories() / "manifest.json").is_file():
        sys.exit(
            f"the shared trajectories are not at {trajectories()} "
            "(set TOOLBUDGET_SHARED, or name your own transcript files)"
        )


def transcript_files(paths: Sequence[str] = ()) -> list[tuple[str, Path]]:
    """``(name, path)`` of each transcript to measure: the ones given, or every one of the manifest."""
    if paths:
        return [(path, Path(path)) for path in paths]
    root = trajectories()
    return [
        (entry["file"], root / entry["file"]) for entry in orjson.loads((root / "manifest.json").read_bytes())
    ]


def conversations(paths: Sequence[str] = ()) -> list[tuple[str, Conversation]]:
    """Every conversation of the transcripts given (or of every shared one), named ``file#id``."""
    out = []
    for name, path in transcript_files(paths):
        for conversation in load_transcript(path).conversations:
            out.append((f"{name}#{conversation.id}", conversation))
    return out


def write_result(path: str | Path, result: Any) -> None:
    """Write a benchmark's result as indented JSON (its directory made if missing), and say where."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    print(f"wrote {out}")


def p95(values: Sequence[float]) -> float:
    """The 95th percentile of ``values``: the one 95% of the way up the sorted list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


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
