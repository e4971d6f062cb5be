"""Recall: how an agent gets back what a cut left out, a page at a time.

Every marker carries a ``<<tb:KEY>>``. The recall tool, added to the agent's
tools, answers a call with a page of the original: by line range, by a regex
over its lines, or by character range for a single giant line. A page never
exceeds its cap, header and footer included, and says how to ask for the next
one, so a recalled 900 KB diff is read in pages instead of being cut again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from .errors import InputError
from .marker import KEY_RE, RECALL_TOOL

__all__ = [
    "MIN_PAGE_CHARS",
    "RECALL_DESCRIPTION",
    "RECALL_PARAMETERS",
    "RecallQuery",
    "parse_query",
    "recall_page",
    "recall_tool",
]

RECALL_DESCRIPTION = (
    "Read tool output that toolbudget cut from the conversation. Every cut is marked "
    "[toolbudget: omitted N of M chars ...; recall <<tb:KEY>> ...]. Pass that KEY, and either "
    'lines "A:B" (1-based, inclusive; "A:" to the end) or grep "REGEX" (matching lines with their '
    'numbers), or chars "A:B" for one very long line. With neither, the first page is returned. '
    "Each answer is one page and says how to ask for the next."
)

RECALL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "key": {"type": "string", "description": "The KEY from a <<tb:KEY>> marker."},
        "lines": {"type": "string", "description": 'A line range "A:B", 1-based and inclusive.'},
        "grep": {"type": "string", "description": "A regular expression; matching lines are returned."},
        "chars": {"type": "string", "description": 'A character range "A:B" (0-based, B excluded).'},
    },
    "required": ["key"],
}

_KEY = re.compile(KEY_RE)
_RANGE = re.compile(r"^\s*(\d*)\s*[:\-]\s*(\d*)\s*$")
_LINE_LIMIT = 400  # characters of one matching line shown in a grep answer


@dataclass(frozen=True, slots=True)
class RecallQuery:
    key: str
    lines: tuple[int, int | None] | None = None
    grep: str | None = None
    chars: tuple[int, int | None] | None = None


def recall_tool(api: str) -> dict[str, Any]:
    """The recall tool's definition, in the wire form of ``api``."""
    from .wire import resolve_api

    name = resolve_api(api)
    if name == "anthropic":
        return {"name": RECALL_TOOL, "description": RECALL_DESCRIPTION, "input_schema": RECALL_PARAMETERS}
    if name == "openai-chat":
        return {
            "type": "function",
            "function": {
                "name": RECALL_TOOL,
                "description": RECALL_DESCRIPTION,
                "parameters": RECALL_PARAMETERS,
            },
        }
    if name == "openai-responses":
        return {
            "type": "function",
            "name": RECALL_TOOL,
            "description": RECALL_DESCRIPTION,
            "parameters": RECALL_PARAMETERS,
        }
    if name == "gemini":
        return {"name": RECALL_TOOL, "description": RECALL_DESCRIPTION, "parameters": RECALL_PARAMETERS}
    return {
        "toolSpec": {
            "name": RECALL_TOOL,
            "description": RECALL_DESCRIPTION,
            "inputSchema": {"json": RECALL_PARAMETERS},
        }
    }


def parse_query(arguments: Mapping[str, Any] | str) -> RecallQuery:
    """A recall call's arguments (an object, or its JSON text) as a query.

    Raises :class:`InputError` with a message the model can act on.
    """
    if isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            raise InputError("the arguments are not a JSON object") from None
    if not isinstance(arguments, Mapping):
        raise InputError("the arguments must be an object with a key")
    key = arguments.get("key")
    if not isinstance(key, str) or not key.strip():
        raise InputError('a "key" is needed: the KEY of a <<tb:KEY>> marker')
    key = key.strip()
    if key.startswith("<<tb:") and key.endswith(">>"):
        key = key[5:-2]
    grep = arguments.get("grep")
    if grep is not None and (not isinstance(grep, str) or not grep):
        raise InputError('"grep" must be a non-empty regular expression')
    return RecallQuery(
        key,
        _range(arguments.get("lines"), "lines", first=1),
        grep,
        _range(arguments.get("chars"), "chars", first=0),
    )


def _range(value: Any, name: str, *, first: int) -> tuple[int, int | None] | None:
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, value + (0 if first == 1 else 1))
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return (int(value[0]), int(value[1]))
    match = _RANGE.match(str(value))
    if not match:
        raise InputError(f'"{name}" must look like "A:B", not {value!r}')
    start = int(match[1]) if match[1] else first
    end = int(match[2]) if match[2] else None
    if start < first or (end is not None and end < start):
        raise InputError(f'"{name}" {value!r} is not a valid range')
    return (start, end)


