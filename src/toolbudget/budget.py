"""Per-tool, per-result and per-turn caps on tool results.

The transform is pure apart from the archive: every decision depends only on
the result's own text, its tool, its turn and the policy. So a result's
preview, once decided, is the same bytes in every later request, and running
the transform on its own output changes nothing.

The order of the work:

1. each result over its cap (the tool's own cap, or the per-result cap;
   errors get at least the error cap) becomes a preview;
2. then, per assistant turn, while the turn's results are over the turn
   budget, the largest one that can still shrink is previewed smaller;
3. a turn that cannot fit even with minimal previews still goes out, and is
   reported as unreachable: nothing is silently dropped.

The original of every cut goes to the archive first, so each cut can be
recalled byte for byte. If the archive fails, the result is still cut, but the
marker says plainly that the rest is lost, and the failure is reported.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field, replace

import orjson

from ._fastinit import fast_init
from .compaction import (
    LEVEL_FOLDED,
    LEVEL_PREVIEW,
    LEVEL_SUMMARY,
    Schedule,
    SlotInfo,
    key_argument,
    turn_starts,
)
from .compaction import summarize as summarize_result
from .errors import StoreError, ToolbudgetError
from .inplace import with_text
from .jsonio import dumps
from .marker import find_markers, is_recall_tool, marker_line
from .measure import MARKER_ROOM, message_chars
from .model import Data, Message, Part, Request, Text, Thinking, ToolCall, ToolResult
from .policy import Policy
from .previews import Preview, make_preview
from .readback import MADE_PREFIX, made_at, policy_digest, preview_inputs, summary_inputs
from .readback import read as read_record
from .readback import record as made_record
from .tools import EXEC_TOOLS
from .wire import dumps_text

__all__ = [
    "MIN_PREVIEW_CHARS",
    "Archive",
    "Budgeted",
    "Cut",
    "Fresh",
    "Trail",
    "Unreachable",
    "cut_fresh",
    "cut_record",
    "enforce",
    "extend",
    "message_chars",
    "recall_route",
    "scanned_plain",
]

MIN_PREVIEW_CHARS = 600
"""The smallest preview the turn budget shrinks a result to: the marker and a little text."""


PreviewKey = tuple[str, int, bool, bool, bool, "str | None"]
"""A preview's memo key: the original's key, the limit, whether the result is an error, whether
stderr has a cap of its own (a cut at the result's cap), whether it is compaction's, the route."""

SummaryKey = tuple[str, "str | None", str, bool, "str | None"]
"""A summary's memo key: the original's key, the tool, the call's key argument, whether the result
is an error, the route."""


class Archive:
    """Where originals go: the session's store, namespaced and keyed.

    ``keep`` returns ``(key, path)``; ``path`` is set for file-backed stores.
    It raises :class:`StoreError` when the store fails.
    """

    def key_for(self, text: str) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    def keep(self, text: str) -> tuple[str, str | None]:  # pragma: no cover - interface
        raise NotImplementedError

    def original(self, key: str) -> str | None:  # pragma: no cover - interface
        """The archived text of ``key``, or ``None``; never raises."""
        raise NotImplementedError

    def absent(self, key: str) -> bool:
        """Whether the store answers that it does not hold ``key`` (one that fails is not asked
        to vouch for an absence); never raises."""
        return False

    def still(self, key: str, text: str) -> None:
        """``text``, kept earlier under ``key``, is named again by this request.

        :class:`StoreError` when it can no longer be counted on; an archive that
        checks its keys before each request notes it here.
        """

    def record(self, key: str, text: str) -> None:
        """Keep ``text``, a record about an original (see :func:`cut_record`), under ``key``.

        Kept with the originals of the same request, in their round trip, and
        named again whenever they are, so it lives and expires with its
        original. Never raises: a record lost costs ``stats`` a tool name, never a cut.
        """

    def key_of(self, text: str) -> str:
        """``key_for`` of an original that may be kept in this request: an archive may keep it
        for :meth:`keep`, which then need not hash the text again."""
        return self.key_for(text)

    def path_of(self, key: str) -> str | None:
        """The file a file-backed store keeps ``key`` in (whether or not it is there yet), else ``None``."""
        return None

    def made(self, key: str, text: str) -> None:
        """Keep ``text`` under ``key`` with this request's writes: a record a later session may
        read back (see :mod:`toolbudget.readback`), never checked again once kept."""

    def read_made(self, keys: list[str]) -> dict[str, str]:
        """The records of ``keys`` the store holds, in one round trip; ``{}`` when it fails."""
        return {}

    cold: bool = False
    """Nothing was budgeted through this archive yet: its first request reads back what it can."""

    memo: dict[PreviewKey, Preview]
    """Previews already made, by key, limit and how they were made: a warm session reuses them."""

    forms: set[str]
    """Every cut text this archive's session has sent. Only these are read back as cuts: a
    result that merely quotes a marker (a file the agent pasted one into) is its own text."""

    form_keys: dict[str, str]
    """The key of each cut text's "sent as a cut" record, by text."""


@dataclass(slots=True)
class _Known:
    """What an archive's session has already worked out, so a resent history is not worked again.

    Everything here is a function of its key (an original's text, and for
    summaries its tool and key argument), so reusing it gives the same bytes
    as working it out again.
    """

    stored: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """The key and path each original was archived under."""
    summaries: dict[SummaryKey, str] = field(default_factory=dict)
    """One-line summaries, by original's key, tool, key argument and whether errors stay."""
    folds: dict[tuple[int, int, int], tuple[Message, Message, str, str | None, int]] = field(
        default_factory=dict
    )
    """Fold markers, by turns folded and the first and last folded messages (kept, so their ids hold)."""
    rebuilt: dict[int, tuple[Message, tuple[tuple[int, str], ...], Message]] = field(default_factory=dict)
    """Messages rebuilt with cut texts, by the message they were built from (kept, so ids hold)."""
    plain: set[str] = field(default_factory=set)
    """Result texts without a marker: their own text, whatever this session sends later."""
    quoted: set[str] = field(default_factory=set)
    """Texts with a marker that were never sent as cuts (until this session sends one as a cut)."""
    unrecorded: dict[tuple[object, ...], tuple[str, Preview]] = field(default_factory=dict)
    """Previews and summaries made ahead (:func:`make_ahead`), by memo key, with the inputs their
    record is kept under: the request that first sends one keeps its record."""


_KNOWN: weakref.WeakKeyDictionary[Archive, _Known] = weakref.WeakKeyDictionary()


def _known(archive: Archive) -> _Known:
    # Kept on the archive itself where it can be (a weak mapping's lookup costs a request of an
    # agent's next turn about a microsecond), else beside it.
    found: _Known | None = getattr(archive, "_budget_known", None)
    if found is not None:
        return found
    found = _KNOWN.get(archive)
    if found is None:
        found = _Known()
        try:
            archive._budget_known = found  # type: ignore[attr-defined]
        except AttributeError:
            _KNOWN[archive] = found
    return found


@fast_init
@dataclass(frozen=True, slots=True)
class Cut:
    """One result the budget cut."""

    index: int
    """Message index in the managed request."""
    call_id: str | None
    tool: str | None
    kind: str
    before: int
    after: int
    key: str | None
    """The recall key; ``None`` when the store failed and the rest is lost."""
    reason: str
    """``result_cap`` or ``turn_budget``."""


def _moved(cut: Cut, shift: int) -> Cut:
    """``cut`` at its index less ``shift`` (turns folded away before it). Built as any cut is:
    ``dataclasses.replace`` asks the class for its fields each time, about four times the cost,
    and a fold moves every cut after it (hundreds in a long session's cold request)."""
    return Cut(cut.index - shift, cut.call_id, cut.tool, cut.kind, cut.before, cut.after, cut.key, cut.reason)


@fast_init
@dataclass(frozen=True, slots=True)
class Unreachable:
    """A turn whose results exceed the turn budget even at minimal previews."""

    turn: int
    chars: int
    budget: int
    results: int


@fast_init
@dataclass(frozen=True, slots=True)
class Budgeted:
    request: Request
    cuts: tuple[Cut, ...]
    unreachable: tuple[Unreachable, ...]
    store_fallbacks: int
    results_seen: int
    event: bool = False
    """A compaction event fired at this request (the compacted form changed)."""
    form_keys: frozenset[str] = frozenset()
    """Keys of the session's own records (which texts were sent as cuts, what each cut was of):
    not originals of cuts."""
    trail: Trail | None = None
    """What the next request, when it only appends to this one, may resume from (see :func:`extend`)."""
    redone: tuple[int, ...] = ()
    """The earlier messages :func:`extend` cut again (an event since the request it resumed from),
    by their index in the managed request."""


@fast_init
@dataclass(frozen=True, slots=True)
class Trail:
    """What :func:`enforce` decided for a request, kept so that a request which only appends
    messages to it is budgeted from here, at the cost of its new messages alone.

    Every field is what the whole transform would compute again for the
    unchanged messages: their slots as the schedule sees them, the levels it
    gave them, the cuts and unreachable turns, where the turns stand. It is
    only made for a request where that holds of any extension (no unfolded
    history, no protected recall answer, no call without an id, nothing the
    store failed to keep).
    """

    infos: tuple[SlotInfo, ...]
    sizes: tuple[int, ...]
    """Each message's characters as the schedule placed it (results after their caps)."""
    levels: tuple[int, ...]
    folded: int
    shift: int
    """Messages the fold took out: a managed index is the request's index less this."""
    turn: int
    turn_no: int
    assistant_last: bool
    cuts: tuple[Cut, ...]
    unreachable: tuple[Unreachable, ...]
    seen: int
    form_keys: frozenset[str]
    compacted: bool
    """Whether the schedule was asked at all (compaction on, and there were results)."""


@dataclass(slots=True)
class _Slot:
    """A tool result being budgeted."""

    msg: int
    part: int
    result: ToolResult
    original: str
    tool: str | None
    turn: int
    exempt: bool
    current: str
    turn_no: int = 0
    call: ToolCall | None = None
    protected: bool = False
    folded: bool = False
    """Its whole turn is folded away."""
    cut: Cut | None = None
    text: str = ""
    """Its text as the request holds it."""


def result_text(result: ToolResult) -> str | None:
    """The text of a result that a budget can cut, or ``None`` when it has none."""
    content = result.content
    if len(content) == 1:
        only = content[0]
        if isinstance(only, Text):
            return only.text
        if isinstance(only, Data):
            return dumps_text(only.value)
        return None
    texts = [
        p.text if isinstance(p, Text) else dumps_text(p.value) for p in content if isinstance(p, (Text, Data))
    ]
    return "\n".join(texts) if texts else None


def _with_text(result: ToolResult, text: str) -> ToolResult:
    """The result with its text replaced where its text was.

    Text blocks in a row become one block in their place, with the first
    block's own fields and the breakpoint (``cache_control``) of the last one
    that had one; where images or other blocks sit between text blocks, the
    cut is split back so every piece stays on its side of them. See
    :mod:`toolbudget.inplace`.
    """
    return with_text(result, text)


def _slots(request: Request, policy: Policy, archive: Archive | None) -> tuple[list[_Slot], int, bool]:
    """Every tool result with its tool name, the turn it answers, and whether it is exempt.

    A result that is already one of our previews is budgeted from its archived
    original, so managing a managed history changes nothing, and a tighter
    policy re-cuts from the original instead of cutting a cut.

    Also returns how many results there are. A result with no text (an empty
    one, or only an image) gets no slot, having nothing to cut, but it is still
    a result: some wire forms read an empty result as no content at all and
    others as one empty text, and the count must not depend on which. And
    whether a call or a result has no id (see :func:`_resumable`), found on
    the same walk.
    """
    calls: dict[str, tuple[ToolCall, int, int]] = {}
    # Calls without ids (Gemini), by name: their responses answer them in order.
    unnamed: dict[str, list[tuple[ToolCall, int, int]]] = {}
    slots: list[_Slot] = []
    seen = 0
    anonymous = False
    known = _known(archive) if archive is not None else None
    turn = -1
    turn_no = -1
    prev_assistant = False
    for i, message in enumerate(request.messages):
        assistant = message.role == "assistant"
        if assistant and not prev_assistant:
            turn = i
            turn_no += 1
        prev_assistant = assistant
        for k, part in enumerate(message.parts):
            if isinstance(part, ToolCall):
                if part.id is not None:
                    calls[part.id] = (part, turn, turn_no)
                else:
                    anonymous = True
                    unnamed.setdefault(part.name, []).append((part, turn, turn_no))
            elif isinstance(part, ToolResult):
                seen += 1
                anonymous = anonymous or part.call_id is None
                waiting = unnamed.get(part.name or "") if part.call_id is None else None
                found = calls.get(part.call_id) if part.call_id is not None else None
                if waiting:
                    found = waiting.pop(0)
                text = result_text(part)
                if text is None:
                    continue
                call, owner, owner_no = found if found else (None, turn, turn_no)
                tool = call.name if call is not None else part.name
                original = _original_of(text, archive, known)
                # Work from the original: a managed body is managed as if it were the original.
                slots.append(
                    _Slot(
                        i,
                        k,
                        part,
                        original,
                        tool,
                        owner,
                        policy.exempt(tool),
                        original,
                        owner_no,
                        call,
                        text=text,
                    )
                )
    _protect_newest_recall(slots)
    return slots, seen, anonymous


def _protect_newest_recall(slots: list[_Slot]) -> None:
    """A recall answer in the newest turn is never cut, so recall and cut cannot loop."""
    if slots:
        newest = max(s.turn for s in slots)
        for slot in slots:
            slot.protected = slot.turn == newest and is_recall_tool(slot.tool)


def scanned_plain(archive: Archive) -> Container[str]:
    """Result texts this session has looked through and found no marker in (a shortcut: a text
    not among them may hold none either)."""
    return _known(archive).plain


def _original_of(text: str, archive: Archive | None, known: _Known | None = None) -> str:
    if archive is None:
        return text
    known = known if known is not None else _known(archive)
    plain = known.plain
    if text in plain:  # a resent text is the same object: its hash is kept, no scan
        return text
    if "[toolbudget: " not in text:
        if len(plain) >= _PLAIN_LIMIT:
            plain.clear()  # only a shortcut: forgetting costs one scan per text
        plain.add(text)
        return text
    if text not in archive.forms:
        # Sent as a cut by an earlier run of this session (a restart, another process)?
        quoted = known.quoted
        if text in quoted:
            return text
        if archive.original(archive.key_for(FORM_PREFIX + text)) != FORM_PREFIX + text:
            quoted.add(text)
            return text
        archive.forms.add(text)
    keyed = [m for m in find_markers(text) if m.key]
    if len(keyed) != 1:
        return text
    marker = keyed[0]
    original = archive.original(marker.key or "")
    if original is None and archive.absent(marker.key or ""):
        # This session sent it as a cut, and its original is gone since (a file deleted, a
        # flush): nothing in the request can keep it again, so the marker says so instead of
        # naming a key the store does not hold.
        lost = marker_line(marker.omitted, marker.total, key=None, detail=marker.detail)
        return text[: marker.start] + lost + text[marker.end :]
    return original if original is not None and len(original) > len(text) else text


def recall_route(request: Request) -> str | None:
    """The name of the recall tool ``request`` defines, if any: what markers may tell the model to call."""
    for tool in request.tools:
        if tool.kind == "function" and is_recall_tool(tool.name):
            return tool.name
    return None


_PLAIN_LIMIT = 100_000

CUT_PREFIX = "\x00toolbudget: cut of\x00"
"""What the record of a cut is archived under, prefixed: which original it is about, the tool
it came from, the original's characters and the kind of the cut (see :func:`cut_record`)."""


def cut_record(key: str, tool: str | None, chars: int, kind: str) -> str:
    """The record of one cut: what ``toolbudget mcp``'s ``stats`` tells per tool.

    It is about the original under ``key``, and it is kept under a key made
    of that key alone (:func:`record_key`), so it is the same entry whichever
    request, process or replica of the session cut the original first; the
    store never replaces an entry, so the first cut's tool and kind stand.
    ``tool`` is ``None`` when the cut is not of one tool's result (folded
    turns) or its tool is unknown. It starts with a NUL, as no recall of an
    original ever answers with it.
    """
    fields = {"chars": chars, "key": key, "kind": kind, "tool": tool}
    try:
        return CUT_PREFIX + orjson.dumps(fields).decode()
    except TypeError:  # a name with a lone surrogate, which orjson refuses and json escapes
        return CUT_PREFIX + json.dumps(fields, separators=(",", ":"))


def record_key(archive: Archive, key: str) -> str:
    """The key the record of the cut whose original is under ``key`` is kept under."""
    return archive.key_for(CUT_PREFIX + key)


FORM_PREFIX = "\x00toolbudget: sent as a cut\x00"
"""What a cut text is archived under, prefixed, to say it was sent as a cut: a session started
again reads it back as that cut, never a text that merely quotes a marker."""


class _Cutter:
    def __init__(
        self,
        policy: Policy,
        archive: Archive | None,
        on_store_error: Callable[[StoreError], None],
        route: str | None = None,
    ) -> None:
        self.policy = policy
        self.route = route
        self.archive = archive
        self.on_store_error = on_store_error
        self.fallbacks = 0
        self.kept: dict[str, tuple[str | None, str | None]] = {}
        self.known = _known(archive) if archive is not None else None
        self.form_keys: set[str] = set()
        self._policy_digest: str | None = None
        self.point = 0
        """The request point being budgeted (how many messages it holds), noted in each record."""
        self.read: dict[str, Preview | None] | None = None
        """The records of previews and summaries this request read back, by name (``None`` for
        one the store had not, or that did not check out); ``None`` unless its archive was cold."""
        self._arguments: dict[int, tuple[ToolCall, str]] = {}

    def key_argument(self, call: ToolCall | None) -> str:
        """:func:`~toolbudget.compaction.key_argument` of ``call``, worked out once a request (a
        cold request's reads and its summaries both name each summary by it). By ``id``, with
        the call kept beside it, so no other call can take its ``id`` meanwhile."""
        if call is None:
            return key_argument(None)
        found = self._arguments.get(id(call))
        if found is None or found[0] is not call:
            found = self._arguments[id(call)] = (call, key_argument(call))
        return found[1]

    @property
    def policy_digest(self) -> str:
        """What names the policy and the code in a record's inputs (``""``: keep no records)."""
        if self._policy_digest is None:
            self._policy_digest = policy_digest(self.policy)
        return self._policy_digest

    def preview_inputs(self, key: str, path: str | None, limit: int, is_error: bool, reason: str) -> str:
        """The inputs of the preview :meth:`preview` makes with these arguments (see :mod:`.readback`)."""
        stderr_limit = self.policy.error_max_chars if reason == "result_cap" else None
        compacting = reason == COMPACT_PREVIEW
        ratio = self.policy.microcompact_head_ratio if compacting else self.policy.head_ratio
        return preview_inputs(self.policy_digest, key, path, limit, ratio, is_error, stderr_limit, self.route)

    def summary_inputs(
        self, key: str, path: str | None, tool: str | None, call: ToolCall | None, is_error: bool
    ) -> str:
        """The inputs of the summary :meth:`summarize` makes of a result of ``call``."""
        return summary_inputs(self.policy_digest, key, path, tool, call, is_error, self.route)

    def preview_key(self, key: str, limit: int, is_error: bool, reason: str) -> PreviewKey:
        """What :attr:`Archive.memo` holds the preview :meth:`preview` makes with these under."""
        return (key, limit, is_error, reason == "result_cap", reason == COMPACT_PREVIEW, self.route)

    def summary_key(self, key: str, tool: str | None, call: ToolCall | None, is_error: bool) -> SummaryKey:
        """What the session's summaries are held under: the one :meth:`summarize` makes of a
        result of ``call``."""
        return (key, tool, self.key_argument(call), is_error, self.route)

    def _keep_made(self, inputs: str, made: Preview) -> None:
        """Archive what was just made, keyed by its inputs, for a session started again to read back."""
        archive = self.archive
        if archive is None or not self.policy_digest:
            return
        name = self.name_of(inputs)
        text = made_record(name, made, archive.key_for, self.point)
        if text is not None:
            archive.made(name, text)

    def store(self, text: str) -> tuple[str | None, str | None]:
        """Archive ``text`` once per transform; ``(None, None)`` when the store failed."""
        known = self.kept.get(text)
        if known is not None:
            return known
        if self.archive is None or self.known is None:
            entry: tuple[str | None, str | None] = (None, None)
            self.fallbacks += 1
        elif text in self.known.stored:
            # Archived by an earlier request (a resent text is the same object: its hash is kept);
            # still named to the archive, which checks it is there before the request goes out.
            entry = self.known.stored[text]
            try:
                self.archive.still(entry[0] or "", text)
            except StoreError as exc:
                self.on_store_error(exc)
                self.fallbacks += 1
                entry = (None, None)
        else:
            try:
                entry = self.archive.keep(text)
                self.known.stored[text] = entry
            except StoreError as exc:
                self.on_store_error(exc)
                self.fallbacks += 1
                entry = (None, None)
        self.kept[text] = entry
        return entry

    def preview(self, slot: _Slot, limit: int, reason: str) -> None:
        """Preview the slot's original within ``limit``.

        A separate stderr section is kept up to the error cap when a result is
        first cut ("capped separately and more generously"); when the turn
        budget squeezes further, or compaction shrinks an old result, stderr
        shrinks with the rest.
        """
        original = slot.original
        key, path = self.store(original)
        memo = self.archive.memo if self.archive is not None and key is not None else None
        memo_key = self.preview_key(key or "", limit, slot.result.is_error, reason)
        made = memo.get(memo_key) if memo is not None else None
        inputs = None
        if made is None and memo is not None and reason == "turn_budget" and self.read is not None:
            # Its limit depends on the whole turn, so the first read could not name it; now
            # that the limit is known, a cold request reads it back, where making a preview of
            # a large result again cost half of such a request.
            inputs = self.preview_inputs(key or "", path, limit, slot.result.is_error, reason)
            name = self.name_of(inputs)
            made = self.read_back([name])[name]
            if made is not None:
                memo[memo_key] = made
        elif made is not None and self.known is not None and self.known.unrecorded:
            self._keep_ahead_made(memo_key)
        if made is None:
            made = self._made_preview(original, key, path, limit, slot.result.is_error, reason)
            if memo is not None:
                memo[memo_key] = made
                self._keep_made(
                    inputs or self.preview_inputs(key or "", path, limit, slot.result.is_error, reason), made
                )
        self._set(slot, made.text, made.kind, key, reason)

    def _made_preview(
        self, original: str, key: str | None, path: str | None, limit: int, is_error: bool, reason: str
    ) -> Preview:
        """The preview :meth:`preview` makes of ``original`` (archived under ``key`` at ``path``)."""

        def mark(omitted: int, detail: str) -> str:
            return marker_line(omitted, len(original), key=key, path=path, detail=detail, tool=self.route)

        compacting = reason == COMPACT_PREVIEW
        return make_preview(
            original,
            limit,
            marker=mark,
            head_ratio=self.policy.microcompact_head_ratio if compacting else self.policy.head_ratio,
            is_error=is_error,
            stderr_limit=self.policy.error_max_chars if reason == "result_cap" else None,
        )

    def _made_summary(
        self,
        tool: str | None,
        call: ToolCall | None,
        original: str,
        is_error: bool,
        key: str | None,
        path: str | None,
    ) -> tuple[str, Preview]:
        """The text :meth:`summarize` sends for ``original``, and what its record keeps."""
        summary = summarize_result(tool, call, original, is_error=is_error)
        kept = sum(len(line) + 1 for line in summary.errors)
        line = marker_line(
            max(0, len(original) - kept),
            len(original),
            key=key,
            path=path,
            detail=summary.detail,
            tool=self.route,
        )
        text = "\n".join([line, *summary.errors])
        return text, Preview(text, "summary", max(0, len(original) - kept), summary.detail)

    def _keep_ahead_made(self, memo_key: tuple[object, ...]) -> None:
        """The record of a preview or summary made ahead (:func:`make_ahead`), kept by the request
        that first sends it, as it would have been had that request made it."""
        assert self.known is not None
        found = self.known.unrecorded.pop(memo_key, None)
        if found is not None:
            self._keep_made(*found)

    def name_of(self, inputs: str) -> str:
        """The name of the record of what ``inputs`` make (see :mod:`toolbudget.readback`)."""
        assert self.archive is not None
        return self.archive.key_for(MADE_PREFIX + inputs)

    def read_back(self, names: Iterable[str]) -> dict[str, Preview | None]:
        """The records of ``names``, each read once a request: those not read yet in one read,
        into :attr:`read`. Only a request that reads back (a cold archive) reads."""
        archive, read = self.archive, self.read
        if archive is None or read is None:
            return {}
        names = list(names)
        new = sorted({name for name in names if name not in read})
        if new:
            found = archive.read_made(new)
            for name in new:
                data = found.get(name)
                read[name] = read_record(data, name, archive.key_for) if data is not None else None
        return {name: read[name] for name in names}

    def summarize(self, slot: _Slot) -> None:
        """The one-line form of an old result: what ran on what, how long, what kind, its exit status.

        Errors, and the logs and test runs of exec tools, keep their error
        lines under the marker (see :func:`~toolbudget.compaction.summarize`).
        """
        original = slot.original
        key, path = self.store(original)
        memo_key = self.summary_key(key or "", slot.tool, slot.call, slot.result.is_error)
        memo = self.known.summaries if self.known is not None and key is not None else None
        text = memo.get(memo_key) if memo is not None else None
        if text is None:
            text, made = self._made_summary(slot.tool, slot.call, original, slot.result.is_error, key, path)
            if memo is not None:
                memo[memo_key] = text
                self._keep_made(
                    self.summary_inputs(key or "", path, slot.tool, slot.call, slot.result.is_error), made
                )
        elif self.known is not None and self.known.unrecorded:
            self._keep_ahead_made(memo_key)
        if len(text) < len(slot.current):
            self._set(slot, text, "summary", key, COMPACT_SUMMARY)

    def _set(self, slot: _Slot, text: str, kind: str, key: str | None, reason: str) -> None:
        slot.current = text
        if key is not None and self.archive is not None:
            self._record(key, slot.tool, len(slot.original), kind)
            if text not in self.archive.forms:
                self.archive.forms.add(text)
                if self.known is not None:
                    self.known.quoted.discard(text)
                self._remember_form(text)
            else:
                self._renew_form(text)
        slot.cut = Cut(
            slot.msg, slot.result.call_id, slot.tool, kind, len(slot.original), len(text), key, reason
        )

    def _record(self, key: str, tool: str | None, chars: int, kind: str) -> None:
        """Note the cut's record beside its original, in the same batch (see :func:`cut_record`)."""
        assert self.archive is not None
        named = record_key(self.archive, key)
        if named in self.form_keys:
            return  # noted already in this request: its first cut stands
        self.archive.record(named, cut_record(key, tool, chars, kind))
        self.form_keys.add(named)  # a record, not an original: not among the keys written

    def _remember_form(self, text: str) -> None:
        """Archive that ``text`` was sent as a cut, so a restarted session reads it back as one."""
        assert self.archive is not None
        try:
            key, _ = self.archive.keep(FORM_PREFIX + text)
        except StoreError:
            return  # the cut still goes out; a restart then reads it as its own text
        self.archive.form_keys[text] = key
        self.form_keys.add(key)

    def _renew_form(self, text: str) -> None:
        """The record of a cut text sent before is named again, so a lost one is kept again."""
        assert self.archive is not None
        key = self.archive.form_keys.get(text)
        if key is None:
            key = self.archive.form_keys[text] = self.archive.key_for(FORM_PREFIX + text)
        try:
            self.archive.still(key, FORM_PREFIX + text)
        except StoreError:
            return
        self.form_keys.add(key)


def make_ahead(
    archive: Archive, policy: Policy, request: Request, results: Iterable[tuple[str, ToolResult, ToolCall]]
) -> None:
    """Make, between requests, what a compaction event will make of each of ``results`` (a
    result's whole text, the result and its call, in ``request``): its key, its head-and-tail
    preview and its one-line summary, into the memos the event's cutter looks in.

    Nearly every request that cuts is such an event, and making these was
    most of its time, though each result arrived turns before. What is made
    here is what the event would make (the same functions of the same
    inputs), so the bytes sent are the same whether it ran or not. Nothing is
    archived: the event keeps the original, and the record of what it sends,
    in its own batch, checked before the request goes out as always.
    """
    cutter = _Cutter(policy, archive, lambda exc: None, recall_route(request))
    known = cutter.known
    assert known is not None
    memo = archive.memo
    limit = policy.microcompact_head_chars + policy.microcompact_tail_chars + MARKER_ROOM
    for text, result, call in results:
        stored = known.stored.get(text)
        if stored is None:
            key = archive.key_for(text)
            path = archive.path_of(key)
            # Its key, worked out: the event names it to the archive, which checks the store holds it.
            known.stored[text] = (key, path)
        else:
            key, path = stored
        is_error = result.is_error
        if len(text) > limit:
            memo_key = cutter.preview_key(key, limit, is_error, COMPACT_PREVIEW)
            if memo_key not in memo:
                made = cutter._made_preview(text, key, path, limit, is_error, COMPACT_PREVIEW)
                inputs = cutter.preview_inputs(key, path, limit, is_error, COMPACT_PREVIEW)
                known.unrecorded[memo_key] = (inputs, made)
                memo[memo_key] = made
        summary_key = cutter.summary_key(key, call.name, call, is_error)
        if summary_key not in known.summaries:
            line, summary = cutter._made_summary(call.name, call, text, is_error, key, path)
            inputs = cutter.summary_inputs(key, path, call.name, call, is_error)
            known.unrecorded[summary_key] = (inputs, summary)
            known.summaries[summary_key] = line


COMPACT_PREVIEW = "compaction_preview"
COMPACT_SUMMARY = "compaction_summary"
FOLD_REASON = "compaction_fold"


def _keeps_errors(slot: _Slot) -> bool:
    """Whether the result's summary may keep error lines: an error, or an exec tool's output.

    A write tool's result is a confirmation or a view of the edited file; its
    lines that mention errors are the file's, not a failure.
    """
    return slot.result.is_error or slot.tool in EXEC_TOOLS


def enforce(
    request: Request,
    policy: Policy,
    archive: Archive | None,
    *,
    schedule: Schedule | None = None,
    sizes: Sequence[int] | None = None,
    on_store_error: Callable[[StoreError], None] = lambda exc: None,
) -> Budgeted:
    """Apply the caps, compaction and the turn budget to every tool result of ``request``.

    ``schedule`` decides the compaction levels (none without one); ``sizes``
    are the characters of each message, known from the caller's caches.
    """
    unfolded = _unfold(request, archive)
    if unfolded is not None:
        # A managed body with folded turns: budgeted as the history it was made from.
        request, sizes = unfolded, None
    slots, seen, anonymous = _slots(request, policy, archive)
    cutter = _Cutter(policy, archive, on_store_error, recall_route(request))
    cutter.point = len(request.messages)
    if archive is not None and archive.cold:
        archive.cold = False
        _read_back(slots, policy, cutter, schedule, request.messages)
    for slot in slots:
        _cap(slot, policy, cutter)
    event = False
    folded = 0
    scheduled = schedule is not None and policy.compaction != "off"
    placed: list[int] = []
    infos: list[SlotInfo] = []
    levels: list[int] = []
    if schedule is not None and scheduled and slots:
        event, infos, placed, levels = _compact(request, slots, policy, cutter, schedule, sizes)
        folded = schedule.folded
    elif scheduled:
        placed = list(sizes) if sizes is not None else [message_chars(m) for m in request.messages]
    unreachable = _turn_budgets(slots, policy, cutter)
    rebuilt = _rebuild(request, slots, cutter.known)
    cuts = [s.cut for s in slots if s.cut is not None and not s.folded]
    if folded:
        rebuilt, cuts = _fold(request, rebuilt, slots, folded, cuts, cutter)
    trail = None
    if unfolded is None and not cutter.fallbacks and _resumable(slots, anonymous):
        starts = turn_starts(request.messages)
        trail = Trail(
            tuple(infos),
            tuple(placed),
            tuple(levels),
            folded,
            len(request.messages) - len(rebuilt.messages),
            starts[-1] if starts else -1,
            len(starts) - 1,
            bool(request.messages) and request.messages[-1].role == "assistant",
            tuple(cuts),
            tuple(unreachable),
            seen,
            frozenset(cutter.form_keys),
            bool(infos),
        )
    return Budgeted(
        rebuilt,
        tuple(cuts),
        tuple(unreachable),
        cutter.fallbacks,
        seen,
        event,
        frozenset(cutter.form_keys),
        trail,
    )


def _resumable(slots: Sequence[_Slot], anonymous: bool) -> bool:
    """Whether an extension of the request of ``slots`` leaves every decision on it as it is
    (see :class:`Trail`).

    A recall answer of the newest turn is protected only while its turn is
    the newest; a call without an id (``anonymous``: one, or a result
    without one) is answered by name, in order, so a later result may answer
    an old one.
    """
    return not anonymous and not any(s.protected for s in slots)


def extend(
    request: Request,
    start: int,
    trail: Trail,
    managed: Request | None,
    policy: Policy,
    archive: Archive | None,
    *,
    schedule: Schedule | None,
    sizes: Sequence[int],
    on_store_error: Callable[[StoreError], None] = lambda exc: None,
) -> Budgeted | None:
    """:func:`enforce` of ``request``, whose first ``start`` messages are those of the request
    ``trail`` was made for and ``managed`` its managed form (``None`` when it went out as it
    came), working on the new messages alone.

    ``sizes`` are the characters of the new messages. A compaction event
    (at this request, or at one between the trail's and this one) cuts again
    only the turns whose results it moved to another level: the messages
    holding them are in :attr:`Budgeted.redone`. ``None`` when the new
    messages could change a decision on the earlier ones in a way that is
    not told from the history's end (a result that answers an earlier call,
    a fold that moves, a store that fails): then only the whole transform
    gives the right answer.
    """
    messages = request.messages
    known = _known(archive) if archive is not None else None
    calls: dict[str, tuple[ToolCall, int, int]] = {}
    slots: list[_Slot] = []
    seen = 0
    turn, turn_no, prev = trail.turn, trail.turn_no, trail.assistant_last
    for i in range(start, len(messages)):
        message = messages[i]
        assistant = message.role == "assistant"
        if assistant and not prev:
            turn = i
            turn_no += 1
        prev = assistant
        for k, part in enumerate(message.parts):
            if isinstance(part, ToolCall):
                if part.id is None:
                    return None
                calls[part.id] = (part, turn, turn_no)
            elif isinstance(part, ToolResult):
                seen += 1
                found = calls.get(part.call_id) if part.call_id is not None else None
                if found is None:
                    return None  # it answers an earlier call (or none): its turn is an old one
                text = result_text(part)
                if text is None:
                    continue
                call, owner, owner_no = found
                original = _original_of(text, archive, known)
                slots.append(
                    _Slot(
                        i,
                        k,
                        part,
                        original,
                        call.name,
                        owner,
                        policy.exempt(call.name),
                        original,
                        owner_no,
                        call,
                        text=text,
                    )
                )
    _protect_newest_recall(slots)
    cutter = _Cutter(policy, archive, on_store_error, recall_route(request))
    cutter.point = len(messages)
    for slot in slots:
        _cap(slot, policy, cutter)
    scheduled = schedule is not None and policy.compaction != "off"
    count = len(trail.levels) if trail.compacted else 0
    infos = trail.infos
    placed: list[int] = []
    levels: list[int] = []
    if scheduled:
        placed = [*trail.sizes, *sizes]
        if len(placed) != len(messages):
            return None
        for slot in slots:
            placed[slot.msg] += len(slot.current) - len(_text_now(slot))
    if schedule is not None and scheduled and (infos or slots):
        infos = (*infos, *_infos(slots, policy))
        levels = schedule.levels(request, infos, placed, policy)
        if schedule.folded != trail.folded or any(levels[count:]):
            return None
    old: list[_Slot] = []
    event = bool(levels) and schedule is not None and schedule.fired_now
    if event or levels[:count] != list(trail.levels):
        # An event: the results whose level changed are cut again, with the rest of their turns.
        recut = _changed_turns(request, start, trail, levels, turn_no, policy, archive, known)
        if recut is None:
            return None
        old, numbers = recut
        for slot in old:
            _cap(slot, policy, cutter)
        _apply_levels(old, [levels[k] for k in numbers], policy, cutter)
    unreachable = _turn_budgets(slots, policy, cutter)
    redone = _turn_budgets(old, policy, cutter)
    if cutter.fallbacks:
        return None
    rebuilt = _rebuild(request, slots, cutter.known)
    cuts = [s.cut for s in slots if s.cut is not None]
    if trail.shift:
        cuts = [_moved(c, trail.shift) for c in cuts]
    head = managed.messages if managed is not None else messages[:start]
    old_cuts: Sequence[Cut] = trail.cuts
    old_unreachable: Sequence[Unreachable] = trail.unreachable
    redone_at: set[int] = set()
    if old:
        again = _rebuild(request, old, cutter.known)
        # Where each message cut again is in the managed request (after the turns folded away).
        shift = trail.shift
        redone_at = {slot.msg - shift for slot in old}
        head = tuple(again.messages[i + shift] if i in redone_at else m for i, m in enumerate(head))
        # The cuts and unreachable turns in the order the whole transform lists them: the fold's
        # first, then by message (a message's results in order), and by turn.
        moved = [o.cut for o in old if o.cut is not None]
        if shift:
            moved = [_moved(c, shift) for c in moved]
        old_cuts = sorted(
            [*(c for c in trail.cuts if c.reason == FOLD_REASON or c.index not in redone_at), *moved],
            key=_cut_index,
        )
        turns_at = {slot.turn for slot in old}
        old_unreachable = sorted(
            [*(u for u in trail.unreachable if u.turn not in turns_at), *redone], key=_unreachable_turn
        )
    if managed is None and rebuilt is request and not old:
        result = request  # nothing changed, before or now
    else:
        result = (managed or request).with_messages((*head, *rebuilt.messages[start:]))
    seen += trail.seen
    form_keys = trail.form_keys | cutter.form_keys
    all_cuts = (*old_cuts, *cuts)
    all_unreachable = (*old_unreachable, *unreachable)
    after = None
    if not any(s.protected for s in slots):
        after = Trail(
            infos,
            tuple(placed),
            tuple(levels),
            trail.folded,
            trail.shift,
            turn,
            turn_no,
            prev,
            all_cuts,
            all_unreachable,
            seen,
            form_keys,
            bool(infos),
        )
    return Budgeted(
        result, all_cuts, all_unreachable, 0, seen, event, form_keys, after, tuple(sorted(redone_at))
    )


def _cut_index(cut: Cut) -> int:
    return cut.index


def _unreachable_turn(unreachable: Unreachable) -> int:
    return unreachable.turn


def _changed_turns(
    request: Request,
    start: int,
    trail: Trail,
    levels: Sequence[int],
    newest: int,
    policy: Policy,
    archive: Archive | None,
    known: _Known | None,
) -> tuple[list[_Slot], list[int]] | None:
    """The slots, as :func:`_slots` makes them, of every earlier result whose turn holds one whose
    level changed at this request, with each one's number among the results the trail knows;
    ``None`` when the whole transform must decide (a result of the newest turn, a message
    holding results of other turns, a call not found where it was)."""
    infos = trail.infos
    count = len(trail.levels)
    turns = {infos[k].turn_no for k in range(count) if levels[k] != trail.levels[k]}
    if newest in turns:
        return None  # the newest turn's recall answers are protected: the whole transform decides
    numbers = [k for k in range(count) if infos[k].turn_no in turns]
    by_message: dict[int, list[int]] = {}
    for k in numbers:
        by_message.setdefault(infos[k].msg, []).append(k)
    messages = request.messages
    out: list[_Slot] = []
    for i, ks in by_message.items():
        if i >= start:
            return None
        results = [
            (part_index, part, text)
            for part_index, part in enumerate(messages[i].parts)
            if isinstance(part, ToolResult) and (text := result_text(part)) is not None
        ]
        if len(results) != len(ks):
            return None  # results of other turns in the same message
        for (part_index, part, text), k in zip(results, ks, strict=True):
            owner = _call_of(messages, i, part.call_id)
            if owner is None:
                return None
            call, turn = owner
            original = _original_of(text, archive, known)
            slot = _Slot(
                i,
                part_index,
                part,
                original,
                call.name,
                turn,
                policy.exempt(call.name),
                original,
                infos[k].turn_no,
                call,
                text=text,
            )
            out.append(slot)
    return out, numbers


def _call_of(messages: Sequence[Message], at: int, call_id: str | None) -> tuple[ToolCall, int] | None:
    """The call ``call_id`` names, in the assistant messages before ``at``, and where its turn starts."""
    if call_id is None:
        return None
    i = at - 1
    while i >= 0 and messages[i].role != "assistant":
        i -= 1
    while i >= 0 and messages[i].role == "assistant":
        for part in messages[i].parts:
            if isinstance(part, ToolCall) and part.id == call_id:
                turn = i
                while turn > 0 and messages[turn - 1].role == "assistant":
                    turn -= 1
                return part, turn
        i -= 1
    return None


def _read_back(
    slots: Sequence[_Slot],
    policy: Policy,
    cutter: _Cutter,
    schedule: Schedule | None = None,
    messages: Sequence[Message] = (),
) -> None:
    """Fill the memos of a cold archive with the previews and summaries the store already holds.

    For every result that may be cut (over its cap, or old enough and large
    enough for compaction), the records of what the cap, compaction's preview
    and its summary would make are read in one round trip; each one that checks
    out (see :mod:`toolbudget.readback`) goes into the memo, where :class:`_Cutter`
    finds it as if this session had made it. The turn budget's previews, whose
    limits depend on the whole turn, are read when their limits are known
    (:meth:`_Cutter.preview`), and the summaries the schedule gives small results
    once it has (:func:`_read_back_summaries`). The records of the
    ``schedule``'s last decisions (:mod:`toolbudget.schedulerecord`) come in the
    same read.
    """
    archive, known = cutter.archive, cutter.known
    if archive is None or known is None or not cutter.policy_digest:
        return
    cutter.read = {}
    memo = archive.memo
    compact_limit = policy.microcompact_head_chars + policy.microcompact_tail_chars + MARKER_ROOM
    previews: dict[str, PreviewKey] = {}
    summaries: dict[str, SummaryKey] = {}
    arrivals: list[int] = []
    for slot in slots:
        if slot.protected:
            continue
        original = slot.original
        size = len(original)
        is_error = slot.result.is_error
        cap = policy.cap_for(slot.tool, is_error=is_error)
        compactable = size > policy.microcompact_min_chars and not slot.exempt
        if size <= cap and not (compactable and size > compact_limit):
            continue
        key = archive.key_of(original)
        path = archive.path_of(key)
        if size > cap:
            arrivals.append(slot.msg)
            limit = min(cap, policy.preview_chars + MARKER_ROOM)
            capped = cutter.preview_key(key, limit, is_error, "result_cap")
            if capped not in memo:
                inputs = cutter.preview_inputs(key, path, limit, is_error, "result_cap")
                previews[cutter.name_of(inputs)] = capped
        if compactable:
            compacted = cutter.preview_key(key, compact_limit, is_error, COMPACT_PREVIEW)
            if size > compact_limit and compacted not in memo:
                inputs = cutter.preview_inputs(key, path, compact_limit, is_error, COMPACT_PREVIEW)
                previews[cutter.name_of(inputs)] = compacted
            summary_key = cutter.summary_key(key, slot.tool, slot.call, is_error)
            if summary_key not in known.summaries:
                inputs = cutter.summary_inputs(key, path, slot.tool, slot.call, is_error)
                summaries[cutter.name_of(inputs)] = summary_key
    if not previews and not summaries and (schedule is None or not schedule.checkpointed(messages)):
        return  # nothing to read back: the schedule decides again, with no read of its own
    decided = schedule.stored_keys(messages, policy, arrivals) if schedule is not None else {}
    found = archive.read_made(sorted({*previews, *summaries, *decided}))
    if schedule is not None and decided:
        # Where the session last wrote (the newest record's point): its schedule's record went
        # with that write. Read it too, unless it was among the points read already.
        latest = max((made_at(found[name], name) or 0 for name in found if name not in decided), default=0)
        more = schedule.stored_key(latest, policy) if latest not in decided.values() else None
        if more is not None:
            decided[more] = latest
            found.update(archive.read_made([more]))
        schedule.offer({decided[name]: data.encode() for name, data in found.items() if name in decided})
    read = cutter.read
    for name in (*previews, *summaries):
        data = found.get(name)
        made = read[name] = read_record(data, name, archive.key_for) if data is not None else None
        if made is None:
            continue
        if name in previews:
            memo[previews[name]] = made
        else:
            known.summaries[summaries[name]] = made.text


def _infos(slots: Sequence[_Slot], policy: Policy) -> list[SlotInfo]:
    """What the schedule knows of each result: where it is, its turn, its size after its cap."""
    return [
        SlotInfo(
            s.msg,
            s.turn_no,
            len(s.current),  # as sent after its cap: what compaction can still reclaim
            len(s.original) > policy.microcompact_min_chars and not s.exempt and not s.protected,
            _keeps_errors(s),
            not s.exempt and not s.protected,
        )
        for s in slots
    ]


def _cap(slot: _Slot, policy: Policy, cutter: _Cutter) -> None:
    """The first step for every result: over its cap (the tool's own, or the per-result cap), a preview."""
    if slot.protected:
        return
    cap = policy.cap_for(slot.tool, is_error=slot.result.is_error)
    if len(slot.original) > cap:
        # Over its cap: a preview of the policy's shape, never larger than the cap.
        cutter.preview(slot, min(cap, policy.preview_chars + MARKER_ROOM), "result_cap")


@dataclass(frozen=True, slots=True)
class Fresh:
    """What :func:`cut_fresh` made of one result."""

    text: str
    """What the model sees in the result's place: the result's own text, or its preview."""
    cut: Cut | None
    store_fallbacks: int
    form_keys: frozenset[str] = frozenset()


def cut_fresh(
    text: str,
    tool: str | None,
    policy: Policy,
    archive: Archive | None,
    *,
    is_error: bool = False,
    call_id: str | None = None,
    route: str | None = None,
    on_store_error: Callable[[StoreError], None] = lambda exc: None,
) -> Fresh:
    """One fresh result alone, as :func:`enforce` treats it in the request where it is new.

    A result of the newest turn has age 0, so no compaction touches it; what
    is left is its cap, through the very code :func:`enforce` runs, which is
    why the preview, the key and the marker are the same bytes. What one
    result alone cannot show is the turn budget, which depends on the other
    results of its turn. ``route`` is the recall tool the request defines
    (see :func:`recall_route`).
    """
    result = ToolResult(call_id, (Text(text),), is_error, tool)
    original = _original_of(text, archive)
    slot = _Slot(0, 0, result, original, tool, 0, policy.exempt(tool), original, 0, text=text)
    slot.protected = is_recall_tool(tool)  # a recall answer of the newest turn is never cut
    cutter = _Cutter(policy, archive, on_store_error, route)
    _cap(slot, policy, cutter)
    return Fresh(slot.current, slot.cut, cutter.fallbacks, frozenset(cutter.form_keys))


def _compact(
    request: Request,
    slots: Sequence[_Slot],
    policy: Policy,
    cutter: _Cutter,
    schedule: Schedule,
    sizes: Sequence[int] | None,
) -> tuple[bool, list[SlotInfo], list[int], list[int]]:
    """Shrink old results to the levels the schedule gives; say whether an event fired now.

    Also gives what the schedule was told (each result, each message's size as placed) and the
    levels, for :class:`Trail`.
    """
    infos = _infos(slots, policy)
    message_sizes = list(sizes) if sizes is not None else [message_chars(m) for m in request.messages]
    for slot in slots:
        # Place results as sent before compaction: after their caps, whatever the body held.
        message_sizes[slot.msg] += len(slot.current) - len(_text_now(slot))
    levels = schedule.levels(request, infos, message_sizes, policy)
    if cutter.read is not None:
        _read_back_summaries(slots, levels, cutter)
    _apply_levels(slots, levels, policy, cutter)
    return schedule.fired_now, infos, message_sizes, levels


def _read_back_summaries(slots: Sequence[_Slot], levels: Sequence[int], cutter: _Cutter) -> None:
    """Fill the memo of a cold archive with the one-line summaries its schedule asks for and
    :func:`_read_back` did not read: a long history past its high watermark has its small
    results summarised too, whatever their size, and which of them only the schedule says. A
    session started again on such a history made dozens of them again (a tenth of its first
    request at 500 turns); one more batched read, made only when there are some, takes them
    from the store."""
    archive, known = cutter.archive, cutter.known
    if archive is None or known is None or cutter.read is None:
        return
    # The first result of each memo key, as :meth:`_Cutter.summarize` meets them: it makes that
    # one's summary, and the others of the key take it from the memo.
    first: dict[SummaryKey, _Slot] = {}
    for slot, level in zip(slots, levels, strict=True):
        if level != LEVEL_SUMMARY:
            continue
        summary_key = cutter.summary_key(
            archive.key_of(slot.original), slot.tool, slot.call, slot.result.is_error
        )
        if summary_key not in known.summaries:
            first.setdefault(summary_key, slot)
    wanted = {
        cutter.name_of(
            cutter.summary_inputs(
                summary_key[0], archive.path_of(summary_key[0]), slot.tool, slot.call, slot.result.is_error
            )
        ): summary_key
        for summary_key, slot in first.items()
    }
    for name, made in cutter.read_back(wanted).items():
        if made is not None:
            known.summaries[wanted[name]] = made.text


def _apply_levels(slots: Sequence[_Slot], levels: Sequence[int], policy: Policy, cutter: _Cutter) -> None:
    """Shrink each result (after its cap) to the compaction level the schedule gave it."""
    limit = policy.microcompact_head_chars + policy.microcompact_tail_chars + MARKER_ROOM
    for slot, level in zip(slots, levels, strict=True):
        if level == LEVEL_FOLDED:
            slot.folded = True
        elif level == LEVEL_SUMMARY:
            cutter.summarize(slot)
        elif level == LEVEL_PREVIEW and len(slot.original) > limit and len(slot.current) > limit:
            cutter.preview(slot, limit, COMPACT_PREVIEW)


def _turn_budgets(slots: Sequence[_Slot], policy: Policy, cutter: _Cutter) -> list[Unreachable]:
    budget = policy.turn_budget_chars
    turns: dict[int, list[_Slot]] = {}
    for slot in slots:
        turns.setdefault(slot.turn, []).append(slot)
    unreachable: list[Unreachable] = []
    for turn, members in turns.items():
        total = sum(len(s.current) for s in members)
        if total <= budget:
            continue
        # Largest first; ties broken by position, so the outcome never depends on dict order.
        if any(s.folded for s in members):
            continue  # folded away whole: nothing of it is sent
        order = sorted(
            (s for s in members if not s.exempt and not s.protected),
            key=lambda s: (-len(s.current), s.msg, s.part),
        )
        for slot in order:
            excess = total - budget
            if excess <= 0:
                break
            size = len(slot.current)
            target = max(MIN_PREVIEW_CHARS, size - excess)
            if target >= size:
                continue
            cutter.preview(slot, target, "turn_budget")
            total += len(slot.current) - size
        if total > budget:
            unreachable.append(Unreachable(turn, total, budget, len(members)))
    return unreachable


def _fold(
    request: Request,
    rebuilt: Request,
    slots: Sequence[_Slot],
    folded: int,
    cuts: list[Cut],
    cutter: _Cutter,
) -> tuple[Request, list[Cut]]:
    """Take the ``folded`` oldest turns out of the request, behind one marker that recalls them.

    The marker goes first in the first kept turn (after its reasoning blocks),
    so user and assistant turns still alternate; on Responses, where each item
    stands alone, it is an assistant message of its own. The archived text is
    the folded turns as the model read them, with every result's original.
    """
    starts = turn_starts(request.messages)
    first, last = starts[0], starts[folded]
    span = request.messages[first:last]
    memo = cutter.known.folds if cutter.known is not None else None
    memo_key = (folded, id(span[0]), id(span[-1]))
    known = memo.get(memo_key) if memo is not None else None
    if known is not None and known[0] is span[0] and known[1] is span[-1]:
        _, _, marker, key, size = known
    else:
        text = _span_text(request, span, first, slots)
        key, path = cutter.store(text)
        results = sum(1 for m in span for p in m.parts if isinstance(p, ToolResult))
        detail = f"the {folded} oldest turns folded away: {len(span)} messages, {results} tool results"
        marker = marker_line(len(text), len(text), key=key, path=path, detail=detail)
        size = len(text)
        if memo is not None:
            memo[memo_key] = (span[0], span[-1], marker, key, size)
    if key is not None and cutter.archive is not None:
        cutter._record(key, None, size, "turns")
        if marker not in cutter.archive.forms:
            cutter.archive.forms.add(marker)
            cutter._remember_form(marker)
    messages = list(rebuilt.messages)
    if request.api == "openai-responses":
        out = [*messages[:first], Message("assistant", (Text(marker),)), *messages[last:]]
        shift = last - first - 1
    else:
        head = messages[last]
        lead = 0
        while lead < len(head.parts) and isinstance(head.parts[lead], Thinking):
            lead += 1
        parts = (*head.parts[:lead], Text(marker), *head.parts[lead:])
        messages[last] = Message(head.role, parts, head.extra, head.form)
        out = [*messages[:first], *messages[last:]]
        shift = last - first
    fold_cut = Cut(first, None, None, "turns", size, len(marker), key, FOLD_REASON)
    moved = [_moved(c, shift) for c in cuts]
    return replace(rebuilt, messages=tuple(out)), [fold_cut, *moved]


def _span_text(request: Request, span: Sequence[Message], first: int, slots: Sequence[_Slot]) -> str:
    """The folded messages as the request's own API lays them out, every result its original.

    This is what recall returns for a fold, and what a managed body is
    unfolded from, so it is exact JSON of the API, indented a line per field.
    """
    from . import wire

    originals = {(s.msg, s.part): s for s in slots if first <= s.msg < first + len(span)}
    messages = []
    for i, message in enumerate(span, first):
        parts: list[Part] = list(message.parts)
        changed = False
        for k in range(len(parts)):
            slot = originals.get((i, k))
            if slot is not None and slot.original != _text_now(slot):
                parts[k] = _with_text(slot.result, slot.original)
                changed = True
        messages.append(
            Message(message.role, tuple(parts), message.extra, message.form) if changed else message
        )
    body = wire.render(Request(request.api, tuple(messages)))
    return dumps(body, indent=True).decode()


def _unfold(request: Request, archive: Archive | None) -> Request | None:
    """The history a managed body with folded turns was made from, or ``None`` when it has none.

    The fold's marker is the first text of the first assistant turn; only a
    marker this session sent as a cut is read back.
    """
    if archive is None:
        return None
    at = next((i for i, m in enumerate(request.messages) if m.role == "assistant"), None)
    if at is None:
        return None
    head = request.messages[at]
    found = next((k for k, p in enumerate(head.parts) if isinstance(p, Text)), None)
    if found is None:
        return None
    text = head.parts[found]
    assert isinstance(text, Text)
    if "[toolbudget: " not in text.text or _original_of(text.text, archive) == text.text:
        return None
    from . import wire
    from .jsonio import loads

    keyed = [m for m in find_markers(text.text) if m.key]
    original = archive.original(keyed[0].key or "") if len(keyed) == 1 else None
    if original is None:
        return None
    try:
        span = wire.parse(loads(original), request.api).messages
    except ToolbudgetError:
        return None  # not a fold's record: leave the text as it is
    rest = (*head.parts[:found], *head.parts[found + 1 :])
    # On Responses the marker was an item of its own; elsewhere it led the first kept turn.
    kept = (*span, Message(head.role, rest, head.extra, head.form)) if rest else tuple(span)
    return replace(request, messages=(*request.messages[:at], *kept, *request.messages[at + 1 :]))


def _text_now(slot: _Slot) -> str:
    return slot.text


def _rebuild(request: Request, slots: Sequence[_Slot], known: _Known | None = None) -> Request:
    changed = [s for s in slots if s.current != _text_now(s)]
    if not changed:
        return request
    by_message: dict[int, dict[int, _Slot]] = {}
    for slot in changed:
        by_message.setdefault(slot.msg, {})[slot.part] = slot
    messages = list(request.messages)
    rebuilt = known.rebuilt if known is not None else None
    for i, parts_to_change in by_message.items():
        message = messages[i]
        texts = tuple((k, slot.current) for k, slot in sorted(parts_to_change.items()))
        # A resent message cut the same way is rebuilt once: the cut texts are remembered strings.
        done = rebuilt.get(id(message)) if rebuilt is not None else None
        if done is not None and done[0] is message and done[1] == texts:
            messages[i] = done[2]
            continue
        parts: list[Part] = list(message.parts)
        for k, slot in parts_to_change.items():
            parts[k] = _with_text(slot.result, slot.current)
        messages[i] = Message(message.role, tuple(parts), message.extra, message.form)
        if rebuilt is not None:
            rebuilt[id(message)] = (message, texts, messages[i])
    return request.with_messages(tuple(messages))
