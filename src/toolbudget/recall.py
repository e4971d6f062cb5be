"""Recall: how an agent gets back what a cut left out, a page at a time.

Every marker carries a ``<<tb:KEY>>``. The recall tool, added to the agent's
tools, answers a call with a page of the original: by line range, by a regex
over its lines, or by character range for a single giant line. A page never
exceeds its cap, header and footer included, and says how to ask for the next
one, so a recalled 900 KB diff is read in pages instead of being cut again.

The arguments come from the model, so they are treated as hostile input. The
accepted grammar is exact, and anything outside it gets a one-line reason
naming what is wrong rather than a wrong page or an exception:

* ``key``: a string, the KEY of a marker (``<<tb:KEY>>`` spelled whole is fine).
* ``lines``: 1-based and inclusive, ``1 <= A <= B``: the string ``"A:B"``
  (``"A-B"`` too), ``"A:"`` (to the end), ``":B"`` (from the first), ``"A"``
  (one line); a whole number ``A`` (one line); or a list ``[A, B]`` whose ``B``
  may be ``null`` (to the end).
* ``chars``: 0-based with ``B`` excluded, ``0 <= A < B``: the same forms, ``"A"``
  and ``A`` meaning the one character at ``A``. It cannot be combined with
  ``lines`` or ``grep``.
* ``grep``: a non-empty string of at most :data:`MAX_PATTERN_CHARS` characters,
  run by RE2 (see below); ``lines`` narrows the lines it searches.
* Numbers are whole (not booleans, not floats) and at most :data:`MAX_NUMBER`;
  ``null`` or ``""`` for ``lines``, ``chars`` or ``grep`` means not given; any
  other argument name is refused, so a misspelt ``line`` is not silently ignored.

``grep`` runs on RE2, whose matching time is linear in the text, because a
backtracking engine given ``(a+)+$`` by a model never finishes on a long line.
The work of one call is bounded too (:data:`GREP_WORK`, the bytes searched times
the size of the compiled pattern): a search that reaches it answers what it
found so far and points at the line to go on from, so the answer depends on
the text and the pattern only, never on the speed of the machine. RE2 has no
backreferences or lookaround; such a pattern is refused with a reason, and text
that is no regular expression at all is matched as plain text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import re2

from .errors import InputError, NotFoundError, StoreError
from .marker import KEY_RE, RECALL_TOOL

__all__ = [
    "GREP_WORK",
    "MAX_NUMBER",
    "MAX_PATTERN_CHARS",
    "MIN_PAGE_CHARS",
    "RECALL_DESCRIPTION",
    "RECALL_PARAMETERS",
    "RecallQuery",
    "key_of",
    "parse_query",
    "recall_page",
    "recall_tool",
]

MAX_NUMBER = 10**12
"""The largest line or character number accepted: far past any output, and short to print."""

MAX_PATTERN_CHARS = 1000
"""The longest ``grep`` pattern accepted; every page's pointer to the next one carries it whole."""

GREP_WORK = 50_000_000
"""The work one grep call may do: bytes searched times the compiled pattern's size (well under a second)."""

RECALL_DESCRIPTION = (
    "Read tool output that toolbudget cut from the conversation. Every cut is marked "
    "[toolbudget: omitted N of M chars ...; key <<tb:KEY>> ...]. Pass that KEY, and either "
    'lines "A:B" (1-based, inclusive; "A:" to the end) or grep "REGEX" (RE2 syntax: matching lines '
    'with their numbers), or chars "A:B" for one very long line. With neither, the first page is '
    "returned. Each answer is one page and says how to ask for the next."
)

RECALL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "key": {"type": "string", "description": "The KEY from a <<tb:KEY>> marker."},
        "lines": {
            "type": "string",
            "description": (
                'A line range "A:B", 1-based and inclusive, 1 <= A <= B; "A:" runs to the end, '
                '"A" is one line.'
            ),
        },
        "grep": {
            "type": "string",
            "description": (
                "A regular expression in RE2 syntax (no backreferences or lookaround), at most "
                f"{MAX_PATTERN_CHARS} characters; matching lines are returned, within lines if given."
            ),
        },
        "chars": {
            "type": "string",
            "description": (
                'A character range "A:B", 0-based with B excluded, 0 <= A < B; "A:" runs to the end. '
                "Not combined with lines or grep."
            ),
        },
    },
    "required": ["key"],
}

