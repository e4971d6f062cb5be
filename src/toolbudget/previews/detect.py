"""What kind of content a tool result is, from a bounded sample.

Detection reads the first 4 KB and the last 2 KB of the body (inside any
agent envelope, see :mod:`._envelope`), never the whole text, so it costs
the same for 5 KB and 5 MB. The rules run in a fixed order, most specific
first: a structured document (JSON, a diff), then a tool's recognisable
output (a test runner's, a compiler's, a stack trace), then line shapes
(numbered file views, grep hits, file listings, tables), then markup and
source languages by score, and ``text`` when nothing stands out. Subtitles
(WebVTT, SRT) are ``text``: speech, whatever their timestamps and voice tags
look like. A pytest
run with a traceback is ``pytest``; a numbered view of Python code is
``file-view``.

Two kinds of output are unwrapped before the rules run: Claude Code's
``<persisted-output>`` (a large output saved to a file, with a preview of its
head) is the kind of that preview, and its ``<tool_use_error>`` is an error
message, ``text``, not XML.

The content alone cannot always tell: a numbered view of a Markdown file is a
file view, a ``cat`` of one is Markdown. When the caller knows which call made
the output, :func:`detect` takes its tool and key argument as hints: a plain
read of one file (``cat``, ``head``, ``sed -n``, a read tool on a path) takes
the kind of the file's extension over a guess from the content, and a
sub-agent's report is prose, whatever diagrams it quotes.

Each label maps to one preview strategy (:data:`STRATEGY`).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections import Counter
from collections.abc import Mapping
from types import MappingProxyType

from ._envelope import split_envelope
from ._linepattern import LinePattern

__all__ = ["KINDS", "STRATEGY", "detect"]

KINDS = (
    "json",
    "yaml",
    "xml",
    "html",
    "csv",
    "tsv",
    "table",
    "diff",
    "git-log",
    "python",
    "go",
    "javascript",
    "typescript",
    "rust",
    "java",
    "c",
    "cpp",
    "pytest",
    "unittest",
    "jest",
    "go-test",
    "compiler-errors",
    "stack-trace",
    "file-listing",
    "tree",
    "grep",
    "file-view",
    "markdown",
    "text",
)

STRATEGY: Mapping[str, str] = MappingProxyType(
    {
        "json": "json",
        "csv": "table",
        "tsv": "table",
        "table": "table",
        "diff": "diff",
        "git-log": "diff",  # git log -p; without hunks it falls back to plain
        "pytest": "log",
        "unittest": "log",
        "jest": "log",
        "go-test": "log",
        "compiler-errors": "log",
        "stack-trace": "log",
        "text": "log-or-plain",  # the log strategy when the sample has error lines
    }
)
"""The strategy of each label; every label not listed previews as ``plain``."""

_HEAD = 4096
_TAIL = 2048
_MAX_LINES = 120

_M = re.MULTILINE
_SHARE_STEP = 16  # lines looked at between two checks of whether a share is settled


# Claude Code: an output too large to inline, saved to a file, with a preview of its head.
_PERSISTED = re.compile(
    r"<persisted-output>\r?\nOutput too large \([^\n]{0,40}\)\. Full output saved to: [^\n]{0,2000}\r?\n"
    r"(?:\r?\n)?Preview \(first [^\n]{0,40}\):\r?\n"
)
_PERSISTED_END = re.compile(r"(?:\r?\n\.\.\.)?\r?\n</persisted-output>\s*\Z")
_TOOL_USE_ERROR = re.compile(r"\s*<tool_use_error>[^<]*</tool_use_error>\s*\Z")


def _body(text: str) -> tuple[int, int]:
    """Where the output itself is: inside an agent's envelope, or a persisted output's preview."""
    start, end = split_envelope(text)
    found = _PERSISTED.match(text, start)
    if found:
        start = found.end()
        close = _PERSISTED_END.search(text, max(start, end - 64))
        if close:
            end = close.start()
    return start, max(start, end)


def _sample(text: str) -> tuple[str, str]:
    """The head and the tail (empty when the head is everything)."""
    start, end = _body(text)
    head = text[start : min(end, start + _HEAD)]
    tail = text[max(start + _HEAD, end - _TAIL) : end] if end - start > _HEAD else ""
    return head, tail


def _lines(head: str, tail: str) -> list[str]:
    """The non-blank sample lines of a head and tail from :func:`_sample`."""
    head_lines = head.split("\n")
    if tail and len(head_lines) > 1:
        head_lines = head_lines[:-1]  # the last line of the head is cut (there is more after it)
    tail_lines = tail.split("\n")[1:] if tail else []
    lines = [ln.rstrip("\r") for ln in head_lines[:_MAX_LINES] + tail_lines[-_MAX_LINES // 3 :]]
    return [ln for ln in lines if ln.strip()]


def _holds(head: str, tail: str, literal: str) -> bool:
    """Whether the sample holds ``literal`` (with no line break): else none of its lines does."""
    return literal in head or literal in tail


def _share(lines: list[str], pattern: re.Pattern[str]) -> float:
    if not lines:
        return 0.0
    return len(list(filter(pattern.search, lines))) / len(lines)  # a C loop: no frame per line


def _at_least(lines: list[str], pattern: re.Pattern[str], share: float) -> bool:
    """``_share(lines, pattern) >= share``, decided as soon as the lines looked at settle it.

    Most rules ask whether nearly all lines have a shape, and most samples settle that
    long before their last line.
    """
    total = len(lines)
    if not total:
        return share <= 0.0  # as _share says of no lines
    hits = 0
    for start in range(0, total, _SHARE_STEP):
        hits += len(list(filter(pattern.search, lines[start : start + _SHARE_STEP])))
        if hits / total >= share:
            return True  # the share can only grow
        if (hits + max(0, total - start - _SHARE_STEP)) / total < share:
            return False  # not even if every line left had the shape
    return False


def _count(pattern: LinePattern, *texts: str) -> int:
    return sum(pattern.count(t) for t in texts)


# Structured documents.
_JSON_START = re.compile(r"\s*(?:\{\s*(?:\"|\})|\[\s*(?:[\[{\"\]]|-?\d|true\b|false\b|null\b))")
_JSON_END = re.compile(r"[}\]]\s*\Z")
_JSON_STRING = re.compile(r'\s*"[^\n]*\s*\Z')
_JSONL = re.compile(r"^\{\".*\}\s*$")
_GIT_LOG = re.compile(r"\A\s*commit [0-9a-f]{7,40}\b.*\n(?:Merge: .*\n)?Author: ")
_COMMIT = LinePattern(r"^commit [0-9a-f]{7,40}\b")
_ONELINE_LOG = re.compile(r"^[0-9a-f]{7,12} \S")
_DIFF = LinePattern(
    r"^(?:diff --git |diff -\S* \S|--- \S.*\n\+\+\+ \S"
    r"|@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@)"
)

# Tool output.
_PYTEST = LinePattern(
    r"^=+ (?:test session starts|FAILURES|ERRORS|short test summary info|warnings summary) =+"
    r"|^=+ [^\n]{0,200}?\b(?:passed|failed)\b[^\n]{0,200}? in [\d.]+s[^\n]{0,200}? =+[ \t]*\r?$"
    r"|^(?:FAILED|ERROR|PASSED) \S+\.py::"
    r"|^\S+\.py::\S+ (?:PASSED|FAILED|ERROR|SKIPPED)"
)
_UNITTEST = LinePattern(
    r"^Ran \d+ tests? in [\d.]+s"
    r"|^(?:FAIL|ERROR): \w+ \([\w.]+\)"
    r"|^={40,}\r?\n(?:FAIL|ERROR): "
    r"|^test result: (?:ok|FAILED)\. \d+ passed"
    r"|^test \S+ \.\.\. (?:ok|FAILED|ignored)\s*$"
)
_JEST = LinePattern(
    r"^[ \t]*+(?:PASS|FAIL) \S+\.(?:test|spec)\.[cm]?[jt]sx?\b"
    r"|^Tests:[ \t]+[^\n]{0,200}?\d+ total|^Test Suites:[ \t]+[^\n]{0,200}?\d+ total"
)
_GO_TEST = LinePattern(
    r"^(?:=== RUN\s+Test|--- (?:FAIL|PASS|SKIP): Test|ok  \t\S+\s+[\d.]+s|FAIL\t\S+\s+[\d.]+s|PASS\r?$)"
)
_DIAGNOSTIC = LinePattern(
    r"^\S+?\.\w{1,6}(?::\d+){1,2}:? (?:fatal )?(?:error|warning|note)\b"
    r"|^\S+?\.\w{1,6}\(\d+,\d+\): (?:error|warning) \w+"
    r"|^\S+?\.\w{1,6}:\d+:\d+: [CEWRFI]\d{4}: "
    r"|^(?:error|warning)(?:\[E\d{4}\])?: [^\n]*\n[ \t]*--> \S+:\d+:\d+"
    r"|^\S+?\.java:\d+: (?:error|warning): ",
    # An error, a warning or a note follows a blank; Rust's "error: ..." line has its "--> "
    # below. This pattern backtracks along every line of a path listing, which has none.
    needs=(" error", " warning", " note", "--> ", re.compile(r": [CEWRFI]\d{4}: ")),
)
_PY_TRACE = LinePattern(r"^Traceback \(most recent call last\):[ \t]*\r?\n[ \t]+File \"")
_JAVA_FRAMES = LinePattern(r"(?:^[ \t]++at [\w$.<>/]+\([^)\n]*\)[ \t]*\r?\n){2,}")
_JS_FRAMES = LinePattern(r"(?:^[ \t]++at [^\n]{0,300}?:\d+:\d+\)?[ \t]*\r?\n){2,}")
_GO_PANIC = LinePattern(r"^(?:panic: [^\n]*|goroutine \d+ \[[^\]\n]+\]:[ \t]*\r?)$")
_RUST_PANIC = LinePattern(r"^thread '.*' panicked at ")

# Line shapes.
_NUMBERED = re.compile(r"^\s*\d+(?:→|\t)|^\d+:")
_GREP_CONTEXT = re.compile(r"^\d+-")
_COLON_NUMBER = re.compile(r"^(\d+):")
_GREP = re.compile(
    r"^(?:[A-Za-z]:)?[\w./@+~-]*[\w@+~-]\.[\w-]{1,12}(?::\d+)?[:-]"
    r"|^(?:\./)?(?:[\w.@+~-]+/)+[\w.@+~-]+(?::\d+)?:"
)
_GREP_NUMBERED = re.compile(r"^(?:[A-Za-z]:)?[^\s:]+:\d+[:-]")
_LISTING = re.compile(
    r"^[\w@.+~,=#%/-]+(?: [\w@.+~,=#%/-]+){0,2}/?$"  # a bare path or name, at most two spaces
    r"|^[-dlcbps][rwxsStT-]{9}[.+@]?\s+\d+"  # ls -l
    r"|^total \d+$"
    r"|^[\w@.+~/-]*:$"  # ls -R headers
)
_PATHISH = re.compile(r"[/.]")
_TREE = re.compile(r"[├└]── |│   ")
# Subtitles (WebVTT, SRT): timed cues of speech, whose timestamps look like grep hits and
# whose voice tags look like XML.
_CUE = re.compile(r"^(?:\d{1,2}:)?\d{2}:\d{2}[.,]\d{3} --> (?:\d{1,2}:)?\d{2}:\d{2}[.,]\d{3}")
_TABLE_HEADER = re.compile(r"^[A-Z%#][A-Z0-9_%#/.()-]*(?:\s+[A-Z%#][A-Z0-9_%#/.()-]*)+\s*$")
_QUOTED = re.compile(r'"[^"]*"')
_COLUMNS = re.compile(r"\S\s{2,}\S|\S\t\S")

# Markup.
_XML = re.compile(r"\A\s*(?:<\?xml|<[A-Za-z][\w:.-]*(?:\s[^>]*)?>)")
_HTML_START = re.compile(r"\s*(?:<!doctype html|<html\b)", re.IGNORECASE)
_HTML_TAGS = re.compile(r"<(?:head|body|div|span|p|table|script|a)\b[^>]*>", re.IGNORECASE)
_YAML_LINE = re.compile(r"^[ \t]*+(?:- )?[\w\"'./-]++:(?:[ \t]|$)|^[ \t]*+- \S|^---[ \t]*$|^[ \t]*+#")
_YAML_BLOCK = re.compile(r"^([ \t]*)(?:- )?[\w\"'./-]+:[ \t]*$")  # a key whose value is the block below
# `prog: subject: message` (bash, rm, grep, make...): a message, not a mapping.
_MESSAGE = re.compile(r"^[\w./-]+: [^\n]*?\S: ")
_FENCED = re.compile(r"^[ \t]*```[^\n]*\n.*?(?:^[ \t]*```[ \t]*$|\Z)", re.MULTILINE | re.DOTALL)
_MD_HEADING = LinePattern(r"^#{1,6} \S")
# Markdown signs: at a line start a fence, a list item, a table row, a numbered item or a quote;
# anywhere bold text or a link. Counted as ``findall`` counts
#   ^```|\*\*\S|\[[^\]\n]{1,200}\]\([^)\s]{1,300}\)|^[ \t]*[-*+] \S|^\|[^\n]*\|[ \t]*$|^\d+\. \S|^> \S
# but with the line-start signs led by their newline (see LinePattern), over "\n" + text: the
# pattern then opens with a newline, `*` or `[`, and the engine tries it at those alone. The
# count is the same: no sign ends with a newline, none starts with one, and at one line start
# only one kind can match (a line sign opens with a backtick, blank, `-`, `*` then a blank, `+`,
# `|`, a digit or `>`, bold text with `**`, a link with `[`), so their order does not matter.
_MD_OTHER = re.compile(
    r"\n(?:```|[ \t]*+[-*+] \S|\|[^\n]*\|[ \t]*$|\d+\. \S|> \S)|\*\*\S|\[[^\]\n]{1,200}\]\([^)\s]{1,300}\)",
    _M,
)

# Source languages, scored over the sample: line shapes (anchored, so cheap) and literal
# tokens (counted with str.count). Each hit adds the weight to the language's score.
# An indent is matched possessively (``[ \t]*+``) here and in the tool output's patterns: what
# follows it never opens with a blank, so giving blanks back could never make a match, and
# would retry every indented line once per blank.
_LANGUAGE_LINES: tuple[tuple[str, LinePattern, int], ...] = (
    ("python", LinePattern(r"^[ \t]*+(?:async )?def \w+\(|^[ \t]*+class \w+[(:]"), 3),
    ("python", LinePattern(r"^(?:import \w+|from [\w.]+ import )"), 3),
    ("python", LinePattern(r"^[ \t]*+(?:elif|except|try|finally|with)\b.*:[ \t]*$|^[ \t]*+@\w"), 1),
    ("go", LinePattern(r"^package \w+[ \t]*$"), 5),
    ("go", LinePattern(r"^func [\w(]|^import \($"), 2),
    ("rust", LinePattern(r"^[ \t]*+(?:pub(?:\(crate\))? )?(?:fn|struct|enum|impl|trait|mod) \w"), 2),
    ("rust", LinePattern(r"^use \w+(?:::\w+)+"), 3),
    ("java", LinePattern(r"^package [\w.]+;[ \t]*$|^import java\."), 5),
    ("javascript", LinePattern(r"^[ \t]*+(?:const|let|var) \w+ = |^[ \t]*+module\.exports"), 2),
    (
        "javascript",
        LinePattern(r"^[ \t]*+(?:export (?:default )?)?(?:async )?function\b|^import .* from ['\"]"),
        2,
    ),
    ("typescript", LinePattern(r"^[ \t]*+(?:export )?(?:interface|type) \w+|^import type "), 3),
    ("c", LinePattern(r"^#include [<\"]|^#define \w|^#if(?:n?def)? \w"), 3),
    ("cpp", LinePattern(r"^[ \t]*+template[ \t]*<|^[ \t]*+namespace \w+"), 3),
)
_LANGUAGE_TOKENS: tuple[tuple[str, str, int], ...] = (
    ("python", "self.", 1),
    ("python", '"""', 1),
    ("go", ":= ", 2),
    ("go", "err != nil", 2),
    ("rust", "let mut ", 3),
    ("rust", "#[derive(", 3),
    ("rust", "&mut ", 3),
    ("rust", "impl<", 3),
    ("java", "@Override", 2),
    ("java", "public class ", 2),
    ("java", "private static ", 2),
    ("javascript", "require(", 2),
    ("javascript", ") => ", 2),
    ("typescript", ": string", 3),
    ("typescript", ": number", 3),
    ("typescript", ": boolean", 3),
    ("c", "NULL", 1),
    ("c", "printf(", 1),
    ("cpp", "std::", 3),
    ("cpp", "nullptr", 3),
)
_MIN_LANGUAGE = 6


