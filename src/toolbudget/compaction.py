"""Progressive microcompaction of old tool results, scheduled for the prompt cache.

Results the agent has moved past shrink with age (assistant turns since the
call): from :attr:`~toolbudget.policy.Policy.microcompact_truncate_turns` to a
head-and-tail preview, from :attr:`~toolbudget.policy.Policy.microcompact_summarize_turns`
to one line saying which tool ran on what, how long the output was and what it
held. Only results whose *original* is over the minimum are touched, so the
one-line level does fire with the defaults. Every level is a cut of the one
marker grammar, with the same key, so recall returns the original byte for byte.

When the levels change matters as much as what they are. A provider caches a
prompt's prefix; changing an old message rewrites everything after it. Eager
aging changes old messages on nearly every request. The cache-aware schedule
(the default) changes the compacted form only at *events*, so between events
each request is the previous one plus what was appended, byte for byte. An
event fires when a cost model says the rewrite pays for itself: it weighs the
characters it reclaims, read again from the cache on every later request,
against the characters after the first changed byte, which must be written to
the cache again. How many later requests there will be is a guess from how
long the session has run; and while per-turn aging, replayed on the history so
far, has been clearly losing to leaving the history alone, the schedule does
not bet that the next rewrite will pay. It also fires, whatever the cost, when
the history passes the high watermark of the context window, and then
compacts down to the low one.

No rule that sees only the history can stay within a few percent of the
better of "never compact" and "age every turn" on every session, because
which one wins depends on how long the session goes on;
``bench/schedule_bound.py`` measures how close any schedule can come.

The schedule is a pure function of the history: the decision at each earlier
request point is computed again from the history up to that point, which the
client resends unchanged. So it gives the same bytes after a restart and in a
second process, with no shared state; a per-session memo only makes it cheap.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .jsonio import dumps
from .model import Message, Request, Text, ToolCall, ToolDef
from .policy import Policy
from .previews import detect

__all__ = [
    "EXEC_TOOLS",
    "WRITE_TOOLS",
    "Schedule",
    "SlotInfo",
    "context_window",
    "eager_levels",
    "fixed_chars",
    "key_argument",
    "summary_detail",
    "turn_starts",
]

# Tools whose results carry an exit status and error text worth keeping at every level.
EXEC_TOOLS = frozenset(
    {
        "Bash",
        "bash",
        "shell",
        "run_shell_command",
        "exec_command",
        "execute_bash",
        "local_shell",
        "python",
        "run",
        "run_command",
        "terminal",
        "BashOutput",
    }
)
WRITE_TOOLS = frozenset(
    {
        "Write",
        "Edit",
        "MultiEdit",
        "NotebookEdit",
        "str_replace_editor",
        "str_replace_based_edit_tool",
        "apply_patch",
        "write_file",
        "replace",
        "edit_file",
        "edit",
        "create",
    }
)

LEVEL_NONE, LEVEL_PREVIEW, LEVEL_SUMMARY, LEVEL_FOLDED = 0, 1, 2, 3
"""A result's compaction levels. ``LEVEL_FOLDED``: its whole turn is folded away (see below)."""
FOLD_ROOM = 400
"""What the one marker that stands for the folded turns takes (an estimate for the schedule)."""

_MARKER_ROOM = 320
_SUMMARY_CHARS = 420
_SUMMARY_ERROR_CHARS = 1_000

# Cost model: Anthropic's price ratios for cache reads and writes, relative to base input.
READ_COST = 0.1
WRITE_COST = 1.25
# How many more requests a compaction is expected to serve: half as many as the session has
# had so far, at least 10 and at most 60. Chosen by replaying the shared sessions (see README):
# longer horizons compact too late in short sessions, shorter ones too late in long ones.
HORIZON_SHARE = 0.5
HORIZON_MIN = 10
HORIZON_MAX = 60
# Events wait while per-turn aging, replayed on the history so far, has cost more than this
# share above leaving the history alone: the session's results have not been paying back
# their rewrites, so a guess that the next ones will is a poor bet. (Watermarks still fire.)
EAGER_LOSING = 0.3

