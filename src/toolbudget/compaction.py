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
the request (system prompt, tool definitions and every message) passes the
high watermark of the context window, and then compacts down to the low one:
the results over the minimum first, then every older result whatever its
size, and at last the oldest turns, folded away whole behind one marker whose
key recalls them, so no request goes out that is known not to fit while
anything but the task and the newest turn is left to fold.

No rule that sees only the history can stay within a few percent of the
better of "never compact" and "age every turn" on every session, because
which one wins depends on how long the session goes on;
``bench/schedule_bound.py`` measures how close any schedule can come.

The schedule is a pure function of the history: the decision at each earlier
request point is computed again from the history up to that point, which the
client resends unchanged. So it gives the same bytes after a restart and in a
second process, with no shared state; a per-session memo only makes it cheap,
and running sums carried from point to point keep the walk from scratch linear
in the history's length.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
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
        msgs = [s.msg for s in slots]
        size_prefix = [0]
        for slot in slots:
            size_prefix.append(size_prefix[-1] + slot.size)
        # Each point's age levels serve its decision, and its eager step and the next one's.
        then = eager_levels(slots[: len(state)], resume, policy) if resume else []
        tally = _Tally(slots, policy, state, then)
        thresholds = {policy.microcompact_truncate_turns, policy.microcompact_summarize_turns}
        by_turn: dict[int, list[int]] = {}
        for k, slot in enumerate(slots):
            if slot.eligible:
                by_turn.setdefault(slot.turn_no, []).append(k)
        for j in range(resume, len(points)):
            end = points[j]
            prev_end = points[j - 1] if j else 0
            patient = j > 0 and eager > (1 + EAGER_LOSING) * unmanaged
            step = tally.advance(j, bisect_left(msgs, end), by_turn, thresholds, end, prev_end, cum)
            present = _Head(slots, len(state))
            span = _Span(starts, fold, msgs, size_prefix)
            if _decide(
                present,
                state,
                tally.eager,
                j + 1,
                end,
                prev_end,
                cum,
                window_chars,
                policy,
                patient,
                fixed,
                span,
                tally,
            ):
                events.append(j)
            unmanaged += _unmanaged_step(end, prev_end, cum, first=j == 0)
            eager += step
            kept.append(_Checkpoint(end, tuple(state), fold[0], unmanaged, eager))
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


class _Head(Sequence[SlotInfo]):
    """The first ``count`` results, without copying them at every request point."""

    def __init__(self, slots: Sequence[SlotInfo], count: int) -> None:
        self.slots, self.length = slots, count

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return list(self)[k]
        if not -self.length <= k < self.length:
            raise IndexError(k)
        return self.slots[k % self.length]

    def __iter__(self) -> Iterator[SlotInfo]:
        return islice(self.slots, self.length)


class _SizesAt(Sequence[int]):
    """``size_at`` of each present result at its applied level, worked out only where asked."""

    def __init__(self, present: Sequence[SlotInfo], state: Sequence[int], policy: Policy) -> None:
        self.present, self.state, self.policy = present, state, policy

    def __len__(self) -> int:
        return len(self.present)

    def __getitem__(self, k: Any) -> Any:
        return size_at(self.present[k], self.state[k], self.policy)