def _json(head: str, tail: str, lines: list[str]) -> bool:
    if _JSON_START.match(head) and _JSON_END.search(tail or head):
        return True
    if _JSON_STRING.match(head) and (tail or head).rstrip().endswith('"'):
        return True  # one long string literal: no raw newline can be inside
    return len(lines) >= 2 and _at_least(lines, _JSONL, 0.9)


def _runner(head: str, tail: str) -> str | None:
    for label, pattern in (
        ("pytest", _PYTEST),
        ("jest", _JEST),
        ("go-test", _GO_TEST),
        ("unittest", _UNITTEST),
    ):
        if pattern.search(head) or pattern.search(tail):
            return label
    return None


def _trace(head: str, tail: str) -> bool:
    return any(
        p.search(head) or p.search(tail)
        for p in (_PY_TRACE, _JAVA_FRAMES, _JS_FRAMES, _GO_PANIC, _RUST_PANIC)
    )


def _numbered(lines: list[str]) -> str | None:
    # grep -n -C on one file numbers its lines too: `N:` for hits, `N-` for context, `--`
    # between groups (a single group has none).
    context = _share(lines, _GREP_CONTEXT)
    if context:
        numbered = _share(lines, _NUMBERED)
        if numbered + context >= 0.6 and ("--" in lines or any(map(_COLON_NUMBER.match, lines))):
            return "grep"
        if numbered < 0.5:
            return None
    elif not _at_least(lines, _NUMBERED, 0.5):
        return None
    return "grep" if _scattered(lines) else "file-view"


