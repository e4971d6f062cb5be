"""The recovery ladder: smaller and smaller histories, until the provider accepts one.

When a provider still answers "prompt too long", the request is tried again at
escalating levels:

1. the turn and result budgets halved, and assistant texts over 5,000
   characters cut, like any cut, with a key to recall them;
2. the system prompt, the task (the first user message, which the seeds' own
   version loses), and the last ``emergency_keep_messages`` messages from a
   safe boundary, with a notice of what was dropped;
3. the same with the last 4 messages.

If level 3 still does not fit, its tool results and long texts are cut further,
recallably, until the estimate fits; only a system prompt and task that alone
exceed the window make recovery give up. Every level archives what it drops
(the notice names the key), leaves the pairing valid and the history starting
with a user message, and never touches the caller's history.

When the provider's error states the prompt size and the limit, the ladder
calibrates its estimates with them and starts at the first level that fits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..budget import enforce
from ..compaction import Schedule
from ..errors import StoreError
from ..marker import marker_line
from ..model import Data, Message, Part, Request, Text, Thinking, ToolCall, ToolResult
from ..pairing import repair_request
from ..policy import Policy
from ..previews import make_preview
from ..wire._common import dumps_text
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
    "shrink",
]

LONG_TEXT_CHARS = 5_000
NUCLEAR_KEEP_MESSAGES = 4
_SAFETY = 0.95  # aim under the limit: estimates are estimates
_SQUEEZES = 6  # how many times level 3 halves its budgets again before giving up


class RecoveryFailed(Exception):
    """Nothing smaller can be sent: the system prompt and the task alone exceed the window."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """One rung of the ladder that was tried."""

    level: int
    estimated_tokens: int
    dropped_messages: int = 0
    archive_key: str | None = None
    cuts: int = 0


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What recovery did for one call: the errors it met and the levels it tried."""

    errors: tuple[Classified, ...] = ()
    attempts: tuple[Attempt, ...] = ()
    recovered: bool = False

    @property
    def level(self) -> int:
        """The last level tried (0 when none was needed)."""
        return self.attempts[-1].level if self.attempts else 0


def estimate_tokens(request: Request, factor: float = 1.0) -> int:
    """Tokens of a request at four characters a token, times a calibration ``factor``."""
    from ..session import count_chars

    return int(count_chars(request) / 4 * factor)


def shrink(
    session: Session,
    request: Request,
    level: int,
    *,
    target_tokens: int | None = None,
    factor: float = 1.0,
) -> tuple[Request, Attempt]:
    """The history ``request`` at recovery ``level`` (1, 2 or 3), budgeted, repaired and valid.

    With ``target_tokens``, level 3 keeps cutting until the estimate fits it,
    and raises :class:`RecoveryFailed` when the system prompt and the task alone
    do not.
    """
    request, _ = repair_request(request)
    # Halved budgets, and every old result at the level its age allows at once: a level must
    # never send more than the managed request that was refused.
    policy = replace(session.policy.scaled(0.5), compaction="eager")
    dropped = 0
    key: str | None = None
    if level >= 2:
        keep = session.policy.emergency_keep_messages if level == 2 else NUCLEAR_KEEP_MESSAGES
        request, dropped, key = _drop_middle(session, request, keep)
        if target_tokens is not None and level >= 3:
            needed = estimate_tokens(_core(request), factor)
            if needed > target_tokens:
                raise RecoveryFailed(
                    f"the system prompt and the task alone need about {needed} tokens, "
                    f"over the {target_tokens} that fit"
                )
    shrunk, cuts = _budget(session, request, policy)
    if level >= 3 and target_tokens is not None:
        for _ in range(_SQUEEZES):
            if estimate_tokens(shrunk, factor) <= target_tokens:
                break
            policy = policy.scaled(0.5)
            shrunk, more = _budget(session, request, policy, long_text=max(400, policy.preview_chars))
            cuts = more
    return shrunk, Attempt(level, estimate_tokens(shrunk, factor), dropped, key, cuts)


