"""Gemini ``generateContent``: requests (:mod:`.request`), replies (:mod:`.reply`), streams (:mod:`.stream`).

Everything toolbudget knows of this API lives in this package; the rest of
the library reaches it through :func:`toolbudget.wire.module` or
:func:`toolbudget.wire.dialect`.
"""

from __future__ import annotations

from typing import Any

from .reply import DIALECT, GeminiDialect
from .request import API, SIGNATURE_KEYS, SKIP_SIGNATURE, adapt, parse, render
from .stream import ChunkFolder

__all__ = [
    "API",
    "DIALECT",
    "SIGNATURE_KEYS",
    "SKIP_SIGNATURE",
    "ChunkFolder",
    "GeminiDialect",
    "adapt",
    "parse",
    "recall_tool",
    "render",
]


def recall_tool() -> dict[str, Any]:
    """The recall tool's definition, a ``functionDeclarations`` entry."""
    return DIALECT.recall_tool()