_NAMES = ("key", "lines", "grep", "chars")
_KEY = re.compile(KEY_RE)
_RANGE = re.compile(r"\s*([0-9]+)?\s*(?:([:\-])\s*([0-9]+)?\s*)?", re.ASCII)
_LINE_LIMIT = 400  # characters of one matching line shown in a grep answer
_SHOWN = 60  # characters of a bad value quoted back in a reason


@dataclass(frozen=True, slots=True)
class RecallQuery:
    """What to show of one original. Built only valid: a bad range raises :class:`InputError`.

    ``lines`` is ``(A, B)`` 1-based and inclusive, ``chars`` is ``(A, B)`` 0-based
    with ``B`` excluded; ``B`` is ``None`` for "to the end".
    """

    key: str
    lines: tuple[int, int | None] | None = None
    grep: str | None = None
    chars: tuple[int, int | None] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.key, str):
            raise InputError(f'"key" must be a string, not {_kind(self.key)}')
        _check_range(self.lines, "lines", self.lines)
        _check_range(self.chars, "chars", self.chars)
        if self.grep is not None:
            _check_grep(self.grep)
        if self.chars is not None and (self.lines is not None or self.grep is not None):
            raise InputError('"chars" cannot be combined with "lines" or "grep"')


def recall_tool(api: str) -> dict[str, Any]:
    """The recall tool's definition, in the wire form of ``api`` (its dialect writes it)."""
    from .wire import module, resolve_api

    return module(resolve_api(api)).recall_tool()


def parse_query(arguments: Mapping[str, Any] | str) -> RecallQuery:
    """A recall call's arguments (an object, or its JSON text) as a query.

    Raises :class:`InputError` with a one-line message the model can act on.
    """
    if isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError as error:
            raise InputError(f"the arguments are not JSON: {str(error)[:80]}") from None
    if not isinstance(arguments, Mapping):
        raise InputError(f'the arguments must be a JSON object with a "key", not {_kind(arguments)}')
    unknown = [name for name in arguments if name not in _NAMES]
    if unknown:
        raise InputError(
            f"unknown argument {_shown(unknown[0])}: the arguments are key, lines, grep and chars"
        )
    key = arguments.get("key")
    if key is None or (isinstance(key, str) and not key.strip()):
        raise InputError('a "key" is needed: the KEY of a <<tb:KEY>> marker')
    if not isinstance(key, str):
        raise InputError(f'"key" must be a string, the KEY of a <<tb:KEY>> marker, not {_kind(key)}')
    key = key_of(key)
    grep = arguments.get("grep")
    if grep == "":
        raise InputError('"grep" must be a non-empty regular expression')
    return RecallQuery(
        key,
        _range(arguments.get("lines"), "lines", first=1),
        grep,
        _range(arguments.get("chars"), "chars", first=0),
    )


def _range(value: Any, name: str, *, first: int) -> tuple[int, int | None] | None:
    """One of the accepted spellings of a range as ``(A, B)``, checked."""
    if value is None or value == "":
        return None
    forms = f'"{name}" must be a string "A:B", a whole number or a list [A, B], not {_shown(value)}'
    out: tuple[Any, Any]
    if _whole(value):
        out = (value, value if first == 1 else value + 1)
    elif isinstance(value, (list, tuple)):
        if len(value) != 2 or not _whole(value[0]) or not (value[1] is None or _whole(value[1])):
            raise InputError(
                f'"{name}" {_shown(value)}: a list must be [A, B], two whole numbers (B may be null)'
            )
        out = (value[0], value[1])
    elif isinstance(value, str):
        match = _RANGE.fullmatch(value)
        # "-5" reads as "the last five" as often as "up to 5": without a start, only ":B" is taken.
        if not match or not (match[1] or match[3]) or (not match[1] and match[2] == "-"):
            raise InputError(f'"{name}" must look like "A:B", "A:" or "A", not {_shown(value)}')
        if max(len(match[1] or ""), len(match[3] or "")) > len(str(MAX_NUMBER)):
            raise InputError(f'"{name}" {_shown(value)}: numbers must be at most {MAX_NUMBER}')
        start = int(match[1]) if match[1] else first
        if not match[2]:
            end: int | None = start if first == 1 else start + 1
        else:
            end = int(match[3]) if match[3] else None
        out = (start, end)
    else:
        raise InputError(forms)
    _check_range(out, name, value)
    return out


