"""The Anthropic Messages API: requests (:mod:`.request`), replies (:mod:`.reply`), streams (:mod:`.stream`).

Everything toolbudget knows of this API lives in this package; the rest of
the library reaches it through :func:`toolbudget.wire.module` or
:func:`toolbudget.wire.dialect`.
"""

from __future__ import annotations

from typing import Any

from .reply import DIALECT, AnthropicDialect
from .request import API, adapt, parse, render
from .stream import MessageFolder

__all__ = ["API", "DIALECT", "AnthropicDialect", "MessageFolder", "adapt", "parse", "recall_tool", "render"]


def recall_tool() -> dict[str, Any]:
    """The recall tool's definition for a Messages request's ``tools``."""
    return DIALECT.recall_tool()
