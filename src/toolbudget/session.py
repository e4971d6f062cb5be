"""A session: one agent conversation, its policy, and the archive its cuts go to.

``Session.manage`` is the whole pipeline for one request: parse, repair the
pairing, enforce the budgets, render. It never mutates its input and is
deterministic: the same body gives the same bytes, in this process or another,
and managing a managed body changes nothing. A request that only appends to
the last one is worked on its new messages alone, to the same bytes
(:mod:`toolbudget.incremental`).

The session id namespaces the archive. When none is given, it is derived from
the conversation itself (its system prompt and its task, the opening run of
messages after the system prompt), so every request of one conversation lands in
the same namespace, even across restarts and processes. Two conversations
that really begin alike share one, which is harmless: keys are content hashes,
and nothing is removed while any session holding the archive is alive.

An archive outlives the session: closing a session only lets go of it, and
what nobody holds any more is removed by the store's TTL or by ``clean``. A
store that hangs costs a request at most ``Policy.store_timeout`` seconds, and
before a request goes out every key its markers name has been checked present
in the store, in one round trip, and kept again when it was lost.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from . import ahead, wire
from ._fastinit import fast_init
from .budget import (
    CUT_PREFIX,
    FOLD_REASON,
    FORM_PREFIX,
    Archive,
    Budgeted,
    Cut,
    Unreachable,
    cut_fresh,
    enforce,
    extend,
    scanned_plain,
)
from .coldrecord import StoreRecord
from .compaction import Schedule
from .convert import OPENING_USER_TEXT
from .errors import InputError, NotFoundError, StoreConfigError, StoreError, ToolbudgetError
from .incremental import (
    HISTORY,
    Prefix,
    entries_after,
    fingerprint,
    head_of,
    opening,
    parse_entries,
    render_entries,
)
from .jsonio import dumps, in_order_of, keep_literals, to_body
from .marker import is_recall_tool
from .measure import fixed_chars, message_chars, request_chars, request_texts, tokens_of
from .model import Message, Request, Text, ToolCall, set_origin
from .models import context_window
from .pairing import Repair, appends_validly, call_ids, repair_traced
from .policy import Policy
from .previews import Preview
from .recall import answer as answer_recall
from .recall import recall_page, valid_key
from .store import DirStore, MemoryStore, Store, open_store
from .store.dir import default_dir_root
from .store.guard import Deadline, StoreGuard
from .store.redis import masked_url

_log = logging.getLogger("toolbudget")

count_chars = request_chars
"""The characters the model reads of a request (see :mod:`toolbudget.measure`)."""

__all__ = ["Managed", "Report", "Session", "conversation_id"]

TokenCounter = Callable[[str], int]


@fast_init
@dataclass(frozen=True, slots=True)
class Report:
    """What one ``manage`` call did."""

    api: str
    session: str
    results_seen: int
    results_cut: int
    chars_before: int
    chars_after: int
    tokens_before: int
    tokens_after: int
    repairs: tuple[Repair, ...]
    cuts: tuple[Cut, ...]
    store_fallbacks: int
    keys_written: tuple[str, ...]
    budget_unreachable: tuple[Unreachable, ...]
    compaction_event: bool = False
    """Old results were compacted further at this request: its prefix differs from the last one."""
    window_tokens: int = 0
    """The context window the request was budgeted for (the policy's, or the model's)."""
    over_window: bool = False
    """The managed request is still estimated over ``window_tokens``: the provider may refuse it."""

    @property
    def changed(self) -> bool:
        return bool(self.repairs or self.cuts)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form, for ``--report`` files and logs."""
        return {
            "api": self.api,
            "session": self.session,
            "results_seen": self.results_seen,
            "results_cut": self.results_cut,
            "chars_before": self.chars_before,
            "chars_after": self.chars_after,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "repairs": [
                {"kind": r.kind, "index": r.index, "call_id": r.call_id, "detail": r.detail}
                for r in self.repairs
            ],
            "cuts": [
                {
                    "index": c.index,
                    "call_id": c.call_id,
                    "tool": c.tool,
                    "kind": c.kind,
                    "before": c.before,
                    "after": c.after,
                    "key": c.key,
                    "reason": c.reason,
                }
                for c in self.cuts
            ],
            "store_fallbacks": self.store_fallbacks,
            "keys_written": list(self.keys_written),
            "compaction_event": self.compaction_event,
            "window_tokens": self.window_tokens,
            "over_window": self.over_window,
            "budget_unreachable": [
                {"turn": u.turn, "chars": u.chars, "budget": u.budget, "results": u.results}
                for u in self.budget_unreachable
            ],
        }


@fast_init
@dataclass(frozen=True, slots=True)
class _Trace:
    """What ``origins`` is worked out from, kept as the pipeline left it so only a caller that asks pays.

    The repair says where each repaired message came from; the budget then
    keeps every message in its place, except a fold, which takes the oldest
    turns out from the first assistant message on (on Responses leaving its
    marker as an item of its own there), and the unfolding of a managed body,
    which puts back the turns its fold marker stands for.
    """

    repaired: tuple[int | None, ...] | None
    """For each repaired message, the input message it is; ``None``: the input's, one for one."""
    budgeted: Request
    """The request the budget was given (the repaired one)."""
    count: int
    """Messages of the managed request."""
    folded: bool
    """The managed request folds turns."""

    def origins(self) -> tuple[int | None, ...]:
        messages = self.budgeted.messages
        first = next((i for i, m in enumerate(messages) if m.role == "assistant"), len(messages))
        shift = len(messages) - self.count  # the fold took these out (unfolding: put them back)
        items = self.budgeted.api == "openai-responses"
        out: list[int | None] = []
        for i in range(self.count):
            j: int | None = i
            if i < first:
                pass  # before the first turn, nothing moves
            elif self.folded and items and i == first:
                j = None  # the fold's marker, an item of its own
            else:
                j = i + shift
                if j < first or (j == first and items and shift < 0):
                    j = None  # a turn put back from the archive, not from the input
            if j is not None and self.repaired is not None:
                j = self.repaired[j]
            out.append(j)
        return tuple(out)


@fast_init
@dataclass(frozen=True, slots=True)
class Managed:
    """A managed body (in the form it was given: dict, bytes or text), its report, and both
    requests parsed, so what comes next (the recovery ladder) need not parse either body again."""

    body: Any
    report: Report
    original: Request
    """The request as given, parsed."""
    request: Request
    """The managed request: ``body`` parsed (the very ``original`` when nothing changed)."""
    _trace: _Trace | None = field(default=None, repr=False, compare=False)

    @property
    def origins(self) -> tuple[int | None, ...]:
        """For each message of ``request``, the index in ``original`` of the message it came from.

        ``None`` for a message toolbudget made: a synthesized result, the
        first user message Bedrock needs, the item that carries a fold's
        marker on Responses, a turn put back from the archive. A message that
        came from one keeps its index whatever was changed in it (a result
        cut, a fold marker put first in it, a call renamed, a result moved
        next to its call). Messages the repair joined into one (pieces of one
        response, Bedrock's alternation) are the first of them; a message
        that held only results which moved elsewhere, or only duplicates or
        orphans, is the origin of nothing. On every API the messages are the
        body's history list one for one (``messages``, ``input``,
        ``contents``), so an adapter maps a managed message back to the
        framework's object it laid out there.

        Computed when asked, from what the pipeline kept; a request that
        went out unchanged is its own, message for message.
        """
        if self._trace is None:
            return tuple(range(len(self.request.messages)))
        return self._trace.origins()


def _traced(
    repaired: tuple[int | None, ...] | None, budgeted: Request, managed: Request, done: Budgeted
) -> _Trace:
    folded = any(cut.reason == FOLD_REASON for cut in done.cuts)
    return _Trace(repaired, budgeted, len(managed.messages), folded)


def conversation_id(request: Request) -> str:
    """A stable id for a conversation: a hash of its system prompt and its task.

    The task is the first message that is not a system message, on every API:
    in OpenAI's APIs the system prompt is itself a message, and hashing it as
    "the first message" gave every task of one agent the same id. It runs on
    over the messages of the same role that follow: Anthropic and Bedrock
    merge user messages in a row into one, the other forms keep them apart,
    and a tool that opens every session with the same words (Claude Code's
    caveat before the user's own) would otherwise give all its sessions one id.

    A conversation converted to each API gives one id: the system prompt is
    hashed as its blocks' text joined by newlines, as the Responses API's one
    ``instructions`` string holds them, and the placeholder user turn a
    Bedrock body of a conversation the agent opened begins with is not the task.
    """
    digest = hashlib.blake2b(digest_size=8, person=b"toolbudget-conv")
    system = [p.text for p in request.system if isinstance(p, Text)]
    system += [p.text for m in request.messages if m.role == "system" for p in m.parts if isinstance(p, Text)]
    if system:
        digest.update("\n".join(system).encode("utf-8", "surrogatepass") + b"\x00")
    digest.update(b"\x01")
    others = task_messages(request.messages)
    for start, end in _task_runs(others):
        digest.update(others[start].role.encode())
        for message in others[start:end]:
            for part in message.parts:
                if isinstance(part, Text):
                    digest.update(b"\x00" + part.text.encode("utf-8", "surrogatepass"))
                elif isinstance(part, ToolCall):
                    digest.update(b"\x00" + part.name.encode("utf-8", "surrogatepass"))
    return "conv-" + digest.hexdigest()


