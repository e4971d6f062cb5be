"""Repairing pairing, with the fewest changes that make a history valid.

The repair keeps what the agent saw. It never deletes a result that has a call
(it moves it back next to the call), never touches thinking blocks or their
signatures, and leaves a trailing call that is still waiting to run alone
unless asked to close it. What it cannot keep it reports: every change is a
:class:`Repair` naming its kind, the message index in the input and the call.

Messages a repair does not change are passed through as the very same
objects, so they render back byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..model import Message, Part, Request, Text, Thinking, ToolCall, ToolResult, frozen_mapping
from .check import USER_SIDE, held_on_server, matches, pending_from, rides_with_results
from .rules import Rules

__all__ = ["SYNTHETIC_TEXT", "Fixed", "Repair", "fix"]

SYNTHETIC_TEXT = (
    "[toolbudget] This tool call was interrupted before its result was recorded, so its outcome is "
    "unknown. It may or may not have taken effect: check the current state before running it again."
)

FIRST_USER_TEXT = "[toolbudget] The conversation before this point is not included."


@dataclass(frozen=True, slots=True)
class Repair:
    """One change made by :func:`fix`."""

    kind: str
    index: int
    call_id: str | None = None
    detail: str = ""

    def __str__(self) -> str:
        where = f"message {self.index}" if self.index >= 0 else "the request"
        call = f" (call {self.call_id})" if self.call_id else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.kind} at {where}{call}{detail}"


@dataclass(slots=True)
class _Entry:
    """A message being rebuilt, with the index it had in the input."""

    index: int
    """Where repairs are reported: the input message, or ``-1`` for the request."""
    message: Message
    origin: int | None
    """The input message this one is (changed or not); ``None`` for one the repair made."""


@dataclass(slots=True)
class _Claim:
    """A result and the call it answers."""

    result: ToolResult
    entry: int  # position of the entry holding the result
    call_entry: int  # position of the entry holding the call
    call: ToolCall
    in_slot: bool


def synthetic(call: ToolCall) -> ToolResult:
    return ToolResult(call.id, (Text(SYNTHETIC_TEXT),), True, call.name)


@dataclass(frozen=True, slots=True)
class Fixed:
    """What :func:`fix` made: the messages, the repairs, and the system prompt when it changed."""

    messages: tuple[Message, ...]
    repairs: list[Repair]
    system: tuple[Part, ...] | None = None
    origins: tuple[int | None, ...] = ()
    """For each message, the input message it is (see :func:`fix`); ``None`` for one made here."""


def fix(request: Request, rules: Rules, *, close_pending: bool = False) -> Fixed:
    """The repaired messages of ``request`` (and system prompt, if it changed) and the repairs made.

    Also where each message came from (``Fixed.origins``): the index of the
    input message it is, changed or not. A result moved next to its call is
    its own message's; messages joined into one (a response split in pieces,
    Bedrock's alternation) are the first of them, the others' parts inside
    it; a synthesized result, the message made to carry results after their
    call, and the first user message Bedrock needs are ``None``. A system
    message moved into the system prompt is no message any more.
    """
    entries = [_Entry(i, m, i) for i, m in enumerate(request.messages)]
    repairs: list[Repair] = []
    system: tuple[Part, ...] | None = None
    if not rules.system_role:
        entries, moved = _system_messages(entries, repairs)
        if moved:
            system = request.system + moved
    if rules.carrier == "items":
        out = _Items(rules, entries, repairs, request, close_pending).run()
    else:
        out = _Turns(rules, entries, repairs, close_pending).run()
    return Fixed(tuple(e.message for e in out), repairs, system, tuple(e.origin for e in out))


def _system_messages(entries: list[_Entry], repairs: list[Repair]) -> tuple[list[_Entry], tuple[Part, ...]]:
    """Take ``system`` messages out of a history whose API refuses them there.

    The fewest changes that keep what the model reads, in the order it reads
    it: the run of system messages that opens the history, when they hold
    text only, goes to the end of the top-level system prompt (which the
    model reads just before the history). Any other system message becomes a
    user message with the same content: the model still reads it at that
    point, and nothing is dropped or reworded.
    """
    moved: list[Part] = []
    out: list[_Entry] = []
    leading = True
    for entry in entries:
        message = entry.message
        if message.role != "system":
            leading = False
            out.append(entry)
            continue
        if leading and message.parts and all(isinstance(p, Text) for p in message.parts):
            moved.extend(message.parts)
            repairs.append(Repair("moved_to_system", entry.index, detail="into the top-level system prompt"))
            continue
        leading = False
        out.append(
            _Entry(entry.index, Message("user", message.parts, message.extra, message.form), entry.origin)
        )
        repairs.append(Repair("system_message_made_user", entry.index))
    return out, tuple(moved)


class _Turns:
    """Repair for APIs where a turn's results sit right after the assistant message."""

    def __init__(
        self, rules: Rules, entries: list[_Entry], repairs: list[Repair], close_pending: bool
    ) -> None:
        self.rules = rules
        self.entries = entries
        self.repairs = repairs
        self.close_pending = close_pending

    def note(self, kind: str, index: int, call_id: str | None = None, detail: str = "") -> None:
        self.repairs.append(Repair(kind, index, call_id, detail))

    def run(self) -> list[_Entry]:
        self.entries = self.merge_split_turns(self.entries)
        self.drop_duplicate_calls()
        claims = self.assign()
        self.rename_duplicate_ids(claims)
        out = self.rebuild(claims)
        if self.rules.call_after_user:
            # A dropped message that held only orphans can leave two model turns in a row.
            out = self.merge_split_turns(out)
        if self.rules.alternation:
            out = self.alternate(out)
        if self.rules.no_mixed_results:
            out = [self.fold(e) for e in out]
        return out

    # --- calls -----------------------------------------------------------------------

    def merge_split_turns(self, entries: list[_Entry]) -> list[_Entry]:
        """Join an assistant message to the assistant message right after it, when they are one turn.

        Two assistant messages in a row are joined only on evidence that they
        are pieces of one response (some loaders and providers write each block
        of a response as a message of its own):

        - the first has calls, and a result right after the run of assistant
          messages answers one of them: the model issued both before anything
          ran, so they were one parallel batch and get their one slot back;
        - the first has calls and the run ends the history: nothing was run
          yet, and joined, the calls wait together (nothing is invented);
        - the first has no calls and the API will not take two model turns in
          a row (Bedrock's alternation, Gemini's call turn after a model turn).

        Otherwise the first turn's calls were answered before the second was
        made (a chain of steps whose result was lost), so they stay apart and
        the missing result goes between them: one repair, and the model is not
        told a dependent chain ran in parallel.
        """
        after = self.results_after_runs(entries)
        merged: list[_Entry] = []
        for pos, entry in enumerate(entries):
            prev = merged[-1] if merged else None
            if prev is None or prev.message.role != "assistant" or entry.message.role != "assistant":
                merged.append(entry)
                continue
            if _has_calls(prev.message):
                results = after[pos]
                join = results is None or any(
                    matches(self.rules, call, result)
                    for call in prev.message.tool_calls()
                    for result in results
                )
            else:
                join = self.rules.alternation or (self.rules.call_after_user and _has_calls(entry.message))
            if not join:
                merged.append(entry)
                continue
            prev.message = Message(
                "assistant",
                prev.message.parts + entry.message.parts,
                prev.message.extra,
                prev.message.form,
            )
            self.note("merged_messages", entry.index, detail=f"into message {prev.index}")
        return merged

    @staticmethod
    def results_after_runs(entries: Sequence[_Entry]) -> list[list[ToolResult] | None]:
        """For each position in a run of assistant messages, the results right after the run.

        Those are the results in the user-side messages that follow the run, up
        to the next assistant message; ``None`` when the run ends the history.
        Positions outside a run get an empty list.
        """
        n = len(entries)
        out: list[list[ToolResult] | None] = [[] for _ in range(n)]
        pos = 0
        while pos < n:
            if entries[pos].message.role != "assistant":
                pos += 1
                continue
            end = pos
            while end + 1 < n and entries[end + 1].message.role == "assistant":
                end += 1
            results: list[ToolResult] | None = None
            if end + 1 < n:
                results = []
                j = end + 1
                while j < n and entries[j].message.role in USER_SIDE:
                    results.extend(entries[j].message.tool_results())
                    j += 1
            for p in range(pos, end + 1):
                out[p] = results
            pos = end + 1
        return out

    def drop_duplicate_calls(self) -> None:
        for entry in self.entries:
            message = entry.message
            if message.role != "assistant":
                continue
            kept: dict[str, int] = {}  # call id -> its position in `keep`
            keep: list[Part] = []
            for part in message.parts:
                if isinstance(part, ToolCall) and part.id is not None:
                    if part.id in kept:
                        detail = self.hand_on_signature(part, keep, kept[part.id])
                        self.note("removed_duplicate_call", entry.index, part.id, detail)
                        continue
                    kept[part.id] = len(keep)
                keep.append(part)
            if len(keep) != len(message.parts):
                entry.message = replace(message, parts=tuple(keep))

    def hand_on_signature(self, dropped: ToolCall, parts: list[Part], kept: int) -> str:
        """Move the signature of a dropped call onto the call kept in its place (else the turn's first call).

        A signature cannot be made up, and Gemini wants one on the first call of
        the turn, so it must not leave with a duplicate. Says where it went.
        """
        keys = self.rules.signature_keys
        signature = {k: v for k, v in dropped.extra.items() if k in keys}
        if not signature:
            return ""
        first = next(n for n, p in enumerate(parts) if isinstance(p, ToolCall))
        for n in (kept, first):
            call = parts[n]
            assert isinstance(call, ToolCall)
            if not any(k in call.extra for k in keys):
                parts[n] = replace(call, extra=frozen_mapping({**call.extra, **signature}))
                return f"its signature moved to call {call.id or call.name}"
        return "its signature was dropped: the calls kept already carry one"

    def assign(self) -> dict[int, list[_Claim]]:
        """Give each result to the call it answers; drop duplicates and orphans.

        A result answers the nearest unanswered call before it with its id; a
        result that comes before its call is moved after it. Returns the claims
        by the position of the calling message.
        """
        rules, entries = self.rules, self.entries
        calls = [
            (pos, c)
            for pos, e in enumerate(entries)
            if e.message.role == "assistant"
            for c in e.message.tool_calls()
        ]
        taken: set[int] = set()
        claims: dict[int, list[_Claim]] = {}
        for pos, entry in enumerate(entries):
            if entry.message.role not in USER_SIDE:
                continue
            for result in entry.message.tool_results():
                found = None
                answered_before = False
                for n in range(len(calls) - 1, -1, -1):
                    cpos, call = calls[n]
                    if cpos >= pos or not matches(rules, call, result):
                        continue
                    if n in taken:
                        answered_before = True
                        continue
                    found = n
                    break
                if found is not None:
                    found = self.first_in_turn(calls, taken, found, result)
                if found is None and not answered_before:
                    found = next(
                        (
                            n
                            for n, (cpos, call) in enumerate(calls)
                            if cpos > pos and n not in taken and matches(rules, call, result)
                        ),
                        None,
                    )
                if found is None:
                    kind = "removed_duplicate_result" if answered_before else "removed_orphan_result"
                    self.note(kind, entry.index, result.call_id)
                    continue
                taken.add(found)
                cpos, call = calls[found]
                in_slot = self.in_slot(cpos, pos)
                if not in_slot:
                    self.note(
                        "moved_result",
                        entry.index,
                        result.call_id,
                        f"next to its call in message {entries[cpos].index}",
                    )
                claims.setdefault(cpos, []).append(_Claim(result, pos, cpos, call, in_slot))
        return claims

    def first_in_turn(
        self, calls: list[tuple[int, ToolCall]], taken: set[int], found: int, result: ToolResult
    ) -> int:
        """The first unanswered call ``result`` matches in the turn of call ``found``.

        Results answer a turn's calls in order: without ids (Gemini), two calls of
        one name are told apart only by their position.
        """
        turn = calls[found][0]
        return next(
            n
            for n, (pos, call) in enumerate(calls)
            if pos == turn and n not in taken and matches(self.rules, call, result)
        )

    def in_slot(self, call_pos: int, result_pos: int) -> bool:
        if self.rules.carrier == "user-message":
            return result_pos == call_pos + 1
        return result_pos > call_pos and all(
            self.entries[p].message.role == "tool" for p in range(call_pos + 1, result_pos + 1)
        )

    def rename_duplicate_ids(self, claims: dict[int, list[_Claim]]) -> None:
        """Give a call an id of its own when an earlier turn used its id, or the API refuses it.

        Its result is renamed with it, so the pair stays a pair.
        """
        rules = self.rules
        if not rules.unique_ids and rules.id_pattern is None:
            return
        ids = {c.id for e in self.entries for c in e.message.tool_calls() if c.id}
        seen: set[str] = set()
        for pos, entry in enumerate(self.entries):
            if entry.message.role != "assistant":
                continue
            renames: dict[int, ToolCall] = {}
            for call in entry.message.tool_calls():
                if call.id is None:
                    continue
                bad = rules.id_pattern is not None and not rules.id_pattern.match(call.id)
                if bad or (rules.unique_ids and call.id in seen):
                    new_id = _fresh_id(_SAFE_CHARS.sub("_", call.id) or "call", ids, first=bad)
                    ids.add(new_id)
                    renames[id(call)] = replace(call, id=new_id)
                    self.note("renamed_call_id", entry.index, call.id, f"to {new_id}")
                seen.add(call.id)
            if not renames:
                continue
            entry.message = replace(
                entry.message, parts=tuple(renames.get(id(p), p) for p in entry.message.parts)
            )
            for claim in claims.get(pos, []):
                if id(claim.call) in renames:
                    claim.call = renames[id(claim.call)]
                    claim.result = replace(claim.result, call_id=claim.call.id)
                    claim.in_slot = False  # its bytes changed, so it is rebuilt

    # --- results ---------------------------------------------------------------------

    def slot_results(self, pos: int, claims: list[_Claim], pending: bool) -> list[ToolResult]:
        """The results that must follow the assistant message at ``pos``, in order."""
        message = self.entries[pos].message
        calls = list(message.tool_calls())
        order = {id(c): n for n, c in enumerate(calls)}
        stay = [c.result for c in sorted((c for c in claims if c.in_slot), key=lambda c: c.entry)]
        moved = sorted((c for c in claims if not c.in_slot), key=lambda c: order.get(id(c.call), 0))
        out = stay + [c.result for c in moved]
        if pending and not claims and not self.close_pending:
            return out
        answered = {id(c.call) for c in claims}
        for call in calls:
            if id(call) not in answered:
                out.append(synthetic(call))
                kind = "closed_pending_call" if pending else "synthesized_result"
                self.note(kind, self.entries[pos].index, call.id)
        return out

    def rebuild(self, claims: dict[int, list[_Claim]]) -> list[_Entry]:
        entries = self.entries
        pending = pending_from(self.rules, [e.message for e in entries])
        keep_in_place = {id(c.result): entries[c.entry] for cs in claims.values() for c in cs if c.in_slot}
        home = {id(c.result): entries[c.entry] for cs in claims.values() for c in cs}
        carried: dict[int, list[ToolResult]] = {}
        out: list[_Entry] = []
        for pos, entry in enumerate(entries):
            message = entry.message
            if message.role == "assistant":
                out.append(entry)
                if not _has_calls(message):
                    continue
                results = self.slot_results(pos, claims.get(pos, []), pos >= pending)
                if not results:
                    continue
                if self.rules.carrier == "user-message":
                    nxt = entries[pos + 1] if pos + 1 < len(entries) else None
                    if nxt is not None and nxt.message.role in USER_SIDE:
                        carried[pos + 1] = results
                    else:
                        # A message made to carry them: its results keep their call ids.
                        out.append(_Entry(entry.index, Message("user", tuple(results)), None))
                else:
                    for result in results:
                        out.append(self.tool_message(result, keep_in_place, home))
                continue
            if message.role not in USER_SIDE:
                out.append(entry)
                continue
            if self.rules.carrier == "tool-messages" and message.role == "tool":
                others = tuple(p for p in message.parts if not isinstance(p, ToolResult))
                if others:
                    out.append(_Entry(entry.index, replace(message, parts=others), entry.origin))
                continue
            others = tuple(p for p in message.parts if not isinstance(p, ToolResult))
            parts = tuple(carried.get(pos, ())) + others
            if parts == message.parts:
                out.append(entry)
            elif parts:
                out.append(_Entry(entry.index, replace(message, parts=parts), entry.origin))
                if pos in carried and self.rules.results_first and _results_after_text(message):
                    self.note("moved_results_first", entry.index)
            # a message that held only results that went elsewhere is dropped
        return out

    @staticmethod
    def tool_message(result: ToolResult, keep_in_place: dict[int, _Entry], home: dict[int, _Entry]) -> _Entry:
        """The tool message for ``result``: its own, untouched, when it stays where it was.

        A result moved next to its call is still its message's (its origin); a
        synthesized one has none.
        """
        entry = keep_in_place.get(id(result))
        if entry is not None and len(entry.message.parts) == 1:
            return entry
        came = home.get(id(result))
        return _Entry(-1, Message("tool", (result,)), came.origin if came is not None else None)

    # --- APIs that demand strict alternation (Bedrock) --------------------------------

    def alternate(self, entries: list[_Entry]) -> list[_Entry]:
        out: list[_Entry] = []
        for entry in entries:
            prev = out[-1] if out else None
            if prev is not None and _side(prev.message) == _side(entry.message):
                a, b = prev.message, entry.message
                parts = a.parts + b.parts
                if _side(a) == "user":
                    parts = tuple(p for p in parts if isinstance(p, ToolResult)) + tuple(
                        p for p in parts if not isinstance(p, ToolResult)
                    )
                prev.message = Message(a.role if a.role != "tool" else "user", parts, a.extra, a.form)
                self.note("merged_messages", entry.index, detail=f"into message {prev.index}")
                continue
            out.append(entry)
        if out and out[0].message.role != "user":
            out.insert(0, _Entry(-1, Message("user", (Text(FIRST_USER_TEXT),)), None))
            self.note("inserted_first_user_message", 0)
        return out

    def fold(self, entry: _Entry) -> _Entry:
        """Move text sharing a message with tool results into the last result (Bedrock refuses the mix)."""
        message = entry.message
        if message.role not in USER_SIDE:
            return entry
        results = [p for p in message.parts if isinstance(p, ToolResult)]
        others = tuple(
            p for p in message.parts if not isinstance(p, ToolResult) and not rides_with_results(p)
        )
        if not results or not others:
            return entry
        last = results[-1]
        results[-1] = replace(last, content=last.content + others)
        self.note("folded_into_result", entry.index, last.call_id, f"{len(others)} block(s)")
        # A cache point stays where it was, after the results: inside one Bedrock refuses it.
        kept = tuple(p for p in message.parts if rides_with_results(p))
        return _Entry(entry.index, replace(message, parts=(*results, *kept)), entry.origin)


