"""What the framework adapter tests share: a tool whose output is large, a scripted agent, a real server.

Each framework's test drives the same ten-turn agent with the framework's own
fake model: eight searches whose results are far over the per-result cap, a
recall of the first marker the model saw, and a final answer. The script
reads only what the model was shown, so a test proves that the model saw
markers (not the originals) and that the recall tool, called with a key taken
from a marker, returns the original.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from llama_server import llama_server, require_llama_server
from toolbudget import MARKER_RE, RECALL_TOOL

__all__ = [
    "FINAL",
    "N_CTX",
    "SEARCHES",
    "TOOL",
    "Step",
    "llama_url",
    "marker_keys",
    "next_step",
    "run_example",
    "search_output",
]

TOOL = "search_logs"
SEARCHES = 8
"""Searches before the recall; with the recall and the final answer, ten model turns in all."""
FINAL = "The failures all come from the parser."
N_CTX = 1024
"""The real server's window: a 5,000-character preview alone is over it, so the first request overflows."""


def search_output(query: str) -> str:
    """A search's output: about 60,000 characters, three times the default per-result cap."""
    return "\n".join(
        f"{query} hit {i:04d}: src/parser/module_{i % 37}.py:{i} ERROR token" for i in range(1200)
    )


def marker_keys(texts: Sequence[str]) -> list[str]:
    """The keys of every marker in ``texts``, in order."""
    return [m["key"] for text in texts for m in MARKER_RE.finditer(text) if m["key"]]


@dataclass(frozen=True)
class Step:
    """What the scripted model does next: call ``tool`` with ``args``, or answer ``text``."""

    tool: str | None
    args: dict[str, str]
    text: str = ""


def next_step(turn: int, tool_texts: Sequence[str]) -> Step:
    """Turn ``turn`` (0-based) of the script, given the tool results the model was shown so far."""
    if turn < SEARCHES:
        return Step(TOOL, {"query": f"q{turn}"})
    if turn == SEARCHES:
        keys = marker_keys(tool_texts)
        assert keys, "the model was shown no marker"
        return Step(RECALL_TOOL, {"key": keys[0], "lines": "1:3"})
    return Step(None, {}, FINAL)


KEY_LINE = re.compile(r"q0 hit 0000: ")
"""The first line of the first search's output: what the recall of its marker must return."""


@pytest.fixture(scope="module")
def llama_url() -> Iterator[str]:
    require_llama_server()
    with llama_server(n_ctx=N_CTX) as url:
        yield url


def run_example(name: str, *args: str) -> str:
    """Run ``examples/NAME`` on this tree's sources; its standard output (it must exit 0)."""
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo / "src")}
    done = subprocess.run(
        [sys.executable, str(repo / "examples" / name), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def import_error_without(package: str, adapter: str) -> str:
    """What importing ``toolbudget.adapters.ADAPTER`` says in a Python where ``package`` is missing."""
    code = (
        f"import sys\nsys.modules[{package!r}] = None\n"
        f"try:\n    import toolbudget.adapters.{adapter}\n"
        "except ImportError as e:\n    print(e)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        timeout=120,
        check=True,
    ).stdout.strip()
