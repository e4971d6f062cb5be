"""Gemini ``generateContent``: request bodies, candidates and their limit, chunk streams, the recall tool."""

from __future__ import annotations

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


recall_tool = DIALECT.recall_tool
"""The recall tool's definition, for this API's tool list."""
