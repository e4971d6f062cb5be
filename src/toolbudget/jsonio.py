"""Reading and writing JSON bodies, with every failure mapped to our errors.

orjson is strict in the ways a provider is: it refuses invalid UTF-8 and lone
surrogates, which a provider would also refuse, so refusing them here gives the
caller a clear message before a request is ever sent.

orjson also has limits a body may pass: it reads integers beyond 64 bits as
floats, and will not write them, nor values nested more than 254 deep. A body
is never altered for that: those (rare) bodies go through the standard
library, which keeps every integer exact.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from .errors import EncodingError, InvalidJSON, ShapeError

__all__ = ["Body", "dumps", "loads", "parse_exact", "to_body", "type_name"]

Body = dict[str, Any]

# Every digit read as "0": a run of 19 marks a number orjson may not keep exact (or a long
# digit string, which costs only the slower parse).
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * 19


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
            raise EncodingError(f"{what} is not valid UTF-8 text: {text}") from None
        raise InvalidJSON(f"{what} is not valid JSON: {text}") from None
    return parse_exact(bytes(data), value)


def dumps(value: Any, *, indent: bool = False) -> bytes:
    """Serialise deterministically (sorted keys are NOT used: key order is the caller's).

    Raises :class:`EncodingError` for text that is not valid UTF-8 and
    :class:`ShapeError` for a value JSON cannot hold.
    """
    option = orjson.OPT_INDENT_2 if indent else 0
    try:
        return orjson.dumps(value, option=option)
    except TypeError as exc:
        text = str(exc)
        if "surrogate" in text or "UTF-8" in text:
            raise EncodingError(f"output would hold text that is not valid UTF-8: {text}") from None
        if "64-bit" in text or "Recursion" in text:
            return _dumps_exact(value, indent)
        raise ShapeError(f"a value cannot be written as JSON: {text}") from None


def _dumps_exact(value: Any, indent: bool) -> bytes:
    """The standard library's JSON, laid out as orjson lays it out."""
    try:
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


def to_body(body: Any, *, what: str = "body") -> Body:
    """Accept a body as a dict, or as JSON bytes or text."""
    if isinstance(body, (bytes, bytearray, memoryview, str)):
        body = loads(body, what=what)
    if not isinstance(body, dict):
        raise ShapeError(f"{what} must be a JSON object, not {type_name(body)}")
    return body


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