def _scattered(lines: list[str]) -> bool:
    """``N:text`` lines whose numbers jump: ``grep -n``/``rg -n`` hits in one file.

    A numbered view counts up by one from line to line (``N:`` is SWE-agent's
    view); hits skip the lines between them. Views numbered ``N→`` or
    ``N<tab>`` (Claude Code, ``cat -n``) are never grep output.
    """
    numbers = [int(found[1]) for ln in lines if (found := _COLON_NUMBER.match(ln))]
    if len(numbers) < 3 or 2 * len(numbers) < len(lines):
        return False
    steps = sum(1 for a, b in itertools.pairwise(numbers) if b == a + 1)
    return 2 * steps < len(numbers) - 1


def _records(lines: list[str]) -> list[str]:
    """Lines joined into CSV records: a quoted field may hold newlines."""
    records: list[str] = []
    current: list[str] = []
    inside = False
    for line in lines:
        current.append(line)
        if line.count('"') % 2:
            inside = not inside
        if not inside:
            records.append("\n".join(current))
            current = []
    return records


def _first_record(lines: list[str]) -> str:
    """``(_records(lines) or lines)[0]``, without joining every record."""
    inside = False
    for i, line in enumerate(lines):
        if line.count('"') % 2:
            inside = not inside
        if not inside:
            return "\n".join(lines[: i + 1])
    return lines[0]