def _task_runs(messages: list[Message]) -> list[tuple[int, int]]:
    """Where the task is in ``messages`` (from :func:`task_messages`): its opening run of one role,
    and, when the agent spoke first and the user answered in words, the user's run right after it.

    An agent that opens every conversation with the same words (a support
    agent's greeting) would otherwise give every task of it one id, as a
    tau2 run's fifty tasks had. A run still open at the end of ``messages``
    ends there.
    """
    if not messages:
        return []
    opening = _run_end(messages, 0)
    runs = [(0, opening)]
    if messages[0].role == "assistant" and opening < len(messages):
        answer = messages[opening]
        # The user's own words: results of the agent's opening calls are a user message on
        # some APIs and a tool message on others, and must not make the id differ between them.
        if answer.role == "user" and answer.parts and all(isinstance(p, Text) for p in answer.parts):
            runs.append((opening, _run_end(messages, opening)))
    return runs


def _run_end(messages: list[Message], start: int) -> int:
    role = messages[start].role
    return next((i for i in range(start, len(messages)) if messages[i].role != role), len(messages))


def task_read_whole(messages: tuple[Message, ...]) -> bool:
    """Whether every message the id reads has ended inside ``messages``: each run of the task
    is followed by a message of another role, so no later message can change the id."""
    others = task_messages(messages)
    runs = _task_runs(others)
    return bool(runs) and runs[-1][1] < len(others)


def task_messages(messages: tuple[Message, ...]) -> list[Message]:
    """The messages from the task on: the system ones left out, and the placeholder turn that
    opens a converted Bedrock body when the agent spoke first (:data:`OPENING_USER_TEXT`)."""
    others = [m for m in messages if m.role != "system"]
    if others and others[0].role == "user" and len(others[0].parts) == 1:
        part = others[0].parts[0]
        if isinstance(part, Text) and part.text == OPENING_USER_TEXT:
            return others[1:]
    return others


@fast_init
@dataclass(frozen=True, slots=True)
class _Last:
    """The last request managed, and its answer (``out`` is ``None`` when it was unchanged)."""

    request: Request
    policy: Policy
    out: dict[str, Any] | None
    report: Report
    repeat_report: Report
    """The report of answering it again: nothing new was written."""
    managed: Request
    """The managed request (``request`` itself when it was unchanged)."""
    trace: _Trace | None = None


@dataclass(frozen=True, slots=True)
class _Primed:
    """A body read before its ``manage`` (to find its session), kept with the body itself.

    ``request`` is ``None`` when finding the session needed only the JSON
    (a header named it): ``manage`` then parses no more than it must."""

    body: Any
    parsed: dict[str, Any]
    api: str
    request: Request | None


_PRIMED_LIMIT = 16
"""Bodies parsed ahead that a session keeps for their ``manage``: one per thread in flight."""

_RECORDS_KEPT = 4
"""Records of the schedule's decisions a session keeps for its close to write (the newest), when
its store's worker has not written them yet."""


def _shown(url: str | None) -> str:
    """A store URL as messages show it: the default spelled out, a password hidden."""
    return masked_url(url) if url else f"dir:{default_dir_root()}"


def _same_request(a: Request, b: Request) -> bool:
    """Whether two parsed requests are the same: identical cached messages, equal everything else."""
    if a.api != b.api or len(a.messages) != len(b.messages):
        return False
    if not all(x is y for x, y in zip(a.messages, b.messages, strict=True)):
        return False
    return a.system == b.system and a.tools == b.tools and a.extra == b.extra and a.form == b.form


_OWN_RECORDS = (CUT_PREFIX, FORM_PREFIX)
"""How the texts of a session's records of its own cuts begin (:func:`toolbudget.budget.cut_record`,
:data:`~toolbudget.budget.FORM_PREFIX`): kept beside the originals, promised by no marker."""


def _chars_known(request: Request, result: Request, sizes: Sequence[int]) -> tuple[int, int]:
    """:func:`~toolbudget.measure.request_chars` of ``request`` and of its managed form, from the
    sizes of ``request``'s messages known already: only the messages the budget changed are
    counted again (an event's whole pipeline would otherwise count every message twice)."""
    fixed = fixed_chars(request)
    before = fixed + sum(sizes)
    if result is request:
        return before, before
    known = {id(message): size for message, size in zip(request.messages, sizes, strict=True)}
    after = (
        fixed_chars(result)
        if result.system is not request.system or result.tools is not request.tools
        else fixed
    )
    for message in result.messages:
        size = known.get(id(message))
        after += message_chars(message) if size is None else size
    return before, after


def _check_and_keep(
    store: Store,
    session: str,
    keys: list[str],
    pending: Mapping[str, str],
    records: Mapping[str, str] | None = None,
    sizes: Mapping[str, int] | None = None,
    record: Mapping[str, bytes] | None = None,
    rider: Callable[[], Mapping[str, bytes]] | None = None,
    encoded: Mapping[str, bytes] | None = None,
) -> tuple[set[str], set[str], StoreError | None]:
    """Which of ``keys`` were absent, which of those could not be kept, and why.

    The writes come with a look at the other keys after them: a store that
    evicts may have dropped an old entry to make room for a new one. With
    ``sizes``, an entry of another length (torn by a power loss) is kept again.
    ``records`` (see :mod:`toolbudget.readback`) are written after the entries
    the markers name, in the same batch, so a store that is nearly full keeps
    those first; nothing checks them. The ``record`` entries
    (:mod:`toolbudget.coldrecord`) go with the writes unasked: a ``put`` of an
    entry the store holds only renews it. The ``rider`` entries (the schedule's
    last decision, :mod:`toolbudget.schedulerecord`) go only with a batch that
    writes anyway: they never cost a write of their own. An original in ``encoded`` is written
    as the bytes its key was worked out from, not encoded again.
    """
    absent = store.missing(session, keys, sizes) if keys else set()
    if not absent and not records and not record:
        return absent, set(), None
    made = encoded or {}
    items = {key: made.get(key) or pending[key].encode("utf-8", "surrogatepass") for key in sorted(absent)}
    for key in sorted(records or ()):
        items.setdefault(key, (records or {})[key].encode("utf-8", "surrogatepass"))
    if record:
        items.update(record)
    riding = rider() if rider is not None else {}
    for key, data in riding.items():
        items.setdefault(key, data)
    held = [key for key in keys if key not in absent]
    try:
        failed = store.put_many(session, items, held)
    except StoreError as exc:
        return absent, absent, exc
    return absent, failed - (records or {}).keys() - (record or {}).keys() - riding.keys(), None


def _kept_decision(
    store: Store, session: str, lease: _Lease, make: Callable[[], Mapping[str, bytes]]
) -> Callable[[], bool]:
    """The idle step that writes the schedule's record ``make`` gives (see
    :meth:`Session._keep_decision`); best effort, like every record. The write is noted in the
    lease, and made once: by the worker between requests, or by the close, in the trip that lets
    go of the session's directory, when the worker has not reached it (a close right after the
    request), so that a session met cold later reads it. Nothing after that trip (a directory let
    go of may be cleaned at once). It keeps no reference to the session."""

    def write() -> None:
        with contextlib.suppress(StoreError):
            store.put_many(session, dict(make()))

    def step() -> bool:
        if lease.take(write):
            write()
        return False

    with lease.lock:
        # The newest few: a cold session reads the newest two points (a store being skipped runs
        # no idle work, and nothing would be left to write otherwise).
        if len(lease.records) >= _RECORDS_KEPT:
            del lease.records[: len(lease.records) - _RECORDS_KEPT + 1]
        lease.records.append(write)
    return step


def _last_trip(
    records: Sequence[Callable[[], None]], store: DirStore | None, session: str | None, holder: str | None
) -> None:
    """A closing session's last work on its store's worker, in one call: the records its worker
    had not written, then the release of its directory (which a record slow to write delays,
    never skips: the call goes on after a close that stopped waiting for it)."""
    for write in records:
        with contextlib.suppress(Exception):  # best effort, as every record is
            write()
    if store is not None and session is not None and holder is not None:
        store.release(session, holder)


def _take_hold(store: DirStore, session: str, lease: _Lease) -> None:
    """Hold the session's directory and note the holder in ``lease`` at once, on the thread that
    made it: a caller that stopped waiting for the trip (a store over its bound) or a check after
    it that failed would otherwise lose the holder, live while this process runs, and never let it
    go (:meth:`_Lease.took`). Nothing when the lease holds already (made ahead, :func:`_ready`)."""
    if lease.holder is None and not lease.ended:
        lease.took(store, session, store.hold(session))


def _ready(store: DirStore, session: str, lease: _Lease) -> Callable[[], bool]:
    """The idle step that holds the session's directory and makes what its first cut would make
    (:meth:`DirStore.ready`), run by the store's worker while no call waits. It keeps no reference
    to the session, so a session dropped unclosed is still collected and lets go of its lease."""

    def step() -> bool:
        with contextlib.suppress(StoreError):
            _take_hold(store, session, lease)
            if lease.holder is not None:
                store.ready(session)
        return False

    return step


