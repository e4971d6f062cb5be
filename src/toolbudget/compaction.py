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
``bench/schedule_bound.py`` measures how close any schedule can come. Its
search shows that a small history whose results have not been paying back
their rewrites (per-turn aging, replayed on it, behind leaving it alone) is
best left alone: there a rewrite is a large share of all the session has
cost, and the session may well end before it pays. So while the request is
small and aging is behind, only an event that costs its own request no more
than leaving the history alone fires.

What a rewrite costs is the request's price model (:mod:`toolbudget.prices`):
at Anthropic's write price of 1.25 a rewrite must earn back more than where
writing costs 1x, and without a cache (``none``) every rewrite is pure
saving, so the schedule compacts as soon as per-turn aging does.

A request after an idle gap longer than the cache's TTL (known only when the
caller says when requests arrive, :meth:`Schedule.arrive`) finds the cache
cold: it is all written again whatever is decided, so everything eligible is
compacted there, down to the low watermark. That request point is recorded
(:attr:`Schedule.cold_points`); given the same history and the same recorded
points, the levels are the same in any process. A session keeps the points,
and each request's arrival, in its store (:mod:`toolbudget.coldrecord`,
:attr:`Schedule.record`); a schedule that did not see the previous request
itself reads them back once before it decides.

The schedule is a pure function of the history: the decision at each earlier
request point is computed again from the history up to that point, which the
client resends unchanged (and of the recorded cold points, when there are
any). So it gives the same bytes after a restart and in a second process,
with no shared state; a per-session memo only makes it cheap,
and running sums carried from point to point keep the walk from scratch linear
in the history's length. A session started again resumes from the state after
the last point its store has a record of (:mod:`toolbudget.schedulerecord`),
used only when every input the decisions up to that point are made from is the
same, so it gives the bytes the walk from scratch gives.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from operator import is_
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from ._fastinit import fast_init
from .measure import MARKER_ROOM, chars_for, fixed_chars
from .model import Message, Request, ToolCall
from .models import context_window
from .policy import Policy
from .previews import STRATEGY, detect, split_envelope
from .prices import ANTHROPIC_5M, NAMED, PriceModel, marks_one_hour, price_for
from .schedulerecord import EVERY, LOOK_BACK, Decided, Inputs
from .schedulerecord import decode as decode_decided
from .schedulerecord import encode as encode_decided
from .schedulerecord import name as decided_name
from .schedulerecord import policy_text as schedule_policy_text
from .tools import EDITOR_TOOLS, EXEC_TOOLS, FILE_VIEW_TOOLS, REPORT_TOOLS, WRITE_TOOLS

if TYPE_CHECKING:
    from .coldrecord import StoreRecord as ColdRecord

__all__ = [
    "EXEC_TOOLS",
    "WRITE_TOOLS",
    "Schedule",
    "SlotInfo",
    "Summary",
    "context_window",
    "eager_levels",
    "error_lines",
    "exit_status",
    "fixed_chars",
    "key_argument",
    "last_line",
    "result_kind",
    "summarize",
    "summary_detail",
    "turn_starts",
]

LEVEL_NONE, LEVEL_PREVIEW, LEVEL_SUMMARY, LEVEL_FOLDED = 0, 1, 2, 3
"""A result's compaction levels. ``LEVEL_FOLDED``: its whole turn is folded away (see below)."""
FOLD_ROOM = 400
"""What the one marker that stands for the folded turns takes (an estimate for the schedule)."""

_SUMMARY_CHARS = 420
_SUMMARY_ERROR_CHARS = 1_000

# Cost model: cache read and write prices relative to base input. Each request is weighed
# with its own price model (see :mod:`toolbudget.prices`); these are the default one's.
READ_COST = ANTHROPIC_5M.read
WRITE_COST = ANTHROPIC_5M.write
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
# While the request is still small (system prompt, tools and messages under this many
# characters) and per-turn aging has cost more than this share above leaving the history alone,
# an event waits unless it costs its own request no more than leaving the history alone would.
# A rewrite there is a large share of all the session has cost so far, and in such a session
# it has not been paying back: the exhaustive search of ``bench/schedule_bound.py`` finds that
# never compacting is the best any schedule does on the small sessions where this holds (see
# README). Long sessions pass the size soon, and their large results pay at once.
QUIET_BELOW_CHARS = 32_000
QUIET_EAGER = 0.1
# An event also waits until its changes have paid, by waiting, for this share of its rewrite:
# what they save at its own request (written no more) and what they have cost since their age
# allowed them (read again at every request since). The horizon above guesses how long the
# session goes on; this asks that the wait itself has shown part of it, as renting before
# buying does: a session that ends soon after a change became due has paid for no rewrite.
# It batches the changes of several turns into one event, and is what keeps sessions under
# Gemini's prices (a read a quarter of a write) prefix-stable (see README). It holds, with the
# two below, for price models without a write premium (write at most 1x: OpenAI, Gemini):
# under Anthropic's the least horizon of 10 and no wait are what the small sessions'
# exhaustive search (``bench/schedule_bound.py``) favours. All three were chosen by replaying
# the shared sessions over 50k tokens under each price model.
PAID_SHARE = 0.65
FREE_WRITE_HORIZON_MIN = 30
# Without a write premium, the floor of ``compact_clear_at_least`` is this many times higher.
FREE_WRITE_FLOOR = 1.125


@fast_init
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
    # level_for_age, told by turn: a result's age is at least n when its turn is at most this one.
    summarized = turns - 1 - policy.microcompact_summarize_turns
    previewed = turns - 1 - policy.microcompact_truncate_turns
    return [
        (
            LEVEL_SUMMARY
            if s.turn_no <= summarized
            else LEVEL_PREVIEW
            if s.turn_no <= previewed
            else LEVEL_NONE
        )
        if s.eligible
        else LEVEL_NONE
        for s in slots
    ]


def size_at(slot: SlotInfo, level: int, policy: Policy) -> int:
    """How many characters a result takes at a level (an estimate for the schedule)."""
    if level == LEVEL_NONE:
        return slot.size
    if level == LEVEL_FOLDED:
        return 0
    if level == LEVEL_PREVIEW:
        return min(slot.size, policy.microcompact_head_chars + policy.microcompact_tail_chars + MARKER_ROOM)
    return min(slot.size, _SUMMARY_ERROR_CHARS if slot.keeps_errors else _SUMMARY_CHARS)


@dataclass(slots=True)
class _Checkpoint:
    """The schedule's state after deciding at one request point."""

    end: int  # message index where the point's request ends
    snap: tuple[int, ...]
    """The applied levels as the last event at or before the point left them. Between events
    the results only grow in number (the new ones at ``LEVEL_NONE``), so a point without an
    event shares its predecessor's tuple instead of copying every level at every point."""
    count: int  # how many slots are present at the point
    folded: int  # how many of the oldest turns are folded away at the point
    unmanaged: float  # what the history so far cost with no compaction (chars at cache prices)
    eager: float  # and with per-turn aging
    known: bool = True  # False: a point before one read back from the store, not held here

    @property
    def levels(self) -> tuple[int, ...]:
        """The applied level of each slot present at the point."""
        missing = self.count - len(self.snap)
        return self.snap + (LEVEL_NONE,) * missing if missing else self.snap


_UNKNOWN = _Checkpoint(-1, (), 0, 0, 0.0, 0.0, known=False)
"""Each point before one read back from the store (which ``_ends`` names)."""


