"""JSON: a smaller document of the same shape, still valid JSON, with every cut counted.

Cutting JSON text anywhere breaks it, and dropping items or keys silently
makes the model believe they are not there. So the preview is re-serialised
(compactly) from a shortened copy of the value:

- arrays keep their first and last items; the ones between become one note,
  ``"… 4998 more items …"``, or, in the top-level array, the marker itself;
- objects keep every key while that can fit; values are shortened instead
  (long strings end in ``… (+N chars)``, nested containers recursively);
  only when the keys alone cannot fit are the middle ones replaced by a
  ``"…": "N more keys"`` entry;
- the top-level marker goes under an added ``"toolbudget"`` key of an object,
  into the top-level array, or into a small wrapper object for a scalar.

How hard to shorten is searched on a fixed ladder of levels (items per
array, characters per string, keys per object, depth), from the gentlest, so
the result is deterministic and as complete as the room allows.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson

from ..errors import ToolbudgetError
from ..jsonio import dumps, parse_exact
from ._base import plural
from ._lines import safe_cut

__all__ = ["JsonCut", "JsonStrategy"]


@dataclass(frozen=True, slots=True)
class _Level:
    items: int | None
    chars: int | None
    keys: int | None
    depth: int | None


_LEVELS: tuple[_Level, ...] = (
    _Level(None, None, None, None),
    *(
        _Level(items, chars, None, None)
        for items, chars in (
            (1000, 4000),
            (400, 2000),
            (200, 1000),
            (100, 600),
            (60, 400),
            (40, 300),
            (24, 200),
            (16, 160),
            (10, 120),
            (8, 100),
            (6, 80),
            (4, 64),
            (2, 48),
            (2, 32),
            (2, 24),
            (2, 16),
        )
    ),
    _Level(2, 16, 64, None),
    _Level(2, 16, 32, 8),
    _Level(2, 12, 16, 6),
    _Level(2, 12, 8, 4),
    _Level(2, 8, 4, 3),
    _Level(2, 8, 2, 2),
    _Level(1, 8, 2, 1),
    _Level(1, 8, 1, 0),
)

MARKER_KEY = "toolbudget"
_CONTAINERS = (dict, list)  # a tuple: ``dict | list`` would build a union at every node


class _TooBig(Exception):
    """The shortened value already exceeds the room: this level cannot fit."""


@dataclass(slots=True)
class _Stats:
    items: int = 0  # array items left out
    keys: int = 0  # object keys left out
    strings: int = 0  # strings shortened
    nested: int = 0  # containers summarised at the depth limit
    synthetic: int = 0  # characters of notes the preview adds
    size: int = 0  # a lower bound of the serialised size so far


@dataclass(frozen=True, slots=True)
class JsonCut:
    """A JSON preview with a placeholder where the marker goes.

    ``placeholder`` is the JSON string literal (quotes included) that occurs
    exactly once in ``body``; the marker replaces it, serialised as a JSON string.
    """

    body: str
    placeholder: str
    omitted: int
    detail: str

    @property
    def size(self) -> int:
        """Length without the marker's own characters (its two quotes are counted)."""
        return len(self.body) - len(self.placeholder) + 2


def _type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    return "object"


def shape(value: Any, depth: int = 0) -> str:
    """A short description of a value's shape: ``{id: int, name: str, tags: list}``."""
    if isinstance(value, dict):
        keys = list(value)
        fields = ", ".join(f"{k[:30]}: {_type(value[k])}" for k in keys[:6])
        return "{" + fields + (", …" if len(keys) > 6 else "") + "}"
    if isinstance(value, list) and depth < 2:
        inner = f" {shape(value[0], depth + 1)}" if value else ""
        return f"list of {len(value)}{inner}"
    return _type(value)


