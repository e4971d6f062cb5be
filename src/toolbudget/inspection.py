"""The numbers of ``toolbudget inspect``: where one session's context budget goes.

A session is read from a transcript (any format :func:`~toolbudget.load_transcript`
reads) or from one request body of any of the five APIs, whose history is then
the session. Its requests are the ones ``toolbudget replay`` builds
(:func:`~toolbudget.replay.requests_of`, one per assistant turn), rendered for
the API and measured on the prompt as the model reads it
(:func:`~toolbudget.replay.prompt_text`), so every count here is the count
``replay`` gives; tokens are characters / 4, as there.

Each request is split into bands: the system prompt, the tool definitions, the
user's and the assistant's messages, and the tool results by the tool that made
them. The bands other than the tool definitions add up to the request's
prompt exactly. The definitions are measured as the JSON of each tool's name,
description and parameters; the replay's cache arithmetic leaves them out,
since they are the same in every request of a session, but they are part of
what the window must hold, so they are shown as a band of their own.

The schedules are replayed as ``replay`` replays them: the requests as the
agent sent them (no management at all), and managed by one session with
compaction ``off`` (oversized results cut, nothing aged), ``eager`` and
``cache-aware``, each with the prefix-cache bill of every request.

Everything is a pure function of the input: the same file gives the same numbers.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import wire
from .cli_input import read_bodies
from .compaction import key_argument, result_kind
from .errors import InputError, TranscriptError, UnknownAPIError
from .jsonio import dumps
from .model import Conversation, Message, Part, Request, ToolCall, ToolResult, text_of
from .policy import Policy
from .replay import (
    PRICE_READ,
    PRICE_WRITE,
    Progress,
    ReplayTotals,
    TurnStats,
    counter,
    prompt_text,
    replay_managed,
    replay_requests,
    request_count,
    requests_of,
    tokens,
)
from .transcripts import TranscriptWarning, detect_format, load_transcript

__all__ = [
    "SCHEDULES",
    "InspectedSession",
    "Inspection",
    "LargeResult",
    "Schedule",
    "TurnBands",
    "inspect_conversation",
    "inspect_source",
    "load_session",
]

SCHEDULES = ("as sent", "off", "eager", "cache-aware")
"""The schedules compared, in order: unmanaged, then each compaction mode of a managed session."""

SYSTEM = "system"
TOOL_DEFINITIONS = "tool definitions"
USER = "user"
ASSISTANT = "assistant"
RESULTS = "results: "
OTHER_RESULTS = "results: other tools"

TOOL_BANDS = 6
"""Tools with a band of their own (the largest by their results in the last request); the rest share one."""

LARGEST = 12
"""How many of the largest results are listed."""


@dataclass(frozen=True, slots=True)
class InspectedSession:
    """The conversation to inspect, the API its requests are built for, and what was said on reading it."""

    source: str
    kind: str
    """``transcript: FORMAT`` or ``body: API``."""
    conversation: Conversation
    api: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TurnBands:
    """One request, split into bands (characters, in the order of :attr:`Inspection.bands`)."""

    turn: int
    chars: tuple[int, ...]
    prompt_chars: int
    """The request's prompt as ``replay`` measures it: every band but the tool definitions."""

    @property
    def tokens(self) -> tuple[int, ...]:
        return tuple(tokens(c) for c in self.chars)

    @property
    def total_tokens(self) -> int:
        """The request with its tool definitions, in tokens."""
        return tokens(sum(self.chars))


@dataclass(frozen=True, slots=True)
class LargeResult:
    """One of the session's largest tool results."""

    turn: int
    """The first request that holds it."""
    tool: str
    kind: str
    """Its content kind, as :func:`~toolbudget.previews.detect` tells it with its call's hints."""
    chars: int
    argument: str
    """What the call ran on: its command, path or pattern, shortened."""

    @property
    def tokens(self) -> int:
        return tokens(self.chars)


@dataclass(frozen=True, slots=True)
class Schedule:
    """One schedule replayed over the whole session."""

    name: str
    totals: ReplayTotals
    events: tuple[int, ...] = ()
    """The requests at which the schedule rewrote old results (a cache-aware event)."""

    @property
    def turns(self) -> tuple[TurnStats, ...]:
        return self.totals.turns

    @staticmethod
    def billed(turn: TurnStats) -> float:
        """What one request bills, in base-price tokens: its cached prefix read, the rest written."""
        return PRICE_READ * turn.prefix_tokens + PRICE_WRITE * (turn.tokens - turn.prefix_tokens)

    @staticmethod
    def hit_share(turn: TurnStats) -> float:
        """The share of one request's tokens read from the cache."""
        return turn.prefix_tokens / turn.tokens if turn.tokens else 0.0