class Schedule:
    """The cache-aware schedule of one conversation, memoised across requests.

    ``levels`` is a pure function of the history; the memo remembers the
    decision at every request point of the last history, and a longer
    history that starts with the same messages resumes from there.
    """

    def __init__(self) -> None:
        self._messages: tuple[Message, ...] = ()
        self._frame: tuple[int, int, PriceModel | None] = (0, 0, None)
        self._framed: tuple[tuple[Any, ...], tuple[int, int, PriceModel]] | None = None
        """The objects the last frame was worked out from (by identity), and that frame."""
        self._hour: tuple[int, bool] = (0, False)
        """How many messages of the last history were checked for the one-hour cache, and the answer."""
        self._carry: _Carry | None = None
        self._points: list[_Checkpoint] = []
        self._ends: list[int] = []
        """The ``end`` of each of ``_points``, to compare with a request's points at C speed."""
        self.events: list[int] = []
        """Request points (by index) where an event fired, for the last history."""
        self.fired_now = False
        """Whether the compacted form changed at the last request asked about."""
        self.folded = 0
        """How many of the oldest turns the last request asked about has folded away."""
        self._cold: set[int] = set()
        self._cold_used: frozenset[int] = frozenset()
        self._last_arrival: float | None = None
        self._gap: float | None = None
        self._now: float | None = None
        self._arrived: int | None = None
        self.record: ColdRecord | None = None
        """Where the session keeps its arrivals and cold points (:mod:`toolbudget.coldrecord`):
        read before a timed request whose previous request this schedule did not see."""
        self.key_for: Callable[[str], str] | None = None
        """The session's keyed hash, to name the records of its decisions
        (:mod:`toolbudget.schedulerecord`); ``None``: none are kept or read."""
        self._offered: dict[int, bytes] = {}
        """Records of decisions read from the store, by point, for the next ``levels`` call."""
        self._inputs: Inputs | None = None
        """The digest of the last history's inputs, fed from the carry's lists up to
        ``_feed_to`` messages when a record is made (feeding is the same in one piece or many)."""
        self._feed_to = 0
        self._plan = ""
        """The frame of the last decision (window, fixed characters, price model), as text."""
        self._given = ""
        """The key of the last record :meth:`decided_record` gave."""
        self._restored: Inputs | None = None
        self._asked: frozenset[int] = frozenset()
        """The points of the request :meth:`stored_keys` was last asked about."""
        """The digest :meth:`_restore` fed, for ``levels`` to go on feeding."""

    def arrive(self, now: float) -> None:
        """A request arrives at ``now`` (seconds): the next ``levels`` call is that request.

        When the gap since the previous arrival is longer than the cache's
        TTL, that request finds the cache cold, and the schedule records it
        (see :attr:`cold_points`): a request that pays full price anyway is
        the one moment compacting everything eligible costs nothing extra.
        """
        last, self._last_arrival = self._last_arrival, now
        self._gap = None if last is None else now - last
        self._now = now

    def done(self) -> None:
        """The request told by :meth:`arrive` is managed, decided here or not (a request with no
        result yet is not): its time is not the next request's."""
        self._gap = self._now = None

    @property
    def arrived_at(self) -> int | None:
        """The request point (by message count) of the last timed request decided here."""
        return self._arrived

    @property
    def cold_points(self) -> frozenset[int]:
        """The request points recorded as cold, by how many messages their request holds.

        With the history, they are all the schedule depends on: a schedule
        given the same history and the same points (:meth:`restore_cold`)
        gives the same levels, in any process.
        """
        return frozenset(self._cold)

    def restore_cold(self, points: frozenset[int] | set[int] | tuple[int, ...]) -> None:
        """Take the cold points another schedule recorded for this conversation (from its store)."""
        self._cold.update(points)

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
        # What ``arrive`` said holds for this request only, whether it is decided here or not.
        (gap, arrival), self._gap, self._now = (self._gap, self._now), None, None
        if policy.compaction == "off" or not slots:
            return [LEVEL_NONE] * len(slots)
        carry, self._carry = self._carry, None
        messages = request.messages
        same = self._same(messages)
        added: list[int] = []
        if carry is not None and same >= carry.messages:
            added = turn_starts(messages, carry.messages, carry.assistant_last)
            starts = carry.starts  # the carry's own list: it goes on in place
            starts += added
        else:
            carry = None
            starts = turn_starts(messages)
        if policy.compaction == "eager":
            now = eager_levels(slots, len(starts), policy)
            # In eager mode the form changes whenever a result crosses an age.
            before = eager_levels(slots, len(starts) - 1, policy)
            self.fired_now = any(
                a != b for a, b, s in zip(now, before, slots, strict=True) if s.turn_no < len(starts) - 1
            )
            return now
        # Whether a message asks for the one-hour cache, checked on the new messages alone.
        checked, hour = self._hour if self._hour[0] <= same else (0, False)
        hour = hour or marks_one_hour(messages, checked)
        self._hour = (len(messages), hour)
        # Every earlier decision depends on these too: when they change, none of the memo holds.
        frame = self._frame_of(request, policy, hour)
        window_chars, fixed, price = frame
        if carry is not None:
            # The last history's points (``_ends``, the carry's too) go on in place: its last
            # one still holds when the new messages begin with the turn it ended before.
            points = self._ends
            held = len(points)
            last_end = points.pop()
            points += added if len(starts) > len(added) else added[1:]
            points.append(len(messages))
            resume = (held if points[held - 1] == last_end else held - 1) if frame == self._frame else 0
        else:
            points = [*starts[1:], len(messages)]
            resume = self._resume(same, points) if frame == self._frame else 0
        if frame is not self._frame:
            self._plan = f"{window_chars}\x00{fixed}\x00{price!r}"
            self._frame = frame
        new = resume < len(points)
        if arrival is not None:
            # A point decided untimed before (a token count of this history) is new to timing.
            gap, new = self._timed_gap(points, arrival, gap, new)
        if price.cold_after(gap) and new:
            # A new request after the cache expired (a retry of a decided one is not new).
            self._cold.add(points[-1])
        if len(self._cold) != len(self._cold_used):  # the points only ever gain members
            cold = frozenset(self._cold)
            changed = cold ^ self._cold_used
            resume = next((j for j, e in enumerate(points[:resume]) if e in changed), resume)
            self._cold_used = cold
        cold = self._cold_used
        if resume and not self._points[resume - 1].known:
            resume = 0  # the history changed before the point read back: nothing here holds
        if not resume and self._offered:
            resume = self._restore(points, starts, slots, sizes, policy, cold)
        kept = self._points
        last = kept[resume - 1] if resume else None
        unmanaged, eager = (last.unmanaged, last.eager) if last else (0.0, 0.0)
        events = self.events
        whole = resume == len(kept)
        if not whole:
            del kept[resume:]
            # Every event is at a point of the memo: only a shorter memo leaves some behind.
            events = self.events = [e for e in events if e < resume]
        if carry is not None and whole and resume and carry.grows(slots, sizes, policy):
            # The last history, grown: its sums and running state go on from where they stopped.
            cum, msgs, fold, tally = carry.cum, carry.msgs, carry.fold, carry.tally
            slots = carry.slots
            # The levels as the carry's last point left them (a memo read back since is not them).
            snap = last.snap if last is carry.point and last is not None else tuple(tally.state)
        else:
            self._inputs = None  # the history is not the last one grown: its digest starts again
            state = list(last.levels) if last else []
            snap = last.snap if last else ()
            # Each point's age levels serve its decision, and its eager step and the next one's.
            then = eager_levels(slots[: len(state)], resume, policy) if resume else []
            carry = _Carry.start(messages, starts, slots, sizes, policy, state, then, price, last)
            cum, msgs, fold, tally = carry.cum, carry.msgs, carry.fold, carry.tally
            slots = carry.slots
        by_turn, state, span = carry.by_turn, tally.state, carry.span
        for j in range(resume, len(points)):
            end = points[j]
            prev_end = points[j - 1] if j else 0
            chilled = j > 0 and end in cold
            patient = j > 0 and eager > (1 + EAGER_LOSING) * unmanaged
            quiet = j > 0 and fixed + cum[end] < QUIET_BELOW_CHARS and eager > (1 + QUIET_EAGER) * unmanaged
            step = tally.advance(j, bisect_left(msgs, end), by_turn, end, prev_end, cum, cold=chilled)
            if _decide(
                slots,
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
                cold=chilled,
                quiet=quiet,
            ):
                events.append(j)
                snap = tuple(state)
            unmanaged += _unmanaged_step(end, prev_end, cum, price, first=j == 0 or chilled)
            eager += step
            kept.append(_Checkpoint(end, snap, len(state), fold[0], unmanaged, eager))
        if self._inputs is None:
            self._inputs = self._restored or Inputs()
        self._restored = None
        self._feed_to = len(messages)
        self._messages = messages
        self._ends = points
        self.fired_now = bool(events) and events[-1] == len(points) - 1
        self.folded = fold[0]
        carry.messages = len(messages)
        carry.assistant_last = bool(messages) and messages[-1].role == "assistant"
        carry.point = kept[-1] if kept else None
        self._carry = carry
        return [*state, *([LEVEL_NONE] * (len(slots) - len(state)))]

    def stored_keys(
        self, messages: Sequence[Message], policy: Policy, arrivals: Iterable[int] = ()
    ) -> dict[str, int]:
        """The keys of the records of decisions a cold session reads back, by the point each is of.

        The request's last :data:`~toolbudget.schedulerecord.LOOK_BACK` points, and
        as many of the newest points where a result over its cap first arrived
        (``arrivals``, by message): such a request kept that result's original,
        so it wrote to the store, and its record went with that write. Nothing
        when this schedule has decided here already, or keeps no records.
        """
        text = self._policy_text(policy)
        if self.key_for is None or self._points or not text:
            return {}
        starts = turn_starts(messages)
        points = [*starts[1:], len(messages)]
        wanted = set(points[-LOOK_BACK:])
        first = sorted({bisect_right(points, msg) for msg in arrivals})
        wanted.update(points[k] for k in first[-LOOK_BACK:] if k < len(points))
        # The newest two points kept whatever their requests wrote (see :meth:`checkpoint_due`).
        newest = len(points) - len(points) % EVERY - 1
        wanted.update(points[k] for k in (newest, newest - EVERY) if k >= 0)
        key_for = self.key_for
        self._asked = frozenset(points)
        return {key_for(decided_name(text, end)): end for end in sorted(wanted)}

    def stored_key(self, end: int, policy: Policy) -> str | None:
        """The key of the record of the point ``end``, when it is a point of the request
        :meth:`stored_keys` was last asked about."""
        text = self._policy_text(policy)
        if self.key_for is None or not text or end not in self._asked:
            return None
        return self.key_for(decided_name(text, end))

    def offer(self, found: Mapping[int, bytes]) -> None:
        """Records of decisions read from the store (by point) for the next ``levels`` call to resume from."""
        self._offered = dict(found)

    def checkpointed(self, messages: Sequence[Message]) -> bool:
        """Whether a history of ``messages`` has a point whose decision is kept whatever its
        request wrote (see :meth:`checkpoint_due`): a cold session reads it back even when it has
        no preview or summary to read."""
        return self.key_for is not None and len(turn_starts(messages)) >= EVERY

    def checkpoint_due(self) -> bool:
        """Whether the last request's point is one whose decision is kept whatever the request
        wrote (every :data:`~toolbudget.schedulerecord.EVERY`-th point), so that a cold session
        of a long history that stopped cutting long ago does not decide every point since."""
        return self.key_for is not None and bool(self._ends) and len(self._ends) % EVERY == 0

    def decided_record(self) -> Callable[[], dict[str, bytes]] | None:
        """What makes the record of the last point decided here (see :mod:`toolbudget.schedulerecord`).

        ``None`` when nothing was decided here, or its record was given
        already. What it makes it from is taken now, so it may run later
        (in the store's worker) whatever this schedule does meanwhile.
        """
        carry, points, inputs = self._carry, self._points, self._inputs
        if carry is None or inputs is None or self.key_for is None or not points:
            return None
        inputs.feed(self._feed_to, carry.sizes, carry.starts, carry.slots)
        text = self._policy_text(carry.policy)
        last = points[-1]
        if not text or not last.known or last.end != carry.messages or inputs.messages != last.end:
            return None
        key = self.key_for(decided_name(text, last.end))
        if key == self._given:
            return None
        digest = inputs.digest(f"{self._plan}\x00{text}", (c for c in self._cold_used if c <= last.end))
        events = tuple(self.events)

        def make() -> dict[str, bytes]:
            self._given = key  # written with this batch: the same point's record is not given again
            decided = Decided(last.end, digest, last.levels, last.folded, last.unmanaged, last.eager, events)
            return {key: encode_decided(decided)}

        return make

    def _policy_text(self, policy: Policy) -> str:
        """What names the policy and the code in a record's key ("" when none may be kept)."""
        if policy.compaction in ("off", "eager"):
            return ""
        return schedule_policy_text(policy)

    def _restore(
        self,
        points: Sequence[int],
        starts: Sequence[int],
        slots: Sequence[SlotInfo],
        sizes: Sequence[int],
        policy: Policy,
        cold: frozenset[int],
    ) -> int:
        """Resume from the newest record read back that checks out; how many points it decided."""
        offered, self._offered = self._offered, {}
        index = {end: j for j, end in enumerate(points)}
        ends = sorted(end for end in offered if end in index)
        text = self._policy_text(policy)
        if not ends or not text:
            return 0
        frame = f"{self._plan}\x00{text}"
        inputs = self._restored = Inputs()
        digests = {}
        for end in ends:
            inputs.feed(end, sizes, starts, slots)
            digests[end] = inputs.digest(frame, (c for c in cold if c <= end))
        msgs = [s.msg for s in slots]
        for end in reversed(ends):
            decided = decode_decided(offered[end], end)
            j = index[end]
            if (
                decided is None
                or decided.inputs != digests[end]
                or len(decided.levels) != bisect_left(msgs, end)
                or any(not 0 <= e <= j for e in decided.events)
            ):
                continue
            self._points = [_UNKNOWN] * j
            self._points.append(
                _Checkpoint(
                    end,
                    decided.levels,
                    len(decided.levels),
                    decided.folded,
                    decided.unmanaged,
                    decided.eager,
                )
            )
            self._ends = list(points[: j + 1])
            self.events = list(decided.events)
            return j + 1
        return 0

    def _timed_gap(
        self, points: Sequence[int], now: float, gap: float | None, new: bool
    ) -> tuple[float | None, bool]:
        """The gap before a timed request, and whether it is a new arrival, with what the record
        says when this schedule did not see the previous request itself (a fresh session, or
        another replica sent it).

        A request point this schedule decided only untimed (a token count of the same
        history) is new; one the record shows arrived before is not: a retry.
        """
        seen, self._arrived = self._arrived, points[-1]
        new = new or seen != points[-1]
        if self.record is None or (seen is not None and seen in points[-2:]):
            return gap, new
        found = self.record.read(points)
        self._cold.update(found.cold)
        if found.decided:
            return None, False
        return (gap if found.previous is None else now - found.previous), new

    def _same(self, messages: tuple[Message, ...]) -> int:
        """How many of ``messages`` begin the last history (the same objects)."""
        old = self._messages
        # A history that grew holds the last one's very objects: told at C speed, in one pass
        # (``map`` stops at the shorter one, so nothing is sliced).
        if all(map(is_, old, messages)):
            return min(len(old), len(messages))
        same = 0
        while old[same] is messages[same]:
            same += 1
        return same

    def _frame_of(self, request: Request, policy: Policy, hour: bool) -> tuple[int, int, PriceModel]:
        """The request's frame: the context window and the fixed characters (both in characters),
        and the price model.

        A session's next request holds the very objects its last one did (the
        policy, the system prompt, the tool definitions, the other fields), so
        the frame worked out for those objects is the last one. A price model
        read from a file is read again, as its file may have changed.
        """
        key = (policy, request.api, request.extra, request.system, request.tools, hour)
        framed = self._framed
        if framed is not None and all(map(is_, key, framed[0])):
            return framed[1]
        window_chars = chars_for(context_window(policy, request.model))
        # The system prompt and the tool definitions fill the window too.
        fixed = fixed_chars(request)
        price = price_for(policy, request.api, request.model, request, hour_in_messages=hour)
        frame = (window_chars, fixed, price)
        named = policy.cache_price is None or policy.cache_price in NAMED
        self._framed = (key, frame) if named else None
        return frame

    def _resume(self, same: int, points: Sequence[int]) -> int:
        """How many request points of the memo still hold for a history whose first ``same``
        messages are the last one's."""
        ends = self._ends
        if ends == points[: len(ends)] and (not ends or ends[-1] <= same):
            return len(ends)  # the usual case, a history that grew: told without a walk (ends only grow)
        count = 0
        for held, end in zip(ends, points, strict=False):
            if held != end or end > same:
                break
            count += 1
        return count