class _Shortener:
    """One level's shortened copy of a value, given up (:class:`_TooBig`) once over the room.

    A search tries several levels on every node of the value, so the loops over arrays
    and objects take strings and scalars, nearly all of the nodes, themselves, without a
    call per node; what they grow is what :meth:`value` would.
    """

    def __init__(self, level: _Level, room: int) -> None:
        self.level = level
        self.room = room
        self.stats = _Stats()

    def note(self, text: str) -> str:
        """A note the preview adds; its characters are not the original's."""
        self.stats.synthetic += len(text) + 3  # its quotes and a comma
        self.grow(len(text) + 3)
        return text

    def grow(self, n: int) -> None:
        self.stats.size += n
        if self.stats.size > self.room:
            raise _TooBig

    def value(self, value: Any, depth: int) -> Any:
        level = self.level
        if isinstance(value, str):
            return self.string(value)
        if isinstance(value, _CONTAINERS) and level.depth is not None and depth > level.depth:
            self.stats.nested += 1
            what = plural(len(value), "key") if isinstance(value, dict) else plural(len(value), "item")
            return self.note(f"… {what} …")
        if isinstance(value, list):
            return self.array(value, depth, None)
        if isinstance(value, dict):
            return self.object(value, depth)
        self.grow(1)
        return value

    def string(self, value: str) -> str:
        limit = self.level.chars
        if limit is not None and len(value) > limit:
            cut = safe_cut(value, limit, -1, 0, len(value))
            self.stats.strings += 1
            suffix = f"… (+{len(value) - cut} chars)"
            self.stats.synthetic += len(suffix)
            self.grow(cut + len(suffix) + 2)
            return value[:cut] + suffix
        self.grow(len(value) + 2)
        return value

    def values(self, items: list[Any], depth: int) -> list[Any]:
        """``[self.value(v, depth) for v in items]``, with strings and scalars taken in the loop."""
        stats = self.stats
        room = self.room
        chars = self.level.chars
        out: list[Any] = []
        for item in items:
            if isinstance(item, str):
                if chars is not None and len(item) > chars:
                    out.append(self.string(item))
                    continue
                stats.size += len(item) + 2
            elif isinstance(item, _CONTAINERS):
                out.append(self.value(item, depth))
                continue
            else:
                stats.size += 1
            if stats.size > room:
                raise _TooBig
            out.append(item)
        return out

    def array(self, value: list[Any], depth: int, placeholder: str | None) -> list[Any]:
        """``value`` shortened; ``placeholder`` goes in the left-out run, or at position 1."""
        limit = self.level.items
        self.grow(2)
        if limit is None or len(value) <= limit:
            out = self.values(value, depth + 1)
            if placeholder is not None:
                out.insert(min(1, len(out)), placeholder)
            return out
        first = (limit + 1) // 2
        last = limit - first
        left = len(value) - first - last
        self.stats.items += left
        out = self.values(value[:first], depth + 1)
        if placeholder is not None:
            out.append(placeholder)
        else:
            out.append(self.note(f"… {left} more items …"))
        out.extend(self.values(value[len(value) - last :], depth + 1))
        return out

    def object(self, value: dict[str, Any], depth: int) -> dict[str, Any]:
        limit = self.level.keys
        keys = list(value)
        self.grow(2)
        if limit is None or len(keys) <= limit:
            return self.entries(value, keys, depth)
        first = (limit + 1) // 2
        last = limit - first
        left = len(keys) - first - last
        self.stats.keys += left
        out = self.entries(value, keys[:first], depth)
        out[_free_key(value, "…")] = self.note(f"{left} more keys")
        out.update(self.entries(value, keys[len(keys) - last :], depth))
        return out

    def entries(self, value: dict[str, Any], keys: list[str], depth: int) -> dict[str, Any]:
        """The entries of ``keys``: each key grows, then its value as :meth:`value` grows it."""
        stats = self.stats
        room = self.room
        chars = self.level.chars
        out: dict[str, Any] = {}
        for key in keys:
            stats.size += len(key) + 4
            if stats.size > room:
                raise _TooBig
            item = value[key]
            if isinstance(item, str):
                if chars is not None and len(item) > chars:
                    out[key] = self.string(item)
                    continue
                stats.size += len(item) + 2
            elif isinstance(item, _CONTAINERS):
                out[key] = self.value(item, depth + 1)
                continue
            else:
                stats.size += 1
            if stats.size > room:
                raise _TooBig
            out[key] = item
        return out


def _free_key(value: dict[str, Any], base: str) -> str:
    """``base``, or ``base`` with the smallest numeric suffix that ``value`` does not use."""
    if base not in value:
        return base
    n = 1
    while f"{base}{n}" in value:
        n += 1
    return f"{base}{n}"


