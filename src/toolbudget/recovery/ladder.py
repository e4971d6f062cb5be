"""The recovery ladder: smaller and smaller histories, until the provider accepts one.

When a provider still answers "prompt too long", the request is tried again at
escalating levels:

1. the turn and result budgets halved, and assistant texts over 5,000
   characters cut, like any cut, with a key to recall them;
2. the system prompt, the task (the first user message, which the seeds' own
   version loses), and the last ``emergency_keep_messages`` messages from a
   safe boundary, with a notice of what was dropped;
3. the same with the last 4 messages.

A safe boundary never splits a call from its results: a tail that would open
with results starts earlier, at the call that made them (a parallel batch is
kept whole, and squeezed), rather than later.

Every retry after a refusal sends strictly less than the refused request: a
level that would not is skipped, and level 3 repeated cuts further. Its further
cuts, in order, until the estimate fits: tool results and long texts (the
user's too, never the task) squeezed, recallably; then the kept messages
dropped from the oldest, one safe boundary at a time, with a shorter notice;
and last no notice. When even the system prompt and the task alone do not fit
(the task is a pasted log, a long spec), the task itself is cut, last of all:
each of its long texts keeps its head and tail around one marker whose key
recalls it byte for byte, first in the room the later messages leave (they
keep up to half of it), then in half of that, down to 400 characters. A task
is better cut than refused. Only a system prompt (with the tool definitions)
that leaves no room even for that, or that was refused beside it, makes
recovery give up. Every level archives what it drops (the notice names the
key), leaves the pairing valid and the history starting with a user message,
and never touches the caller's history.

When the provider's error states the prompt size and the limit, the ladder
calibrates its estimates with them (the provider's count over the estimate of
what was refused) and starts at the first level that fits.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..budget import enforce, recall_route
from ..compaction import Schedule
from ..errors import StoreError
from ..marker import marker_line
from ..measure import CHARS_PER_TOKEN, MARKER_ROOM, estimate_tokens, request_chars, tokens_of
from ..model import Data, Message, Part, Request, Text, Thinking, ToolCall, ToolResult
from ..pairing import repair_request
from ..policy import Policy
from ..previews import head_end, make_preview, newline_of, tail_start
from ..wire import dumps_text
from .classify import Classified

if TYPE_CHECKING:
    from ..session import Session

__all__ = [
    "LONG_TEXT_CHARS",
    "NUCLEAR_KEEP_MESSAGES",
    "Attempt",
    "RecoveryFailed",
    "RecoveryReport",
    "estimate_tokens",
    "next_rung",
    "shrink",
]

LONG_TEXT_CHARS = 5_000
NUCLEAR_KEEP_MESSAGES = 4
_SAFETY = 0.95  # aim under the limit: estimates are estimates
_SQUEEZES = 6  # how many times level 3 halves its budgets again before dropping kept messages
_FLOOR_CHARS = 400  # level 3 cuts no text below this: past it, dropping a message frees more


class RecoveryFailed(Exception):
    """Nothing smaller can be sent: the system prompt leaves no room even for the task's head and tail.

    Internal to recovery, so not a :class:`~toolbudget.errors.ToolbudgetError`:
    the loop catches it and gives up with
    :class:`~toolbudget.errors.RecoveryExhausted`, whose ``reason`` is this message.
    """


@dataclass(frozen=True, slots=True)
class Attempt:
    """One rung of the ladder that was tried."""

    level: int
    estimated_tokens: int
    dropped_messages: int = 0
    archive_key: str | None = None
    cuts: int = 0
    task_keys: tuple[str, ...] = ()
    """Keys of the task's texts, when the task itself had to be cut (recall them by these)."""
    tokens: int = 0
    """The history sent at this level in the tokens a :class:`~toolbudget.session.Report` shows
    (``estimated_tokens`` is calibrated by the provider's own count, to compare with its limit)."""


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What recovery did for one call: the errors it met and the levels it tried."""

    errors: tuple[Classified, ...] = ()
    attempts: tuple[Attempt, ...] = ()
    recovered: bool = False
    remembered: bool = False
    """The call started at the level that fit the session's last call, without sending its history first."""

    @property
    def level(self) -> int:
        """The last level tried (0 when none was needed)."""
        return self.attempts[-1].level if self.attempts else 0


