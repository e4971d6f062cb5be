"""Reading and writing JSON bodies, with every failure mapped to our errors.

orjson is strict in the ways a provider is: it refuses invalid UTF-8 and lone
surrogates, which a provider would also refuse, so refusing them here gives the
caller a clear message before a request is ever sent.

orjson also has limits a body may pass: it reads integers beyond 64 bits as
floats, and will not write them, nor values nested more than 254 deep. A body
is never altered for that: those (rare) bodies go through the standard
library, which keeps every integer exact.

A number's value survives any parse, but its spelling does not: ``1E5`` is
read as ``100000.0`` and written back that way, and
``1.0000000000000000000001`` becomes ``1.0``. A body that must be written
again after a change reads its numbers with :func:`loads_exact`, which keeps
the literal of every number that would not be written back as it came
(:class:`ExactFloat`, :class:`ExactInt`), and :func:`dumps` writes those
literals back verbatim. The common path (no change, or only plainly written
numbers) never pays for it.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import orjson

from .errors import EncodingError, InvalidJSON, ShapeError

__all__ = [
    "Body",
    "ExactFloat",
    "ExactInt",
    "dumps",
    "in_order_of",
    "keep_literals",
    "loads",
    "loads_exact",
    "parse_exact",
    "to_body",
    "type_name",
    "utf8_error",
    "with_literals",
]

Body = dict[str, Any]

# Every digit read as "0": a run of 19 marks a number orjson may not keep exact (or a long
# digit string, which costs only the slower parse).
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * 19
# The integers orjson reads as integers; it reads any other as a float.
_ORJSON_INT_MIN = -(1 << 63)
_ORJSON_INT_MAX = (1 << 64) - 1


def parse_exact(data: bytes, value: Any) -> Any:
    """``value`` (orjson's reading of ``data``), or an exact reading when integers may be too big."""
    if _LONG_RUN in data.translate(_DIGITS_AS_ZERO):
        return json.loads(data)
    return value


def loads(data: bytes | bytearray | memoryview | str, *, what: str = "input") -> Any:
    """Parse JSON text, raising :class:`InvalidJSON` or :class:`EncodingError`."""
    if isinstance(data, str):
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise EncodingError(f"{what} holds a lone surrogate at character {exc.start}") from None
    if not data or not bytes(data).strip():
        raise InvalidJSON(f"{what} is empty")
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        text = str(exc)
        if "UTF-8" in text or "surrogate" in text:
            raise (
                utf8_error(bytes(data), what) or EncodingError(f"{what} is not valid UTF-8 text: {text}")
            ) from None
        raise InvalidJSON(f"{what} is not valid JSON: {text}") from None
    return parse_exact(bytes(data), value)


def utf8_error(data: bytes, what: str) -> EncodingError | None:
    """Which byte of ``data`` is not UTF-8, and where; ``None`` when ``data`` is UTF-8.

    orjson says "surrogates not allowed" of any byte that is not UTF-8, which
    points nowhere; the offset, line and column point at the byte itself.
    (UTF-8 bytes may still spell a lone surrogate as an escape: orjson's own
    message, with its position, says that one well.)
    """
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        return EncodingError(
            f"{what} is not valid UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start} "
            f"(line {line}, column {column}) is not part of a UTF-8 character"
        )
    return None


class ExactFloat(float):
    """A JSON number read with its literal text, which :func:`dumps` writes back verbatim.

    It is the float the literal denotes, so it compares, hashes and computes as
    that float; only its spelling (``1E5``, ``1.50``, more digits than a double
    holds) is kept apart.
    """

    literal: str

    def __new__(cls, literal: str) -> ExactFloat:
        number = super().__new__(cls, literal)
        number.literal = literal
        return number

    def __reduce__(self) -> tuple[Any, ...]:
        return (ExactFloat, (self.literal,))


class ExactInt(int):
    """An integer whose literal is not how it is written back (``-0``), or that a fast reading may
    have taken for a float (past 64 bits); kept like :class:`ExactFloat`."""

    literal: str

    def __new__(cls, literal: str) -> ExactInt:
        number = super().__new__(cls, literal)
        number.literal = literal
        return number

    def __reduce__(self) -> tuple[Any, ...]:
        return (ExactInt, (self.literal,))


def loads_exact(data: bytes | bytearray | memoryview | str, value: Any = None) -> Any | None:
    """``data`` read with every number's literal kept where writing it back would change it.

    ``None`` when there is no such number, so the caller keeps its fast
    reading. ``data`` must be JSON that :func:`loads` accepted. ``value`` is
    that reading, when the caller has it: if :func:`dumps` writes it back as
    ``data`` itself (a body written compactly, as orjson and httpx write
    them), every literal is already the one written back, and ``data`` is not
    read a second time.
    """
    if value is not None:
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        try:
            if dumps(value) == raw:
                return None
        except (EncodingError, ShapeError):
            pass
    found = False

    def read_float(literal: str) -> float:
        nonlocal found
        value = float(literal)
        try:
            if orjson.dumps(value).decode() == literal:
                return value
        except TypeError:  # inf or nan from an out-of-range literal: only the literal can say it
            pass
        found = True
        return ExactFloat(literal)

    def read_int(literal: str) -> int:
        nonlocal found
        value = int(literal)
        # Past 64 bits orjson reads an integer as a float (the proxy's reading): its twin must be kept.
        if str(value) == literal and _ORJSON_INT_MIN <= value <= _ORJSON_INT_MAX:
            return value
        found = True
        return ExactInt(literal)

    text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    value = json.loads(text, parse_float=read_float, parse_int=read_int)
    return value if found else None


def _default(value: Any) -> Any:
    """What orjson cannot write itself: kept literals verbatim, other subclasses as their base type."""
    if isinstance(value, (ExactFloat, ExactInt)):
        return orjson.Fragment(value.literal)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def dumps(value: Any, *, indent: bool = False) -> bytes:
    """Serialise deterministically (sorted keys are NOT used: key order is the caller's).

    Numbers read by :func:`loads_exact` are written in their own literal.
    Raises :class:`EncodingError` for text that is not valid UTF-8 and
    :class:`ShapeError` for a value JSON cannot hold.
    """
    option = orjson.OPT_PASSTHROUGH_SUBCLASS | (orjson.OPT_INDENT_2 if indent else 0)
    try:
        return orjson.dumps(value, option=option, default=_default)
    except TypeError as exc:
        text = str(exc)
        if "surrogate" in text or "UTF-8" in text:
            raise EncodingError(f"output would hold text that is not valid UTF-8: {text}") from None
        if "64-bit" in text or "Recursion" in text:
            return _dumps_exact(value, indent)
        raise ShapeError(f"a value cannot be written as JSON: {text}") from None


def _with_literals(value: Any, indent: bool) -> str:
    """The standard library's JSON text for ``value``, with kept literals written verbatim.

    ``json`` writes numbers through ``int.__repr__`` and ``float.__repr__`` and
    has no public hook to change that, so this writer lays the value out the
    way ``json.dumps(ensure_ascii=False, allow_nan=False)`` does (``indent=2``
    or compact separators), writing strings with ``json.dumps`` itself. It is
    used only for the rare bodies orjson cannot write that also hold literals.
    """
    out: list[str] = []
    on_path: set[int] = set()  # the containers being written, to refuse a cycle as json does
    colon = ": " if indent else ":"

    def number(item: Any) -> str:
        if isinstance(item, (ExactFloat, ExactInt)):
            return item.literal
        if isinstance(item, int):
            return int.__repr__(item)
        if not math.isfinite(item):
            raise ValueError(f"Out of range float values are not JSON compliant: {item!r}")
        return float.__repr__(item)

    def key_text(key: Any) -> str:
        if isinstance(key, str):
            return key
        if key is True or key is False or key is None:
            return json.dumps(key)
        if isinstance(key, (int, float)):
            return number(key)
        raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")

    def write(item: Any, depth: int) -> None:
        if isinstance(item, str):
            out.append(json.dumps(item, ensure_ascii=False))
        elif item is None or item is True or item is False:
            out.append(json.dumps(item))
        elif isinstance(item, (int, float)):
            out.append(number(item))
        elif isinstance(item, (dict, list, tuple)):
            container(item, depth)
        else:
            raise TypeError(f"Object of type {type(item).__name__} is not JSON serializable")

    def container(item: dict[Any, Any] | list[Any] | tuple[Any, ...], depth: int) -> None:
        opening, closing = ("{", "}") if isinstance(item, dict) else ("[", "]")
        if not item:
            out.append(opening + closing)
            return
        if id(item) in on_path:
            raise ValueError("Circular reference detected")
        on_path.add(id(item))
        inner = "\n" + "  " * (depth + 1) if indent else ""
        out.append(opening)
        for at, entry in enumerate(item.items() if isinstance(item, dict) else item):
            out.append(("," if at else "") + inner)
            if isinstance(item, dict):
                out.append(json.dumps(key_text(entry[0]), ensure_ascii=False) + colon)
                entry = entry[1]
            write(entry, depth + 1)
        out.append(("\n" + "  " * depth if indent else "") + closing)
        on_path.discard(id(item))

    write(value, 0)
    return "".join(out)


def _has_literals(value: Any) -> bool:
    """Whether a value holds a kept literal anywhere (checked only on the rare standard-library path).

    Each container is looked into once, so a value that holds itself ends the
    search (the writer then refuses the cycle) instead of growing it forever.
    """
    stack = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, (ExactFloat, ExactInt)):
            return True
        if isinstance(item, (dict, list, tuple)):
            if id(item) in seen:
                continue
            seen.add(id(item))
            if isinstance(item, dict):
                stack.extend(item.keys())
                stack.extend(item.values())
            else:
                stack.extend(item)
    return False


