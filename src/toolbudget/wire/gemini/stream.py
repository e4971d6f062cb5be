"""``streamGenerateContent`` folded into one ``GenerateContentResponse``.

Each chunk of the stream is a whole ``GenerateContentResponse`` holding the
parts written since the last one (``reference/integrations.md`` 4.1). The
folded reply appends every candidate's parts in order, joining the text of a
text part to the text part before it when both are answer text or both are
thought (the API splits text at arbitrary points; the unstreamed reply holds
it whole), and keeps the last ``finishReason``, the last ``usageMetadata``
(each chunk's counts are the totals so far) and the last of every other
field. There is no end event: the stream ends when the connection closes.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .._stream import Appends, copied, event_index
from .request import snake_case

__all__ = ["ChunkFolder", "field"]


def field(obj: Any, camel: str) -> Any:
    """``obj[camel]``, or its snake_case spelling (the Python SDK's dumps use that one)."""
    if not isinstance(obj, Mapping):
        return None
    value = obj.get(camel)
    return obj.get(snake_case(camel)) if value is None else value


def _text_run(part: Mapping[str, Any]) -> bool | None:
    """Whether ``part`` is thought text (``True``), answer text (``False``), or no plain text (``None``)."""
    if not isinstance(part.get("text"), str):
        return None
    if any(k not in ("text", "thought", "thoughtSignature", "thought_signature") for k in part):
        return None
    return bool(part.get("thought"))


class ChunkFolder:
    """One ``streamGenerateContent`` stream, folded into the reply it streams."""

    kinds: frozenset[str | None] | None = None
    unread: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self._reply: dict[str, Any] | None = None
        self._candidates: dict[int, dict[str, Any]] = {}
        self._text = Appends()

    def see(self, event: Mapping[str, Any]) -> None:
        if self._reply is None:
            self._reply = {}
        for key, value in event.items():
            if key != "candidates" and value is not None:
                self._reply[key] = copy.deepcopy(value)
        for candidate in event.get("candidates") or []:
            if isinstance(candidate, Mapping):
                self._candidate(candidate)

    def _candidate(self, candidate: Mapping[str, Any]) -> None:
        index = event_index(candidate, "index") or 0
        target = self._candidates.setdefault(index, {"content": {"parts": []}})
        for key, value in candidate.items():
            if key != "content" and value is not None:
                target[key] = copy.deepcopy(value)
        content = candidate.get("content")
        if not isinstance(content, Mapping):
            return
        folded = target["content"]
        for key, value in content.items():
            if key != "parts" and value is not None:
                folded[key] = copy.deepcopy(value)
        parts: list[dict[str, Any]] = folded["parts"]
        for part in content.get("parts") or []:
            if not isinstance(part, Mapping):
                continue
            run = _text_run(part)
            last = parts[-1] if parts else None
            if run is not None and last is not None and _text_run(last) is run:
                last.update({k: copy.deepcopy(v) for k, v in part.items() if k != "text"})
                self._text.add(last, "text", part["text"])
            else:
                parts.append(copy.deepcopy(dict(part)))

    def reply(self) -> dict[str, Any] | None:
        self._text.settle()
        reply = copied(self._reply)
        if reply is None:
            return None
        if self._candidates:
            reply["candidates"] = [copy.deepcopy(self._candidates[i]) for i in sorted(self._candidates)]
        return reply
