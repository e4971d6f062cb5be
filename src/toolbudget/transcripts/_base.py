"""Plumbing the transcript loaders share: reading a file once, shape checks, the neutral layout.

A session file is read and parsed exactly once into a :class:`Source`; format
detection and loading both work on that, so a 3 MB file is never parsed twice.
Every failure becomes a one-line :class:`~toolbudget.errors.InputError` that
names the file, because the person reading it is looking at their own disk, not
at our code.

Some damage is not a failure. An agent appends one JSON line per event, so a
session that is still being written, or whose writer was killed, ends in half a
line: everything before it is intact and worth reading. Such a file is read up
to its last complete line, and the loss is said in :attr:`Source.warnings`
(one line each, naming the file) rather than hidden. A damaged line anywhere
else is still an error: past it, the order of events can no longer be trusted.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import EncodingError, InvalidJSON, TranscriptError
from ..jsonio import loads, type_name
from ..model import Message, Part, Text, ToolCall, ToolDef, ToolResult
from ..wire import parse_arguments as _parse_json_arguments

_BOM = b"\xef\xbb\xbf"
# How orjson says a value stopped before it was complete (and nothing else).
_ENDS_EARLY = "unexpected end of data"


class TranscriptWarning(UserWarning):
    """A transcript was read, but not all of it, or not all a conversation needs.

    Raised through :mod:`warnings` by ``load_transcript``, and kept in
    ``Transcript.warnings`` so a program can look without catching anything.
    """


def warn(message: str) -> None:
    """Say ``message`` as a :class:`TranscriptWarning`, pointing at the caller of ``load_transcript``."""
    warnings.warn(message, TranscriptWarning, stacklevel=3)


# orjson counts positions within the one line it was given; the file's line number is said separately.
_LINE_POSITION = re.compile(r": line 1 column (\d+) \(char \d+\)$")


@dataclass(frozen=True, slots=True)
class Source:
    """A transcript file, parsed once.

    ``doc`` is the whole file as one JSON value when it is one (a ``.json``
    file, or a JSONL file with a single line). ``records`` are the JSONL values
    in file order (for a one-value file, that value alone), and ``line_numbers``
    their 1-based lines, so an error can point at the line a person would open.
    ``warnings`` says what was left unread (a cut-off last line), one line each.
    """

    path: str
    doc: Any
    records: tuple[Any, ...]
    line_numbers: tuple[int, ...]
    warnings: tuple[str, ...] = ()

    @property
    def stem(self) -> str:
        """The file name without its transcript suffixes: the fallback conversation id."""
        name = Path(self.path).name
        for suffix in (".traj.json", ".jsonl", ".json", ".traj"):
            if name.endswith(suffix):
                return name[: -len(suffix)]
        return name

    def where(self, index: int) -> str:
        """How record ``index`` is named in an error message."""
        if self.doc is None and 0 <= index < len(self.line_numbers):
            return f"{self.path}: line {self.line_numbers[index]}"
        return self.path


def read_source(path: str | Path) -> Source:
    """Read and parse ``path`` as JSON or JSONL, or raise a one-line error saying why not.

    A leading ``~`` is the user's home, as in a shell: session files live
    there (``~/.claude/projects/...``), and that is how people write their paths.
    """
    p = Path(path).expanduser()
    data = _read_bytes(p)
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    if not data.strip():
        raise TranscriptError(f"{p} is empty")
    data, cut = _check_utf8(p, data)
    try:
        doc = loads(data, what=str(p))
    except InvalidJSON as whole_error:
        try:
            return _read_jsonl(p, data, whole_error, cut)
        except InvalidJSON as error:
            if error is whole_error and "infinity" in str(error):
                # Not a transcript any agent writes; a request body may hold one (1e400), and a
                # caller that also reads bodies (inspect) reads it as one, number for number.
                raise TranscriptError(f"{p} is not a transcript: {error}") from None
            raise
    if cut is not None:
        # One complete line before the cut one: a JSONL file of one record.
        return Source(str(p), None, (doc,), (1,), (_cut_off(p, cut, 1, "a character"),))
    records = (doc,) if isinstance(doc, dict) else ()
    return Source(str(p), doc, records, (1,) if records else ())


def _read_bytes(p: Path) -> bytes:
    if p.is_dir():
        raise TranscriptError(f"{p} is a directory, not a transcript file")
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise TranscriptError(f"{p} does not exist") from None
    except OSError as exc:
        raise TranscriptError(f"{p} cannot be read: {exc.strerror or exc}") from None


def _check_utf8(p: Path, data: bytes) -> tuple[bytes, int | None]:
    """``data`` if it is UTF-8 text, or its complete lines if only a cut-off last line is not.

    A writer stopped in the middle of a multi-byte character leaves the file
    ending inside it. That is a cut-off last line like any other, so the
    complete lines are returned with the number of the line dropped.
    """
    # Checked up front so the message names the byte offset rather than a JSON position.
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        newline = data.rfind(b"\n", 0, exc.start)
        ends_inside = exc.end == len(data) and exc.reason == _ENDS_EARLY
        if ends_inside and newline >= 0 and data[:newline].strip():
            return data[: newline + 1], data.count(b"\n", 0, newline + 1) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise EncodingError(
            f"{p} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}, "
            f"line {line}, column {column})"
        ) from None
    return data, None


def _cut_off(p: Path, number: int, kept: int, inside: str) -> str:
    """The warning for a dropped last line: which line, and how much was read instead."""
    return (
        f"{p}: line {number} is cut off in the middle of {inside} (the session was still being "
        f"written, or its writer stopped); read the {kept} complete line(s) before it"
    )


def _read_jsonl(p: Path, data: bytes, whole_error: InvalidJSON, cut: int | None = None) -> Source:
    """Parse ``data`` line by line.

    When no line before the bad one parsed, the file may instead be a broken
    (pretty-printed) JSON document; the whole-document error describes that
    better, unless the line after it is JSON on its own, which only JSONL is.

    A last line whose value stops before it ends is what an interrupted append
    leaves: it is dropped with a warning. Any other bad line is an error.
    ``cut`` is the number of a last line already dropped for ending inside a
    character.
    """
    lines = [(n, raw.rstrip(b"\r")) for n, raw in enumerate(data.split(b"\n"), start=1) if raw.strip()]
    records: list[Any] = []
    inside = "a character"
    for position, (number, line) in enumerate(lines):
        try:
            records.append(loads(line, what=f"{p}: line {number}"))
        except InvalidJSON as exc:
            if not records and not _parses(lines[position + 1 : position + 2]):
                raise whole_error from None
            if cut is None and position == len(lines) - 1 and _ENDS_EARLY in str(exc):
                lines = lines[:position]
                cut, inside = number, "a JSON value"
                break
            detail = _LINE_POSITION.sub(r" at column \1", str(exc).split("is not valid JSON: ", 1)[-1])
            raise TranscriptError(
                f"{p}: line {number} is not valid JSON ({detail}); the line is damaged or cut off"
            ) from None
    notes = (_cut_off(p, cut, len(records), inside),) if cut is not None else ()
    return Source(str(p), None, tuple(records), tuple(n for n, _ in lines), notes)


def _parses(lines: list[tuple[int, bytes]]) -> bool:
    try:
        return bool(lines) and isinstance(loads(lines[0][1]), (dict, list))
    except InvalidJSON:
        return False


# --- shape checks -------------------------------------------------------------------


def obj(value: Any, where: str) -> dict[str, Any]:
    """``value`` as a JSON object, or a TranscriptError naming ``where``."""
    if not isinstance(value, dict):
        raise TranscriptError(f"{where}: expected an object, found {type_name(value)}")
    return value


def arr(value: Any, where: str) -> list[Any]:
    """``value`` as a JSON array, or a TranscriptError naming ``where``."""
    if not isinstance(value, list):
        raise TranscriptError(f"{where}: expected an array, found {type_name(value)}")
    return value


def str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def dict_or_empty(value: Any) -> dict[str, Any]:
    """Optional sub-objects: absent or odd ones read as empty rather than failing the file."""
    return value if isinstance(value, dict) else {}


def text_parts(text: Any) -> tuple[Part, ...]:
    """A message body as parts: nothing for an absent or empty body."""
    return (Text(text),) if isinstance(text, str) and text else ()


def synthetic_id(index: int) -> str:
    """A deterministic call id for formats that have none (``call_0007``).

    Ids follow the strictest provider pattern (``^[A-Za-z0-9_-]+$``) and depend
    only on the call's position, so loading the same file twice gives equal ids.
    """
    return f"call_{index:04d}"


def parse_arguments(raw: Any) -> tuple[Any, str | None, bool]:
    """``(arguments, arguments_json, arguments_ok)`` for a call whose arguments may be a JSON string.

    A string that does not parse (a call cut off by ``max_tokens``) gives
    ``None`` arguments and ``ok=False``, so nothing runs a truncated call.
    """
    if not isinstance(raw, str):
        return raw, None, True
    value, ok = _parse_json_arguments(raw)
    return value, raw, ok


_FAMILIES = (
    ("claude", "anthropic"),
    ("anthropic", "anthropic"),
    ("gemini", "gemini"),
    ("google", "gemini"),
    ("gpt", "openai"),
    ("openai", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
)
_WORD = re.compile(r"[a-z0-9]+")


def family_of(model: str | None) -> str | None:
    """The provider family that signs a model's reasoning (``anthropic``, ``openai``, ``gemini``)."""
    if not model:
        return None
    words = _WORD.findall(model.lower())
    for word in words:
        for prefix, family in _FAMILIES:
            if word.startswith(prefix):
                return family
    return None