def _dumps_exact(value: Any, indent: bool) -> bytes:
    """The standard library's JSON, laid out as orjson lays it out."""
    try:
        if _has_literals(value):
            text = _with_literals(value, indent)
        else:
            text = json.dumps(
                value,
                ensure_ascii=False,
                allow_nan=False,
                indent=2 if indent else None,
                separators=(",", ": ") if indent else (",", ":"),
            )
    except RecursionError:
        raise ShapeError("a value is nested too deeply to be written as JSON") from None
    except (TypeError, ValueError) as exc:
        raise ShapeError(f"a value cannot be written as JSON: {exc}") from None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise EncodingError(f"output would hold a lone surrogate at character {exc.start}") from None


def keep_literals(out: Any, parsed: Any, data: bytes | bytearray | memoryview | str) -> Any:
    """``out``, built from ``parsed`` (the reading of ``data``), with every number it carries over in
    the literal ``data`` spells it with, where :func:`dumps` would write it another way.

    The one step every writer of a changed body takes (a repair, a managed
    body, the command line, the proxy): ``out`` itself when no number needs it.
    """
    try:
        exact = loads_exact(data, parsed)
    except RecursionError:  # nested past Python's stack: the numbers go out as they were read
        return out
    return out if exact is None else with_literals(out, parsed, exact)


