"""The Anthropic Messages API: request bodies, replies and their ``max_tokens``, streams, the recall tool."""

from __future__ import annotations

from .reply import DIALECT, AnthropicDialect
from .request import API, adapt, parse, render
from .stream import MessageFolder

__all__ = ["API", "DIALECT", "AnthropicDialect", "MessageFolder", "adapt", "parse", "recall_tool", "render"]


recall_tool = DIALECT.recall_tool
"""The recall tool's definition, for this API's tool list."""