def _check_range(value: Any, name: str, given: Any) -> None:
    if value is None:
        return
    first = 1 if name == "lines" else 0
    if (
        not isinstance(value, tuple)
        or len(value) != 2
        or not _whole(value[0])
        or not (value[1] is None or _whole(value[1]))
    ):
        raise InputError(
            f'"{name}" must be (A, B), whole numbers with B None for the end, not {_shown(given)}'
        )
    start, end = value
    if start > MAX_NUMBER or (end is not None and end > MAX_NUMBER + 1 - first):
        raise InputError(f'"{name}" {_shown(given)}: numbers must be at most {MAX_NUMBER}')
    if start < first:
        unit = "lines count from 1" if first == 1 else "characters count from 0"
        raise InputError(f'"{name}" {_shown(given)}: {unit}')
    if end is not None and (end < start if first == 1 else end <= start):
        what = "the end comes before the start" if first == 1 else "the range is empty (B is excluded)"
        raise InputError(f'"{name}" {_shown(given)}: {what}')


def _check_grep(pattern: Any) -> None:
    if not isinstance(pattern, str):
        raise InputError(f'"grep" must be a string, a regular expression, not {_kind(pattern)}')
    if not pattern:
        raise InputError('"grep" must be a non-empty regular expression')
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InputError(f'"grep" must be at most {MAX_PATTERN_CHARS} characters, not {len(pattern)}')


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    """A bad value named by its JSON type, and quoted if it is short."""
    kinds = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    if value is None:
        return "null"
    for kind, name in kinds.items():
        if isinstance(value, kind):
            return f"{name} ({_shown(value)})"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


def _shown(value: Any) -> str:
    """A value quoted back on one line, shortened: the model wrote it, it may be huge."""
    if _whole(value) and abs(value) >= 10**_SHOWN:
        return f"a number of more than {_SHOWN} digits"
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def answer(
    arguments: Mapping[str, Any] | str,
    original: Callable[[str], str],
    max_chars: int,
    *,
    tool: str = RECALL_TOOL,
) -> str:
    """The answer to one recall call: a page of ``original(key)``, or a one-line reason.

    ``original`` reads the archive (raising :class:`NotFoundError` or
    :class:`StoreError`); the session and the MCP server give their own. The
    arguments are the model's, so nothing they hold gets an exception out.
    ``tool`` is the name the answer tells the model to call for the next page:
    the tool it called, as the server that answers it names it.
    """
    try:
        query = parse_query(arguments)
        return recall_page(original(query.key), query, max_chars, tool=tool)
    except (InputError, NotFoundError) as exc:
        return reason_line(f"{tool}: {exc}", max_chars)
    except StoreError as exc:
        return reason_line(f"{tool}: the archive could not be read: {exc}", max_chars)
    except UnicodeDecodeError:
        return reason_line(f"{tool}: the archived entry is not UTF-8 text", max_chars)


def reason_line(reason: str, max_chars: int) -> str:
    """Why a call got no page, as the model gets it: one line, inside the page cap."""
    line = " ".join(reason.split())
    return line if len(line) <= max_chars else line[: max_chars - 1] + "…"


def key_of(text: str) -> str:
    """The KEY in any spelling of it a model or a person writes: ``<<tb:KEY>>``, ``tb:KEY``, KEY.

    Keys are lowercase hex, so case is dropped, and so is the space around it:
    a model that upper-cases or trims a key still reaches the original.
    """
    key = text.strip().lower()
    if key.startswith("<<") and key.endswith(">>"):
        key = key[2:-2].strip()
    if key.startswith("tb:"):
        key = key[3:].strip()
    return key