def with_literals(out: Any, parsed: Any, exact: Any) -> Any:
    """``out`` with the numbers it carries over from ``parsed`` in their literal text.

    ``parsed`` is a body as :func:`loads` read it and ``exact`` the same bytes
    read by :func:`loads_exact`; ``out`` was built from ``parsed`` (a repaired
    or managed body), sharing its untouched objects. Every object of
    ``parsed`` that holds a kept literal is swapped for its twin in ``exact``,
    and every float read from a kept literal for that literal, wherever it
    sits in ``out``. ``out`` itself is not changed: containers on the way are
    copied. (A ``-0`` sitting alone in a new object below the top level reads
    as ``0``: integers are shared objects, so an integer cannot be told by
    where it came from; the body's own top-level fields are told by name.)
    """
    twins: dict[int, Any] = {}
    floats: dict[int, ExactFloat] = {}
    keep: list[Any] = []  # keeps the ids above from being reused while they are looked up

    def pair(a: Any, b: Any) -> bool:
        """Record the twins under ``a``/``b``; whether ``b`` holds a kept literal."""
        if isinstance(b, ExactFloat):
            floats[id(a)] = b
            keep.append(a)
            return True
        if isinstance(b, ExactInt):
            return True
        held = False
        if isinstance(a, dict) and isinstance(b, dict):
            for key, value in a.items():
                held = pair(value, b[key]) or held
        elif isinstance(a, list) and isinstance(b, list):
            for x, y in zip(a, b, strict=True):
                held = pair(x, y) or held
        if held:
            twins[id(a)] = b
            keep.append(a)
        return held

    def swap(node: Any) -> Any:
        twin = twins.get(id(node))
        if twin is not None:
            return twin
        if isinstance(node, float):
            return floats.get(id(node), node)
        if isinstance(node, dict):
            items = {k: swap(v) for k, v in node.items()}
            return items if any(items[k] is not v for k, v in node.items()) else node
        if isinstance(node, list):
            values = [swap(v) for v in node]
            return values if any(x is not y for x, y in zip(values, node, strict=True)) else node
        return node

    try:
        pair(parsed, exact)
        swapped = swap(out)
    except RecursionError:  # nested past Python's stack: the numbers go out as they were read
        return out
    return _top_level_ints(swapped, parsed, exact)