class _Items:
    """Repair for OpenAI Responses, where every call and output is an item of its own."""

    def __init__(
        self,
        rules: Rules,
        entries: list[_Entry],
        repairs: list[Repair],
        request: Request,
        close_pending: bool,
    ) -> None:
        self.rules = rules
        self.entries = entries
        self.repairs = repairs
        self.server_state = held_on_server(request)
        self.close_pending = close_pending

    def note(self, kind: str, index: int, call_id: str | None = None, detail: str = "") -> None:
        self.repairs.append(Repair(kind, index, call_id, detail))

    def run(self) -> list[_Entry]:
        entries = self.entries
        turn = _turns(entries)
        # Duplicate calls within one turn are dropped; across turns they are renamed after pairing.
        last_turn: dict[str, int] = {}
        drop: set[int] = set()
        for pos, entry in enumerate(entries):
            for call in entry.message.tool_calls():
                key = call.id or ""
                if last_turn.get(key) == turn[pos]:
                    drop.add(pos)
                    self.note("removed_duplicate_call", entry.index, call.id)
                else:
                    last_turn[key] = turn[pos]
        pending = pending_from(self.rules, [e.message for e in entries])
        # Outputs go at the end of their call's run, but never into the trailing calls still
        # waiting to run, which would stop being trailing.
        limit = [pending if pos < pending else len(entries) for pos in range(len(entries))]
        closed = pending  # trailing calls before this have an output after them now
        calls = [(pos, c) for pos, e in enumerate(entries) if pos not in drop for c in e.message.tool_calls()]
        taken: dict[int, int] = {}  # call number -> position of its output
        insert_after: dict[int, list[tuple[int, _Entry]]] = {}
        for pos, entry in enumerate(entries):
            result = next(entry.message.tool_results(), None)
            if result is None:
                continue
            found, answered_before = None, False
            for n in range(len(calls) - 1, -1, -1):
                cpos, call = calls[n]
                if cpos > pos or call.id != result.call_id:
                    continue
                if n in taken:
                    answered_before = True
                    continue
                found = n
                break
            if found is not None:
                taken[found] = pos
                continue
            if not answered_before:
                later = next(
                    (
                        n
                        for n, (cpos, c) in enumerate(calls)
                        if cpos > pos and n not in taken and c.id == result.call_id
                    ),
                    None,
                )
                if later is not None:
                    taken[later] = pos
                    cpos = calls[later][0]
                    end = _block_end(entries, cpos, limit[cpos])
                    if cpos >= pending:
                        closed = max(closed, end + 1)
                    insert_after.setdefault(end, []).append((later, entry))
                    drop.add(pos)
                    self.note(
                        "moved_result",
                        entry.index,
                        result.call_id,
                        f"after its call in item {entries[cpos].index}",
                    )
                    continue
                if self.server_state:
                    continue
            drop.add(pos)
            kind = "removed_duplicate_result" if answered_before else "removed_orphan_result"
            self.note(kind, entry.index, result.call_id)
        for n, (cpos, call) in enumerate(calls):
            if n in taken:
                continue
            if cpos >= closed and not self.close_pending:
                continue
            end = _batch_end(entries, cpos, limit[cpos])
            made = _Entry(-1, Message("tool", (synthetic(call),)), None)
            insert_after.setdefault(end, []).append((n, made))
            kind = "closed_pending_call" if cpos >= pending else "synthesized_result"
            self.note(kind, entries[cpos].index, call.id)
        out: list[_Entry] = []
        for pos, entry in enumerate(entries):
            if pos not in drop:
                out.append(entry)
            for _, extra in sorted(insert_after.get(pos, []), key=lambda t: t[0]):
                out.append(extra)
        return self.rename(out)

    def rename(self, entries: list[_Entry]) -> list[_Entry]:
        """Give a call whose id an earlier block used an id of its own, and its output too."""
        ids = {c.id for e in entries for c in e.message.tool_calls() if c.id}
        seen: set[str] = set()
        renamed: dict[str, str] = {}  # pending renames: old id -> new id, for the next output
        for entry in entries:
            message = entry.message
            call = next(message.tool_calls(), None)
            if call is not None and call.id is not None:
                if call.id in seen:
                    new_id = _fresh_id(call.id, ids, first=False)
                    ids.add(new_id)
                    renamed[call.id] = new_id
                    entry.message = replace(
                        message, parts=tuple(replace(p, id=new_id) if p is call else p for p in message.parts)
                    )
                    self.note("renamed_call_id", entry.index, call.id, f"to {new_id}")
                seen.add(call.id)
                continue
            result = next(message.tool_results(), None)
            if result is not None and result.call_id in renamed:
                new_id = renamed.pop(result.call_id)
                entry.message = replace(
                    message,
                    parts=tuple(replace(p, call_id=new_id) if p is result else p for p in message.parts),
                )
        return entries