def _not_rows(records: list[str]) -> bool:
    """Code or prose that happens to have as many commas on every line."""
    code = sum(r.rstrip().endswith((";", "{", ")", ":")) for r in records) > len(records) // 4
    fields = [f for r in records for f in _QUOTED.sub("", r).split(",")]
    prose = sum(f.strip().count(" ") for f in fields) >= 2 * len(fields)
    return code or prose


def _delimited(lines: list[str]) -> str | None:
    if len(lines) < 3 or _NUMBERED.match(lines[0]):
        return None  # a numbered view of a file is a file view, whatever the file holds
    for label, sep in (("tsv", "\t"), ("csv", ",")):
        # The first row must hold the separator as often as most rows do: without one there,
        # the rows need not be counted (nor joined into records).
        first = _QUOTED.sub("", lines[0] if label == "tsv" else _first_record(lines)).count(sep)
        if not first:
            continue
        if label == "csv":
            lines = _records(lines) or lines
        counts = Counter(_QUOTED.sub("", ln).count(sep) for ln in lines)
        common, hits = counts.most_common(1)[0]
        if common >= 1 and first == common and hits >= 0.8 * len(lines):
            if label == "csv" and _not_rows(lines):
                return None
            return label
    return None


def _aligned(lines: list[str]) -> bool:
    if len(lines) < 3 or not _TABLE_HEADER.match(lines[0]):
        return False
    columns = len(lines[0].split())
    return (
        columns >= 2
        and _at_least(lines[1:], _COLUMNS, 0.7)
        and all(len(ln.split()) >= columns - 1 for ln in lines[1:20])
    )


