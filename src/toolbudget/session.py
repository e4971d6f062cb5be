"""A session: one agent conversation, its policy, and the archive its cuts go to.

``Session.manage`` is the whole pipeline for one request: parse, repair the
pairing, enforce the budgets, render. It never mutates its input and is
deterministic: the same body gives the same bytes, in this process or another,
and managing a managed body changes nothing.

The session id namespaces the archive. When none is given, it is derived from
the conversation itself (its system prompt and first message), so every
request of one conversation lands in the same namespace, even across restarts
and processes, and different conversations never share one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from . import wire
from .budget import Archive, Budgeted, Cut, Unreachable, enforce, message_chars
from .compaction import Schedule, context_window, fixed_chars
from .errors import InputError, NotFoundError, StoreError
from .jsonio import dumps, to_body
from .marker import RECALL_TOOL
from .model import Request, Text, ToolCall, ToolResult
from .pairing import Repair, repair_request
from .policy import Policy
from .previews import Preview
from .recall import parse_query, recall_page, valid_key
from .store import Store, open_store

__all__ = ["Managed", "Report", "Session", "conversation_id"]

TokenCounter = Callable[[str], int]


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


@dataclass(frozen=True, slots=True)
class Managed:
    """A managed body (in the form it was given: dict, bytes or text) and its report."""

    body: Any
    report: Report


def conversation_id(request: Request) -> str:
    """A stable id for a conversation: a hash of its system prompt and first message."""
    digest = hashlib.blake2b(digest_size=8, person=b"toolbudget-conv")
    for part in request.system:
        if isinstance(part, Text):
            digest.update(part.text.encode("utf-8", "surrogatepass"))
    digest.update(b"\x00")
    for message in request.messages[:1]:
        for part in message.parts:
            if isinstance(part, Text):
                digest.update(part.text.encode("utf-8", "surrogatepass"))
    return "conv-" + digest.hexdigest()


def count_chars(request: Request, sizes: Mapping[int, int] | None = None) -> int:
    """The characters the model reads: the system prompt, the tool definitions, and every
    message's text, thinking, tool arguments and results.

    ``sizes`` holds known counts of messages by ``id`` (cached messages), so a
    resent history is not counted again.
    """
    total = fixed_chars(request)
    for message in request.messages:
        known = sizes.get(id(message)) if sizes is not None else None
        total += message_chars(message) if known is None else known
    return total


def _texts(request: Request) -> list[str]:
    out = [p.text for p in request.system if isinstance(p, Text)]
    for tool in request.tools:
        out.extend((tool.name, tool.description or "", dumps(tool.parameters).decode()))
    for message in request.messages:
        for part in message.parts:
            if isinstance(part, Text):
                out.append(part.text)
            elif isinstance(part, ToolResult):
                out.extend(p.text for p in part.content if isinstance(p, Text))
            elif isinstance(part, ToolCall):
                out.append(part.arguments_json or dumps(part.arguments).decode())
    return out


@dataclass(frozen=True, slots=True)
class _Last:
    """The last request managed, and its answer (``out`` is ``None`` when it was unchanged)."""

    request: Request
    policy: Policy
    out: dict[str, Any] | None
    report: Report
    repeat_report: Report
    """The report of answering it again: nothing new was written."""


def _in_order_of(given: Mapping[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """``out`` with its fields in the order the caller gave them, new fields last.

    A body that changed then still reads like the one sent before it, field for field.
    """
    if list(out) == [k for k in given if k in out]:
        return out
    ordered = {k: out[k] for k in given if k in out}
    ordered.update((k, v) for k, v in out.items() if k not in ordered)
    return ordered


def _same_request(a: Request, b: Request) -> bool:
    """Whether two parsed requests are the same: identical cached messages, equal everything else."""
    if a.api != b.api or len(a.messages) != len(b.messages):
        return False
    if not all(x is y for x, y in zip(a.messages, b.messages, strict=True)):
        return False
    return a.system == b.system and a.tools == b.tools and a.extra == b.extra and a.form == b.form


class _SessionArchive(Archive):
    """The archive of one session in its store, with keys only this session can compute."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.memo: dict[tuple[str, int, bool, bool, bool], Preview] = {}
        self.forms: set[str] = set()
        self.written: dict[str, str | None] = {}
        self.secret = hashlib.blake2b(
            session.id.encode("utf-8", "surrogatepass"), digest_size=32, person=b"toolbudget-key"
        ).digest()

    def key_for(self, text: str) -> str:
        return hashlib.blake2b(
            text.encode("utf-8", "surrogatepass"), key=self.secret, digest_size=16
        ).hexdigest()

    def keep(self, text: str) -> tuple[str, str | None]:
        key = self.key_for(text)
        if key in self.written:
            return key, self.written[key]
        store = self.session.store
        store.put(self.session.id, key, text.encode("utf-8", "surrogatepass"))
        path = store.path(self.session.id, key)
        self.written[key] = path
        self.session._keys_this_call.append(key)
        return key, path

    def original(self, key: str) -> str | None:
        try:
            data = self.session.store.get(self.session.id, key)
        except StoreError:
            return None
        return None if data is None else data.decode("utf-8", "surrogatepass")