@dataclass(frozen=True, slots=True)
class _Goal:
    """What an attempt must meet: fit ``target`` (calibrated tokens), and be under ``below``.

    ``below`` is the uncalibrated estimate of the request the provider refused:
    sending it again, or anything as big, can only be refused again.
    """

    target: int | None = None
    factor: float = 1.0
    below: int | None = None

    def fits(self, request: Request) -> bool:
        return self.target is None or estimate_tokens(request, self.factor) <= self.target

    def met(self, request: Request) -> bool:
        if not self.fits(request):
            return False
        return self.below is None or estimate_tokens(request) < self.below


def _tried(
    level: int,
    shrunk: Request,
    factor: float,
    dropped: int = 0,
    key: str | None = None,
    cuts: int = 0,
    keys: tuple[str, ...] = (),
) -> Attempt:
    tokens = tokens_of(request_chars(shrunk))
    return Attempt(level, estimate_tokens(shrunk, factor), dropped, key, cuts, keys, tokens)


def shrink(
    session: Session,
    request: Request,
    level: int,
    *,
    target_tokens: int | None = None,
    factor: float = 1.0,
    below: int | None = None,
) -> tuple[Request, Attempt]:
    """The history ``request`` at recovery ``level`` (1, 2 or 3), budgeted, repaired and valid.

    With ``target_tokens`` (calibrated by ``factor``), or ``below`` (the estimate,
    uncalibrated, of a refused request, which the result must undercut), level 3
    keeps cutting until the result meets both, the task itself last. It raises
    :class:`RecoveryFailed` when the system prompt and the task cut to its floor
    do not fit ``target_tokens``, or when nothing under ``below`` is left.
    """
    with session.exclusive():  # its cuts go to the session's archive, which one thread works at a time
        return _shrink(session, request, level, target_tokens=target_tokens, factor=factor, below=below)


def _shrink(
    session: Session,
    request: Request,
    level: int,
    *,
    target_tokens: int | None,
    factor: float,
    below: int | None,
) -> tuple[Request, Attempt]:
    request, _ = repair_request(request)
    # Halved budgets, and every old result at the level its age allows at once: a level must
    # never send more than the managed request that was refused.
    policy = replace(session.policy.scaled(0.5), compaction="eager")
    if level < 2:
        shrunk, cuts = _budget(session, request, policy)
        return shrunk, _tried(level, shrunk, factor, cuts=cuts)
    keep = session.policy.emergency_keep_messages if level == 2 else NUCLEAR_KEEP_MESSAGES
    start = _tail_start(request.messages, keep)
    kept = _drop_before(session, request, start)
    goal = _Goal(target_tokens, factor, below)
    # Without its task cut, level 3 can fit only when the system prompt and the task do.
    whole_task = level < 3 or target_tokens is None or goal.fits(_core(request))
    if whole_task:
        shrunk, cuts = _budget(session, kept.request, policy)
        if level < 3 or goal.met(shrunk):
            return shrunk, _tried(level, shrunk, factor, kept.dropped, kept.key, cuts)
        for shrunk, cuts, kept in _further_cuts(session, request, start, policy):
            if goal.met(shrunk):
                return shrunk, _tried(3, shrunk, factor, kept.dropped, kept.key, cuts)
    for shrunk, cuts, kept, keys in _task_cuts(session, request, policy, goal):
        if goal.met(shrunk):
            attempt = _tried(3, shrunk, factor, kept.dropped, kept.key, cuts, keys)
            return shrunk, attempt
    floor, _, _ = _cut_task(session, _core(request), _FLOOR_CHARS)
    needed = estimate_tokens(floor, factor)
    if target_tokens is not None and needed > target_tokens:
        raise RecoveryFailed(
            f"the system prompt and the tool definitions leave no room for the task: with the task cut "
            f"to {_FLOOR_CHARS} characters they need about {needed} tokens, over the {target_tokens} that fit"
        )
    raise RecoveryFailed(
        f"nothing smaller than the refused request is left: the system prompt and the task cut to "
        f"{_FLOOR_CHARS} characters, about {needed} tokens, were refused"
    )


def next_rung(
    session: Session,
    request: Request,
    start: int,
    *,
    target_tokens: int | None = None,
    factor: float = 1.0,
    below: int | None = None,
) -> tuple[Request, Attempt]:
    """The first level from ``start`` whose history meets the goal (see :func:`shrink`).

    Levels 1 and 2 count when they fit ``target_tokens`` and undercut ``below``;
    level 3, the last, cuts further until it does, or raises :class:`RecoveryFailed`.
    """
    goal = _Goal(target_tokens, factor, below)
    for level in range(start, 3):
        shrunk, attempt = shrink(session, request, level, factor=factor)
        if goal.met(shrunk):
            return shrunk, attempt
    return shrink(session, request, 3, target_tokens=target_tokens, factor=factor, below=below)