_WINDOWS = (
    ("claude", 200_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-5", 400_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("gemini", 1_048_576),
    ("deepseek", 128_000),
    ("mistral", 131_072),
    ("llama", 128_000),
    ("qwen", 131_072),
)
DEFAULT_WINDOW = 200_000


def context_window(policy: Policy, model: str | None) -> int:
    """The context window in tokens: the policy's, or the one known for the model's name."""
    if policy.context_window_tokens:
        return policy.context_window_tokens
    name = (model or "").lower()
    for prefix, window in _WINDOWS:
        if prefix in name:
            return window
    return DEFAULT_WINDOW


def fixed_chars(request: Request) -> int:
    """The characters a request sends besides its messages: the system prompt and the tool definitions.

    Both fill the context window on every request, so the estimate, the
    report and the watermarks all count them.
    """
    system = sum(len(p.text) for p in request.system if isinstance(p, Text))
    return system + tool_chars(request.tools)


_TOOLS_MEASURED: dict[int, tuple[tuple[ToolDef, ...], int]] = {}


def tool_chars(tools: tuple[ToolDef, ...]) -> int:
    """The characters of the tool definitions: names, descriptions and parameter schemas.

    A resent tool list is the same tuple (the parse caches keep it), so its
    count is remembered by identity, with the tuple itself kept so the
    identity cannot be reused.
    """
    if not tools:
        return 0
    known = _TOOLS_MEASURED.get(id(tools))
    if known is not None and known[0] is tools:
        return known[1]
    total = sum(len(tool.name) + len(tool.description or "") + len(dumps(tool.parameters)) for tool in tools)
    if len(_TOOLS_MEASURED) >= 256:
        _TOOLS_MEASURED.clear()
    _TOOLS_MEASURED[id(tools)] = (tools, total)
    return total


@dataclass(frozen=True, slots=True)
class SlotInfo:
    """What the schedule needs to know of one tool result."""

    msg: int
    turn_no: int
    """Which assistant turn called it (0 is the first)."""
    size: int
    """Characters it takes as sent before compaction (after its per-result cap)."""
    eligible: bool
    """Over the minimum size, and of a tool that may be compacted."""
    keeps_errors: bool
    """An error, or an exec/write tool: its error text stays at every level."""
    shrinkable: bool = True
    """Of a tool that may be compacted at all (not exempt, not a recall answer being read):
    past the high watermark it is summarised whatever its size."""


def level_for_age(age: int, policy: Policy) -> int:
    if age >= policy.microcompact_summarize_turns:
        return LEVEL_SUMMARY
    if age >= policy.microcompact_truncate_turns:
        return LEVEL_PREVIEW
    return LEVEL_NONE


def eager_levels(slots: Sequence[SlotInfo], turns: int, policy: Policy) -> list[int]:
    """The level of each result by its age alone, when ``turns`` assistant turns exist."""
    return [level_for_age(turns - 1 - s.turn_no, policy) if s.eligible else LEVEL_NONE for s in slots]


def size_at(slot: SlotInfo, level: int, policy: Policy) -> int:
    """How many characters a result takes at a level (an estimate for the schedule)."""
    if level == LEVEL_NONE:
        return slot.size
    if level == LEVEL_FOLDED:
        return 0
    if level == LEVEL_PREVIEW:
        return min(slot.size, policy.microcompact_head_chars + policy.microcompact_tail_chars + _MARKER_ROOM)
    return min(slot.size, _SUMMARY_ERROR_CHARS if slot.keeps_errors else _SUMMARY_CHARS)


@dataclass(slots=True)
class _Checkpoint:
    """The schedule's state after deciding at one request point."""

    end: int  # message index where the point's request ends
    levels: tuple[int, ...]  # applied level of each slot present at the point
    folded: int  # how many of the oldest turns are folded away at the point
    unmanaged: float  # what the history so far cost with no compaction (chars at cache prices)
    eager: float  # and with per-turn aging


class Schedule:
    """The cache-aware schedule of one conversation, memoised across requests.

    ``levels`` is a pure function of the history; the memo remembers the
    decision at every request point of the last history, and a longer
    history that starts with the same messages resumes from there.
    """

    def __init__(self) -> None:
        self._messages: tuple[Message, ...] = ()
        self._frame: tuple[int, int] = (0, 0)
        self._points: list[_Checkpoint] = []
        self.events: list[int] = []
        """Request points (by index) where an event fired, for the last history."""
        self.fired_now = False
        """Whether the compacted form changed at the last request asked about."""
        self.folded = 0
        """How many of the oldest turns the last request asked about has folded away."""

    def levels(
        self,
        request: Request,
        slots: Sequence[SlotInfo],
        sizes: Sequence[int],
        policy: Policy,
    ) -> list[int]:
        """The level of every slot for this request.

        ``sizes`` are the characters of each message as sent without
        compaction (tool results after their per-result caps), used to place
        each result in the prompt.
        """
        self.fired_now = False
        self.folded = 0
        if policy.compaction == "off" or not slots:
            return [LEVEL_NONE] * len(slots)
        starts = turn_starts(request.messages)
        if policy.compaction == "eager":
            now = eager_levels(slots, len(starts), policy)
            # In eager mode the form changes whenever a result crosses an age.
            before = eager_levels(slots, len(starts) - 1, policy)
            self.fired_now = any(
                a != b for a, b, s in zip(now, before, slots, strict=True) if s.turn_no < len(starts) - 1
            )
            return now
        points = [*starts[1:], len(request.messages)]
        window_chars = context_window(policy, request.model) * 4
        # The system prompt and the tool definitions fill the window too.
        fixed = fixed_chars(request)
        # Every earlier decision depends on these too: when they change, none of the memo holds.
        resume = self._resume(request.messages, points) if (window_chars, fixed) == self._frame else 0
        self._frame = (window_chars, fixed)
        cum = [0]
        for size in sizes:
            cum.append(cum[-1] + size)
        last = self._points[resume - 1] if resume else None
        state: list[int] = list(last.levels) if last else []
        fold = [last.folded if last else 0]
        unmanaged, eager = (last.unmanaged, last.eager) if last else (0.0, 0.0)
        kept = self._points[:resume]
        events = [e for e in self.events if e < resume]
        # Each point's age levels serve its decision, and its eager step and the next one's.
        then = (
            eager_levels([s for s in slots if s.msg < points[resume - 1]], resume, policy) if resume else []
        )
        for j in range(resume, len(points)):
            end = points[j]
            present = [s for s in slots if s.msg < end]
            now = eager_levels(present, j + 1, policy)
            state.extend([LEVEL_NONE] * (len(present) - len(state)))
            prev_end = points[j - 1] if j else 0
            patient = j > 0 and eager > (1 + EAGER_LOSING) * unmanaged
            span = _Span(starts, fold)
            if _decide(
                present, state, now, j + 1, end, prev_end, cum, window_chars, policy, patient, fixed, span
            ):
                events.append(j)
            unmanaged += _unmanaged_step(end, prev_end, cum, first=j == 0)
            eager += _eager_step(present, then, now, end, prev_end, cum, policy)
            kept.append(_Checkpoint(end, tuple(state), fold[0], unmanaged, eager))
            then = now
        self._messages = request.messages
        self._points = kept
        self.events = events
        self.fired_now = bool(events) and events[-1] == len(points) - 1
        self.folded = fold[0]
        state.extend([LEVEL_NONE] * (len(slots) - len(state)))
        return state

    def _resume(self, messages: tuple[Message, ...], points: Sequence[int]) -> int:
        """How many request points of the memo still hold for ``messages``."""
        old = self._messages
        same = 0
        limit = min(len(old), len(messages))
        while same < limit and old[same] is messages[same]:
            same += 1
        count = 0
        for checkpoint, end in zip(self._points, points, strict=False):
            if checkpoint.end != end or end > same:
                break
            count += 1
        return count


def turn_starts(messages: Sequence[Message]) -> list[int]:
    """Message index where each assistant turn (a run of assistant messages) starts."""
    starts = []
    prev = False
    for i, message in enumerate(messages):
        assistant = message.role == "assistant"
        if assistant and not prev:
            starts.append(i)
        prev = assistant
    return starts


def _decide(
    present: Sequence[SlotInfo],
    state: list[int],
    targets: Sequence[int],
    turns: int,
    end: int,
    prev_end: int,
    cum: Sequence[int],
    window_chars: int,
    policy: Policy,
    patient: bool = False,
    fixed: int = 0,
    span: _Span | None = None,
) -> bool:
    """Decide at one request point; apply an event to ``state`` and say whether one fired.

    ``targets`` are the levels the results' ages allow at this point, ``turns``
    the assistant turns so far. ``end`` is where this request ends and ``prev_end`` where the previous one
    did: the previous request is what the provider has cached. A ``patient``
    decision fires only for the watermark. ``fixed`` is what the request holds
    outside its messages (the system prompt), which fills the window too.

    An event rewrites everything after its first changed result. So it starts
    at the cut point that pays best: the pending changes from there on are
    applied, and older ones that would cost more to rewrite than they save
    stay pending (a later event may take them along).
    """
    sizes = [size_at(s, lv, policy) for s, lv in zip(present, state, strict=True)]
    saved = sum(s.size - size for s, size in zip(present, sizes, strict=True))
    length = fixed + cum[end] - saved - (span.removed(present, cum) if span is not None else 0)
    high = length > policy.compact_high_watermark * window_chars
    changing = [k for k, (lv, tg) in enumerate(zip(state, targets, strict=True)) if tg > lv]
    if not high:
        if not changing or patient:
            return False
        cut = _best_cut(present, sizes, targets, changing, turns, cum[prev_end] - saved, cum, policy)
        if cut is None:
            return False
        changing = [k for k in changing if present[k].msg >= cut]
    for k in changing:
        state[k] = targets[k]
    if high:
        _down_to_low(present, state, turns, fixed + cum[end], window_chars, policy, cum, span)
    return True


def _best_cut(
    present: Sequence[SlotInfo],
    sizes: Sequence[int],
    targets: Sequence[int],
    changing: Sequence[int],
    turns: int,
    cached: int,
    cum: Sequence[int],
    policy: Policy,
) -> int | None:
    """The message where an event should start, or ``None`` when no start pays.

    Starting at a result rewrites the cached prompt from there (``cached``
    minus what comes before it) at the write price instead of reading it, and
    reclaims the changes from there on, which every later request (estimated
    from the turns so far) reads no more.
    """
    horizon = min(HORIZON_MAX, max(HORIZON_MIN, int(turns * HORIZON_SHARE)))
    value = READ_COST * horizon + WRITE_COST
    best: tuple[float, int] | None = None
    reclaim = 0
    # Savings before each slot shift its position; walk the pending changes from the end.
    shift = [0] * (len(present) + 1)
    for k in range(len(present)):
        shift[k + 1] = shift[k] + present[k].size - sizes[k]
    for k in reversed(changing):
        reclaim += sizes[k] - size_at(present[k], targets[k], policy)
        if reclaim < policy.compact_clear_at_least:
            continue
        start = cum[present[k].msg] - shift[k]
        net = reclaim * value - (WRITE_COST - READ_COST) * max(0, cached - start)
        if net > 0 and (best is None or net > best[0]):
            best = (net, present[k].msg)
    return None if best is None else best[1]


def _unmanaged_step(end: int, prev_end: int, cum: Sequence[int], *, first: bool) -> float:
    """What one request costs with no compaction: the previous one read, the rest written."""
    if first:
        return WRITE_COST * cum[end]
    return READ_COST * cum[prev_end] + WRITE_COST * (cum[end] - cum[prev_end])


def _eager_step(
    present: Sequence[SlotInfo],
    then: Sequence[int],
    now: Sequence[int],
    end: int,
    prev_end: int,
    cum: Sequence[int],
    policy: Policy,
) -> float:
    """What one request costs under per-turn aging, after the previous one under it.

    ``now`` are the age levels of ``present`` at this request, ``then`` those of
    the results the previous request held, at that request (none for the first).
    """
    length = cum[end] - sum(s.size - size_at(s, lv, policy) for s, lv in zip(present, now, strict=True))
    if prev_end == 0:
        return WRITE_COST * length
    before = present[: len(then)]
    prefix = cum[prev_end]
    shift = 0
    for slot, old, new in zip(before, then, now, strict=False):
        if old != new:
            prefix = cum[slot.msg] - shift
            break
        shift += slot.size - size_at(slot, old, policy)
    else:
        prefix -= shift
    return READ_COST * prefix + WRITE_COST * (length - prefix)


@dataclass(slots=True)
class _Span:
    """The oldest turns folded away at a request point: ``fold[0]`` turns from the first.

    The folded messages (the turns' calls, results and everything between)
    leave the request; one marker in the first kept turn stands for them.
    """

    starts: Sequence[int]  # message index where each assistant turn starts
    fold: list[int]  # [turns folded], shared with the caller so a decision can change it

    def removed(self, present: Sequence[SlotInfo], cum: Sequence[int]) -> int:
        """The characters the fold takes out of the request, net of its marker."""
        folded = self.fold[0]
        if not folded:
            return 0
        first, last = self.starts[0], self.starts[folded]
        # The folded results already count as nothing (LEVEL_FOLDED); the rest of the span goes too.
        results = sum(s.size for s in present if first <= s.msg < last)
        return cum[last] - cum[first] - results - FOLD_ROOM


def _down_to_low(
    present: Sequence[SlotInfo],
    state: list[int],
    turns: int,
    total: int,
    window_chars: int,
    policy: Policy,
    cum: Sequence[int] = (),
    span: _Span | None = None,
) -> None:
    """Over the high watermark: compact further, oldest first, until under the low one.

    First the results over the minimum size, to one line, then to a preview
    (the newest turn's too); then every result older than the newest turn, to
    one line, whatever its size; then the oldest turns are folded away whole,
    behind one marker whose key recalls them, until the request fits or only
    the newest turn is left.
    """
    goal = policy.compact_low_watermark * window_chars

    def length() -> int:
        removed = span.removed(present, cum) if span is not None else 0
        return (
            total
            - removed
            - sum(s.size - size_at(s, lv, policy) for s, lv in zip(present, state, strict=True))
        )

    current = length()
    for wanted, min_age, any_size in (
        (LEVEL_SUMMARY, 1, False),
        (LEVEL_PREVIEW, 0, False),
        (LEVEL_SUMMARY, 1, True),
    ):
        for k, slot in enumerate(present):
            if current <= goal:
                return
            age = turns - 1 - slot.turn_no
            allowed = slot.shrinkable if any_size else slot.eligible
            if allowed and age >= min_age and state[k] < wanted:
                current -= size_at(slot, state[k], policy) - size_at(slot, wanted, policy)
                state[k] = wanted
    if span is None or current <= goal:
        return
    # Fold the oldest turns, one at a time, never the newest one.
    while current > goal and span.fold[0] < turns - 1:
        span.fold[0] += 1
        last = span.starts[span.fold[0]]
        for k, slot in enumerate(present):
            if slot.msg < last:
                state[k] = LEVEL_FOLDED
        current = length()


# --- the one-line summary ---------------------------------------------------------------

_KEY_ARGS = (
    "command",
    "cmd",
    "file_path",
    "path",
    "filename",
    "file",
    "pattern",
    "query",
    "url",
    "regex",
    "glob",
)
_EXIT = re.compile(
    r"(?:exit(?:ed)?(?: with)? (?:code|status)[:= ]*(-?\d+)"
    r"|<returncode>(-?\d+)</returncode>|\bexit_code\W+(-?\d+))",
    re.IGNORECASE,
)
_ERROR_LINE = re.compile(
    r"(?i:\b(?:error|errors|failed|failure|fatal|exception|traceback|panic)\b)"
    r"|[A-Za-z]+(?:Error|Exception)\b|^E {3}"
)


def key_argument(call: ToolCall | None) -> str:
    """The argument that says what a call did: its command, path or pattern."""
    if call is None:
        return ""
    arguments: Any = call.arguments
    if isinstance(arguments, dict):
        for name in _KEY_ARGS:
            value = arguments.get(name)
            if isinstance(value, str) and value.strip():
                return _short(value)
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                return _short(" ".join(value))
        for value in arguments.values():
            if isinstance(value, str) and value.strip():
                return _short(value)
        return ""
    if isinstance(arguments, str):
        return _short(arguments)
    return _short(call.arguments_json or "")


def _short(text: str, room: int = 80) -> str:
    one = " ".join(text.split())
    return one if len(one) <= room else one[: room - 1] + "…"


def exit_status(text: str) -> str | None:
    """The exit status a result states, if any (looked for in its first and last lines)."""
    for sample in (text[-2_000:], text[:2_000]):
        found = _EXIT.search(sample)
        if found:
            return next(g for g in found.groups() if g is not None)
    return None


def error_lines(text: str, room: int = 600) -> list[str]:
    """The lines of an output that carry its errors, whole, within ``room`` characters."""
    out: list[str] = []
    used = 0
    for line in text.splitlines():
        if _ERROR_LINE.search(line):
            line = line.rstrip()
            if len(line) > 300:
                line = line[:299] + "…"
            if used + len(line) + 1 > room:
                break
            out.append(line)
            used += len(line) + 1
    return out


def summary_detail(tool: str | None, call: ToolCall | None, text: str, status: str | None) -> str:
    """The marker detail of a one-line summary: tool, key argument, size, content type, exit status."""
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    what = f"{tool or 'tool'}"
    argument = key_argument(call)
    if argument:
        what += f" `{argument}`"
    parts = [what, f"{lines} lines", f"{len(text)} chars", detect(text)]
    if status is not None:
        parts.append(f"exit {status}")
    return ", ".join(parts)