class Session:
    """One conversation's policy and archive. Use it as a context manager.

    When it closes, the session workspace (the default ``dir:`` store) is
    removed unless ``keep_workspace`` is set; durable stores (SQLite, Redis)
    keep their entries until their TTL.
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
    ) -> None:
        self.policy = policy if policy is not None else Policy.load()
        self._id = id
        self._store_arg = store if store is not None else self.policy.store
        self._store: Store | None = store if isinstance(store, Store) else None
        self._archive: _SessionArchive | None = None
        self.on_cut = on_cut
        self.on_budget_unreachable = on_budget_unreachable
        self.token_counter = token_counter
        self._keys_this_call: list[str] = []
        self._closed = False
        self._caches: dict[str, wire.EntryCache] = {}
        self._last: _Last | None = None
        self._schedule = Schedule()
        self.last_report: Report | None = None
        """The report of the last ``manage`` call."""
        self._store_error: StoreError | None = None
        if isinstance(self._store_arg, str):
            try:
                self._store = open_store(self._store_arg)  # a malformed URL fails here, not at the first cut
            except StoreError as exc:
                # A store that is down is not the caller's mistake: cuts fall back, and say so.
                self._store_error = exc

    # --- identity and storage --------------------------------------------------------

    @property
    def id(self) -> str:
        if self._id is None:
            raise InputError("this session has no id yet: give one, or manage a request first")
        return self._id

    @property
    def store(self) -> Store:
        if self._store_error is not None:
            raise self._store_error
        if self._store is None:
            url = self._store_arg if isinstance(self._store_arg, str) else None
            self._store = open_store(url)
        return self._store

    @property
    def archive(self) -> _SessionArchive:
        if self._archive is None:
            self._archive = _SessionArchive(self)
        return self._archive

    def _bind(self, request: Request) -> None:
        if self._id is None:
            self._id = conversation_id(request)

    # --- the pipeline ----------------------------------------------------------------

    def manage(self, body: Any, api: str | None = None) -> Managed:
        """Repair and budget a request body; returns a new body (in the same form) and a report."""
        parsed = to_body(body)
        name = wire.resolve_api(api) if api else wire.detect_api(parsed)
        cache = self._caches.get(name)
        if cache is None:
            cache = self._caches[name] = wire.EntryCache(measure=message_chars)
        request = wire.parse(parsed, name, cache)
        return self._manage_request(body, parsed, request)

    def manage_request(self, request: Request) -> tuple[Request, Report]:
        """The same pipeline on a parsed request."""
        fixed, report = self._pipeline(request)
        return fixed, report

    def _manage_request(self, body: Any, parsed: dict[str, Any], request: Request) -> Managed:
        last = self._last
        out: dict[str, Any] | None
        if last is not None and last.policy is self.policy and _same_request(last.request, request):
            # The same history again (a retry, or the same body twice): the same answer, and
            # the same callbacks, as for a history that grew.
            report = last.repeat_report
            out = last.out
            self._notify(report)
        else:
            fixed, report = self._pipeline(request)
            out = None if fixed is request else _in_order_of(parsed, wire.render(fixed))
            self._last = _Last(request, self.policy, out, report, replace(report, keys_written=()))
        self.last_report = report
        if out is None:
            return Managed(body, report)
        if isinstance(body, (bytes, bytearray, memoryview)):
            return Managed(dumps(out), report)
        if isinstance(body, str):
            return Managed(dumps(out).decode(), report)
        return Managed(out, report)

    def _pipeline(self, request: Request) -> tuple[Request, Report]:
        self._bind(request)
        self._keys_this_call = []
        repaired, repairs = repair_request(request)
        known = self._sizes(request.api)
        sizes = [
            (known.get(id(m)) if known is not None else None) or message_chars(m) for m in repaired.messages
        ]
        budgeted = enforce(repaired, self.policy, self.archive, schedule=self._schedule, sizes=sizes)
        result = budgeted.request
        report = self._report(request, result, repairs, budgeted)
        self._notify(report)
        return result, report

    def _notify(self, report: Report) -> None:
        for cut in report.cuts:
            if self.on_cut is not None:
                self.on_cut(cut)
        for turn in report.budget_unreachable:
            if self.on_budget_unreachable is not None:
                self.on_budget_unreachable(turn)

    def _report(
        self, before: Request, after: Request, repairs: tuple[Repair, ...], budgeted: Budgeted
    ) -> Report:
        sizes = self._sizes(before.api)
        chars_before = count_chars(before, sizes)
        chars_after = chars_before if after is before else count_chars(after, sizes)
        if self.token_counter is None:
            tokens_before, tokens_after = -(-chars_before // 4), -(-chars_after // 4)
        else:
            counter = self.token_counter
            tokens_before = sum(counter(t) for t in _texts(before))
            tokens_after = tokens_before if after is before else sum(counter(t) for t in _texts(after))
        window = context_window(self.policy, before.model)
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

    def _sizes(self, api: str | None) -> dict[int, int] | None:
        cache = self._caches.get(api or "")
        return cache.sizes if cache is not None else None

    # --- recall ----------------------------------------------------------------------

    def original(self, key: str) -> str:
        """The exact original text archived under ``key``."""
        if not valid_key(key):
            raise NotFoundError(f"not found: {key[:80]!r} is not a toolbudget key")
        data = self.store.get(self.id, key)
        if data is None:
            raise NotFoundError(f"not found: no archived output has key {key} in session {self.id}")
        return data.decode("utf-8", "surrogatepass")

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

        Raises :class:`InputError` for a page smaller than :data:`MIN_PAGE_CHARS`,
        which could not hold its header and the pointer to the next page.
        """
        from .recall import MIN_PAGE_CHARS, RecallQuery

        if max_chars is not None and (isinstance(max_chars, bool) or max_chars < MIN_PAGE_CHARS):
            raise InputError(
                f"a recall page must allow at least {MIN_PAGE_CHARS} characters, not {max_chars}"
            )
        text = self.original(key)
        return recall_page(
            text, RecallQuery(key, lines, grep, chars), max_chars or self.policy.recall_max_chars
        )

    def handle_recall(self, arguments: Mapping[str, Any] | str) -> str:
        """Answer a call of the recall tool (its arguments as an object or JSON text).

        Always returns text for the model: a page, or a one-line reason it got none.
        """
        try:
            query = parse_query(arguments)
            text = self.original(query.key)
        except (InputError, NotFoundError) as exc:
            return f"{RECALL_TOOL}: {exc}"
        except StoreError as exc:
            return f"{RECALL_TOOL}: the archive could not be read: {exc}"
        return recall_page(text, query, self.policy.recall_max_chars)

    # --- lifetime --------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._store is not None:
            try:
                if self._id is not None and self._store.file_backed and not self.policy.keep_workspace:
                    self._store.drop(self._id)
            finally:
                if not isinstance(self._store_arg, Store):
                    self._store.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
