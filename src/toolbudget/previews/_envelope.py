"""Agent envelopes around a tool's own output.

Agents wrap what a command printed: mini-swe-agent in
``<returncode>0</returncode>\\n<output>…</output>``, Codex in a ``Chunk ID: …
Output:`` header, OpenHands and Claude Code in "Here's the result of running
`cat -n`…". The content kind is the kind of what is inside, and a table's
header is the first line inside, so detection and the strategies look at the
body; the envelope itself is kept verbatim around the preview when it fits.
"""

from __future__ import annotations

import re

__all__ = ["split_envelope"]

_PREFIXES = (
    # mini-swe-agent, whole output or its own head/tail truncation
    re.compile(
        r"<returncode>-?\d{1,5}</returncode>\r?\n"
        r"(?:<warning>[^<]{0,2000}</warning>\r?\n?)?"
        r"<output(?:_head)?>\r?\n"
    ),
    # mini-swe-agent timeout
    re.compile(
        r"The last command <command>[^\n]{0,2000}?</command> timed out and has been killed\.\r?\n"
        r"The output of the command was:\r?\n ?<output>\r?\n"
    ),
    # Codex exec / write_stdin
    re.compile(
        r"Chunk ID: \w{1,64}\r?\nWall time: [^\n]{0,80}\n"
        r"(?:Process (?:exited with code -?\d{1,5}|running with session ID \d{1,12})\r?\n)?"
        r"(?:Original token count: \d{1,12}\r?\n)?"
        r"Output:\r?\n(?:Total output lines: \d{1,12}\r?\n\r?\n)?"
    ),
    # OpenHands str_replace_editor view
    re.compile(r"Here's the result of running `cat -n` on [^\n]{1,1000}:\r?\n"),
    # Claude Code Edit
    re.compile(
        r"The file [^\n]{1,1000} has been updated\. "
        r"Here's the result of running `cat -n` on a snippet of the edited file:\r?\n"
    ),
)

_SUFFIX = re.compile(
    r"\r?\n?</output(?:_tail)?>[ \t]*(?:\r?\n[^\n<]{0,200})?\s*\Z",
)
_SUFFIX_WINDOW = 400


def split_envelope(text: str) -> tuple[int, int]:
    """``(start, end)`` of the body inside a known envelope; ``(0, len(text))`` when there is none."""
    start = 0
    for pattern in _PREFIXES:
        found = pattern.match(text)
        if found:
            start = found.end()
            break
    end = len(text)
    if start and "<output" in text[:start]:
        found = _SUFFIX.search(text, max(start, end - _SUFFIX_WINDOW))
        if found:
            end = found.start()
    return start, max(start, end)
