"""The one marker grammar for every cut toolbudget makes.

A cut replaces part of a tool result with exactly one marker line. Budget
cuts, compaction and recovery all write the same grammar, so an agent (or a
person, or a regex) reads every cut the same way. A marker names only a route
to the original that the request really offers, so it takes one of four forms
(each one line, wrapped here; the key shortened to ``K``)::

    [toolbudget: omitted 85432 of 90432 chars (lines 101-1933);
     key <<tb:K>>, recall it with toolbudget_recall by lines or grep]
    [toolbudget: omitted 85432 of 90432 chars (lines 101-1933);
     full output: /home/u/.cache/toolbudget/toolbudget-s1/tool-results/K.txt; key <<tb:K>>]
    [toolbudget: omitted 85432 of 90432 chars (lines 101-1933); key <<tb:K>>]
    [toolbudget: omitted 85432 of 90432 chars (lines 101-1933);
     the rest could not be kept and cannot be recalled]

- the counts say how much is missing, of how much;
- the parenthesis says what was left out, in the terms of the content (lines,
  hunks of which files, items of an array); it never holds ``;``, ``[`` or ``]``;
- ``key <<tb:KEY>>`` is the recall key, 16 to 64 characters of ``[a-z0-9]``;
- ``recall it with TOOL`` appears when the request defines a recall tool (ours,
  under its own name or as an MCP tool); the tool named is the one the request has;
- otherwise ``full output`` appears for file-backed stores: a path the agent's
  own read tool can open;
- otherwise the key alone is given, with no promise of a tool: a person, or a
  program holding the session, can still recall it;
- when the store could not keep the original, the marker says so and carries
  no key, since nothing could be recalled.

:data:`MARKER_RE` matches every form and is the documented contract.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

__all__ = [
    "KEY_RE",
    "MARKER_RE",
    "RECALL_TOOL",
    "Marker",
    "find_markers",
    "is_recall_tool",
    "marker_line",
]

RECALL_TOOL = "toolbudget_recall"

KEY_RE = r"[a-z0-9]{16,64}"

TOOL_NAME_RE = r"[A-Za-z0-9_.:-]{1,128}"

MARKER_RE = re.compile(
    r"\[toolbudget: omitted (?P<omitted>\d+) of (?P<total>\d+) chars"
    r"(?: \((?P<detail>[^;\[\]\n]*)\))?"
    r"(?:; full output: (?P<path>[^;\[\]\n]+))?"
    r"(?:; key <<tb:(?P<key>" + KEY_RE + r")>>"
    r"(?:, recall it with (?P<tool>" + TOOL_NAME_RE + r") by lines or grep)?"
    r"|; (?P<lost>the rest could not be kept and cannot be recalled))\]"
)

# How MCP clients name a server's tool: Claude Code ``mcp__<server>__<tool>``, others
# ``mcp_<server>_<tool>`` or ``<server>__<tool>``; the server is ours when its name says so.
_MCP_RECALL = re.compile(r"(?:mcp_{1,2})?[A-Za-z0-9_.-]*toolbudget[A-Za-z0-9_.-]*?_{1,2}recall")


def is_recall_tool(name: str | None) -> bool:
    """Whether ``name`` is our recall tool: ``toolbudget_recall`` or an MCP server's ``recall`` of ours."""
    if not name:
        return False
    return name == RECALL_TOOL or _mcp_recall(name)


@functools.lru_cache(maxsize=4096)
def _mcp_recall(name: str) -> bool:
    # Asked of every tool a request's new results answer: an agent has a few dozen names.
    return _MCP_RECALL.fullmatch(name) is not None


_UNSAFE = re.compile(r"[;\[\]\n\r]+")
_TOOL_NAME = re.compile(TOOL_NAME_RE)


@dataclass(frozen=True, slots=True)
class Marker:
    """A marker found in text: what was omitted and how to get it back."""

    omitted: int
    total: int
    detail: str
    key: str | None
    path: str | None
    start: int
    end: int
    tool: str | None = None
    """The recall tool the marker names, when the request had one."""


def marker_line(
    omitted: int,
    total: int,
    *,
    key: str | None,
    path: str | None = None,
    detail: str = "",
    tool: str | None = None,
) -> str:
    """The marker for a cut, on one line without a newline.

    ``key`` is ``None`` when the store failed: the marker then says the rest is
    lost. ``tool`` is the recall tool the request defines, if any; when it is
    given the path is left out, since the tool is the route the model can take.
    """
    parts = [f"[toolbudget: omitted {omitted} of {total} chars"]
    detail = _UNSAFE.sub(" ", detail).strip()
    if detail:
        parts.append(f" ({detail})")
    if key is None:
        parts.append("; the rest could not be kept and cannot be recalled]")
        return "".join(parts)
    if tool is not None and _TOOL_NAME.fullmatch(tool) is None:
        tool = None  # a name the grammar cannot carry is not offered as a route
    if tool is None and path and not _UNSAFE.search(path):
        # A path the grammar cannot carry is left out rather than shown altered: a wrong path
        # could name another file. Recall by key still works.
        parts.append(f"; full output: {path}")
    parts.append(f"; key <<tb:{key}>>")
    if tool is not None:
        parts.append(f", recall it with {tool} by lines or grep")
    parts.append("]")
    return "".join(parts)


def find_markers(text: str) -> list[Marker]:
    """Every marker in ``text``, in order."""
    if "[toolbudget: " not in text:
        return []
    return [
        Marker(
            int(m["omitted"]),
            int(m["total"]),
            m["detail"] or "",
            m["key"],
            m["path"],
            m.start(),
            m.end(),
            m["tool"],
        )
        for m in MARKER_RE.finditer(text)
    ]