def _listing(lines: list[str]) -> bool:
    if len(lines) == 1 and "/" not in lines[0]:
        return False  # one bare word or number (`368.0`) lists nothing
    return _at_least(lines, _LISTING, 0.7) and _at_least(lines, _PATHISH, 0.3)


def _markup(head: str) -> str | None:
    if _HTML_START.match(head):
        return "html"
    if not _XML.match(head):
        return None
    if _HTML_TAGS.search(head[:2048]):
        return "html"
    return "xml" if "</" in head or "/>" in head else None


def _yaml(lines: list[str]) -> bool:
    """Key-value lines with the structure of YAML: a nested block, or a ``---`` document start.

    Flat ``Name: value`` lines are what scripts print (``Headers: {...}``,
    ``Error: ...``, ``rm: cannot remove ...``); they are text.
    """
    if len(lines) < 3 or not _at_least(lines, _YAML_LINE, 0.8) or _share(lines, _MESSAGE) > 0.2:
        return False
    if lines[0].rstrip() == "---":
        return True
    for line, below in itertools.pairwise(lines):
        opened = _YAML_BLOCK.match(line)
        if opened and len(below) - len(below.lstrip(" \t")) > len(opened[1]):
            return True
    return False


def _unfenced(text: str) -> str:
    """Markdown without its fenced code: the code a document quotes is not its language."""
    return _FENCED.sub("", text) if "```" in text else text