def valid_key(key: str) -> bool:
    return bool(_KEY.fullmatch(key))


def recall_page(text: str, query: RecallQuery, max_chars: int, *, tool: str = RECALL_TOOL) -> str:
    """One page of ``text`` for ``query``, at most ``max_chars`` characters in all."""
    if query.grep is not None:
        return _grep_page(text, query, max_chars, tool)
    if query.chars is not None:
        return _chars_page(text, query, max_chars, tool)
    return _lines_page(text, query, max_chars, tool)


def _header(key: str, what: str) -> str:
    return f"[toolbudget recall <<tb:{key}>>: {what}]\n"


def _next(tool: str, key: str, **args: str) -> str:
    given = ", ".join(f'{name} "{value}"' for name, value in args.items())
    return f'\n[more follows: call {tool} with key "{key}", {given}]'


_FOOTER_ROOM = 160
MIN_PAGE_CHARS = 200
"""The smallest page that holds a header, some of the text and the pointer to the next page."""


def split_lines(text: str) -> list[str]:
    """Lines as an editor or grep counts them: split at ``\n`` only, ends kept.

    ``str.splitlines`` also splits at form feeds, ``\x1c``-``\x1e`` and
    Unicode separators, which would number lines differently from the tools
    an agent uses.
    """
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def _span(start: int, end: int | None) -> str:
    """A range as the grammar spells it, keeping the end the caller asked for."""
    return f"{start}:{'' if end is None else end}"


def _lines_page(text: str, query: RecallQuery, max_chars: int, tool: str) -> str:
    lines = split_lines(text)
    total = len(lines)
    start, asked = query.lines or (1, None)
    end = total if asked is None else min(asked, total)
    if start > max(total, 1):
        return _fit(_header(query.key, f"lines {start}- asked, but the output has {total} lines"), max_chars)
    room = max(max_chars - _FOOTER_ROOM - 80, 1)
    body: list[str] = []
    used = 0
    last = start - 1
    for number in range(start, end + 1):
        line = lines[number - 1]
        if used + len(line) > room:
            if not body:
                # One line longer than a page: show its start and page on by characters.
                offset = sum(len(x) for x in lines[: number - 1])
                piece = line[:room]
                header = _header(
                    query.key, f"line {number} of {total}, characters 0-{len(piece)} of {len(line)}"
                )
                follow = _next(tool, query.key, chars=f"{offset + len(piece)}:")
                return _fit(header + piece + follow, max_chars)
            break
        body.append(line)
        used += len(line)
        last = number
    header = _header(query.key, f"lines {start}-{last} of {total}")
    follow = _next(tool, query.key, lines=_span(last + 1, asked)) if last < end else ""
    return _fit(header + "".join(body).rstrip("\n") + follow, max_chars)


def _chars_page(text: str, query: RecallQuery, max_chars: int, tool: str) -> str:
    start, asked = query.chars or (0, None)
    if start >= len(text) > 0:
        what = f"characters {start}- asked, but the output has {len(text)} characters"
        return _fit(_header(query.key, what), max_chars)
    end = len(text) if asked is None else min(asked, len(text))
    room = max(max_chars - _FOOTER_ROOM - 80, 1)
    stop = min(end, start + room)
    header = _header(query.key, f"characters {start}-{stop} of {len(text)}")
    follow = _next(tool, query.key, chars=_span(stop, asked)) if stop < end else ""
    return _fit(header + text[start:stop] + follow, max_chars)


# RE2's messages for text that is no regular expression at all: such a grep is a plain-text search.
_BROKEN = ("missing )", "missing ]", "unexpected )", "trailing \\", "missing argument to repetition")
_LINE_COST = 500  # the work of looking at one line at all, in GREP_WORK's units


@dataclass(frozen=True, slots=True)
class _Program:
    """A compiled grep pattern: how to run it, what to say about it, and what each byte costs."""

    regex: Any
    note: str
    size: int