def turn_starts(messages: Sequence[Message], begin: int = 0, after_assistant: bool = False) -> list[int]:
    """Message index where each assistant turn (a run of assistant messages) starts.

    From ``begin`` on, the message before it being the assistant's when ``after_assistant``.
    """
    starts = []
    prev = after_assistant
    for i in range(begin, len(messages)):
        assistant = messages[i].role == "assistant"
        if assistant and not prev:
            starts.append(i)
        prev = assistant
    return starts


@dataclass(slots=True)
class _Carry:
    """What the last ``levels`` call ended with, for a history that only grew since.

    The walk over request points keeps running sums (``_Tally``) and lists
    indexed by message and result. When the next history is the last one plus
    new messages (the same messages, results and sizes before them), they are
    extended in place instead of rebuilt: the decisions are the ones a walk
    from the start gives, at the cost of the new points alone, and no list of
    the whole history is copied.
    """

    messages: int
    assistant_last: bool
    starts: list[int]
    slots: tuple[SlotInfo, ...]
    sizes: list[int]
    policy: Policy
    cum: list[int]
    msgs: list[int]
    size_prefix: list[int]
    by_turn: dict[int, list[int]]
    tally: _Tally
    fold: list[int]
    span: _Span  # over ``starts``, ``fold``, ``msgs`` and ``size_prefix``, which grow in place
    point: _Checkpoint | None = None
    """The checkpoint of the last point the carry's state was left at."""

    @classmethod
    def start(
        cls,
        messages: Sequence[Message],
        starts: list[int],
        slots: Sequence[SlotInfo],
        sizes: Sequence[int],
        policy: Policy,
        state: list[int],
        then: list[int],
        price: PriceModel,
        last: _Checkpoint | None,
    ) -> _Carry:
        """The running lists of a history walked from the point ``last`` (from the start: ``None``)."""
        slots = tuple(slots)
        by_turn: dict[int, list[int]] = {}
        for k, slot in enumerate(slots):
            if slot.eligible:
                by_turn.setdefault(slot.turn_no, []).append(k)
        msgs = [s.msg for s in slots]
        size_prefix = list(accumulate((s.size for s in slots), initial=0))
        fold = [last.folded if last else 0]
        return cls(
            len(messages),
            bool(messages) and messages[-1].role == "assistant",
            starts,
            slots,
            list(sizes),
            policy,
            list(accumulate(sizes, initial=0)),
            msgs,
            size_prefix,
            by_turn,
            _Tally(slots, policy, state, then, price),
            fold,
            _Span(starts, fold, msgs, size_prefix),
        )

    def grows(self, slots: Sequence[SlotInfo], sizes: Sequence[int], policy: Policy) -> bool:
        """Whether ``slots`` and ``sizes`` begin with the last ones (equal results, the same
        sizes) under the same policy; if so, the running lists are extended to them."""
        old, known = self.slots, self.sizes
        count, length = len(old), len(known)
        if policy is not self.policy or len(slots) < count or len(sizes) < length:
            return False
        grown = slots if type(slots) is tuple else tuple(slots)
        head = sizes[:length] if type(sizes) is list else list(sizes[:length])
        if grown[:count] != old or head != known:
            return False
        cum, msgs, size_prefix, by_turn = self.cum, self.msgs, self.size_prefix, self.by_turn
        for size in sizes[length:]:
            known.append(size)
            cum.append(cum[-1] + size)
        for k in range(count, len(grown)):
            slot = grown[k]
            msgs.append(slot.msg)
            size_prefix.append(size_prefix[-1] + slot.size)
            if slot.eligible:
                by_turn.setdefault(slot.turn_no, []).append(k)
        self.slots = self.tally.slots = grown
        return True