def compact_meta(**fields: Any) -> dict[str, Any]:
    """Meta fields with the unknown ones left out, so ``meta`` only states facts."""
    return {k: v for k, v in fields.items() if v is not None and v != ""}


# --- neutral layout -----------------------------------------------------------------


class Thread:
    """Collects messages in the neutral layout.

    Assistant parts that belong to one model response arrive in pieces in most
    formats (a line per block, an item per call, an event per action). They are
    merged into one assistant message while that response is still *open*: it
    stays open across the tool messages that answer it, and closes when a user
    or system message arrives. Tool messages are appended in the order given.
    """

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._open: int | None = None
        self._open_key: str | None = None

    def user(self, parts: Iterable[Part]) -> None:
        self._close_and_append(Message("user", tuple(parts)))

    def system(self, parts: Iterable[Part]) -> None:
        self._close_and_append(Message("system", tuple(parts)))

    def assistant(self, parts: Iterable[Part], *, key: str | None = None, merge: bool = True) -> None:
        """Add model output.

        With a ``key`` (a response id), parts join the open message of the same
        key. Without one, ``merge`` joins them to an assistant message that is
        the very last message, which is how item-per-block formats split a turn.
        """
        new = tuple(parts)
        if not new:
            return
        target = self._merge_target(key, merge)
        if target is None:
            self._messages.append(Message("assistant", new))
            self._open = len(self._messages) - 1
        else:
            old = self._messages[target]
            self._messages[target] = Message("assistant", old.parts + new)
        self._open_key = key

    def is_open(self, key: str) -> bool:
        """Whether assistant parts with ``key`` would join a message already started."""
        return self._open is not None and self._open_key == key

    def result(self, result: ToolResult) -> None:
        self._messages.append(Message("tool", (result,)))

    def close(self) -> None:
        """End the open response, so the next assistant parts start a new message."""
        self._open = None
        self._open_key = None

    def messages(self) -> tuple[Message, ...]:
        return tuple(self._messages)

    def _merge_target(self, key: str | None, merge: bool) -> int | None:
        if self._open is None:
            return None
        if key is not None:
            return self._open if key == self._open_key else None
        if merge and self._open == len(self._messages) - 1 and self._open_key is None:
            return self._open
        return None

    def _close_and_append(self, message: Message) -> None:
        self.close()
        if message.parts:
            self._messages.append(message)