def _held_check_and_keep(
    store: Store, session: str, lease: _Lease, *args: Any
) -> tuple[set[str], set[str], StoreError | None]:
    """The session's first hold of its directory (noted in ``lease``; none when the store could
    not make one, as :meth:`Session._hold` allows), then :func:`_check_and_keep`."""
    if isinstance(store, DirStore):
        with contextlib.suppress(StoreError):
            _take_hold(store, session, lease)
    return _check_and_keep(store, session, *args)


class _SessionArchive(Archive):
    """The archive of one session in its store, with keys only this session can compute.

    While a request is managed, cuts only note what they need kept
    (:meth:`collect`); :meth:`flush` then checks every noted key in one round
    trip and writes the ones the store does not hold. So a key written by an
    earlier request and since lost (a Redis restart, an eviction, a flush) is
    written again before a marker names it, and a fresh process does not pay
    a round trip per key it re-derives.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self.memo: dict[tuple[str, int, bool, bool, bool, str | None], Preview] = {}
        self.forms: set[str] = set()
        self.form_keys: dict[str, str] = {}
        self.pending: dict[str, str] | None = None
        self.records: dict[str, str] = {}
        """Records of previews and summaries made in this request (see :mod:`toolbudget.readback`):
        kept with its writes, but not named by its markers, so no later request checks them."""
        self.keyed: dict[str, str] = {}
        """Keys of originals worked out ahead in this request (:meth:`key_of`), by text."""
        self.encoded: dict[str, bytes] = {}
        """The UTF-8 bytes of each original this request keeps (:meth:`keep`) and hashed for its
        key, by key: the write takes them rather than encoding the text again (a pass over a
        long output of its own: 0.4 ms for an 868 KB diff that is not all ASCII)."""
        self.lost: frozenset[str] = frozenset()
        self.cold = True
        self.sizes: dict[str, int] = {}
        """The byte length of each entry this session keeps, by key: a shorter one is torn."""
        self.named: tuple[frozenset[str], list[str], dict[str, int]] | None = None
        """The keys the last check named (a set, sorted) and the size of each it checked."""
        self.cut_records: set[str] = set()
        """Keys of the records of cuts (:func:`toolbudget.budget.cut_record`): checked for
        presence only, since the first cut's record stands and a later cut's text may differ."""
        self.secret = hashlib.blake2b(
            session.id.encode("utf-8", "surrogatepass"), digest_size=32, person=b"toolbudget-key"
        ).digest()

    def key_for(self, text: str) -> str:
        return hashlib.blake2b(
            text.encode("utf-8", "surrogatepass"), key=self.secret, digest_size=16
        ).hexdigest()

    def _key_and_size(self, text: str, write: bool = False) -> str:
        """``key_for(text)``, noting the entry's byte length for the check before each request, and
        with ``write`` its bytes for this request's write (:attr:`encoded`)."""
        data = text.encode("utf-8", "surrogatepass")
        key = hashlib.blake2b(data, key=self.secret, digest_size=16).hexdigest()
        self.sizes[key] = len(data)
        if write:
            self.encoded[key] = data
        return key

    def key_of(self, text: str) -> str:
        key = self.keyed.get(text)
        if key is None:
            key = self.keyed[text] = self._key_and_size(text)
        return key

    def sizes_of(self, pending: Mapping[str, str]) -> dict[str, int]:
        """The byte length of each entry ``pending`` names: what the store must hold for each."""
        sizes = self.sizes
        records = self.cut_records
        for key in pending.keys() - sizes.keys() - records:
            sizes[key] = len(pending[key].encode("utf-8", "surrogatepass"))
        return {key: sizes[key] for key in pending if key not in records}

    def path_of(self, key: str) -> str | None:
        try:
            return self.session.store.location(self.session.id, key)
        except StoreError:
            return None  # a store that failed keeps nothing: what is read back is made again

    def made(self, key: str, text: str) -> None:
        if self.pending is not None:
            self.records[key] = text

    def read_made(self, keys: list[str]) -> dict[str, str]:
        session = self.session
        try:
            found = session._read_many(keys)
        except StoreError:
            return {}  # made again, as if nothing had been kept
        return {key: data.decode("utf-8", "surrogatepass") for key, data in found.items()}

    def keep(self, text: str) -> tuple[str, str | None]:
        key = self.keyed.pop(text, None) or self._key_and_size(text, write=self.pending is not None)
        session = self.session
        if self.pending is not None:
            self.still(key, text)
        else:
            # Outside a request's batch (recovery): kept now, within the request's time.
            session._hold()
            session._store_call(session.store.put, session.id, key, text.encode("utf-8", "surrogatepass"))
            session._keys_this_call.append(key)
        return key, session.store.location(session.id, key)

    def still(self, key: str, text: str) -> None:
        if key in self.lost:
            raise StoreError(f"the store could not keep {key}")
        if self.pending is not None:
            self.pending[key] = text

    def record(self, key: str, text: str) -> None:
        self.cut_records.add(key)
        if self.pending is not None:
            self.pending[key] = text
            return
        # Outside a request's batch (recovery), like ``keep``: kept now, within the request's time.
        session = self.session
        session._hold()
        with contextlib.suppress(StoreError):
            session._store_call(session.store.put, session.id, key, text.encode("utf-8", "surrogatepass"))

    def collect(self) -> None:
        # Records made by an attempt that gave way to the whole pipeline are still written by
        # its flush: the memo then holds them, so nothing would make them again.
        self.pending = {}
        self.keyed = {}
        self.encoded = {}
        self.lost = frozenset()

    def flush(self, record: Mapping[str, bytes] | None = None) -> frozenset[str]:
        """Make sure the store holds every key noted since :meth:`collect`; returns the keys it could not.

        The records made in the request are written in the same trip; one that
        could not be kept is not a lost key (nothing promises it). So are the
        ``record`` entries (the request's arrival and cold points).
        """
        pending, self.pending = self.pending, None
        records, self.records = self.records, {}
        encoded, self.encoded = self.encoded, {}
        self.keyed = {}
        if not pending and not records and not record:
            return frozenset()
        pending = pending or {}
        session = self.session
        named = self.named
        if named is not None and pending.keys() == named[0]:
            keys, sizes = named[1], named[2]  # the keys of the last check: most requests cut nothing new
        else:
            keys = sorted(pending)
            sizes = self.sizes_of(pending)
            self.named = (frozenset(pending), keys, sizes)
        try:
            store = session.store
        except StoreError as exc:
            session._store_failed(exc)
            return frozenset(keys)
        # A session's first hold rides in the trip below, where one is made; a renewal, and a
        # hold before a check made here, are made now.
        deferring = session._writes_later(store)
        first = not deferring and session._first_hold(store)
        if not first and session._holder is None:
            # A held directory was renewed, when due, as this call began (``_bind``, ``_hold``).
            session._hold()
        if deferring:
            # What the markers name is checked now; the records may follow the request.
            try:
                absent = session._missing_here(store, keys, sizes) if keys else set()
            except StoreError as exc:
                session._store_failed(exc)
                return frozenset(keys)
            # So may the session's own records of its cuts (what each was of, which texts went
            # out as cuts): the next request's check names them, once they are written, and keeps
            # again one that was not. Only the originals are kept now, in one trip.
            own = {key: pending[key] for key in absent if pending[key].startswith(_OWN_RECORDS)}
            if len(own) == len(absent):
                if records or record or own:
                    later = {**records, **own}
                    session._write_later(store, later, record, session._schedule.decided_record())
                return frozenset()
            originals = [key for key in keys if key not in own]
            return self._keep_now(store, originals, pending, sizes, {**records, **own}, record, encoded)
        if keys and not records and not record and store.checks_inline(session.id):
            # Nothing to write: the check alone, where the request is, when it cannot hang.
            if first:
                session._hold()
                first = False
            try:
                if not session._missing_here(store, keys, sizes):
                    return frozenset()
            except StoreError as exc:
                session._store_failed(exc)
                return frozenset(keys)
            # A key was lost (a clean, a flush): the worker looks again and keeps it.
        return self._trip(
            store,
            keys,
            pending,
            sizes,
            records,
            record,
            session._schedule.decided_record(),
            hold=first,
            encoded=encoded,
        )

    def _keep_now(
        self,
        store: Store,
        keys: list[str],
        pending: Mapping[str, str],
        sizes: Mapping[str, int],
        later: dict[str, str],
        record: Mapping[str, bytes] | None,
        encoded: Mapping[str, bytes],
    ) -> frozenset[str]:
        """Check and keep the originals ``keys`` now, leaving ``later`` (and ``record``) for
        :meth:`Session.write_now`; returns the keys not kept."""
        lost = self._trip(store, keys, pending, sizes, encoded=encoded)
        self.session._write_later(store, later, record, self.session._schedule.decided_record())
        return lost

    def _trip(
        self,
        store: Store,
        keys: list[str],
        pending: Mapping[str, str],
        sizes: Mapping[str, int],
        records: Mapping[str, str] | None = None,
        record: Mapping[str, bytes] | None = None,
        rider: Callable[[], Mapping[str, bytes]] | None = None,
        *,
        hold: bool = False,
        encoded: Mapping[str, bytes] | None = None,
    ) -> frozenset[str]:
        """One trip to the store's worker for the check of ``keys`` and the writes; returns the
        originals that could not be kept (a record not kept costs no cut: the next request
        keeps it again). ``hold``: the session's first hold of its directory comes first, in
        the same trip (a fresh session's first request paid a trip of its own for it).
        ``encoded``: the bytes of originals already encoded (:attr:`encoded`)."""
        session = self.session
        try:
            if hold:
                absent, failed, error = session._store_call(
                    _held_check_and_keep,
                    store,
                    session.id,
                    session._lease,
                    keys,
                    pending,
                    records,
                    sizes,
                    record,
                    rider,
                    encoded,
                )
            else:
                absent, failed, error = session._store_call(
                    _check_and_keep, store, session.id, keys, pending, records, sizes, record, rider, encoded
                )
        except StoreError as exc:
            session._store_failed(exc)
            return frozenset(keys)  # nothing could be checked: no marker may promise a key
        if error is not None:
            session._store_failed(error)
        if absent and isinstance(store, DirStore):
            # Files for the next request's originals are made while this one goes out, and then
            # the keys are checked again, so the next request's check finds them vouched for.
            session._when_idle(store, store.idle, store.recheck(session.id, keys, sizes))
        session._keys_this_call.extend(key for key in sorted(absent) if key not in failed)
        return frozenset(key for key in failed if not pending[key].startswith(CUT_PREFIX))

    def original(self, key: str) -> str | None:
        try:
            data = self.session._read_many([key]).get(key)
        except StoreError:
            return None
        return self.verified(key, data)

    def absent(self, key: str) -> bool:
        session = self.session
        try:
            data = session._read_many([key]).get(key)
        except StoreError:
            return False  # a store that fails says nothing of what it holds
        if self.verified(key, data) is not None:
            return False
        # Said once per request that meets it: the CLI prints it, the proxy logs it.
        _log.warning(
            "toolbudget: the original of cut %s is gone from the store of session %s (removed since "
            "it was cut); its marker now says it cannot be recalled",
            key,
            session.id,
        )
        return True

    def verified(self, key: str, data: bytes | None) -> str | None:
        """``data`` as text when it is what ``key`` was made of, else ``None``.

        Every key this session writes is a keyed hash of the entry's text, so an
        entry that a power loss left empty or short (the dir store does not
        flush each write to the disk) reads as missing instead of as a wrong
        original.
        """
        if data is None:
            return None
        text = data.decode("utf-8", "surrogatepass")
        return text if self.key_for(text) == key else None