class _Start(NamedTuple):
    """A start ``_best_cut`` weighs: the pending change of one result, and all after it."""

    reclaim: int  # what the pending changes from here on reclaim
    start: int  # where the result is in the prompt, as compacted now
    msg: int  # its message, where the event would start
    weighed: bool  # whether it reclaims enough to be weighed (the floor)
    turn_no: int  # its turn, for its age
    owes: tuple[tuple[float, int], ...]
    """What the change costs a request while it waits, by level: the cost from that level's
    age (``_paid_so_far``'s terms, less the age)."""


class _Tally:
    """Running sums over the results present, kept from one request point to the next.

    What a decision needs at each point (the characters saved so far, and
    before each result; the results whose age allows more than they have; the
    per-turn aging's length and cached prefix) changes only where results age
    or an event applies, so a point costs what changed at it, not a walk over
    the whole history: the schedule of a long session, worked out from
    scratch, is linear in its length.

    Each result's size at every level (``size_at``) is worked out once, when
    a decision first needs it; and the pending changes are laid out for
    ``best_cut`` (see ``_lay``) only when they change, not at every point.
    """

    def __init__(
        self,
        slots: Sequence[SlotInfo],
        policy: Policy,
        state: list[int],
        then: list[int],
        price: PriceModel = ANTHROPIC_5M,
    ) -> None:
        self.slots, self.policy, self.price = slots, policy, price
        self.state = state  # each present result's applied level (a decision changes it in place)
        self.eager = then  # and its age level at the current point
        self.at: dict[int, tuple[int, int, int, int]] = {}
        """``at[k][level]``: ``size_at`` of result k at each level, worked out when first needed
        (a result that stays at ``LEVEL_NONE``, most of them, never needs it)."""
        self.saves: dict[int, tuple[int, int, int, int]] = {}
        """``saves[k][level]``: what result k's level saves, its size less ``at[k][level]``."""
        # applied[k]: characters the applied levels save before result k; eager_saved[k]: the
        # same under the age levels.
        self.applied = [0] * (len(state) + 1)
        self.eager_saved = [0] * (len(state) + 1)
        self._resum(self.applied, state, 0)
        self._resum(self.eager_saved, then, 0)
        self.pending = {k for k, level in enumerate(state) if then[k] > level}
        self.cursors = [0, 0, 0]
        """Where each stage past the watermark resumes (see ``_down_to_low``)."""
        self.truncate = policy.microcompact_truncate_turns
        self.summarize = policy.microcompact_summarize_turns
        # What ``_best_cut`` weighs with, the same at every point.
        free_write = price.write <= 1
        self.least = FREE_WRITE_HORIZON_MIN if free_write else HORIZON_MIN
        self.floor = policy.compact_clear_at_least * (FREE_WRITE_FLOOR if free_write else 1)
        self.share = PAID_SHARE if free_write else 0.0
        self.premium = price.write - price.read
        self.owing = bool(self.share) or self.premium < 0
        """Whether what the changes have paid by waiting can tell. With no share asked (a
        write premium) and a rewrite that costs nothing or more, the paid share holds back
        only a start that reclaims less than nothing, whose net value is below zero anyway:
        then the sum is not worked out, and a start not weighed is not walked."""
        self.walk: list[_Start] = []
        self.reach: tuple[int, int] | None = None
        self.stale = True
        """Whether ``walk`` and ``reach`` are to be laid out again: a pending change changed."""

    def sizes(self, k: int) -> tuple[int, int, int, int]:
        """``size_at`` of result k at each level."""
        at = self.at.get(k)
        return at if at is not None else self._measure(k)

    def _measure(self, k: int) -> tuple[int, int, int, int]:
        """Work out ``at`` and ``saves`` of result k; its ``at``."""
        slot = self.slots[k]
        size = slot.size
        shown = size_at(slot, LEVEL_PREVIEW, self.policy)
        line = size_at(slot, LEVEL_SUMMARY, self.policy)
        at = self.at[k] = (size, shown, line, 0)
        self.saves[k] = (0, size - shown, size - line, size)
        return at

    def advance(
        self,
        j: int,
        count: int,
        by_turn: dict[int, list[int]],
        end: int,
        prev_end: int,
        cum: Sequence[int],
        *,
        cold: bool = False,
    ) -> float:
        """Move to request point ``j``, where ``count`` results are present; its eager step's cost.

        At a ``cold`` point the provider has nothing cached: the whole request is written."""
        policy, slots, state, eager = self.policy, self.slots, self.state, self.eager
        eager_saved = self.eager_saved
        before = len(state)
        # Results whose age level changes here: those crossing an age, and the new ones. Only
        # results that may be compacted are kept by turn; no result is of two ages.
        changed: list[tuple[int, int]] = []
        crossing = by_turn.get(j - self.truncate)
        if self.summarize != self.truncate:
            older = by_turn.get(j - self.summarize)
            if older:
                crossing = sorted(crossing + older) if crossing else older
        if crossing:
            for k in crossing:
                if k < before:
                    level = level_for_age(j - slots[k].turn_no, policy)
                    if level != eager[k]:
                        changed.append((k, level))
        applied = self.applied
        for k in range(before, count):  # the new results, at LEVEL_NONE
            state.append(LEVEL_NONE)
            eager.append(LEVEL_NONE)
            applied.append(applied[-1])
            eager_saved.append(eager_saved[-1])
            slot = slots[k]
            if slot.eligible:  # its turn may be an old one: a result can come late
                level = level_for_age(j - slot.turn_no, policy)
                if level:
                    changed.append((k, level))
        # Per-turn aging's cost: the previous request read from the cache up to its first change.
        prefix = 0
        if j:
            first = changed[0][0] if changed else before
            if first < before:
                prefix = cum[slots[first].msg] - eager_saved[first]
            else:
                prefix = cum[prev_end] - eager_saved[before]
        if changed:
            for k, level in changed:
                eager[k] = level
                if level > state[k]:
                    self.pending.add(k)
            self.stale = True
            self._resum(eager_saved, eager, changed[0][0])
        length = cum[end] - eager_saved[count]
        if not j or cold:
            return self.price.bill(0, length)
        return self.price.bill(prefix, length)

    def decide(
        self,
        turns: int,
        end: int,
        prev_end: int,
        cum: Sequence[int],
        window_chars: int,
        fixed: int,
        span: _Span | None,
        *,
        patient: bool,
        cold: bool,
        quiet: bool,
    ) -> bool:
        """:func:`_decide` at the current point, from the running sums."""
        state, policy, slots = self.state, self.policy, self.slots
        count = len(state)
        saved = self.applied[count]
        length = fixed + cum[end] - saved
        if span is not None and span.fold[0]:
            length -= span.removed(slots, cum)
        high = length > policy.compact_high_watermark * window_chars
        if not high and not cold:
            if not self.pending or patient:
                return False
            cut = self.best_cut(turns, cum[prev_end] - saved, cum, quiet)
            if cut is None:
                return False
            changing = [k for k in sorted(self.pending) if slots[k].msg >= cut]
        else:
            changing = sorted(self.pending)
        eager = self.eager
        for k in changing:
            state[k] = eager[k]
        self.settled(changing, changing[0] if changing else count)
        folded = span.fold[0] if span is not None else 0
        first = count
        if high or cold:
            first = _down_to_low(slots, state, turns, fixed + cum[end], window_chars, policy, cum, span, self)
            self.settled((), first)
        if high:
            return True
        # Cold: an event only where something changed.
        return bool(changing) or first < count or (span is not None and span.fold[0] != folded)

    def best_cut(self, turns: int, cached: int, cum: Sequence[int], quiet: bool) -> int | None:
        """:func:`_best_cut` over the pending changes, laid out once (see ``_lay``).

        The same figures in the same order of operations (``_paid_so_far``
        inlined), so every comparison comes out as there. A start's net value
        is at most what the most any start reclaims is worth less what the
        latest start rewrites: when that is not above zero, no start pays, and
        the changes are not walked.
        """
        if self.stale:
            self._lay(cum)
        reach = self.reach
        if reach is None:
            return None  # no start reclaims enough to be weighed
        price, premium = self.price, self.premium
        horizon = min(HORIZON_MAX, max(self.least, int(turns * HORIZON_SHARE)))
        read, write = price.read, price.write
        value = read * horizon + write
        if premium >= 0 and reach[0] * value - premium * max(0, cached - reach[1]) <= 0:
            return None
        share, owing = self.share, self.owing
        best: tuple[float, int] | None = None
        paid = 0.0
        for reclaim, start, msg, weighed, turn_no, owes in self.walk:
            if owing:
                age = turns - 1 - turn_no
                owed = 0.0
                for cost, since in owes:
                    owed += cost * max(0, age - since)
                paid += owed
                if not weighed:
                    continue
            rewrite = premium * max(0, cached - start)
            if quiet and rewrite > write * reclaim:
                continue
            if owing and write * reclaim + paid < share * rewrite:
                continue  # the changes have not yet cost enough, waiting, to pay for their rewrite
            net = reclaim * value - rewrite
            if net > 0 and (best is None or net > best[0]):
                best = (net, msg)
        return None if best is None else best[1]

    def _lay(self, cum: Sequence[int]) -> None:
        """Lay out the pending changes as ``best_cut`` walks them, latest first; and ``reach``.

        Each start's figures that do not change from one point to the next
        (what the changes from there on reclaim, where it is in the prompt,
        whether it reclaims enough to be weighed, what each level's change
        costs a request while it waits) change only with the pending changes
        and the applied levels. ``reach``: over the starts weighed, the most
        any of them reclaims and where the latest one is (``None``: no start
        is weighed). Without ``owing``, a start not weighed is left out.
        """
        floor, floored, owing = self.floor, self.price.ttl is not None, self.owing
        read, summarize, truncate = self.price.read, self.summarize, self.truncate
        state, eager, slots, shift = self.state, self.eager, self.slots, self.applied
        walk: list[_Start] = []
        reach: tuple[int, int] | None = None
        reclaim = 0
        for k in sorted(self.pending, reverse=True):
            sizes = self.sizes(k)
            held = sizes[state[k]]
            target = eager[k]
            reclaim += held - sizes[target]
            slot = slots[k]
            owes: list[tuple[float, int]] = []
            if owing:  # ``_paid_so_far``, its terms less the age
                for level in range(LEVEL_PREVIEW, target + 1):
                    smaller = sizes[level]
                    if smaller < held:
                        since = summarize if level == LEVEL_SUMMARY else truncate
                        owes.append((read * (held - smaller), since))
                        held = smaller
            weighed = not (reclaim < floor and floored)  # without a cache, no floor
            start = cum[slot.msg] - shift[k]
            if weighed:
                reach = (reclaim, start) if reach is None else (max(reach[0], reclaim), max(reach[1], start))
            if weighed or owing:
                walk.append(_Start(reclaim, start, slot.msg, weighed, slot.turn_no, tuple(owes)))
        self.walk, self.reach, self.stale = walk, reach, False

    def settled(self, changing: Sequence[int], first: int) -> None:
        """After an event: the applied levels changed, from result ``first`` on."""
        state, eager = self.state, self.eager
        self.pending.difference_update(changing)
        self.pending = {k for k in self.pending if eager[k] > state[k]}
        self.stale = True
        self._resum(self.applied, state, first)

    def _resum(self, sums: list[int], levels: Sequence[int], start: int) -> None:
        saves = self.saves
        total = sums[start]
        for k in range(start, len(levels)):
            level = levels[k]
            if level:  # LEVEL_NONE saves nothing
                if k not in saves:
                    self._measure(k)
                total += saves[k][level]
            sums[k + 1] = total


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
    *,
    cold: bool = False,
    quiet: bool = False,
) -> bool:
    """Decide at one request point; apply an event to ``state`` and say whether one fired.

    At a ``cold`` point (the cache expired before this request) every pending
    change is applied, and the request is brought down to the low watermark
    as past the high one: it is all written again whatever is decided.

    ``targets`` are the levels the results' ages allow at this point, ``turns``
    the assistant turns so far. ``end`` is where this request ends and ``prev_end`` where the previous one
    did: the previous request is what the provider has cached. A ``patient``
    decision fires only for the watermark; a ``quiet`` one also for an event
    that costs its own request no more than leaving the history alone. ``fixed`` is what the request holds
    outside its messages (the system prompt), which fills the window too.

    An event rewrites everything after its first changed result. So it starts
    at the cut point that pays best: the pending changes from there on are
    applied, and older ones that would cost more to rewrite than they save
    stay pending (a later event may take them along).
    """
    if tally is not None:
        # The running sums: the same figures, without a walk over every result at every point.
        return tally.decide(
            turns, end, prev_end, cum, window_chars, fixed, span, patient=patient, cold=cold, quiet=quiet
        )
    sizes = [size_at(s, lv, policy) for s, lv in zip(present, state, strict=True)]
    saved = sum(s.size - size for s, size in zip(present, sizes, strict=True))
    changing = [k for k, (lv, tg) in enumerate(zip(state, targets, strict=True)) if tg > lv]
    length = fixed + cum[end] - saved - (span.removed(present, cum) if span is not None else 0)
    high = length > policy.compact_high_watermark * window_chars
    if not high and not cold:
        if not changing or patient:
            return False
        cut = _best_cut(
            present, sizes, targets, changing, turns, cum[prev_end] - saved, cum, policy, quiet=quiet
        )
        if cut is None:
            return False
        changing = [k for k in changing if present[k].msg >= cut]
    for k in changing:
        state[k] = targets[k]
    folded = span.fold[0] if span is not None else 0
    first = len(state)
    if high or cold:
        first = _down_to_low(present, state, turns, fixed + cum[end], window_chars, policy, cum, span)
    if high:
        return True
    # Cold: an event only where something changed.
    return bool(changing) or first < len(state) or (span is not None and span.fold[0] != folded)


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
    price: PriceModel = ANTHROPIC_5M,
    quiet: bool = False,
) -> int | None:
    """The message where an event should start, or ``None`` when no start pays.

    Starting at a result rewrites the cached prompt from there (``cached``
    minus what comes before it) at the write price instead of reading it, and
    reclaims the changes from there on, which every later request (estimated
    from the turns so far) reads no more. When ``quiet``, only a start that
    pays at its own request is taken: what it no longer writes there covers
    what it writes again.
    """
    # Without a write premium, events wait until they have paid a share of their rewrite, and
    # the ones that fire are weighed over a longer least horizon (see ``PAID_SHARE``).
    free_write = price.write <= 1
    least = FREE_WRITE_HORIZON_MIN if free_write else HORIZON_MIN
    horizon = min(HORIZON_MAX, max(least, int(turns * HORIZON_SHARE)))
    value = price.read * horizon + price.write
    floor = policy.compact_clear_at_least * (FREE_WRITE_FLOOR if free_write else 1)
    share = PAID_SHARE if free_write else 0.0
    best: tuple[float, int] | None = None
    reclaim = 0
    # Savings before each slot shift its position; walk the pending changes from the end.
    if shift is None:
        computed = [0] * (len(present) + 1)
        for k in range(len(present)):
            computed[k + 1] = computed[k] + present[k].size - sizes[k]
        shift = computed
    paid = 0.0
    for k in reversed(changing):
        reclaim += sizes[k] - size_at(present[k], targets[k], policy)
        paid += _paid_so_far(present[k], sizes[k], targets[k], turns, policy, price)
        if reclaim < floor and price.cached:
            continue  # without a cache every character reclaimed is saved: no floor
        start = cum[present[k].msg] - shift[k]
        rewrite = (price.write - price.read) * max(0, cached - start)
        if quiet and rewrite > price.write * reclaim:
            continue
        if price.write * reclaim + paid < share * rewrite:
            continue  # the changes have not yet cost enough, waiting, to pay for their rewrite
        net = reclaim * value - rewrite
        if net > 0 and (best is None or net > best[0]):
            best = (net, present[k].msg)
    return None if best is None else best[1]