def _language(head: str, tail: str) -> tuple[str | None, int]:
    scores = dict.fromkeys(("python", "go", "rust", "java", "javascript", "typescript", "c", "cpp"), 0)
    for label, pattern, weight in _LANGUAGE_LINES:
        scores[label] += weight * _count(pattern, head, tail)
    for label, token, weight in _LANGUAGE_TOKENS:
        scores[label] += weight * (head.count(token) + tail.count(token))
    if scores["typescript"]:
        scores["typescript"] += scores["javascript"]
    if scores["cpp"]:
        scores["cpp"] += scores["c"]
    label, score = max(scores.items(), key=lambda kv: (kv[1], -_ORDER[kv[0]]))
    return (label, score) if score >= _MIN_LANGUAGE else (None, score)


_ORDER = {label: i for i, label in enumerate(KINDS)}


# What a file's extension says it holds, for the kinds a preview shows as plain text. A
# structural kind the content shows (JSON, a numbered view, a diff, a test run) stays.
_EXTENSIONS: Mapping[str, str] = MappingProxyType(
    {
        "md": "markdown",
        "markdown": "markdown",
        "mdx": "markdown",
        "py": "python",
        "pyi": "python",
        "go": "go",
        "rs": "rust",
        "java": "java",
        "js": "javascript",
        "mjs": "javascript",
        "cjs": "javascript",
        "jsx": "javascript",
        "ts": "typescript",
        "tsx": "typescript",
        "mts": "typescript",
        "cts": "typescript",
        "c": "c",
        "h": "c",
        "cc": "cpp",
        "cpp": "cpp",
        "cxx": "cpp",
        "hpp": "cpp",
        "hh": "cpp",
        "yaml": "yaml",
        "yml": "yaml",
        "vtt": "text",
        "srt": "text",
    }
)
_LANGUAGES = frozenset(("python", "go", "rust", "java", "javascript", "typescript", "c", "cpp"))
# Kinds the content can only guess at: a file's extension, when known, says better.
_GUESSES = _LANGUAGES | {"markdown", "yaml", "xml", "html", "text", "tree", "file-listing"}