class CallNames:
    """Remembers call ids seen so far, so a result can carry its tool's name.

    Some formats reuse an id across turns (tau-bench does); the latest call with
    an id is the one a following result answers.
    """

    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    def add(self, call: ToolCall) -> ToolCall:
        if call.id is not None:
            self._names[call.id] = call.name
        return call

    def name(self, call_id: str | None) -> str | None:
        return self._names.get(call_id) if call_id is not None else None


def first_str(values: Iterable[Any]) -> str | None:
    """The first string among ``values`` (a model name stated on the first turn that has one)."""
    return next((v for v in values if isinstance(v, str) and v), None)


def tool_defs(tools: Any) -> tuple[ToolDef, ...]:
    """Tool definitions in the OpenAI ``{"type": "function", "function": {...}}`` shape (or bare)."""
    defs: list[ToolDef] = []
    for tool in tools if isinstance(tools, list) else []:
        tool = dict_or_empty(tool)
        function = dict_or_empty(tool.get("function")) or tool
        name = function.get("name")
        if isinstance(name, str):
            defs.append(ToolDef(name, str_or_none(function.get("description")), function.get("parameters")))
    return tuple(defs)


def mapping_get(value: Any, *keys: str) -> Any:
    """``value[k1][k2]...`` through objects, or ``None`` as soon as a step is missing."""
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value
