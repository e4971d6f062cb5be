"""SDK objects as the plain JSON data the SDK would send for them.

A caller hands the SDK wrappers and the framework adapters whatever its SDK
takes: pydantic models (a previous answer's message or content blocks), the
"not given" sentinels, tuples, dates. The session works on JSON, so these are
laid out first, the way the SDK itself would serialise them, as a copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date
from typing import Any

__all__ = ["omitted", "plain"]

_OMITTED = frozenset({"NotGiven", "Omit"})


def omitted(value: Any) -> bool:
    """The SDKs' "not given" sentinels (``NOT_GIVEN``, ``omit``): as if the argument were absent."""
    return type(value).__name__ in _OMITTED


def plain(value: Any) -> Any:
    """``value`` as plain JSON data, copied: SDK models dumped as the SDK sends them, iterables listed."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items() if not omitted(v)}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    dump = None if isinstance(value, type) else getattr(value, "model_dump", None)
    if callable(dump):  # a pydantic model, such as a content block of an earlier answer
        exclude = getattr(value, "__api_exclude__", None)
        return plain(dump(mode="json", by_alias=True, exclude_unset=True, exclude=exclude, warnings=False))
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Iterable) and not isinstance(value, (bytes, bytearray, memoryview)):
        return [plain(v) for v in value]
    return value