def detect(text: str, *, path: str | None = None, report: bool = False) -> str:
    """The content kind of ``text``: one of :data:`KINDS`.

    ``path`` is the file the output shows, when the call that made it was a
    plain read of one file; ``report`` says the output is a sub-agent's
    report. Both are hints from the call: see the module docstring.
    """
    head, tail = _sample(text)
    if _TOOL_USE_ERROR.match(text):
        return "text"
    kind = _sampled(head, tail)
    if not kind:
        return "text"  # blank: whatever the call's hints say
    if report and kind != "json":
        return "markdown" if _markdown_score(head, tail)[1] >= 4 else "text"
    if path is not None and kind in _GUESSES:
        name = path.rstrip("/").rsplit("/", 1)[-1]
        extension = name.rsplit(".", 1)[-1].lower() if "." in name.strip(".") else ""
        return _EXTENSIONS.get(extension, kind)
    return kind


@functools.lru_cache(maxsize=512)
def _sampled(head: str, tail: str) -> str:
    """The kind a sample shows, remembered for the last samples seen.

    One result is detected again at each level it reaches (its cap's preview,
    compaction's preview, its one-line summary), and the rules take about a
    millisecond on a sample; the sample is at most 6 KB, so the memo stays
    small whatever the results' sizes. Empty when the sample has no line but blanks.
    """
    lines = _lines(head, tail)
    return _content(head, tail, lines) if lines else ""


def _md_signs(text: str) -> int:
    """Markdown signs other than headings in ``text`` (see :data:`_MD_OTHER`)."""
    return len(_MD_OTHER.findall("\n" + text)) if text else 0


def _markdown_score(head: str, tail: str) -> tuple[int, int]:
    """Markdown headings, and the score of every Markdown sign (a heading counts twice)."""
    headings = _MD_HEADING.count(head) + _MD_HEADING.count(tail)
    return headings, 2 * headings + _md_signs(head) + _md_signs(tail)


def _content(head: str, tail: str, lines: list[str]) -> str:
    """The kind the sample shows, by the rules in the module docstring's order."""
    if _json(head, tail, lines):
        return "json"
    # One commit and its patch (git show) is a diff; a run of commits is a log.
    if _GIT_LOG.match(head) and (_COMMIT.count(head, 2) > 1 or not _DIFF.search(head)):
        return "git-log"
    if len(lines) >= 3 and _at_least(lines, _ONELINE_LOG, 0.9):
        return "git-log"
    if _DIFF.search(head):
        return "diff"
    runner = _runner(head, tail)
    if runner:
        return runner
    # Whether there are none, one or more settles it: the lines are not read past a second one.
    diagnostics = _DIAGNOSTIC.count(head, 2)
    if diagnostics < 2:
        diagnostics += _DIAGNOSTIC.count(tail, 2 - diagnostics)
    if diagnostics >= 2 or (diagnostics and diagnostics >= len(lines) // 4):
        return "compiler-errors"
    if _trace(head, tail):
        return "stack-trace"
    delimited = _delimited(lines)
    if delimited:
        return delimited
    if lines[0].startswith("WEBVTT") or (_holds(head, tail, " --> ") and _at_least(lines, _CUE, 0.1)):
        return "text"
    numbered = _numbered(lines)
    if numbered:
        return numbered
    headings, markdown = _markdown_score(head, tail)
    # A report or a README that draws a tree in a code block is a document, not a tree listing.
    # Tree lines are drawn with non-ASCII characters: an ASCII sample has none (a check in O(1)).
    drawn = not (head.isascii() and tail.isascii())
    if drawn and _at_least(lines, _TREE, 0.3) and not (headings and "```" in head):
        return "tree"
    if _at_least(lines, _GREP, 0.5) or _at_least(lines, _GREP_NUMBERED, 0.4):
        return "grep"
    if _listing(lines):
        return "file-listing"
    markup = _markup(head)
    if markup:
        return markup
    if _aligned(lines):
        return "table"
    language, score = _language(_unfenced(head), _unfenced(tail)) if headings else _language(head, tail)
    if language and score >= markdown:
        return language
    if headings <= 1 and _yaml(lines):
        return "yaml"
    if (headings and markdown >= 4) or markdown >= 8:
        return "markdown"
    if language:
        return language
    return "text"