class JsonStrategy:
    """Previews a text that is one JSON document (surrounding whitespace allowed)."""

    def __init__(self, text: str) -> None:
        self.text = text
        try:
            data = text.encode("utf-8")
            self.value: Any = parse_exact(data, orjson.loads(data))
            self.usable = True
        except (ValueError, TypeError, RecursionError):
            self.value = None
            self.usable = False
        self.placeholder = self._placeholder()

    def _placeholder(self) -> str:
        """A string the document does not hold, so that it is replaced exactly once.

        (A string that decodes to it from ``\\u`` escapes makes a level fail the
        uniqueness check in :meth:`_finish`; the minimal preview is still unique.)
        """
        n = 0
        while f"@@toolbudget-marker-{n}@@" in self.text:
            n += 1
        return f"@@toolbudget-marker-{n}@@"

    def plan(self, room: int) -> JsonCut:
        """The gentlest level whose preview fits in ``room`` (the marker's own characters not counted)."""
        lo, hi = 0, len(_LEVELS)
        best: JsonCut | None = None
        while lo < hi:
            mid = (lo + hi) // 2
            made = self._at(_LEVELS[mid], room)
            if made is not None:
                best, hi = made, mid
            else:
                lo = mid + 1
        return best if best is not None else self.minimal()

    def _at(self, level: _Level, room: int) -> JsonCut | None:
        shortener = _Shortener(level, room)
        try:
            out = self._top(shortener)
        except _TooBig:
            return None
        made = self._finish(out, shortener.stats)
        if made is None or made.size > room:
            return None
        return made

    def _top(self, shortener: _Shortener) -> Any:
        value = self.value
        placeholder = self.placeholder
        if isinstance(value, list):
            return shortener.array(value, 0, placeholder)
        if isinstance(value, dict):
            out = shortener.object(value, 0)
            return {_free_key(value, MARKER_KEY): placeholder, **out}
        return {MARKER_KEY: placeholder, "value": shortener.value(value, 0)}

    def minimal(self, short: bool = False) -> JsonCut:
        """Nothing but the marker and the counts, for a room too small for any level.

        ``short`` keeps the detail to the count alone (``12 items``, ``12 keys``).
        """
        value = self.value
        stats = _Stats()
        out: Any
        if isinstance(value, list):
            stats.items = len(value)
            out = [self.placeholder]
        elif isinstance(value, dict):
            stats.keys = len(value)
            out = {_free_key(value, MARKER_KEY): self.placeholder}
        else:
            out = {MARKER_KEY: self.placeholder}
        made = self._finish(out, stats)
        assert made is not None  # the placeholder is unique in so small a document
        if short:
            count = plural(len(value), "item") if isinstance(value, list) else ""
            count = plural(len(value), "key") if isinstance(value, dict) else count
            made = JsonCut(made.body, made.placeholder, made.omitted, count or _type(value))
        return made

    def _finish(self, out: Any, stats: _Stats) -> JsonCut | None:
        try:
            body = dumps(out).decode("utf-8")
        except ToolbudgetError:
            return None  # a shape JSON cannot write back: the text preview takes over
        literal = orjson.dumps(self.placeholder).decode("utf-8")
        if body.count(literal) != 1:
            return None
        # Characters of the original shown: the body without the marker's slot and our notes.
        overhead = len(literal) + 1 + stats.synthetic
        if isinstance(self.value, dict):
            overhead += len(MARKER_KEY) + 3
        elif not isinstance(self.value, list):
            overhead += len(MARKER_KEY) + len("value") + 8
        kept = max(0, min(len(self.text), len(body) - overhead))
        return JsonCut(body, literal, len(self.text) - kept, self._detail(stats))

    @cached_property
    def _what(self) -> str:
        """What the document is, the detail's first part (the same for every level tried)."""
        value = self.value
        if isinstance(value, list):
            return f"array of {plural(len(value), 'item')} like {shape(value[0]) if value else 'nothing'}"
        if isinstance(value, dict):
            return f"object with {plural(len(value), 'key')}"
        if isinstance(value, str):
            return f"a string of {plural(len(value), 'char')}"
        return f"a {_type(value)}"

    def _detail(self, stats: _Stats) -> str:
        head = self._what
        parts: list[str] = []
        if stats.items:
            parts.append(f"left out {plural(stats.items, 'array item')}")
        if stats.keys:
            parts.append(f"left out {plural(stats.keys, 'key')}")
        if stats.nested:
            parts.append(f"summarised {plural(stats.nested, 'nested container')}")
        if stats.strings:
            parts.append(f"shortened {plural(stats.strings, 'long string')}")
        if not parts:
            parts.append("reformatted compactly, nothing else left out")
        return ", ".join([head, *parts])