def _paid_so_far(
    slot: SlotInfo, size: int, target: int, turns: int, policy: Policy, price: PriceModel
) -> float:
    """What a pending change has cost so far by waiting: the characters each of its levels
    would have taken off, read again at every request since its age allowed that level.

    A pure function of the result's age, so the schedule stays a function of the history.
    """
    age = turns - 1 - slot.turn_no
    held, paid = size, 0.0
    for level in range(LEVEL_PREVIEW, target + 1):
        smaller = size_at(slot, level, policy)
        if smaller < held:
            since = (
                policy.microcompact_summarize_turns
                if level == LEVEL_SUMMARY
                else policy.microcompact_truncate_turns
            )
            paid += price.read * (held - smaller) * max(0, age - since)
            held = smaller
    return paid


def _unmanaged_step(
    end: int, prev_end: int, cum: Sequence[int], price: PriceModel = ANTHROPIC_5M, *, first: bool
) -> float:
    """What one request costs with no compaction: the previous one read, the rest written."""
    if first:
        return price.bill(0, cum[end])
    return price.bill(cum[prev_end], cum[end])


def _eager_step(
    present: Sequence[SlotInfo],
    then: Sequence[int],
    now: Sequence[int],
    end: int,
    prev_end: int,
    cum: Sequence[int],
    policy: Policy,
    price: PriceModel = ANTHROPIC_5M,
) -> float:
    """What one request costs under per-turn aging, after the previous one under it.

    ``now`` are the age levels of ``present`` at this request, ``then`` those of
    the results the previous request held, at that request (none for the first).
    """
    length = cum[end] - sum(s.size - size_at(s, lv, policy) for s, lv in zip(present, now, strict=True))
    if prev_end == 0:
        return price.bill(0, length)
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
    return price.bill(prefix, length)


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
                    if tally is not None:
                        sizes = tally.sizes(k)
                        change = sizes[state[k]] - sizes[wanted]
                    else:
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
                saved += (
                    tally.sizes(k)[state[k]] if tally is not None else size_at(present[k], state[k], policy)
                )
                state[k] = LEVEL_FOLDED
                first = min(first, k)
            k += 1
        current = length()
    return first


