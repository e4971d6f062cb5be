"""Benchmark: previews of the largest results, and how their cost grows with the result.

Three results a coding agent meets: a log of ``--lines`` lines with errors and
tracebacks in it, one line of about 5 MB (a minified bundle, a base64 blob),
and a source file repeated until it is large, of which only the kind is
detected. Each is timed, then timed again at four times its size: 4.0 is
linear. Writes ``bench/results/previews.json``.

    python bench/previews.py [--lines N] [--repeat N] [--out PATH]
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _shared import timed
from toolbudget.previews import detect, make_preview

PYTHON = 'def handler(event):\n    """Handle one event."""\n    return {"ok": True, "event": event}\n\n'


def log(lines: int) -> str:
    out = []
    for i in range(lines):
        if i % 997 == 0:
            out.append(f"ERROR step {i} failed")
        elif i % 4999 == 0:
            out.append('Traceback (most recent call last):\n  File "a.py", line 3, in f\nValueError: bad')
        else:
            out.append(f"2024-01-01 12:00:{i % 60:02d} INFO processing item {i} of the batch")
    return "\n".join(out) + "\n"


def one_line(units: int) -> str:
    return ("0123456789abcdef" * 8 + "é") * units


def marker(original: int, detail: str) -> str:
    return f"[toolbudget: omitted of {original} chars ({detail}); key <<tb:0123456789abcdef>>]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "previews.json"))
    args = parser.parse_args()
    cases: dict[str, Callable[[int], Callable[[], Any]]] = {
        "log preview": lambda n: functools.partial(make_preview, log(n), 20_000, marker=marker),
        "single-line preview": lambda n: functools.partial(
            make_preview, one_line(n // 3), 20_000, marker=marker
        ),
        "detect": lambda n: functools.partial(detect, PYTHON * (n // 50)),
    }
    results = {}
    for name, make in cases.items():
        small = timed(make(args.lines), args.repeat)
        large = timed(make(4 * args.lines), args.repeat)
        results[name] = {"seconds": small, "seconds_at_4x": large, "growth_at_4x": large / small}
        print(f"{name:20} {small * 1e3:8.1f} ms; 4x the size: {large / small:5.1f}x the time")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
