"""OpenAI Chat Completions: request bodies, completions and their limit, chunk streams, the recall tool."""

from __future__ import annotations

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


recall_tool = DIALECT.recall_tool
"""The recall tool's definition, for this API's tool list."""

strict_recall_tool = DIALECT.strict_recall_tool
"""The recall tool in strict form (every property required, nullable when optional)."""