def _budget(
    session: Session, request: Request, policy: Policy, long_text: int = LONG_TEXT_CHARS
) -> tuple[Request, int]:
    """Tighter budgets, long assistant texts cut, pairing repaired."""
    budgeted = enforce(request, policy, session.archive, schedule=Schedule(), sizes=None)
    trimmed, text_cuts = _cut_long_texts(session, budgeted.request, long_text)
    fixed, _ = repair_request(trimmed)
    return fixed, len(budgeted.cuts) + text_cuts


def _cut_long_texts(session: Session, request: Request, limit: int) -> tuple[Request, int]:
    """Assistant texts, and the arguments of past calls, over ``limit`` characters become previews."""
    cuts = 0
    messages = list(request.messages)
    for i, message in enumerate(messages):
        if message.role != "assistant":
            continue
        parts: list[Part] = []
        changed = False
        for part in message.parts:
            if isinstance(part, Text) and len(part.text) > limit:
                part = Text(_preview(session, part.text, limit))
                changed = True
                cuts += 1
            elif isinstance(part, ToolCall):
                arguments = (
                    part.arguments_json if part.arguments_json is not None else dumps_text(part.arguments)
                )
                if len(arguments) > limit:
                    # Still an object, as every API wants; the call's input can be recalled.
                    shown = {"toolbudget": _preview(session, arguments, limit)}
                    part = ToolCall(part.id, part.name, shown, None, True, part.extra, part.form)
                    changed = True
                    cuts += 1
            parts.append(part)
        if changed:
            messages[i] = Message(message.role, tuple(parts), message.extra, message.form)
    return (replace(request, messages=tuple(messages)) if cuts else request), cuts


def _preview(session: Session, text: str, limit: int) -> str:
    key, path = _keep(session, text)

    def mark(omitted: int, detail: str) -> str:
        return marker_line(omitted, len(text), key=key, path=path, detail=detail)

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


def _drop_middle(session: Session, request: Request, keep: int) -> tuple[Request, int, str | None]:
    """System, task, a notice, and the last ``keep`` messages from a safe boundary."""
    messages = request.messages
    task_start, task_end = _task_span(messages)
    start = max(task_end, len(messages) - keep)
    # A tail must not open with results whose calls were dropped: start at a call or a user turn.
    while start < len(messages) and _carries_results(messages[start]):
        start += 1
    head = [m for m in messages[:task_start] if m.role == "system"]
    dropped = [m for m in messages[:task_start] if m.role != "system"] + list(messages[task_end:start])
    if not dropped:
        return request, 0, None
    text = transcript_text(dropped)
    key, path = _keep(session, text)
    detail = f"{len(dropped)} earlier messages dropped to fit the context window"
    notice = Message(
        "user",
        (
            Text(
                marker_line(len(text), len(text), key=key, path=path, detail=detail)
                + "\nThe conversation continues below from where it was cut; the task above still stands."
            ),
        ),
    )
    kept = [*head, *messages[task_start:task_end], notice, *messages[start:]]
    return replace(request, messages=tuple(kept)), len(dropped), key


def _core(request: Request) -> Request:
    """Only the system prompt and the task: what recovery can never drop."""
    start, end = _task_span(request.messages)
    kept = tuple(m for i, m in enumerate(request.messages) if m.role == "system" or start <= i < end)
    return replace(request, messages=kept, tools=())


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


def first_fitting_level(
    session: Session, request: Request, target_tokens: int, factor: float, start: int = 1
) -> int:
    """The first level from ``start`` whose shrunk history fits ``target_tokens`` (3 when none does)."""
    for level in range(start, 3):
        _shrunk, attempt = shrink(session, request, level, factor=factor)
        if attempt.estimated_tokens <= target_tokens:
            return level
    return 3


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