def _further_cuts(
    session: Session, request: Request, start: int, policy: Policy
) -> Iterator[tuple[Request, int, _Kept]]:
    """Level 3 past its floor, smaller and smaller: ``(request, cuts, kept)``.

    What comes back by recall goes first: results and long texts (the user's
    too, a harness's pasted output, but never the task) are squeezed. Then the
    kept messages go from the oldest, one safe boundary at a time, down to the
    system prompt, the task and the notice, shortened to its marker (the latest
    messages are worth more than its wording); and, when nothing else fits, the
    notice goes too.
    """
    kept = _drop_before(session, request, start)
    for _ in range(_SQUEEZES):
        policy = policy.scaled(0.5)
        yield _squeezed(session, kept, policy)
    for later in [start, *_safe_starts(request.messages, start + 1)]:
        kept = _drop_before(session, request, later, short=True)
        yield _squeezed(session, kept, policy)
    core = _core(request)
    dropped = len(request.messages) - len(core.messages)
    yield _squeezed(session, _Kept(core, dropped, kept.key, len(core.messages)), policy)


def _task_cuts(
    session: Session, request: Request, policy: Policy, goal: _Goal
) -> Iterator[tuple[Request, int, _Kept, tuple[str, ...]]]:
    """The last resort: the task cut to its head and tail, then level 3 again around it.

    Yields ``(request, cuts, kept, task keys)``, smaller and smaller. The task's
    long texts first get the room the target leaves after the system prompt, the
    tools and the later messages, which keep up to half of it (with no target
    known: half their length); then a half of that, and so on down to
    :data:`_FLOOR_CHARS`. A size whose task alone misses the goal is skipped.
    """
    for limit in _task_limits(request, goal):
        cut, keys, task_cuts = _cut_task(session, request, limit)
        if not task_cuts or not goal.met(_core(cut)):
            continue
        start = _tail_start(cut.messages, NUCLEAR_KEEP_MESSAGES)
        for shrunk, cuts, kept in _further_cuts(session, cut, start, policy):
            yield shrunk, cuts + task_cuts, kept, keys


def _task_texts(request: Request) -> list[str]:
    start, end = _task_span(request.messages)
    return [p.text for m in request.messages[start:end] for p in m.parts if isinstance(p, Text)]


def _task_limits(request: Request, goal: _Goal) -> list[int]:
    """The sizes to try for each of the task's long texts, largest first, ending at the floor."""
    texts = _task_texts(request)
    longest = max(map(len, texts), default=0)
    if longest <= _FLOOR_CHARS + MARKER_ROOM:
        return []
    if goal.target is None:
        first = longest // 2
    else:
        core = estimate_tokens(_core(request), goal.factor)
        # The tokens the system prompt, the tools and the task's wrapping leave, and what the
        # later messages would take of them (at most half: level 3 squeezes or drops them).
        room = goal.target - (core - sum(map(len, texts)) / CHARS_PER_TOKEN * goal.factor)
        rest = max(0, estimate_tokens(request, goal.factor) - core)
        first = min(
            longest - 1, int((room - min(rest, room / 2)) * CHARS_PER_TOKEN / goal.factor) - MARKER_ROOM
        )
    limits: list[int] = []
    limit = max(first, _FLOOR_CHARS)
    while limit > _FLOOR_CHARS:
        limits.append(limit)
        limit //= 2
    return [*limits, _FLOOR_CHARS]


def _cut_task(session: Session, request: Request, limit: int) -> tuple[Request, tuple[str, ...], int]:
    """``request`` with each text of its task over ``limit`` characters cut to its head and tail.

    Also returns the keys the originals are archived under (a store that failed
    gives none: the marker says so) and how many texts were cut.
    """
    start, end = _task_span(request.messages)
    messages = list(request.messages)
    keys: list[str] = []
    cuts = 0
    for i in range(start, end):
        parts = list(messages[i].parts)
        for j, part in enumerate(parts):
            if isinstance(part, Text) and len(part.text) > limit + MARKER_ROOM:
                text, key = _head_and_tail(session, part.text, limit, recall_route(request))
                parts[j] = replace(part, text=text)
                if key is not None:
                    keys.append(key)
                cuts += 1
        if parts != list(messages[i].parts):
            messages[i] = replace(messages[i], parts=tuple(parts))
    if not cuts:
        return request, (), 0
    return replace(request, messages=tuple(messages)), tuple(keys), cuts