@dataclass(frozen=True, slots=True)
class Inspection:
    """Everything ``toolbudget inspect`` shows about one session."""

    source: str
    kind: str
    conversation: str
    api: str
    bands: tuple[str, ...]
    turns: tuple[TurnBands, ...]
    largest: tuple[LargeResult, ...]
    schedules: tuple[Schedule, ...]
    results: int
    """How many tool results the whole session holds."""
    kinds: tuple[tuple[str, int, int], ...]
    """Every content kind of the session's results: (kind, results, chars), largest first."""

    def schedule(self, name: str) -> Schedule:
        return next(s for s in self.schedules if s.name == name)


def load_session(
    path: str | Path, *, api: str | None = None, conversation: str | None = None
) -> InspectedSession:
    """Read ``path`` as a transcript or, failing that, as one request body.

    For a transcript, ``api`` is the wire API its requests are built for
    (``anthropic`` when not given) and ``conversation`` chooses one of its
    conversations by id or index (the first main one when not given). For a
    body, ``api`` is a hint for telling its API, and its requests are built for
    that API. Raises :class:`~toolbudget.errors.InputError` when the file is
    neither.
    """
    name = str(path)
    try:
        detect_format(path)
    except TranscriptError as not_transcript:
        # In no transcript format: a body, or else the reason it is not a transcript (a damaged
        # transcript is read as one, so its error is the transcript reader's).
        try:
            data = Path(path).read_bytes()
        except OSError:  # missing or unreadable: the transcript reader has said so
            raise not_transcript from None
        return _body_session(name, data, api, conversation, not_transcript)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TranscriptWarning)
        loaded = load_transcript(path)
    if not loaded.conversations:
        raise InputError(f"{name}: holds no conversation")
    chosen = _choose(loaded.conversations, conversation, name)
    notes = list(loaded.warnings)
    if len(loaded.conversations) > 1 and conversation is None:
        notes.append(
            f"{name} holds {len(loaded.conversations)} conversations; inspecting {chosen.id!r} "
            "(choose with --conversation)"
        )
    return InspectedSession(
        name, f"transcript: {loaded.format}", chosen, wire.resolve_api(api or "anthropic"), tuple(notes)
    )


def _choose(conversations: Sequence[Conversation], which: str | None, name: str) -> Conversation:
    """The conversation named by id or index; by default the first that is not a sub-agent's."""
    if which is None:
        main = [c for c in conversations if not c.sidechain]
        return (main or list(conversations))[0]
    for candidate in conversations:
        if candidate.id == which:
            return candidate
    if which.isdigit() and int(which) < len(conversations):
        return conversations[int(which)]
    raise InputError(f"{name}: no conversation {which!r} (it has {len(conversations)})")


def _body_session(
    name: str, data: bytes, api: str | None, which: str | None, not_transcript: TranscriptError
) -> InspectedSession:
    try:
        bodies = read_bodies(data, name)
    except InputError:
        raise not_transcript from None
    if len(bodies) != 1:
        raise InputError(f"{name}: holds {len(bodies)} request bodies; inspect one at a time")
    if which is not None:
        raise InputError(f"{name}: is one request body, which has no conversations to choose from")
    body = bodies[0].body
    if not isinstance(body, dict):
        raise not_transcript
    try:
        request = wire.parse(body, api)
    except UnknownAPIError as exc:
        raise UnknownAPIError(
            f"{name}: neither a transcript in a known format nor a request body: {exc}"
        ) from None
    resolved = request.api or wire.detect_api(body)
    conversation = Conversation(
        f"{Path(name).name}", name, _neutral(request.messages), request.system, request.tools
    )
    return InspectedSession(name, f"body: {resolved}", conversation, resolved)


def _neutral(messages: Iterable[Message]) -> tuple[Message, ...]:
    """A body's history laid out as a transcript's: each result in a ``tool`` message of its own.

    Results come first, as they answer the turn before; what else their
    message held follows in a message of its role.
    """
    out: list[Message] = []
    for message in messages:
        results = [p for p in message.parts if isinstance(p, ToolResult)]
        if not results:
            out.append(message)
            continue
        out.extend(Message("tool", (r,)) for r in results)
        rest = tuple(p for p in message.parts if not isinstance(p, ToolResult))
        if rest:
            out.append(Message(message.role if message.role != "tool" else "user", rest, message.extra))
    return tuple(out)


def inspect_source(
    path: str | Path,
    *,
    api: str | None = None,
    conversation: str | None = None,
    policy: Policy | None = None,
    progress: Progress | None = None,
) -> tuple[InspectedSession, Inspection]:
    """Read ``path`` (see :func:`load_session`) and inspect it."""
    session = load_session(path, api=api, conversation=conversation)
    return session, inspect_conversation(session, policy=policy, progress=progress)