# --- the one-line summary ---------------------------------------------------------------
#
# The summary is what the model reasons from once the output is gone, so each part says only
# what the result shows: an exit status where the agent states one for a command, error lines
# only from an error, a log or a test run, and the command's last line of output.

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
# A command that only prints one file: its output is the file (no pipe, redirect or heredoc).
_READ_COMMAND = re.compile(
    r"(?:cd [^;&|<>`$]+ && )?"
    r"(?:(?:cat|head|tail|less|more|bat)(?: -{1,2}[\w=-]+(?: \d+)?)*"
    r"|sed -n (?:'[^'\n]*'|\"[^\"\n]*\"|\d+(?:,\d+)?p)"
    r") (?P<path>[^\s;&|<>`$'\"*?]+)"
)
# Programs whose output shows files or search hits, not a run: their lines that mention
# errors are the files' text. A command is judged by its first program.
_VIEW_PROGRAMS = frozenset(
    {"cat", "head", "tail", "sed", "nl", "less", "more", "bat", "grep", "egrep", "rg", "ag", "ack"}
    | {"find", "ls", "tree", "awk", "diff", "wc", "stat", "file", "strings", "xxd", "od"}
)
_VIEW_GIT = frozenset({"show", "diff", "log", "grep", "blame", "cat-file", "status"})
_CD = re.compile(r"\s*cd [^;&|<>`$]+ *(?:&&|;) *")