def _head_and_tail(session: Session, text: str, limit: int, route: str | None) -> tuple[str, str | None]:
    """``text`` cut to about ``limit`` characters of its head and tail around one marker line.

    Not a content-shaped preview: a task says what it wants at its start (a spec,
    an instruction) or at its end (a question after a pasted log), so both ends
    are kept verbatim, cut at line boundaries where there are lines.
    """
    key, path = _keep(session, text)
    length = len(text)
    head = head_end(text, 0, length, int(limit * session.policy.head_ratio))
    tail = tail_start(text, head, length, limit - head)
    head = head_end(text, 0, tail, limit - (length - tail))
    whole_lines = (head == 0 or text[head - 1] == "\n") and (tail == 0 or text[tail - 1] == "\n")
    if whole_lines:
        where = f"lines {text.count(chr(10), 0, head) + 1}-{text.count(chr(10), 0, tail)}"
    else:
        where = f"chars {head + 1}-{tail}"
    detail = f"{where} of the task, cut to fit the context window"
    line = marker_line(tail - head, length, key=key, path=path, detail=detail, tool=route)
    nl = newline_of(text)
    before = text[:head] if head == 0 or text[head - 1] == "\n" else text[:head] + nl
    return f"{before}{line}{nl}{text[tail:]}", key


def _squeezed(session: Session, kept: _Kept, policy: Policy) -> tuple[Request, int, _Kept]:
    long_text = max(_FLOOR_CHARS, policy.preview_chars)
    return (*_budget(session, kept.request, policy, long_text, users_from=kept.tail), kept)


def _budget(
    session: Session,
    request: Request,
    policy: Policy,
    long_text: int = LONG_TEXT_CHARS,
    users_from: int | None = None,
) -> tuple[Request, int]:
    """Tighter budgets, long assistant texts (and user texts from ``users_from``) cut, pairing repaired."""
    budgeted = enforce(request, policy, session.archive, schedule=Schedule(), sizes=None)
    trimmed, text_cuts = _cut_long_texts(session, budgeted.request, long_text, users_from)
    fixed, _ = repair_request(trimmed)
    return fixed, len(budgeted.cuts) + text_cuts


def _cut_long_texts(
    session: Session, request: Request, limit: int, users_from: int | None = None
) -> tuple[Request, int]:
    """Assistant texts, and the arguments of past calls, over ``limit`` characters become previews.

    So do user texts from index ``users_from`` on (after the task and the notice):
    harnesses such as SWE-agent send tool output as user messages, and level 3
    must be able to cut those like results.
    """
    cuts = 0
    route = recall_route(request)
    messages = list(request.messages)
    for i, message in enumerate(messages):
        users = message.role == "user" and users_from is not None and i >= users_from
        if message.role != "assistant" and not users:
            continue
        parts: list[Part] = []
        changed = False
        for part in message.parts:
            if isinstance(part, Text) and len(part.text) > limit:
                part = Text(_preview(session, part.text, limit, route))
                changed = True
                cuts += 1
            elif isinstance(part, ToolCall):
                arguments = (
                    part.arguments_json if part.arguments_json is not None else dumps_text(part.arguments)
                )
                if len(arguments) > limit:
                    # Still an object, as every API wants; the call's input can be recalled.
                    shown = {"toolbudget": _preview(session, arguments, limit, route)}
                    part = ToolCall(part.id, part.name, shown, None, True, part.extra, part.form)
                    changed = True
                    cuts += 1
            parts.append(part)
        if changed:
            messages[i] = Message(message.role, tuple(parts), message.extra, message.form)
    return (replace(request, messages=tuple(messages)) if cuts else request), cuts


def _preview(session: Session, text: str, limit: int, route: str | None) -> str:
    key, path = _keep(session, text)

    def mark(omitted: int, detail: str) -> str:
        return marker_line(omitted, len(text), key=key, path=path, detail=detail, tool=route)

    return make_preview(text, limit, marker=mark, head_ratio=session.policy.head_ratio).text


def _keep(session: Session, text: str) -> tuple[str | None, str | None]:
    try:
        return session.archive.keep(text)
    except StoreError:
        return None, None


def _task_span(messages: tuple[Message, ...]) -> tuple[int, int]:
    """Where the task is: the user messages before the first assistant turn.

    Harnesses often open with several (a caveat, a command's output, then the
    prompt), so all of them are the task, not just the first.
    """
    start = next((i for i, m in enumerate(messages) if m.role == "user"), len(messages))
    end = start
    while end < len(messages) and messages[end].role == "user":
        end += 1
    return start, end


def _carries_results(message: Message) -> bool:
    return message.role == "tool" or any(isinstance(p, ToolResult) for p in message.parts)


