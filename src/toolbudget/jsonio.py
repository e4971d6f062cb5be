"""Reading and writing JSON bodies, with every failure mapped to our errors.

orjson is strict in the ways a provider is: it refuses invalid UTF-8 and lone
surrogates, which a provider would also refuse, so refusing them here gives the
caller a clear message before a request is ever sent.
"""

from __future__ import annotations

from typing import Any

import orjson

from .errors import EncodingError, InvalidJSON, ShapeError

__all__ = ["Body", "dumps", "loads", "to_body", "type_name"]

Body = dict[str, Any]


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
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        text = str(exc)
        if "UTF-8" in text or "surrogate" in text:
            raise EncodingError(f"{what} is not valid UTF-8 text: {text}") from None
        raise InvalidJSON(f"{what} is not valid JSON: {text}") from None


def dumps(value: Any, *, indent: bool = False) -> bytes:
    """Serialise deterministically (sorted keys are NOT used: key order is the caller's)."""
    option = orjson.OPT_INDENT_2 if indent else 0
    try:
        return orjson.dumps(value, option=option)
    except TypeError as exc:
        text = str(exc)
        if "surrogate" in text or "UTF-8" in text:
            raise EncodingError(f"output would hold text that is not valid UTF-8: {text}") from None
        raise


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