def valid_key(key: str) -> bool:
    return bool(_KEY.fullmatch(key))


def recall_page(text: str, query: RecallQuery, max_chars: int) -> str:
    """One page of ``text`` for ``query``, at most ``max_chars`` characters in all."""
    if query.grep is not None:
        return _grep_page(text, query, max_chars)
    if query.chars is not None:
        return _chars_page(text, query, max_chars)
    return _lines_page(text, query, max_chars)


def _header(key: str, what: str) -> str:
    return f"[toolbudget recall <<tb:{key}>>: {what}]\n"


def _next(key: str, **args: str) -> str:
    given = ", ".join(f'{name} "{value}"' for name, value in args.items())
    return f'\n[more follows: call {RECALL_TOOL} with key "{key}", {given}]'


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


def _lines_page(text: str, query: RecallQuery, max_chars: int) -> str:
    lines = split_lines(text)
    total = len(lines)
    start, end = query.lines or (1, None)
    end = total if end is None else min(end, total)
    if start > max(total, 1):
        return _header(query.key, f"lines {start}- asked, but the output has {total} lines")
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
                follow = _next(query.key, chars=f"{offset + len(piece)}:")
                return _fit(header + piece + follow, max_chars)
            break
        body.append(line)
        used += len(line)
        last = number
    header = _header(query.key, f"lines {start}-{last} of {total}")
    follow = _next(query.key, lines=f"{last + 1}:") if last < end else ""
    return _fit(header + "".join(body).rstrip("\n") + follow, max_chars)


def _chars_page(text: str, query: RecallQuery, max_chars: int) -> str:
    start, end = query.chars or (0, None)
    end = len(text) if end is None else min(end, len(text))
    room = max(max_chars - _FOOTER_ROOM - 80, 1)
    stop = min(end, start + room)
    header = _header(query.key, f"characters {start}-{stop} of {len(text)}")
    follow = (
        _next(query.key, chars=f"{stop}:{query.chars[1] if query.chars and query.chars[1] else ''}")
        if stop < end
        else ""
    )
    return _fit(header + text[start:stop] + follow, max_chars)


def _grep_page(text: str, query: RecallQuery, max_chars: int) -> str:
    pattern = query.grep or ""
    note = ""
    try:
        regex = re.compile(pattern)
    except re.error:
        regex = re.compile(re.escape(pattern))
        note = " (not a valid regular expression, matched as plain text)"
    # The header names the pattern for the reader; the pointer to the next page must carry it whole.
    named = repr(pattern) if len(pattern) <= 80 else repr(pattern[:79] + "…")
    lines = [line.rstrip("\r\n") for line in split_lines(text)]
    start, end = query.lines or (1, None)
    end = len(lines) if end is None else min(end, len(lines))
    widest = _header(query.key, f"{end} lines matching {named}{note} in lines {start}-{end} of {len(lines)}")
    room = max(max_chars - len(widest) - len(_next(query.key, grep=pattern, lines=f"{end}:")), 1)
    out: list[str] = []
    used = 0
    matches = 0
    for number in range(start, end + 1):
        line = lines[number - 1]
        if not regex.search(line):
            continue
        label = f"{number}: "
        limit = min(_LINE_LIMIT, room - len(label) - 3) if not out else _LINE_LIMIT
        # The first match of a page is always shown, shortened if it must be, so paging moves on.
        shown = line if len(line) <= limit else line[: max(limit, 1)] + " …"
        entry = f"{label}{shown}\n"
        if out and used + len(entry) > room:
            header = _header(
                query.key, f"{matches} lines matching {named}{note} in lines {start}-{number - 1}"
            )
            follow = _next(query.key, grep=pattern, lines=f"{number}:")
            return _fit(header + "".join(out).rstrip("\n") + follow, max_chars)
        out.append(entry)
        used += len(entry)
        matches += 1
    header = _header(
        query.key, f"{matches} lines matching {named}{note} in lines {start}-{end} of {len(lines)}"
    )
    return _fit(header + "".join(out).rstrip("\n"), max_chars)


def _fit(page: str, max_chars: int) -> str:
    # The arithmetic above leaves room; this is the guarantee.
    return page if len(page) <= max_chars else page[:max_chars]