def _top_level_ints(out: Any, parsed: Any, exact: Any) -> Any:
    """``out`` with the body's own top-level fields that hold a kept integer (``-0``) in their literal.

    An integer cannot be told by its object, but a top-level field is told by
    its name: a managed or repaired body is always a new object, laid out field
    for field from the caller's, so a field still holding the very number the
    caller's held is the caller's field.
    """
    if not (isinstance(out, dict) and isinstance(parsed, dict) and isinstance(exact, dict)):
        return out
    kept = {
        key: value
        for key, value in exact.items()
        if isinstance(value, ExactInt) and key in out and out[key] is parsed.get(key)
    }
    return {**out, **kept} if kept else out


def in_order_of(given: Any, out: Body) -> Body:
    """``out`` with its fields in the order ``given`` (the caller's body) has them, new fields last.

    A body written again after a change then reads like the one it came from, field for field.
    """
    if not isinstance(given, dict) or list(out) == [k for k in given if k in out]:
        return out
    ordered = {k: out[k] for k in given if k in out}
    ordered.update((k, v) for k, v in out.items() if k not in ordered)
    return ordered


def to_body(body: Any, *, what: str = "body") -> Body:
    """Accept a body as a dict, or as JSON bytes or text.

    A file's path given instead of its content is said to be one: the JSON
    error alone would point at the first character of the path.
    """
    if type(body) is dict:
        return body  # what every call of a library caller gives, told apart in one step
    if isinstance(body, os.PathLike):
        raise ShapeError(f"{what} must be a JSON object, not a path: {_PATH_HINT.format(os.fspath(body))}")
    if isinstance(body, (bytes, bytearray, memoryview, str)):
        try:
            body = loads(body, what=what)
        except InvalidJSON:
            if isinstance(body, str) and _looks_like_path(body):
                raise InvalidJSON(f"{what} is not valid JSON: {_PATH_HINT.format(body)}") from None
            raise
    if not isinstance(body, dict):
        raise ShapeError(f"{what} must be a JSON object, not {type_name(body)}")
    return body


_PATH_HINT = "{!r} looks like a file path; read the file first (toolbudget.load_transcript for session files)"


def _looks_like_path(text: str) -> bool:
    """Whether ``text`` reads as a path: it names a file, or a JSON file, and holds no JSON container."""
    if "{" in text or "[" in text or "\n" in text or len(text) > 4096:
        return False
    name = text.strip()
    if name.lower().endswith((".json", ".jsonl")):
        return True
    try:
        return bool(name) and os.path.exists(name)
    except (OSError, ValueError):
        return False


def type_name(value: Any) -> str:
    """How a JSON value's type reads in an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