# Where each agent states a command's exit status. Nothing else is read as one: a file, a
# diff or a script's output may say "exit code 0" about anything.
_STATUS_HEAD = re.compile(
    r"<returncode>(-?\d{1,5})</returncode>"  # mini-swe-agent
    r"|Exit code: (-?\d{1,5})\r?\nWall time: "  # Codex exec
    r"|Chunk ID: \w{1,64}\r?\nWall time: [^\n]{0,80}\nProcess exited with code (-?\d{1,5})\r?\n"  # Codex
)
_STATUS_ERROR = re.compile(r"Exit code (-?\d{1,5})(?:\r?\n|\Z)")  # Claude Code, on an error result
_STATUS_JSON = re.compile(r'"metadata":\{"exit_code":(-?\d{1,5})(?:,[^{}]*)?\}\}\s*\Z')  # Codex shell
_STATUS_TAIL = re.compile(  # OpenHands: its metadata lines close the output
    r"(?:^|\n)\[(?:The command completed with exit code|Command finished with exit code) (-?\d{1,5})\.?\]"
    r"(?:\r?\n\[[^\[\]\n]*\])*\s*\Z"
)
_STATUS_TAIL_CHARS = 600
# mini-swe-agent: a command killed at its time limit has no exit status, and says so.
_TIMED_OUT = re.compile(
    r"The last command <command>.{0,2000}?</command> timed out and has been killed\.", re.DOTALL
)
_ERROR_LINE = re.compile(
    r"(?i:\b(?:error|errors|failed|failure|fatal|exception|traceback|panic)\b)"
    r"|[A-Za-z]+(?:Error|Exception)\b|^E {3}"
)
# What an ASCII line _ERROR_LINE finds anything in holds in its lower case, found at C speed
# (_ERROR_LINE tries each of its alternatives at every position). Not so for every line: the
# regex's case folding also matches a few letters that lower() keeps (U+0131, a dotless i).
_ERROR_HINT = re.compile("rror|fail|fatal|xception|traceback|panic")
# The kinds whose error lines are errors: logs and test runs, and plain output (which
# previews as a log when it has such lines). Never source, a file view, a diff or grep hits.
_LOG_KINDS = frozenset(k for k, strategy in STRATEGY.items() if strategy in ("log", "log-or-plain"))
_LAST_LINE_CHARS = 100
# What the marker's detail cannot hold.
_UNSAFE = re.compile(r"[;\[\]\r\n]+")


@dataclass(frozen=True, slots=True)
class Summary:
    """The one-line form of a result: the marker's detail, and the error lines kept under it."""

    detail: str
    errors: tuple[str, ...]


def summarize(tool: str | None, call: ToolCall | None, text: str, *, is_error: bool = False) -> Summary:
    """What a one-line summary says of a result, with the error lines it keeps.

    ``is_error`` is the result's own error flag. Error lines are kept for an
    error, and for an exec tool's log or test run; never for a file, a diff,
    an edit or grep hits, whose lines merely mention errors.
    """
    kind = result_kind(tool, call, text, is_error=is_error)
    status = exit_status(text, tool, is_error=is_error)
    output = _command_output(tool, text)
    shown = kind if output is text else result_kind(tool, call, output, is_error=is_error)
    keep = is_error or (tool in EXEC_TOOLS and shown in _LOG_KINDS and not _views(_argument(call)))
    errors = tuple(error_lines(output, headline=is_error)) if keep else ()
    return Summary(summary_detail(tool, call, text, status, kind=kind, is_error=is_error), errors)


def _command_output(tool: str | None, text: str) -> str:
    """What a command printed: the ``output`` of Codex's JSON envelope, else ``text`` itself.

    Codex's shell results are ``{"output": ..., "metadata": {"exit_code": ...}}``;
    a test run inside one is still a test run, whose error lines are kept.
    """
    if tool not in EXEC_TOOLS or not text.startswith('{"output":'):
        return text
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    output = value.get("output") if isinstance(value, dict) else None
    return output if isinstance(output, str) else text


def _argument(call: ToolCall | None) -> str:
    """The raw key argument of a call, unshortened."""
    if call is None:
        return ""
    arguments: Any = call.arguments
    if isinstance(arguments, dict):
        for name in _KEY_ARGS:
            value = arguments.get(name)
            if isinstance(value, str) and value.strip():
                return value
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                return " ".join(value)
        for value in arguments.values():
            if isinstance(value, str) and value.strip():
                return value
        return ""
    if isinstance(arguments, str):
        return arguments
    return call.arguments_json or ""


