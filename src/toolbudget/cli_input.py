"""What the command line reads: one body, or JSON Lines of them, from bytes a file or pipe gave.

The library's reader (:mod:`toolbudget.jsonio`) is strict, as a provider is.
The command line reads files people made with other tools, so it also takes
what is valid JSON but outside orjson's reach, and says precisely what is not:

- a UTF-8 byte-order mark (some editors write one) is skipped;
- a number too large for a double (``1e400``) is read by the standard library,
  and written back as its own literal text (``1e400``, never ``Infinity`` or
  ``null``), so the body keeps its meaning;
- bytes that are not UTF-8 are named by value and offset
  (``byte 0xe9 at offset 41 (line 1, column 42)``), not as orjson's "surrogates
  not allowed";
- ``convert --all`` writes one body per line, and ``validate``, ``repair`` and
  ``compact`` read that back: input that is not one JSON value but whose lines
  each are is JSON Lines, each line a body;
- an agent's session file (what ``convert`` reads) is refused as such, with
  the command that makes a body of it, rather than read as a body.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson

from .errors import EncodingError, InputError, InvalidJSON, ShapeError
from .jsonio import ExactFloat, ExactInt, in_order_of, keep_literals, loads, to_body, utf8_error
from .jsonio import dumps as strict_dumps
from .transcripts import format_of

__all__ = ["Input", "dump", "read_bodies", "rewritten"]

BOM = b"\xef\xbb\xbf"


_MAX_DIGITS = 4000
"""Beyond this many digits a number stays infinite inside (Python will not print longer integers)."""


class BigNumber(ExactInt):
    """A number past a double's range (``1e400``), kept exact, with its own text for output.

    Such a literal is an integer (its exponent outgrows any fraction), so it is
    held as one: the library's pipeline measures it like any big integer, and,
    being a kept literal (:class:`~toolbudget.jsonio.ExactInt`), every writer of
    :mod:`toolbudget.jsonio` writes its original text, whichever JSON library
    the rest of the body needs.
    """

    def __new__(cls, text: str, value: int) -> BigNumber:
        number = int.__new__(cls, value)
        number.literal = text
        return number

    def __reduce__(self) -> tuple[Any, ...]:
        return (BigNumber, (self.literal, int(self)))


class HugeNumber(ExactFloat):
    """A literal too long to hold exactly (``1e99999``): infinite inside, its own text for output."""


@dataclass(frozen=True, slots=True)
class Input:
    """One body of the input."""

    body: dict[str, Any]
    raw: bytes
    """The body's own bytes (without a byte-order mark), to write back when nothing changed."""
    line: int | None = None
    """Its line number (from 1) in JSON Lines input; ``None`` for a single body."""
    exact: bool = False
    """It holds numbers only the standard library reads: write it with :func:`dump`."""

    def where(self, what: str) -> str:
        return f"{what} line {self.line}" if self.line is not None else what


def _float(text: str) -> Any:
    value = float(text)
    if not math.isinf(value):
        # Spelled otherwise than it would be written (``1E5``, ``1.50``): keep the spelling.
        return value if orjson.dumps(value) == text.encode() else ExactFloat(text)
    exact = Decimal(text)
    exponent = exact.adjusted()
    return BigNumber(text, int(exact)) if exponent < _MAX_DIGITS else HugeNumber(text)


def _int(text: str) -> int:
    value = int(text)
    return value if str(value) == text else ExactInt(text)  # ``-0``


def _constant(text: str) -> Any:
    raise InvalidJSON(f"{text} is not a JSON number")


def _one(data: bytes, what: str) -> tuple[Any, bool]:
    """One JSON value, and whether the standard library had to read it."""
    try:
        return loads(data, what=what), False
    except EncodingError:
        precise = utf8_error(data, what)
        if precise is not None:
            raise precise from None
        raise
    except InvalidJSON as exc:
        if "infinity" not in str(exc):
            raise
    try:
        return json.loads(data, parse_float=_float, parse_int=_int, parse_constant=_constant), True
    except (ValueError, RecursionError) as exc:
        raise InvalidJSON(f"{what} is not valid JSON: {exc}") from None


def _lines(data: bytes, what: str) -> list[Input] | None:
    """``data`` as JSON Lines, or ``None`` when it is not (its first line is not a JSON object)."""
    lines = data.split(b"\n")
    numbered = [(n, line) for n, line in enumerate(lines, 1) if line.strip()]
    if len(numbered) < 2:
        return None
    try:
        first, _ = _one(numbered[0][1], what)
    except InputError:
        return None
    if not isinstance(first, dict):
        return None
    read: list[tuple[int, bytes, Any, bool]] = []
    for n, line in numbered:
        line = line.rstrip(b"\r")
        try:
            value, exact = _one(line, f"{what} line {n}")
        except InputError:
            # A session file cut off mid-line is still a session file: say that first.
            _refuse_transcript(None, [r[2] for r in read[:_SNIFFED]], what)
            raise
        read.append((n, line, value, exact))
    _refuse_transcript(None, [r[2] for r in read[:_SNIFFED]], what)
    return [Input(_object(value, f"{what} line {n}"), line, n, exact) for n, line, value, exact in read]


_SNIFFED = 20
"""How many JSON Lines records the transcript check looks at (the sniffers look at no more)."""


def _refuse_transcript(doc: Any, records: list[Any], what: str) -> None:
    """Raise :class:`ShapeError` when the input is an agent's session file, not request bodies.

    A session file is JSON too, and some look enough like a body (a list of
    ``messages``) to be read as one and called valid; what the user needs is
    the command that makes a body of it.
    """
    found = format_of(doc, records)
    if found is not None:
        raise ShapeError(
            f"{what} is an agent transcript ({found}), not a request body; "
            "make a body of it with `toolbudget convert FILE --to API`"
        )


def read_bodies(data: bytes, what: str) -> list[Input]:
    """Every body in ``data``: one JSON object, or JSON Lines of them."""
    if data.startswith(BOM):
        data = data[len(BOM) :]
    try:
        value, exact = _one(data, what)
    except InvalidJSON:
        many = _lines(data, what)
        if many is None:
            raise
        return many
    _refuse_transcript(value, [], what)
    return [Input(_object(value, what), data, None, exact)]


def _object(value: Any, what: str) -> dict[str, Any]:
    """The body a JSON value read from a file is, or :class:`ShapeError`.

    The library's :func:`~toolbudget.jsonio.to_body` reads a ``str`` as JSON
    text; a file whose JSON value is a string is no body, whatever the string
    says (a JSON text inside it, or a path).
    """
    if isinstance(value, str):
        raise ShapeError(f"{what} must be a JSON object, not a string")
    return to_body(value, what=what)


def dump(value: Any) -> bytes:
    """``value`` as JSON; every number read from a kept literal is written as that literal."""
    return strict_dumps(value)


def rewritten(item: Input, out: dict[str, Any]) -> bytes:
    """The bytes of ``out``, a body built from ``item.body``, written as ``item`` was.

    Its fields come in the input's order, and the numbers it carries over keep
    the literal text they had in the input (``1E5``, ``1.50``, ``-0``), as the
    library's :func:`~toolbudget.repair` does for a body given as bytes.
    """
    out = in_order_of(item.body, out)
    if not item.exact:  # the standard library's reading already holds every literal
        out = keep_literals(out, item.body, item.raw)
    return dump(out)
