"""OpenAI Responses: request bodies, responses and ``max_output_tokens``, event streams, the recall tool."""

from __future__ import annotations

from .reply import DIALECT, ResponsesDialect
from .request import API, adapt, parse, render
from .stream import ResponseFolder

__all__ = ["API", "DIALECT", "ResponseFolder", "ResponsesDialect", "adapt", "parse", "recall_tool", "render"]


recall_tool = DIALECT.recall_tool
"""The recall tool's definition, for this API's tool list."""