def _views(command: str) -> bool:
    """Whether a command only shows files or search hits (``cat``, ``sed -n``, ``grep``, ``git show``)."""
    lines = [ln for ln in command.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    first = lines[0] if lines else ""
    cd = _CD.match(first)
    words = first[cd.end() if cd else 0 :].split(maxsplit=2)
    if not words:
        return False
    program = words[0].rsplit("/", 1)[-1]
    if program == "git":
        return len(words) > 1 and words[1] in _VIEW_GIT
    return program in _VIEW_PROGRAMS


def key_argument(call: ToolCall | None) -> str:
    """The argument that says what a call did: its command, path or pattern, shortened.

    An editor tool's ``command`` is only its verb (``view``, ``str_replace``):
    the file it worked on goes with it, or every view would read alike.
    """
    if call is not None and call.name in EDITOR_TOOLS and isinstance(call.arguments, dict):
        verb, path = call.arguments.get("command"), call.arguments.get("path")
        if isinstance(path, str) and path.strip():
            return _short(f"{verb} {path}" if isinstance(verb, str) and verb.strip() else path)
    return _short(_argument(call))


def _shown_file(tool: str | None, call: ToolCall | None) -> str | None:
    """The file a call's output shows, when the call is a plain read of one file."""
    if call is None or not isinstance(call.arguments, dict):
        return None
    arguments: dict[str, Any] = call.arguments
    if tool in EDITOR_TOOLS:
        path = arguments.get("path")
        return path if arguments.get("command") == "view" and isinstance(path, str) else None
    if tool in FILE_VIEW_TOOLS:
        for name in ("file_path", "path", "absolute_path", "filename", "file"):
            value = arguments.get(name)
            if isinstance(value, str) and value.strip():
                return value
        return None
    if tool in EXEC_TOOLS:
        command = _argument(call).strip()
        found = _READ_COMMAND.fullmatch(command)
        return found["path"] if found else None
    return None


def result_kind(tool: str | None, call: ToolCall | None, text: str, *, is_error: bool = False) -> str:
    """The content kind of a result, with its call's hints (see :func:`~toolbudget.previews.detect`).

    An error result is the error's text, never the file its call named.
    """
    path = None if is_error else _shown_file(tool, call)
    return detect(text, path=path, report=tool in REPORT_TOOLS and not is_error)


def _short(text: str, room: int = 80) -> str:
    """``text`` on one line in at most ``room`` characters, safe inside a marker's detail.

    A long text loses its middle, not its end: a path keeps its file name
    (and as many parent folders as fit), a command its last words.
    """
    one = " ".join(_UNSAFE.sub(" ", text).split())
    if len(one) <= room:
        return one
    keep = room - 1
    if " " not in one and "/" in one.rstrip("/"):
        cut = one.rstrip("/").rfind("/")
        tail = one[cut:]
        if len(tail) < keep:
            # Whole parent folders, while they leave the head at least half the room.
            while cut > 0:
                parent = one.rfind("/", 0, cut)
                if parent <= 0 or len(one) - parent > keep // 2:
                    break
                cut = parent
            tail = one[cut:]
            return one[: keep - len(tail)] + "…" + tail
    tail_room = keep // 3
    start = len(one) - tail_room
    # A cut inside a path's file name moves back to the folder before it (``cat /a/…/name.py``),
    # while the head keeps at least a third of the room.
    word_end = one.find(" ", start)
    word_end = len(one) if word_end < 0 else word_end
    slash = one.rfind("/", one.rfind(" ", 0, start) + 1, word_end)
    if 0 <= slash < start and word_end - slash < keep - keep // 3:
        start = slash
    return one[: keep - (len(one) - start)] + "…" + one[start:]


def exit_status(text: str, tool: str | None, *, is_error: bool = False) -> str | None:
    """The exit status a command's result states, where its agent states it; else ``None``.

    Only exec tools have one. It is read from mini-swe-agent's
    ``<returncode>``, Codex's ``Exit code:`` / ``Process exited with code``
    header or its JSON ``metadata``, OpenHands' closing ``[... exit code N.]``
    line, and Claude Code's ``Exit code N`` first line of an error result.
    """
    if tool not in EXEC_TOOLS:
        return None
    found = _STATUS_HEAD.match(text)
    if found is None and is_error:
        found = _STATUS_ERROR.match(text)
    if found is None and text.startswith('{"output":'):
        found = _STATUS_JSON.search(text, max(0, len(text) - _STATUS_TAIL_CHARS))
    if found is None:
        found = _STATUS_TAIL.search(text, max(0, len(text) - _STATUS_TAIL_CHARS))
    if found is None:
        return None
    return next(g for g in found.groups() if g is not None)


def error_lines(text: str, room: int = 600, *, headline: bool = False) -> list[str]:
    """The lines of an output that carry its errors, whole, within ``room`` characters.

    With ``headline`` (the output is an error), its first line is one of them
    too: an error message need not say "error" (``String to replace not
    found``). Claude Code's ``Exit code N`` line is left to the exit status.
    """
    out: list[str] = []
    used = 0
    first = headline
    for line in text.splitlines():
        if first and line.strip() and not _STATUS_ERROR.match(line):
            first = False
            line = line.rstrip()
            line = line if len(line) <= 300 else line[:299] + "…"
            out.append(line)
            used += len(line) + 1
            continue
        may = not line.isascii() or line.startswith("E   ") or _ERROR_HINT.search(line.lower())
        if may and _ERROR_LINE.search(line):
            line = line.rstrip()
            if len(line) > 300:
                line = line[:299] + "…"
            if used + len(line) + 1 > room:
                break
            out.append(line)
            used += len(line) + 1
    return out


def last_line(text: str) -> str:
    """The last non-empty line a command printed (inside its agent's envelope), or ``""``."""
    start, end = split_envelope(text)
    body = text[start:end]
    if body.startswith('{"output":'):
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError:
            value = None
        if isinstance(value, dict) and isinstance(value.get("output"), str):
            body = value["output"]  # Codex: the output inside its JSON
    tail = _STATUS_TAIL.search(body, max(0, len(body) - _STATUS_TAIL_CHARS))
    if tail is not None:
        body = body[: tail.start()]
    for line in reversed(body[-4_000:].splitlines()):
        if line.strip():
            return line
    return ""


def summary_detail(
    tool: str | None,
    call: ToolCall | None,
    text: str,
    status: str | None,
    *,
    kind: str | None = None,
    is_error: bool = False,
) -> str:
    """The marker detail of a one-line summary.

    Tool, key argument, size, content type; then, for what the result states,
    its exit status (or ``timed out``, or ``error`` for an error result
    without one) and, for a command, its last line of output, which tells
    runs of one command apart.
    """
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    what = f"{tool or 'tool'}"
    argument = key_argument(call)
    if argument:
        what += f" `{argument}`"
    parts = [
        what,
        f"{lines} lines",
        f"{len(text)} chars",
        kind or result_kind(tool, call, text, is_error=is_error),
    ]
    if status is not None:
        parts.append(f"exit {status}")
    elif tool in EXEC_TOOLS and _TIMED_OUT.match(text):
        parts.append("timed out")
    elif is_error:
        parts.append("error")
    if tool in EXEC_TOOLS:
        last = _short(last_line(text), _LAST_LINE_CHARS)
        if last:
            parts.append(f"last: {last}")
    return ", ".join(parts)