class _Tally:
    """Running sums over the results present, kept from one request point to the next.

    What a decision needs at each point (the characters saved so far, and
    before each result; the results whose age allows more than they have; the
    per-turn aging's length and cached prefix) changes only where results age
    or an event applies, so a point costs what changed at it, not a walk over
    the whole history: the schedule of a long session, worked out from
    scratch, is linear in its length.
    """

    def __init__(self, slots: Sequence[SlotInfo], policy: Policy, state: list[int], then: list[int]) -> None:
        self.slots, self.policy, self.state = slots, policy, state
        self.eager = then  # each present result's age level at the current point
        self.applied = [0]  # applied[k]: characters saved by the applied levels before result k
        self.eager_saved = [0]  # the same under the age levels
        for k, level in enumerate(state):
            slot = slots[k]
            self.applied.append(self.applied[-1] + slot.size - size_at(slot, level, policy))
            self.eager_saved.append(self.eager_saved[-1] + slot.size - size_at(slot, then[k], policy))
        self.pending = {k for k, level in enumerate(state) if then[k] > level}
        self.cursors = [0, 0, 0]
        """Where each stage past the watermark resumes (see ``_down_to_low``)."""

    def advance(
        self,
        j: int,
        count: int,
        by_turn: dict[int, list[int]],
        thresholds: set[int],
        end: int,
        prev_end: int,
        cum: Sequence[int],
    ) -> float:
        """Move to request point ``j``, where ``count`` results are present; its eager step's cost."""
        policy, slots, state, eager = self.policy, self.slots, self.state, self.eager
        before = len(state)
        for _ in range(before, count):
            state.append(LEVEL_NONE)
            eager.append(LEVEL_NONE)
            self.applied.append(self.applied[-1])
            self.eager_saved.append(self.eager_saved[-1])
        # Results whose age level changes here: those crossing an age, and the new ones.
        candidates = {k for age in thresholds for k in by_turn.get(j - age, ()) if k < before}
        candidates.update(range(before, count))
        changed = []
        for k in sorted(candidates):
            slot = slots[k]
            level = level_for_age(j - slot.turn_no, policy) if slot.eligible else LEVEL_NONE
            if level != eager[k]:
                changed.append((k, level))
        # Per-turn aging's cost: the previous request read from the cache up to its first change.
        moved = [k for k, _ in changed if k < before]
        prefix = 0
        if j:
            first = moved[0] if moved else None
            prefix = (
                cum[slots[first].msg] - self.eager_saved[first]
                if first is not None
                else cum[prev_end] - self.eager_saved[before]
            )
        for k, level in changed:
            eager[k] = level
            if level > state[k]:
                self.pending.add(k)
        if changed:
            self._resum(self.eager_saved, eager, changed[0][0])
        length = cum[end] - self.eager_saved[count]
        if not j:
            return WRITE_COST * length
        return READ_COST * prefix + WRITE_COST * (length - prefix)

    def settled(self, changing: Sequence[int], first: int) -> None:
        """After an event: the applied levels changed, from result ``first`` on."""
        state, eager = self.state, self.eager
        self.pending.difference_update(changing)
        self.pending = {k for k in self.pending if eager[k] > state[k]}
        self._resum(self.applied, state, first)

    def _resum(self, sums: list[int], levels: Sequence[int], start: int) -> None:
        slots, policy = self.slots, self.policy
        for k in range(start, len(levels)):
            slot = slots[k]
            sums[k + 1] = sums[k] + slot.size - size_at(slot, levels[k], policy)


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
    tally: _Tally | None = None,
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
    if tally is None:
        sizes: Sequence[int] = [size_at(s, lv, policy) for s, lv in zip(present, state, strict=True)]
        saved = sum(s.size - size for s, size in zip(present, sizes, strict=True))
        changing = [k for k, (lv, tg) in enumerate(zip(state, targets, strict=True)) if tg > lv]
        shift: Sequence[int] | None = None
    else:
        # The running sums: the same figures, without a walk over every result at every point.
        sizes = _SizesAt(present, state, policy)
        saved = tally.applied[len(state)]
        changing = sorted(tally.pending)
        shift = tally.applied
    length = fixed + cum[end] - saved - (span.removed(present, cum) if span is not None else 0)
    high = length > policy.compact_high_watermark * window_chars
    if not high:
        if not changing or patient:
            return False
        cut = _best_cut(present, sizes, targets, changing, turns, cum[prev_end] - saved, cum, policy, shift)
        if cut is None:
            return False
        changing = [k for k in changing if present[k].msg >= cut]
    for k in changing:
        state[k] = targets[k]
    if tally is not None:
        tally.settled(changing, min(changing, default=len(state)))
    if high:
        first = _down_to_low(present, state, turns, fixed + cum[end], window_chars, policy, cum, span, tally)
        if tally is not None:
            tally.settled((), first)
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
    shift: Sequence[int] | None = None,
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
    if shift is None:
        computed = [0] * (len(present) + 1)
        for k in range(len(present)):
            computed[k + 1] = computed[k] + present[k].size - sizes[k]
        shift = computed
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
    msgs: Sequence[int] = ()  # message index of each slot, in order (for the sums below)
    sizes: Sequence[int] = ()  # sizes[k]: characters of the slots before slot k, as sent

    def removed(self, present: Sequence[SlotInfo], cum: Sequence[int]) -> int:
        """The characters the fold takes out of the request, net of its marker."""
        folded = self.fold[0]
        if not folded:
            return 0
        first, last = self.starts[0], self.starts[folded]
        # The folded results already count as nothing (LEVEL_FOLDED); the rest of the span goes too.
        if self.sizes:
            results = self.sizes[bisect_left(self.msgs, last)] - self.sizes[bisect_left(self.msgs, first)]
        else:
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
    tally: _Tally | None = None,
) -> int:
    """Over the high watermark: compact further, oldest first, until under the low one.

    First the results over the minimum size, to one line, then to a preview
    (the newest turn's too); then every result older than the newest turn, to
    one line, whatever its size; then the oldest turns are folded away whole,
    behind one marker whose key recalls them, until the request fits or only
    the newest turn is left. Returns the first result whose level changed.

    With a ``tally``, each stage resumes where it last found nothing left to
    do (levels only grow), so a long session is not walked from its start at
    every watermark event.
    """
    goal = policy.compact_low_watermark * window_chars
    if tally is not None:
        saved = tally.applied[len(state)]
    else:
        saved = sum(s.size - size_at(s, lv, policy) for s, lv in zip(present, state, strict=True))
    cursors = tally.cursors if tally is not None else [0, 0, 0]
    first = len(state)

    def length() -> int:
        return total - (span.removed(present, cum) if span is not None else 0) - saved

    current = length()
    stages = ((LEVEL_SUMMARY, 1, False), (LEVEL_PREVIEW, 0, False), (LEVEL_SUMMARY, 1, True))
    for n, (wanted, min_age, any_size) in enumerate(stages):
        done = True  # every result before k is at ``wanted`` or may never be
        for k in range(cursors[n], len(state)):
            if current <= goal:
                return first
            slot = present[k]
            allowed = slot.shrinkable if any_size else slot.eligible
            if allowed and state[k] < wanted:
                if turns - 1 - slot.turn_no >= min_age:
                    change = size_at(slot, state[k], policy) - size_at(slot, wanted, policy)
                    current -= change
                    saved += change
                    state[k] = wanted
                    first = min(first, k)
                else:
                    done = False
            if done:
                cursors[n] = k + 1
    if span is None or current <= goal:
        return first
    # Fold the oldest turns, one at a time, never the newest one.
    k = bisect_left(span.msgs, span.starts[span.fold[0]]) if span.msgs and span.fold[0] else 0
    while current > goal and span.fold[0] < turns - 1:
        span.fold[0] += 1
        last = span.starts[span.fold[0]]
        while k < len(state) and present[k].msg < last:
            if state[k] != LEVEL_FOLDED:
                saved += size_at(present[k], state[k], policy)
                state[k] = LEVEL_FOLDED
                first = min(first, k)
            k += 1
        current = length()
    return first


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
