"""Agent session files already on disk, read into canonical conversations.

Each supported format has a loader that lays its sessions out the neutral way
(see :class:`~toolbudget.model.Conversation`): the model's turns are assistant
messages carrying ``ToolCall`` parts, and every result follows in a ``tool``
message of its own. The format of a file is told from its content, because
session files are routinely renamed, copied and attached to bug reports.

A file that can be read only in part is still read, and what is missing is
said: :attr:`Transcript.warnings` lists it, one line each, and each line is
also issued as a :class:`TranscriptWarning`. Two things are warned about: a
cut-off last line of a JSONL file (dropped; the lines before it are read), and
a conversation without a single user message (the task it answers is not in
it, so a request built from it would start mid-way).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import TranscriptError
from ..model import Conversation
from . import claude_code, codex, gemini_cli, mini_swe_agent, openhands, swe_agent, tau_bench
from ._base import Source, TranscriptWarning, read_source, warn

__all__ = [
    "FORMATS",
    "Transcript",
    "TranscriptWarning",
    "detect_format",
    "discover_sessions",
    "format_of",
    "load_transcript",
]


@dataclass(frozen=True, slots=True, repr=False)
class Transcript:
    """The conversations read from one file, and the format they were read as.

    ``warnings`` says, one line each, what could not be read or is missing
    (see the module docstring); it is empty for a whole, ordinary file.
    """

    path: str
    format: str
    conversations: tuple[Conversation, ...]
    warnings: tuple[str, ...] = ()

    def __repr__(self) -> str:
        # The conversations hold the whole file: say what it holds, not every message of it.
        messages = sum(len(c.messages) for c in self.conversations)
        results = sum(1 for c in self.conversations for m in c.messages for _ in m.tool_results())
        return (
            f"Transcript(path={self.path!r}, format={self.format!r}, "
            f"{len(self.conversations)} conversations, {messages} messages, {results} results, "
            f"{len(self.warnings)} warnings)"
        )


@dataclass(frozen=True, slots=True)
class _Reader:
    format: str
    sniff: Callable[[Source], bool]
    load: Callable[[Source], tuple[Conversation, ...]]


# The sniffers look at disjoint shapes, so their order only decides the order of FORMATS.
_READERS = (
    _Reader(claude_code.FORMAT, claude_code.sniff, claude_code.load),
    _Reader(codex.FORMAT, codex.sniff, codex.load),
    _Reader(gemini_cli.FORMAT, gemini_cli.sniff, gemini_cli.load),
    _Reader(swe_agent.FORMAT, swe_agent.sniff, swe_agent.load),
    _Reader(mini_swe_agent.FORMAT, mini_swe_agent.sniff, mini_swe_agent.load),
    _Reader(openhands.EVAL_OUTPUT, openhands.sniff_eval_output, openhands.load_eval_output),
    _Reader(openhands.EVENT_LIST, openhands.sniff_event_list, openhands.load_event_list),
    _Reader(tau_bench.TAU_BENCH, tau_bench.sniff_tau_bench, tau_bench.load_tau_bench),
    _Reader(tau_bench.TAU2, tau_bench.sniff_tau2, tau_bench.load_tau2),
    _Reader(openhands.RESOLVER_OUTPUT, openhands.sniff_resolver_output, openhands.load_resolver_output),
)

FORMATS: tuple[str, ...] = tuple(reader.format for reader in _READERS)


def detect_format(path: str | os.PathLike[str]) -> str:
    """The format id of the session file at ``path``, told from its content."""
    return _reader_for(read_source(Path(path))).format


def format_of(doc: Any, records: Sequence[Any] = ()) -> str | None:
    """The transcript format of JSON already read, or ``None`` when it is in none.

    ``doc`` is the whole input as one value (``None`` for JSON Lines), and
    ``records`` its JSONL values in order (for one value, that value if it is
    an object). It lets a reader of request bodies tell, for the cost of the
    sniffers (they look at a few records), that it was given a session file.
    """
    records = tuple(records) if records else ((doc,) if isinstance(doc, dict) else ())
    source = Source("<input>", doc, records, tuple(range(1, len(records) + 1)))
    return next((reader.format for reader in _READERS if reader.sniff(source)), None)


def load_transcript(path: str | os.PathLike[str]) -> Transcript:
    """Read the session file at ``path`` in whichever supported format it is.

    Raises an :class:`~toolbudget.errors.InputError` with a one-line message
    when the file is missing, empty, not UTF-8, damaged, or in no known format.
    A cut-off last line is not damage: it is left out, with a warning.
    """
    source = read_source(Path(path))
    reader = _reader_for(source)
    try:
        conversations = reader.load(source)
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        # The loaders check the shapes they rely on; this is the net for a file
        # damaged in a way they did not foresee, so the user still gets one line.
        raise TranscriptError(
            f"{source.path}: damaged {reader.format} transcript ({type(exc).__name__}: {exc})"
        ) from exc
    notes = source.warnings + tuple(_missing_users(source.path, conversations))
    for note in notes:
        warn(note)
    return Transcript(source.path, reader.format, conversations, notes)


def _missing_users(path: str, conversations: tuple[Conversation, ...]) -> list[str]:
    return [
        f"{path}: conversation {c.id!r} has no user message, so the task it answers is not in it "
        "(the file may be partial, or keep its prompts where this reader does not look)"
        for c in conversations
        if not any(m.role == "user" for m in c.messages)
    ]


def _reader_for(source: Source) -> _Reader:
    for reader in _READERS:
        if reader.sniff(source):
            return reader
    tried = ", ".join(FORMATS)
    raise TranscriptError(f"{source.path} is not a transcript in any known format (tried: {tried})")


# Where the agents keep their sessions, relative to the home directory.
_SESSION_GLOBS = (
    ".claude/projects/**/*.jsonl",
    ".codex/sessions/**/rollout-*.jsonl",
    ".codex/sessions/rollout-*.json",  # the TypeScript CLI's, before the Rust one
    ".gemini/tmp/**/chats/*.json",
)


def discover_sessions() -> list[Path]:
    """The user's own Claude Code, Codex and Gemini CLI session files, newest first.

    ``HOME`` decides where to look, so tests and sandboxes can point it elsewhere.
    Files that vanish while being listed are skipped; no sessions gives ``[]``.
    """
    home = Path(os.path.expanduser("~"))
    found: list[tuple[float, str, Path]] = []
    for pattern in _SESSION_GLOBS:
        for path in home.glob(pattern):
            try:
                if path.is_file():
                    found.append((path.stat().st_mtime, str(path), path))
            except OSError:
                continue
    found.sort(key=lambda item: (-item[0], item[1]))
    return [path for _, _, path in found]