def inspect_conversation(
    session: InspectedSession, *, policy: Policy | None = None, progress: Progress | None = None
) -> Inspection:
    """The bands of every request, the largest results, and every schedule replayed.

    ``progress`` is told how many of the requests of all the schedules are done.
    """
    conversation, api = session.conversation, session.api
    base = policy or Policy.load()
    names = _call_names(conversation.messages)
    split: list[dict[str, int]] = []
    tick = counter(len(SCHEDULES) * request_count(conversation), progress)

    def measure(n: int, body: dict[str, Any]) -> None:
        split.append(_bands(wire.parse(body, api), names))
        tick(n, body)

    as_sent = replay_requests(conversation, api, None, emit=measure)
    schedules = [Schedule("as sent", as_sent)]
    for mode in SCHEDULES[1:]:
        totals, events = replay_managed(conversation, api, replace(base, compaction=mode), tick=tick)
        schedules.append(Schedule(mode, totals, events))
    if not split:
        raise InputError(f"{session.source}: conversation {conversation.id!r} holds no request to inspect")
    order = _band_order(split)
    turns = tuple(
        TurnBands(n, tuple(_fold(chars, order)), stats.chars)
        for n, (chars, stats) in enumerate(zip(split, as_sent.turns, strict=True))
    )
    largest, count, kinds = _results(conversation)
    return Inspection(
        session.source,
        session.kind,
        conversation.id,
        api,
        order,
        turns,
        largest,
        tuple(schedules),
        count,
        kinds,
    )


def _call_names(messages: Iterable[Message]) -> dict[str, str]:
    return {call.id: call.name for m in messages for call in m.tool_calls() if call.id is not None}


def _chars(parts: tuple[Part, ...]) -> int:
    """The characters ``replay`` counts for some parts (measured as a system prompt is: no framing)."""
    return len(prompt_text(Request(None, (), parts)))


def _bands(request: Request, names: dict[str, str]) -> dict[str, int]:
    """One request's characters by band; all but the tool definitions add up to its prompt."""
    out: Counter[str] = Counter()
    out[SYSTEM] += _chars(request.system)
    for tool in request.tools:
        out[TOOL_DEFINITIONS] += len(
            dumps({"name": tool.name, "description": tool.description, "parameters": tool.parameters})
        )
    for message in request.messages:
        role_band = SYSTEM if message.role == "system" else ASSISTANT if message.role == "assistant" else USER
        bands = [_part_band(part, role_band, names) for part in message.parts]
        # The role's framing goes with the message's first part: a results message is results.
        out[bands[0] if bands else role_band] += len(f"\x1e{message.role}\x1f")
        for part, band in zip(message.parts, bands, strict=True):
            out[band] += _chars((part,))
    return dict(out)


def _part_band(part: Part, role_band: str, names: dict[str, str]) -> str:
    if not isinstance(part, ToolResult):
        return role_band
    name = part.name or (names.get(part.call_id) if part.call_id is not None else None)
    return RESULTS + (name or "unknown tool")


def _band_order(split: list[dict[str, int]]) -> tuple[str, ...]:
    """The bands to show: the fixed ones, then the largest tools' results, then the rest as one."""
    last = split[-1] if split else {}
    tools = sorted(
        {band for chars in split for band in chars if band.startswith(RESULTS)},
        key=lambda band: (-last.get(band, 0), band),
    )
    own = tools if len(tools) <= TOOL_BANDS + 1 else tools[:TOOL_BANDS]
    rest = [OTHER_RESULTS] if len(own) < len(tools) else []
    return (SYSTEM, TOOL_DEFINITIONS, USER, ASSISTANT, *own, *rest)


def _fold(chars: dict[str, int], order: tuple[str, ...]) -> list[int]:
    out = [chars.get(band, 0) for band in order]
    if order[-1] == OTHER_RESULTS:
        out[-1] = sum(v for band, v in chars.items() if band.startswith(RESULTS) and band not in order)
    return out


def _results(
    conversation: Conversation,
) -> tuple[tuple[LargeResult, ...], int, tuple[tuple[str, int, int], ...]]:
    """The largest results (ties: the earlier first), how many there are, and their kinds."""
    calls: dict[str, ToolCall] = {
        c.id: c for m in conversation.messages for c in m.tool_calls() if c.id is not None
    }
    # The request that first holds message i: requests grow, so it is the first whose prefix is longer.
    lengths = [len(r.messages) for r in requests_of(conversation)]
    found: list[LargeResult] = []
    kinds: dict[str, list[int]] = {}
    request = 0
    for i, message in enumerate(conversation.messages):
        while request < len(lengths) - 1 and lengths[request] <= i:
            request += 1
        for part in message.tool_results():
            call = calls.get(part.call_id) if part.call_id is not None else None
            tool = part.name or (call.name if call is not None else "unknown tool")
            kind = result_kind(tool, call, text_of(part.content), is_error=part.is_error)
            chars = _chars(part.content)
            found.append(LargeResult(request, tool, kind, chars, key_argument(call)))
            tally = kinds.setdefault(kind, [0, 0])
            tally[0] += 1
            tally[1] += chars
    largest = sorted(range(len(found)), key=lambda j: (-found[j].chars, j))[:LARGEST]
    by_kind = sorted(((k, n, c) for k, (n, c) in kinds.items()), key=lambda t: (-t[2], t[0]))
    return tuple(found[j] for j in largest), len(found), tuple(by_kind)
