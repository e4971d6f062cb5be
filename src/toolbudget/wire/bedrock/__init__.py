"""Bedrock Converse: request bodies, Converse replies and ``maxTokens``, ConverseStream, the recall tool."""

from __future__ import annotations

from .reply import DIALECT, ConverseDialect
from .request import API, adapt, parse, render
from .stream import EventFolder

__all__ = ["API", "DIALECT", "ConverseDialect", "EventFolder", "adapt", "parse", "recall_tool", "render"]


recall_tool = DIALECT.recall_tool
"""The recall tool's definition, for this API's tool list."""
