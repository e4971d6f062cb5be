"""OpenAI Chat Completions: requests (:mod:`.request`), replies (:mod:`.reply`), streams (:mod:`.stream`).

Everything toolbudget knows of this API lives in this package; the rest of
the library reaches it through :func:`toolbudget.wire.module` or
:func:`toolbudget.wire.dialect`.
"""

from __future__ import annotations

from typing import Any

from .reply import DIALECT, ChatDialect
from .request import API, adapt, parse, render
from .stream import ChunkFolder

__all__ = [
    "API",
    "DIALECT",
    "ChatDialect",
    "ChunkFolder",
    "adapt",
    "parse",
    "recall_tool",
    "render",
    "strict_recall_tool",
]


def recall_tool() -> dict[str, Any]:
    """The recall tool's definition for a Chat Completions request's ``tools``."""
    return DIALECT.recall_tool()


def strict_recall_tool() -> dict[str, Any]:
    """The recall tool in strict form (every property required, nullable when optional)."""
    return DIALECT.strict_recall_tool()