def _options(*, literal: bool) -> Any:
    options = re2.Options()
    options.log_errors = False  # a bad pattern is the model's mistake, answered, not logged
    options.never_capture = True  # grep needs whether a line matches, not where
    options.literal = literal
    return options


def _compile(pattern: str, named: str) -> _Program:
    """The pattern as an RE2 program; :class:`InputError` for one RE2 cannot run."""
    encoded = pattern.encode("utf-8", "surrogatepass")
    try:
        regex = re2.compile(encoded, _options(literal=False))
        note = ""
    except re2.error as error:
        reason = _re2_reason(error)
        if not reason.startswith(_BROKEN):
            raise InputError(
                f"grep {named} cannot run on RE2, the linear-time engine grep uses ({reason}): "
                "RE2 has no backreferences or lookaround and repeats at most 1000 times"
            ) from None
        try:
            regex = re2.compile(encoded, _options(literal=True))
        except re2.error as again:
            raise InputError(f"grep {named} cannot run on RE2 ({_re2_reason(again)})") from None
        note = " (not a valid regular expression, matched as plain text)"
    return _Program(regex, note, max(int(regex.programsize), 1))


def _re2_reason(error: Exception) -> str:
    raw = error.args[0] if error.args else ""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    text = " ".join(text.split())
    return text if len(text) <= 100 else text[:99] + "…"


def _grep_page(text: str, query: RecallQuery, max_chars: int, tool: str) -> str:
    pattern = query.grep or ""
    # The header names the pattern for the reader; the pointer to the next page must carry it whole.
    named = repr(pattern) if len(pattern) <= 80 else repr(pattern[:79] + "…")
    program = _compile(pattern, named)
    note = program.note
    lines = [line.rstrip("\r\n") for line in split_lines(text)]
    start, asked = query.lines or (1, None)
    if start > max(len(lines), 1):
        what = f"lines {start}- asked, but the output has {len(lines)} lines"
        return _fit(_header(query.key, what), max_chars)
    end = len(lines) if asked is None else min(asked, len(lines))
    # A line longer than one call's work is searched in its first part only, and the header says so.
    longest = max(GREP_WORK // program.size, 1)
    clipped = f"; lines over {longest} bytes searched in their first {longest}"
    stopped = "; the search stopped at the limit of work for one call"
    widest = _header(
        query.key,
        f"{end} lines matching {named}{note} in lines {start}-{end} of {len(lines)}{clipped}{stopped}",
    )
    room = max(
        max_chars - len(widest) - len(_next(tool, query.key, grep=pattern, lines=_span(end, asked))), 1
    )
    out: list[str] = []
    used = 0
    matches = 0
    work = 0
    was_clipped = False

    def page(last: int, tail: str, follow: str) -> str:
        what = f"{matches} lines matching {named}{note} in lines {start}-{last}{tail}"
        what += clipped if was_clipped else ""
        return _fit(_header(query.key, what) + "".join(out).rstrip("\n") + follow, max_chars)

    for number in range(start, end + 1):
        line = lines[number - 1]
        data = line[:longest].encode("utf-8", "surrogatepass")
        was_clipped = was_clipped or len(line) > longest or len(data) > longest
        data = data[:longest]
        cost = len(data) * program.size + _LINE_COST
        if work and work + cost > GREP_WORK:
            return page(number - 1, stopped, _next(tool, query.key, grep=pattern, lines=_span(number, asked)))
        work += cost
        if program.regex.search(data) is None:
            continue
        label = f"{number}: "
        limit = min(_LINE_LIMIT, room - len(label) - 3) if not out else _LINE_LIMIT
        # The first match of a page is always shown, shortened if it must be, so paging moves on.
        shown = line if len(line) <= limit else line[: max(limit, 1)] + " …"
        entry = f"{label}{shown}\n"
        if out and used + len(entry) > room:
            return page(number - 1, "", _next(tool, query.key, grep=pattern, lines=_span(number, asked)))
        out.append(entry)
        used += len(entry)
        matches += 1
    return page(end, f" of {len(lines)}", "")


def _fit(page: str, max_chars: int) -> str:
    # The arithmetic above leaves room; this is the guarantee.
    return page if len(page) <= max_chars else page[:max_chars]