def _safe_starts(messages: tuple[Message, ...], lo: int) -> list[int]:
    """Where a kept tail may begin, from ``lo`` on, in order; the end (an empty tail) always.

    Not at results, and not after a call whose result the tail keeps: Responses
    gives each call of a parallel batch an item of its own, so the tail must
    start at the batch's first call.
    """
    calls = {call.id: i for i, m in enumerate(messages) for call in m.tool_calls() if call.id}
    starts = [len(messages)]
    earliest = len(messages)  # the first call answered at or after i
    for i in range(len(messages) - 1, lo - 1, -1):
        for result in messages[i].tool_results():
            earliest = min(earliest, calls.get(result.call_id or "", i))
        if not _carries_results(messages[i]) and earliest >= i:
            starts.append(i)
    return starts[::-1]


def _tail_start(messages: tuple[Message, ...], keep: int) -> int:
    """Where the last ``keep`` messages begin, moved back to a safe boundary.

    Back, not forward: a tail of results moves to the call that made them, so a
    parallel batch is kept (and squeezed) rather than dropped whole.
    """
    _, task_end = _task_span(messages)
    starts = _safe_starts(messages, task_end)
    wanted = max(task_end, len(messages) - keep)
    earlier = [s for s in starts if s <= wanted]
    return earlier[-1] if earlier else starts[0]


@dataclass(frozen=True, slots=True)
class _Kept:
    """A history with its middle dropped: how many messages went, their key, where the tail begins."""

    request: Request
    dropped: int
    key: str | None
    tail: int


def _drop_before(session: Session, request: Request, start: int, *, short: bool = False) -> _Kept:
    """System, task, a notice, and the messages from ``start`` (a safe boundary) on.

    A ``short`` notice is the marker alone, without the path: the key still
    recalls what was dropped.
    """
    messages = request.messages
    task_start, task_end = _task_span(messages)
    head = [m for m in messages[:task_start] if m.role == "system"]
    dropped = [m for m in messages[:task_start] if m.role != "system"] + list(messages[task_end:start])
    if not dropped:
        return _Kept(request, 0, None, task_end)
    text = transcript_text(dropped)
    key, path = _keep(session, text)
    detail = f"{len(dropped)} earlier messages dropped to fit the context window"
    line = marker_line(
        len(text), len(text), key=key, path=None if short else path, detail=detail, tool=recall_route(request)
    )
    if not short:
        line += "\nThe conversation continues below from where it was cut; the task above still stands."
    kept = [*head, *messages[task_start:task_end], Message("user", (Text(line),)), *messages[start:]]
    tail = len(head) + task_end - task_start + 1
    return _Kept(replace(request, messages=tuple(kept)), len(dropped), key, tail)


def _core(request: Request) -> Request:
    """Only the system prompt and the task (and the tools): what recovery can never drop."""
    start, end = _task_span(request.messages)
    kept = tuple(m for i, m in enumerate(request.messages) if m.role == "system" or start <= i < end)
    return replace(request, messages=kept)


def transcript_text(messages: list[Message]) -> str:
    """Dropped messages as readable text, for the archive: what recall will page through."""
    lines: list[str] = []
    for message in messages:
        lines.append(f"--- {message.role} ---")
        for part in message.parts:
            if isinstance(part, Text):
                lines.append(part.text)
            elif isinstance(part, ToolCall):
                arguments = (
                    part.arguments_json if part.arguments_json is not None else dumps_text(part.arguments)
                )
                lines.append(f"[call {part.id} {part.name}] {arguments}")
            elif isinstance(part, ToolResult):
                body = "\n".join(
                    p.text if isinstance(p, Text) else dumps_text(p.value)
                    for p in part.content
                    if isinstance(p, (Text, Data))
                )
                flag = " (error)" if part.is_error else ""
                lines.append(f"[result {part.call_id}{flag}]\n{body}")
            elif isinstance(part, Thinking) and part.text:
                lines.append(f"[thinking] {part.text}")
    return "\n".join(lines) + "\n"


def target_of(error: Classified) -> int | None:
    """How many prompt tokens fit, from what the provider's error says."""
    if error.limit is None:
        return None
    room = error.limit - (error.requested_output or 0)
    return max(1, int(room * _SAFETY))


def calibration(error: Classified, sent: Request) -> float:
    """Provider tokens per estimated token, from the prompt size the error states."""
    if not error.prompt_tokens:
        return 1.0
    estimate = estimate_tokens(sent)
    return error.prompt_tokens / estimate if estimate else 1.0