_SAFE_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def _fresh_id(base: str, taken: set[str], *, first: bool) -> str:
    """``base`` itself when allowed and free, else ``base_2``, ``base_3``..."""
    if first and base not in taken:
        return base
    n = 2
    while f"{base}_{n}" in taken:
        n += 1
    return f"{base}_{n}"


def _turns(entries: Sequence[_Entry]) -> list[int]:
    """Number each item by the model turn it belongs to.

    A turn is a run of items the model produced (reasoning, messages, calls), the
    way one response returns them. Any input after it (a user message, an output)
    ends it, so a model item after an output opens the next turn, as a new
    assistant message would on the other APIs.
    """
    out: list[int] = []
    n = 0
    prev_model = False
    for entry in entries:
        model = entry.message.role == "assistant"
        if model and not prev_model:
            n += 1
        out.append(n)
        prev_model = model
    return out


def _block_end(entries: Sequence[_Entry], pos: int, limit: int) -> int:
    """The last position before ``limit`` of the run of call and output items that starts at ``pos``."""
    end = pos
    while end + 1 < limit and _call_or_output(entries[end + 1].message):
        end += 1
    return end


def _batch_end(entries: Sequence[_Entry], pos: int, limit: int) -> int:
    """Where the synthetic output of the unanswered call at ``pos`` goes.

    Calls in a row are one parallel batch only on evidence (see
    ``_Turns.merge_split_turns``): an output after the row answers a call of
    the batch so far. A call with no such evidence was answered before the
    next call was made, so its output goes right after it; a call of the
    row's last batch gets it after the outputs, at the end of the block.
    """
    start = pos
    while start > 0 and _only_calls(entries[start - 1].message):
        start -= 1
    end = pos
    while end + 1 < limit and _only_calls(entries[end + 1].message):
        end += 1
    if end + 1 >= len(entries):
        return _block_end(entries, pos, limit)  # nothing ran yet: the calls wait together
    answered: set[str | None] = set()
    j = end + 1
    while j < limit and _call_or_output(entries[j].message):
        answered.update(r.call_id for r in entries[j].message.tool_results())
        j += 1
    group = start
    for k in range(start, end):
        batched = any(c.id in answered for e in entries[group : k + 1] for c in e.message.tool_calls())
        if not batched:
            if pos <= k:
                return k
            group = k + 1
    return _block_end(entries, pos, limit)


def _only_calls(message: Message) -> bool:
    return (
        message.role == "assistant"
        and bool(message.parts)
        and all(isinstance(p, ToolCall) for p in message.parts)
    )


def _call_or_output(message: Message) -> bool:
    return bool(message.parts) and all(isinstance(p, (ToolCall, ToolResult)) for p in message.parts)


def _has_calls(message: Message) -> bool:
    return any(isinstance(p, ToolCall) for p in message.parts)


def _results_after_text(message: Message) -> bool:
    seen_other = False
    for part in message.parts:
        if isinstance(part, ToolResult):
            if seen_other:
                return True
        elif not isinstance(part, Thinking):
            seen_other = True
    return False


def _side(message: Message) -> str:
    return "assistant" if message.role == "assistant" else "user"