class _Lease:
    """What a session holds outside itself: its holder file, its store's worker, the store it opened.

    Kept apart from the session so that a session dropped without ``close()``
    still lets go of them when it is collected (or at exit): a long-lived
    process would otherwise keep a thread and a holder for every session it
    forgot, and no sweep could ever remove those archives.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.dir_store: DirStore | None = None
        self.session_id: str | None = None
        self.holder: str | None = None
        self.guard: StoreGuard | None = None
        self.owned: Store | None = None
        self.ended = False
        self.records: list[Callable[[], None]] = []
        """Writes of the schedule's records (:func:`_kept_decision`) the worker has not made yet:
        the close makes them, in the trip it makes anyway."""
        self.lock = threading.Lock()

    def take(self, write: Callable[[], None]) -> bool:
        """Whether ``write`` (one of :attr:`records`) is still to be made, by the caller: it is
        made once, whoever takes it first (the worker between requests, or the close)."""
        with self.lock:
            if self.ended or write not in self.records:
                return False
            self.records.remove(write)
            return True

    def took(self, store: DirStore, session_id: str, holder: str) -> None:
        """Note a holder the store made for the session, on whichever thread made it.

        One the lease cannot keep is released at once: the session ended while the trip that made
        it was under way (the caller stopped waiting for a store over its bound), or holds already
        (a later request held while that trip was stuck)."""
        with self.lock:
            keep = not self.ended and self.holder is None
            if keep:
                self.dir_store, self.session_id, self.holder = store, session_id, holder
        if not keep:
            with contextlib.suppress(StoreError):
                store.release(session_id, holder)

    def end(self) -> None:
        """Release everything; never raises, nor waits for a store that hangs longer than a request would."""
        deadline = Deadline(self.timeout)
        with self.lock:
            self.ended = True
            records, self.records = self.records, []
            store, holder, session_id = self.dir_store, self.holder, self.session_id
            self.holder = None
        # The directory to let go of, if the session holds one.
        mine = store if holder is not None and session_id is not None else None
        try:
            if self.guard is not None and self.guard.on_worker():
                # Collected on the worker's own thread (a garbage collection its work set off): the
                # last trip is made here, where a call would wait on itself for the store's bound.
                _last_trip(records, mine, session_id, holder)
            elif self.guard is not None and mine is not None and self.guard.open:
                # The store is being skipped (a call missed its bound): the release is handed to the
                # worker without waiting, and made when the store answers; skipped, the holder
                # would count as live for as long as this process runs. The records are dropped.
                self.guard.call_later(_last_trip, (), mine, session_id, holder)
            elif self.guard is not None and (records or mine is not None):
                # In one call, so that a write under way (a record, spare files) lands first and
                # nothing of this session's is written after it.
                self.guard.call(deadline, _last_trip, records, mine, session_id, holder)
            elif mine is not None:
                _last_trip((), mine, session_id, holder)
            elif self.guard is not None:
                # A store without holders: a write the worker is making between requests lands
                # before the close returns; an idle step not yet begun sees ``ended``.
                self.guard.finish(deadline)
        except StoreError as exc:
            _log.warning("toolbudget: %s", exc)
        except RuntimeError:
            pass  # at interpreter exit no thread may start; a holder whose process is gone is dead
        finally:
            guard, self.guard = self.guard, None
            if guard is not None:
                guard.close()
            owned, self.owned = self.owned, None
            if owned is not None:
                with contextlib.suppress(StoreError):
                    owned.close()


class Session:
    """One conversation's policy and archive. Use it as a context manager.

    Closing it lets go of its archive without removing it: the markers it
    wrote live on in the agent's transcript, so the originals stay until the
    store's TTL has passed with nobody holding them (``toolbudget clean``
    removes them sooner). ``close`` never raises.

    A store URL whose driver is not installed raises :class:`StoreConfigError`
    here; a store that is down is not the caller's mistake, and only costs the
    cuts their recall (each marker says so) until it is back.

    Many threads may share a session, with the answers serial use gives.
    ``manage``, ``manage_request`` and ``cut_result`` hold the session's lock
    while they work: each notes the keys its markers name, then checks and
    writes them in one round trip, and the schedule, the caches and the last
    answer are the session's. That is enough, and costs little: the work held
    is the session's own, milliseconds, and the provider call (seconds) comes
    after it, outside. A recovery rung holds it too (:meth:`exclusive`).
    ``original``, ``recall`` and ``handle_recall`` read the store without it;
    each thread's calls have their own bound on the store, and the store,
    its guard and the archive are made once whichever threads ask first.
    ``last_report`` is the last call's, whichever thread made it: with
    threads, read each call's ``Managed.report``.
    """

    def __init__(
        self,
        id: str | None = None,
        *,
        store: str | Store | None = None,
        policy: Policy | None = None,
        on_cut: Callable[[Cut], None] | None = None,
        on_budget_unreachable: Callable[[Unreachable], None] | None = None,
        token_counter: TokenCounter | None = None,
        write_later: bool = False,
    ) -> None:
        if id is not None and (not isinstance(id, str) or not id.strip()):
            # A blank id would name one archive shared by every caller that forgot to give one.
            raise InputError(f"a session id must be a non-blank string, not {id!r}")
        self.policy = policy if policy is not None else Policy.load()
        self._id = id
        self._store_arg = store if store is not None else self.policy.store
        self._store: Store | None = store if isinstance(store, Store) else None
        self._archive: _SessionArchive | None = None
        self.on_cut = on_cut
        self.on_budget_unreachable = on_budget_unreachable
        self.token_counter = token_counter
        self._keys_this_call: list[str] = []
        self.write_later = write_later
        """Whether writes no marker names wait for :meth:`write_now` or the next call."""
        self._later: Callable[[], None] | None = None
        self._later_lock = threading.Lock()
        self._closed = False
        self._caches: dict[str, wire.EntryCache] = {}
        self._primed: dict[int, _Primed] = {}
        self._last: _Last | None = None
        self._prefix: Prefix | None = None
        self._hint: tuple[Request, bytes, list[int], bool] | None = None
        """A request :meth:`_extend` parsed but could not finish: its history's text and sizes, and
        whether it is known valid (it appends validly to a valid history)."""
        self._schedule = Schedule()
        self._windows: tuple[Policy, str | None, int] | None = None
        self._schedule.record = StoreRecord(self._key_for, self._read_many)
        self._schedule.key_for = self._key_for
        self._arrival: float | None = None
        """When the request being managed arrived, if the caller said (``now=``)."""
        self.last_report: Report | None = None
        """The report of the last ``manage`` call (of any thread)."""
        self._store_error: StoreError | None = None
        self._local = threading.local()
        self._lock = threading.RLock()
        self._open_lock = threading.RLock()
        self._lease = _Lease(self.policy.store_timeout)
        self._release = weakref.finalize(self, self._lease.end)
        self._hung_at_open = False
        self._readied = False
        self._idle_after: list[tuple[Store, Callable[[], bool]]] = []
        """Idle work a request asked for, handed to the worker as it returns (see :meth:`_when_idle`)."""
        if isinstance(self._store_arg, str) or self._store_arg is None:
            self._lease.guard = StoreGuard(_shown(self._store_arg))
            self._open(Deadline(self.policy.store_timeout))

    # --- identity and storage --------------------------------------------------------

    @property
    def held_bytes(self) -> int:
        """The bytes of JSON history this session keeps to resume from (0 before its first request).

        What it holds in memory is about ten times this (the parsed history
        and the managed body beside the text), so a pool bounds it by this.
        """
        prefix = self._prefix
        return len(prefix.history) if prefix is not None else 0

    @property
    def id(self) -> str:
        if self._id is None:
            raise InputError("this session has no id yet: give one, or manage a request first")
        return self._id

    def _open(self, deadline: Deadline) -> None:
        """Open the store the URL names, within ``deadline``.

        A malformed URL fails here, not at the first cut. Opening touches the
        store's disk, which may be a mount that hangs, so it is bounded like
        any store call; a store that did not answer is opened again once its
        guard lets calls through.
        """
        url = self._store_arg if isinstance(self._store_arg, str) else None
        guard = self._lease.guard
        assert guard is not None
        # Memory has no disk, and Redis connects at its first command: nothing there can hang.
        direct = url is not None and url.partition(":")[0].lower() in ("memory", "redis", "rediss")
        try:
            opened = open_store(url) if direct else guard.call(deadline, open_store, url)
            self._store = self._lease.owned = opened
            self._store_error, self._hung_at_open = None, False
        except StoreConfigError:
            raise
        except StoreError as exc:
            # A store that is down is not the caller's mistake: cuts fall back, and say so.
            self._store_error, self._hung_at_open = exc, guard.open

    @property
    def store(self) -> Store:
        store = self._store
        if store is not None and self._store_error is None:
            return store
        with self._open_lock:  # opened once, whichever threads ask at the same time
            if self._store_error is not None and self._hung_at_open and self._guard is not None:
                if not self._guard.open:
                    self._open(self._deadline or Deadline(self.policy.store_timeout))
            if self._store_error is not None:
                raise self._store_error
            if self._store is None:
                url = self._store_arg if isinstance(self._store_arg, str) else None
                self._store = self._lease.owned = open_store(url)
            return self._store

    @property
    def _deadline(self) -> Deadline | None:
        """The bound of the public call this thread is in: each thread's calls are bounded apart."""
        deadline: Deadline | None = getattr(self._local, "deadline", None)
        return deadline

    @_deadline.setter
    def _deadline(self, deadline: Deadline | None) -> None:
        self._local.deadline = deadline

    @property
    def _guard(self) -> StoreGuard | None:
        return self._lease.guard

    @property
    def _holder(self) -> str | None:
        return self._lease.holder

    def _store_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A store call bounded by this request's time; a store that hangs is skipped, not waited for."""
        store = self.store
        if isinstance(store, MemoryStore):
            return fn(*args)  # nothing to wait for
        deadline = self._deadline or Deadline(self.policy.store_timeout)
        return self._guard_of(store).call(deadline, fn, *args)

    def _guard_of(self, store: Store) -> StoreGuard:
        guard = self._lease.guard
        if guard is None:
            with self._open_lock:
                guard = self._lease.guard
                if guard is None:
                    guard = self._lease.guard = StoreGuard(store.url)
        return guard

    def _missing(self, store: Store, keys: list[str], sizes: Mapping[str, int] | None) -> set[str]:
        """Which of ``keys`` the store lacks, in one round trip within the request's time.

        Made on this thread when the store says the check cannot hang
        (:meth:`Store.checks_inline`): the trip to the worker and back cost
        more than the check, on every request that names a key.
        """
        if store.checks_inline(self.id):
            return self._missing_here(store, keys, sizes)
        found: set[str] = self._store_call(store.missing, self.id, keys, sizes)
        return found

    def _missing_here(self, store: Store, keys: list[str], sizes: Mapping[str, int] | None) -> set[str]:
        """:meth:`_missing` on this thread, for a store whose check cannot hang."""
        if isinstance(store, MemoryStore):
            # Never waited for: a pause of this process (a garbage collection, a busy machine)
            # would otherwise pass for a store that hangs, and skip it.
            return store.missing(self.id, keys, sizes)
        deadline = self._deadline or Deadline(self.policy.store_timeout)
        absent: set[str] = self._guard_of(store).call_here(deadline, store.missing, self.id, keys, sizes)
        return absent

    def _store_failed(self, exc: StoreError) -> None:
        _log.warning("toolbudget: %s", exc)

    # --- writes after the call -----------------------------------------------------------

    @property
    def writes_pending(self) -> bool:
        """Whether the last call left records for :meth:`write_now` (``write_later=True``)."""
        return self._later is not None

    def write_now(self) -> None:
        """Write the records the last call left for later, here and now; never raises.

        With ``write_later=True`` a call returns before the records that no
        marker names are in the store: its arrival, its schedule's decision,
        the records of the previews it made (what another process reads to
        decide alike and not make them again), and the records of its new
        cuts (which the next call's check names, and keeps again if lost).
        Every original a marker names is in the store before the call
        returns, as always. A shell writes
        them while the provider answers (the proxy does), and before it
        answers its own caller when the next request may reach another
        process; this session's own next call writes them first otherwise.
        A write that fails is logged, as one made in the call would be.
        """
        with self._later_lock:
            job, self._later = self._later, None
            if job is not None:
                job()

    def settle(self, timeout: float = 10.0) -> bool:
        """Wait up to ``timeout`` seconds for the store's worker to finish what it does between
        calls; returns whether it did. Never needed for correctness.

        A ``dir:`` store's worker holds the session's directory and makes
        what its first cut writes into once the first request has returned, and
        keeps empty files ready for the next originals (see
        :meth:`~toolbudget.store.dir.DirStore.idle`); the worker of any store
        but ``memory:`` makes the previews and summaries a later compaction
        event will send (:mod:`toolbudget.ahead`), all while no call waits: an
        agent's next request comes seconds later, and finds them made. A caller
        that sends requests back to back (a benchmark, a replay) or removes the
        session's files by hand waits here first.
        """
        guard = self._lease.guard
        return guard is None or guard.settle(timeout)

    def _writes_later(self, store: Store) -> bool:
        """Whether this request's records may wait: asked for, and a store whose check of the
        markers' keys is made here (a memory store writes as fast as it would queue)."""
        return self.write_later and not isinstance(store, MemoryStore) and store.checks_inline(self.id)

    def _write_later(
        self,
        store: Store,
        records: Mapping[str, str],
        record: Mapping[str, bytes] | None,
        rider: Callable[[], dict[str, bytes]] | None,
    ) -> None:
        """Keep the request's records for :meth:`write_now`, made from what they hold now."""
        session_id = self.id

        def write() -> None:
            items = {key: text.encode("utf-8", "surrogatepass") for key, text in sorted(records.items())}
            items.update(record or {})
            for key, data in (rider() if rider is not None else {}).items():
                items.setdefault(key, data)
            # Within a bound of its own, on the caller's thread, as this store's check is made.
            deadline = Deadline(self.policy.store_timeout)
            try:
                self._guard_of(store).call_here(deadline, store.put_many, session_id, items)
            except StoreError as exc:
                self._store_failed(exc)  # a record not kept is made again; nothing promised it

        self._later = write

    @property
    def archive(self) -> _SessionArchive:
        archive = self._archive
        if archive is None:
            with self._open_lock:
                archive = self._archive
                if archive is None:
                    archive = self._archive = _SessionArchive(self)
        return archive

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[Session]:
        """Hold the session for work on its archive that spans several steps (the recovery ladder).

        ``manage`` and ``cut_result`` hold it themselves: each batch of cuts
        notes the keys its markers name, then checks and writes them in one
        round trip, and another thread's cuts must not land in that batch.
        Only the session's own work is held: a provider call made between two
        holds waits for nobody.
        """
        with self._lock:
            yield self

    def _bind(self, request: Request) -> None:
        if self._id is None:
            self._id = conversation_id(request)
        if self._holder is not None:
            self._hold()  # renewed when due

    def _when_idle(self, store: Store, *steps: Callable[[], bool]) -> None:
        """Have the store's worker run ``steps`` between calls, asked for as the request returns.

        Run while the request goes on, the steps (spare files made after a
        cut, its keys checked again) took the interpreter's lock from it
        between their system calls: the rest of a cutting request was
        slower by about what they cost.
        """
        if getattr(self._local, "deadline", None) is None:
            guard = self._guard_of(store)
            for step in steps:
                guard.when_idle(step)
        else:
            self._idle_after.extend((store, step) for step in steps)

    def _idle_now(self) -> None:
        """Hand the worker the idle work the call that is returning asked for."""
        if self._idle_after:
            steps, self._idle_after = self._idle_after, []
            for store, step in steps:
                self._guard_of(store).when_idle(step)

    def _ready_ahead(self) -> None:
        """Have the store's worker hold this session's directory, and make what a first cut makes,
        while no call waits, so that the first cut does not wait for it (see :meth:`_hold`).

        Asked as the first request returns, not as it begins: made while a request runs, the files
        cost it the worker's share of the interpreter's lock (a session met cold makes its hold
        in its own trip, as before). Once per session: nothing after the first request."""
        if self._readied:
            return
        self._readied = True
        store = self._store
        if not isinstance(store, DirStore) or self._closed or self._store_error is not None:
            return
        assert self._id is not None
        guard = self._guard_of(store)
        guard.when_idle(_ready(store, self._id, self._lease))
        guard.when_idle(store.idle)  # then the spare files of its results directory

    def _hold(self) -> None:
        """Hold this session's directory in the store, or renew the hold when it is due.

        A request never waits for the first hold unless it has a key to check
        or an entry to write: making the directory and the holder (a few files,
        several times the round trip of a small request's JSON) is left to the
        store's worker once the first request has returned (:meth:`_ready_ahead`),
        and a request that needs the hold before that work is done makes it in
        the same trip as its writes. An archive left holding nothing is removed
        when its last holder ends (:meth:`DirStore.release`).
        """
        assert self._id is not None
        store = self._store
        if not isinstance(store, DirStore) or self._closed:
            return
        holder = self._lease.holder
        if holder is not None and not store.renew_due(self._id):
            return  # most requests: nothing to write, and no call worth guarding
        # Within the request's time, like every store call: the directory may be on a mount that hangs.
        with contextlib.suppress(StoreError):
            if holder is None:
                # Marks the archive in use, so no sweep or clean removes it under this session.
                self._store_call(_take_hold, store, self._id, self._lease)
            else:
                self._store_call(store.renew, self._id, holder)

    def _first_hold(self, store: Store) -> bool:
        """Whether the session has yet to hold its directory in ``store``."""
        return (
            isinstance(store, DirStore) and self._holder is None and not self._closed and self._id is not None
        )

    @contextlib.contextmanager
    def _request_time(self) -> Iterator[None]:
        """One bound on the store for everything one call of the public API does."""
        if self._deadline is not None:
            yield
            return
        self._deadline = Deadline(self.policy.store_timeout)
        try:
            yield
        finally:
            self._deadline = None
            self._idle_now()

    # --- the pipeline ----------------------------------------------------------------

    def manage(self, body: Any, api: str | None = None, *, now: float | None = None) -> Managed:
        """Repair and budget a request body; returns a new body (in the same form) and a report.

        ``now`` is when the request arrives (seconds): after a gap longer than
        the provider's cache lives, the compaction schedule compacts
        everything eligible, since the cache is cold anyway. The arrival and
        that decision are written to the store with the archive
        (:mod:`toolbudget.coldrecord`), so a session made again on the same
        store gives the same bytes; give wall-clock time (``time.time()``, as
        the wrappers and the proxy do) when other processes or machines share
        the store. Without ``now`` the schedule is a function of the history
        alone, and the record is neither read nor written.

        A body whose history begins with the last one's (an agent's next
        request) is worked on its new messages alone, with the same bytes as
        the whole pipeline gives (see :mod:`toolbudget.incremental`). A body
        returned as JSON objects shares the unchanged ones with the bodies
        given and returned before it: nothing here changes them afterwards,
        and a caller that edits a returned body copies it first.
        """
        with self._lock:
            # One bound on the store for the whole call (see :meth:`_request_time`), set inline:
            # a generator context manager costs a few percent of a small request.
            local = self._local
            outer = getattr(local, "deadline", None) is not None
            if not outer:
                local.deadline = Deadline(self.policy.store_timeout)
            try:
                if self._later is not None:
                    self.write_now()
                if now is None:
                    managed = self._manage(body, api)
                else:
                    with self._arriving(now):
                        managed = self._manage(body, api)
                self._ready_ahead()
                self._keep_decision()
                return managed
            finally:
                if not outer:
                    local.deadline = None
                    self._idle_now()

    @contextlib.contextmanager
    def _arriving(self, now: float | None) -> Iterator[None]:
        """Tell the schedule when this request arrived; its record is written with its cuts."""
        if now is None:
            yield
            return
        if isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
            raise InputError(f"now= is a time in seconds, not {now!r}")
        self._schedule.arrive(float(now))
        self._arrival = float(now)
        try:
            yield
        finally:
            self._arrival = None
            self._schedule.done()

    def _key_for(self, text: str) -> str:
        return self.archive.key_for(text)

    def _read_many(self, keys: list[str]) -> dict[str, bytes]:
        """The entries among ``keys`` the store holds, in one round trip within the request's time:
        on this thread when the store's reads cannot hang (:meth:`Store.reads_inline`)."""
        store = self.store
        found: dict[str, bytes]
        if store.reads_inline(self.id):
            if isinstance(store, MemoryStore):
                return store.peek_many(self.id, keys)
            deadline = self._deadline or Deadline(self.policy.store_timeout)
            found = self._guard_of(store).call_here(deadline, store.peek_many, self.id, keys)
        else:
            found = self._store_call(store.get_many, self.id, keys)
        return found

    def _first_arrival(self, request: Request) -> bool:
        """Whether this timed request is the first arrival at its point, though its history was
        managed before untimed (a token count): the schedule must decide it, told the time."""
        if self._arrival is None or self.policy.compaction in ("off", "eager"):
            return False
        return self._schedule.arrived_at != len(request.messages)

    def _record_for(self, messages: int) -> dict[str, bytes] | None:
        """What a timed request writes of the schedule's record (its point holds ``messages``)."""
        if self._arrival is None or self.policy.compaction in ("off", "eager"):
            return None
        assert self._schedule.record is not None
        return self._schedule.record.entries(messages, self._arrival, self._schedule.cold_points)

    def _manage(self, body: Any, api: str | None) -> Managed:
        primed = self._primed.pop(id(body), None)
        if (
            primed is not None
            and primed.body is body
            and (api is None or primed.api == wire.resolve_api(api))
        ):
            # Parsed already, to find this session (:meth:`Sessions.for_request`): not parsed again.
            managed, request = self._extend(body, primed.parsed, primed.api)
            if managed is not None:
                return managed
            if request is None:
                request = primed.request or wire.parse(primed.parsed, primed.api, self._cache(primed.api))
            return self._manage_request(body, primed.parsed, request)
        parsed, name = self._read(body, api)
        managed, request = self._extend(body, parsed, name)
        if managed is not None:
            return managed
        if request is None:
            request = wire.parse(parsed, name, self._cache(name))
        return self._manage_request(body, parsed, request)

    @staticmethod
    def _read(body: Any, api: str | None) -> tuple[dict[str, Any], str]:
        """The body as JSON objects, and its API."""
        parsed = to_body(body)
        return parsed, wire.resolve_api(api) if api else wire.detect_api(parsed)

    def _cache(self, api: str) -> wire.EntryCache:
        cache = self._caches.get(api)
        if cache is None:
            cache = self._caches[api] = wire.EntryCache(measure=message_chars)
        return cache

    def _prime(self, body: Any, parsed: dict[str, Any], api: str, request: Request | None) -> None:
        """Remember ``body`` read (and parsed, if it was), for the ``manage`` of the very same body
        that comes next."""
        with self._lock:
            while len(self._primed) >= _PRIMED_LIMIT:
                del self._primed[next(iter(self._primed))]  # never managed: forgotten, oldest first
            self._primed[id(body)] = _Primed(body, parsed, api, request)

    def manage_request(self, request: Request, *, now: float | None = None) -> tuple[Request, Report]:
        """The same pipeline on a parsed request (``now`` as for :meth:`manage`)."""
        with self._lock, self._request_time(), self._arriving(now):
            self.write_now()
            self._bind(request)
            self._prefix = None  # what a body's next request resumes from is a body's
            managed = self._pipeline(request)
            self._ready_ahead()
            self._keep_decision()
            return managed

    def cut_result(
        self,
        tool: str | None,
        text: str,
        *,
        call_id: str | None = None,
        is_error: bool = False,
        recall_tool: str | None = None,
    ) -> str:
        """What the model should see for one fresh tool result: its text, or its preview and marker.

        For shells that cut a result where it is made (a tool-call hook, an
        MCP server) instead of in the request: the same cut, the same key and
        the same bytes as :meth:`manage` puts in the result's place in the
        request where it is fresh (its turn the newest), and the original is
        in the store, checked, before this returns. So a history of results
        cut here is managed later as if they had arrived whole: ``manage``
        reads each cut back to its original and makes the same cut again.

        It applies the tool's own cap, or the per-result cap (an error gets at
        least the error cap); a recall answer is never cut. What one result
        alone cannot know: the turn budget, which depends on the other results
        of its turn (``manage`` may shrink a result further when its turn is
        over the budget, never less), and the compaction of old results,
        which ``manage`` applies as the result ages.

        ``recall_tool`` is the name of the recall tool the requests define
        (:data:`~toolbudget.RECALL_TOOL`, or the MCP server's, as the agent
        sees it): the marker then tells the model to call it, as ``manage``
        does for a request that defines it. ``None`` gives the marker of a
        request without it: the archived file's path (directory store) and
        the key. The session needs an id (given, or from an earlier
        ``manage``); bad arguments raise :class:`InputError`.
        """
        if not isinstance(text, str):
            raise InputError(f"a tool result's text must be a str, not {type(text).__name__}")
        if tool is not None and not isinstance(tool, str):
            raise InputError(f"a tool name must be a str, not {type(tool).__name__}")
        if recall_tool is not None and not (isinstance(recall_tool, str) and is_recall_tool(recall_tool)):
            raise InputError(f"{recall_tool!r} is not a name of the recall tool")
        with self._lock, self._request_time():
            if self._id is None:
                raise InputError("cut_result needs the session's id: give one, or manage a request first")
            self.write_now()
            self._hold()
            self._keys_this_call = []
            archive = self.archive
            try:
                archive.collect()
                fresh = cut_fresh(
                    text, tool, self.policy, archive, is_error=is_error, call_id=call_id, route=recall_tool
                )
                lost = archive.flush()
                if lost:
                    # Cut again, with the keys the store could not keep marked as lost.
                    archive.collect()
                    archive.lost = lost
                    fresh = cut_fresh(
                        text,
                        tool,
                        self.policy,
                        archive,
                        is_error=is_error,
                        call_id=call_id,
                        route=recall_tool,
                    )
            finally:
                archive.pending = None
                archive.lost = frozenset()
            return fresh.text

    def _manage_request(self, body: Any, parsed: dict[str, Any], request: Request) -> Managed:
        last = self._last
        out: dict[str, Any] | None
        self._bind(request)  # a retry, too, is a sign of life that renews the holder
        if (
            last is not None
            and last.policy is self.policy
            and _same_request(last.request, request)
            and last.report.store_fallbacks == 0  # a cut the store failed is tried again
            and self._still_held(last.report)
            and not self._first_arrival(request)
        ):
            # The same history again (a retry, or the same body twice): the same answer, and
            # the same callbacks, as for a history that grew.
            report = last.repeat_report
            out = last.out
            fixed = last.managed
            trace = last.trace
            self._notify(report)
        else:
            fixed, report, budgeted, valid, noted, sizes, trace = self._run(request)
            self._make_ahead(request, request.messages)
            out = None if fixed is request else in_order_of(parsed, wire.render(fixed))
            self._prefix = None
            if valid and budgeted is not None and budgeted.trail is not None and self.token_counter is None:
                self._prefix = self._prefix_of(parsed, request, fixed, out, report, budgeted, noted, sizes)
            self._hint = None
            out = self._answered(body, parsed, request, fixed, out, report, trace)
        self.last_report = report
        return self._managed(body, request, fixed, out, report, trace)

    def _answered(
        self,
        body: Any,
        parsed: dict[str, Any],
        request: Request,
        fixed: Request,
        out: dict[str, Any] | None,
        report: Report,
        trace: _Trace | None,
    ) -> dict[str, Any] | None:
        """The managed body's JSON objects, remembered as the last answer."""
        if out is not None and isinstance(body, (bytes, bytearray, memoryview, str)):
            out = keep_literals(out, parsed, body)
        # Most requests write nothing new: their report is their repeat's, no copy made.
        repeat = replace(report, keys_written=()) if report.keys_written else report
        self._last = _Last(request, self.policy, out, report, repeat, fixed, trace)
        return out

    @staticmethod
    def _managed(
        body: Any,
        request: Request,
        fixed: Request,
        out: dict[str, Any] | None,
        report: Report,
        trace: _Trace | None,
    ) -> Managed:
        if out is None:
            return Managed(body, report, request, request)
        if isinstance(body, (bytes, bytearray, memoryview)):
            return Managed(dumps(out), report, request, fixed, trace)
        if isinstance(body, str):
            return Managed(dumps(out).decode(), report, request, fixed, trace)
        return Managed(out, report, request, fixed, trace)

    def _prefix_of(
        self,
        parsed: dict[str, Any],
        request: Request,
        fixed: Request,
        out: dict[str, Any] | None,
        report: Report,
        budgeted: Budgeted,
        noted: dict[str, str],
        sizes: list[int],
    ) -> Prefix | None:
        """What the next request, if it only appends to this one, is budgeted from."""
        api = request.api or ""
        key = HISTORY.get(api)
        if key is None or budgeted.trail is None:
            return None
        entries = parsed.get(key)
        hint, self._hint = self._hint, None
        if hint is not None and hint[0] is request:
            text: bytes | None = hint[1]
        else:
            cache = self._caches.get(api)
            text = (cache.text_of(entries, request.messages) if cache is not None else None) or fingerprint(
                entries
            )
        head = head_of(parsed, key)
        if text is None or head is None or not isinstance(entries, list):
            return None
        if len(entries) != len(request.messages):
            return None
        return Prefix(
            api,
            self.policy,
            head,
            opening(text),
            len(entries),
            request,
            None if fixed is request else fixed,
            out,
            budgeted.trail,
            noted,
            report.chars_before,
            report.chars_after,
            call_ids(request.messages),
            tuple(sizes),
        )

    def _extend(self, body: Any, parsed: dict[str, Any], api: str) -> tuple[Managed | None, Request | None]:
        """The managed answer to a request that only appends to the last one, from the last one's
        decisions (see :mod:`toolbudget.incremental`).

        ``None`` when the whole pipeline must run, with the request parsed when its history
        begins with the last one's: the earlier messages as parsed then, the new ones now.
        """
        prefix = self._prefix
        if prefix is None or prefix.api != api or prefix.policy is not self.policy:
            return None, None
        found = entries_after(prefix, parsed)
        if found is None:
            return None, None
        entries, text, head = found
        if not entries:
            # The same history again (a retry): the last answer, if it still holds.
            return None, prefix.request
        try:
            new = parse_entries(api, entries)
        except ToolbudgetError:
            return None, None  # the whole parse says what is wrong, and where, in the body's numbering
        start = prefix.count
        if len(new) != len(entries):
            return None, None
        request = set_origin(prefix.request.with_messages((*prefix.request.messages, *new)), api, parsed)
        managed = None
        valid = appends_validly(request, start, prefix.calls)
        if self.token_counter is None and valid:
            managed = self._extended(body, parsed, request, prefix, text, head)
        if managed is None:
            # The whole pipeline runs on it, without measuring the earlier messages again, nor
            # checking again the pairing of a history known valid (a compaction event's).
            self._hint = (request, text, [*prefix.sizes, *(message_chars(m) for m in new)], valid)
        return managed, request

    def _extended(
        self, body: Any, parsed: dict[str, Any], request: Request, prefix: Prefix, text: bytes, head: bytes
    ) -> Managed | None:
        """:meth:`_extend` of a request known valid: its budget from the prefix's, if that holds."""
        api = prefix.api
        key = HISTORY[api]
        start = prefix.count
        new = request.messages[start:]
        self._bind(request)
        self._keys_this_call = []
        sizes = [message_chars(m) for m in new]
        archive = self.archive
        try:
            archive.collect()
            assert archive.pending is not None
            archive.pending.update(prefix.pending)
            budgeted = extend(
                request,
                start,
                prefix.trail,
                prefix.managed,
                self.policy,
                archive,
                schedule=self._schedule,
                sizes=sizes,
            )
            if budgeted is None:
                return None
            noted = dict(archive.pending)
            lost = archive.flush(self._record_for(len(request.messages)))
        finally:
            archive.pending = None
            archive.lost = frozenset()
        if lost:
            return None  # the whole pipeline cuts again, with the keys the store could not keep
        fixed = budgeted.request
        # An event since the last request cut some earlier messages again.
        was = (prefix.managed or prefix.request).messages
        redone = [i for i in budgeted.redone if fixed.messages[i] is not was[i]]
        chars_before = prefix.chars_before + sum(sizes)
        chars_after = chars_before
        if fixed is not request:
            chars_after = prefix.chars_after + sum(
                # A new message that went out as it came is the same object: its size is known.
                size if m is n else message_chars(m)
                for m, n, size in zip(fixed.messages[-len(new) :], new, sizes, strict=False)
            )
            for i in redone:
                chars_after += message_chars(fixed.messages[i]) - message_chars(was[i])
        report = self._report(request, fixed, (), budgeted, (chars_before, chars_after))
        self._notify(report)
        out: dict[str, Any] | None = None
        if fixed is not request:
            again = render_entries(api, tuple(fixed.messages[i] for i in redone)) if redone else []
            if prefix.out is None or len(again) != len(redone):
                out = in_order_of(parsed, wire.render(fixed))
            else:
                out = dict(prefix.out)
                sent = parsed[key][start:]
                earlier = prefix.out[key]
                if redone:
                    earlier = list(earlier)
                    for i, entry in zip(redone, again, strict=True):
                        earlier[i] = entry
                out[key] = [*earlier, *render_entries(api, fixed.messages[-len(new) :], sent)]
        self._prefix = None
        if budgeted.trail is not None:
            self._prefix = Prefix(
                api,
                self.policy,
                head,
                opening(text),
                len(parsed[key]),
                request,
                None if fixed is request else fixed,
                out,
                budgeted.trail,
                noted,
                chars_before,
                chars_after,
                prefix.calls | call_ids(new),
                (*prefix.sizes, *sizes),
            )
        trace = None if fixed is request else _traced(None, request, fixed, budgeted)
        out = self._answered(body, parsed, request, fixed, out, report, trace)
        self.last_report = report
        self._make_ahead(request, new)
        return self._managed(body, request, fixed, out, report, trace)

    def _keep_decision(self) -> None:
        """Have the schedule's decision at this request's point kept, when the point is one of
        those kept whatever the request wrote (:meth:`Schedule.checkpoint_due`) and no write of
        the request carried it: by the store's worker between requests, or at once in memory."""
        schedule = self._schedule
        store = self._store
        if not schedule.checkpoint_due() or store is None or self._closed or self._store_error is not None:
            return
        if self._later is not None:
            return  # the records left for later carry it (``write_later``)
        make = schedule.decided_record()
        if make is None:
            return
        if isinstance(store, MemoryStore):
            with contextlib.suppress(StoreError):
                store.put_many(self.id, dict(make()))
            return
        self._when_idle(store, _kept_decision(store, self.id, self._lease, make))

    def _make_ahead(self, request: Request, new: Sequence[Message]) -> None:
        """Have the store's worker make, once this request has returned, what a later compaction
        event will make of the results among ``new`` (see :mod:`toolbudget.ahead`)."""
        policy = self.policy
        store = self._store
        if policy.compaction == "off" or self._closed or self._store_error is not None:
            return
        if store is None or isinstance(store, MemoryStore):
            return  # a store without a worker: an event makes them, as before
        found = ahead.candidates(new, policy.microcompact_min_chars, scanned_plain(self.archive))
        if found:
            self._when_idle(store, ahead.step(self.archive, policy, request, found))

    def _still_held(self, report: Report) -> bool:
        """Whether the store still holds every key the last answer's markers name (one round trip)."""
        keys = sorted({cut.key for cut in report.cuts if cut.key is not None})
        if not keys:
            return True
        try:
            known = self.archive.sizes
            sizes = {key: known[key] for key in keys if key in known}
            return not self._missing(self.store, keys, sizes)
        except StoreError:
            return False  # cut again: what cannot be checked is not promised

    def _pipeline(self, request: Request) -> tuple[Request, Report]:
        fixed, report, _, _, _, _, _ = self._run(request)
        return fixed, report

    def _run(
        self, request: Request
    ) -> tuple[Request, Report, Budgeted | None, bool, dict[str, str], list[int], _Trace | None]:
        """The whole pipeline; also what it budgeted, whether the request came valid, the keys
        (with their texts) its markers name and each message's size, for :meth:`_prefix_of`, and
        what :attr:`Managed.origins` is worked out from."""
        self._keys_this_call = []
        hint = self._hint
        repaired: Request
        repairs: tuple[Repair, ...]
        origins: tuple[int | None, ...] | None
        if hint is not None and hint[0] is request and hint[3]:
            repaired, repairs, valid, origins = request, (), True, None  # what the check would say
        else:
            repaired, repairs, valid, origins = repair_traced(request)
        if hint is not None and hint[0] is request and repaired is request:
            sizes = hint[2]
        else:
            known = self._sizes(request.api)
            sizes = [
                (known.get(id(m)) if known is not None else None) or message_chars(m)
                for m in repaired.messages
            ]
        archive = self.archive
        try:
            archive.collect()
            budgeted = enforce(repaired, self.policy, archive, schedule=self._schedule, sizes=sizes)
            noted = dict(archive.pending or {})
            lost = archive.flush(self._record_for(len(repaired.messages)))
            if lost:
                # Cut again, with the keys the store could not keep marked as lost.
                archive.collect()
                archive.lost = lost
                budgeted = enforce(repaired, self.policy, archive, schedule=self._schedule, sizes=sizes)
                valid = False  # nothing to resume from: its keys were never checked
        finally:
            archive.pending = None
            archive.lost = frozenset()
        result = budgeted.request
        chars = _chars_known(request, result, sizes) if repaired is request else None
        report = self._report(request, result, repairs, budgeted, chars)
        self._notify(report)
        trace = None if result is request else _traced(origins, repaired, result, budgeted)
        return result, report, budgeted, valid, noted, sizes, trace

    def _notify(self, report: Report) -> None:
        for cut in report.cuts:
            if self.on_cut is not None:
                self.on_cut(cut)
        for turn in report.budget_unreachable:
            if self.on_budget_unreachable is not None:
                self.on_budget_unreachable(turn)

    def _report(
        self,
        before: Request,
        after: Request,
        repairs: tuple[Repair, ...],
        budgeted: Budgeted,
        chars: tuple[int, int] | None = None,
    ) -> Report:
        if chars is not None:
            chars_before, chars_after = chars  # counted message by message as the history grew
        else:
            sizes = self._sizes(before.api)
            chars_before = request_chars(before, sizes)
            chars_after = chars_before if after is before else request_chars(after, sizes)
        if self.token_counter is None:
            tokens_before, tokens_after = tokens_of(chars_before), tokens_of(chars_after)
        else:
            counter = self.token_counter
            tokens_before = sum(counter(t) for t in request_texts(before))
            tokens_after = tokens_before if after is before else sum(counter(t) for t in request_texts(after))
        window = self._window(before.model)
        return Report(
            before.api or "",
            self.id,
            budgeted.results_seen,
            len(budgeted.cuts),
            chars_before,
            chars_after,
            tokens_before,
            tokens_after,
            repairs,
            budgeted.cuts,
            budgeted.store_fallbacks,
            tuple(k for k in self._keys_this_call if k not in budgeted.form_keys),
            budgeted.unreachable,
            budgeted.event,
            window,
            tokens_after > window,
        )

    def _window(self, model: str | None) -> int:
        """The context window for ``model`` under the session's policy, looked up once per pair."""
        known = self._windows
        if known is not None and known[0] is self.policy and known[1] == model:
            return known[2]
        window = context_window(self.policy, model)
        self._windows = (self.policy, model, window)
        return window

    def _sizes(self, api: str | None) -> dict[int, int] | None:
        cache = self._caches.get(api or "")
        return cache.sizes if cache is not None else None

    # --- recall ----------------------------------------------------------------------

    def original(self, key: str) -> str:
        """The exact original text archived under ``key``."""
        if not valid_key(key):
            raise NotFoundError(f"not found: {key[:80]!r} is not a toolbudget key")
        data: bytes | None = self._store_call(self.store.get, self.id, key)
        text = self.archive.verified(key, data)
        if text is None:
            raise NotFoundError(f"not found: no archived output has key {key} in session {self.id}")
        return text

    def recall(
        self,
        key: str,
        *,
        lines: tuple[int, int | None] | None = None,
        grep: str | None = None,
        chars: tuple[int, int | None] | None = None,
        max_chars: int | None = None,
    ) -> str:
        """One page of the original under ``key``: by lines, by a regex, or by characters.

        ``lines`` is ``(A, B)``, 1-based and inclusive with ``1 <= A <= B``;
        ``chars`` is ``(A, B)``, 0-based with ``B`` excluded and ``0 <= A < B``;
        ``B`` is ``None`` for "to the end". ``grep`` is an RE2 regular expression.
        Raises :class:`InputError` for any other range, a pattern RE2 cannot run,
        or a page smaller than :data:`MIN_PAGE_CHARS`, which could not hold its
        header and the pointer to the next page.
        """
        from .recall import MIN_PAGE_CHARS, RecallQuery

        if max_chars is not None and (
            not isinstance(max_chars, int) or isinstance(max_chars, bool) or max_chars < MIN_PAGE_CHARS
        ):
            raise InputError(
                f"a recall page must allow at least {MIN_PAGE_CHARS} characters, not {max_chars!r}"
            )
        query = RecallQuery(key, lines, grep, chars)
        text = self.original(key)
        return recall_page(text, query, max_chars or self.policy.recall_max_chars)

    def handle_recall(self, arguments: Mapping[str, Any] | str) -> str:
        """Answer a call of the recall tool (its arguments as an object or JSON text).

        Always returns text for the model, never longer than a page: a page, or
        a one-line reason it got none. The arguments are the model's, so
        anything outside the grammar of :mod:`toolbudget.recall` is answered
        with what is wrong, never with an exception or a wrong page.
        """
        return answer_recall(arguments, self.original, self.policy.recall_max_chars)

    # --- lifetime --------------------------------------------------------------------

    def close(self) -> None:
        """Let go of the archive (it stays until its TTL) and release the store; never raises."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            self.write_now()
            self._release()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
