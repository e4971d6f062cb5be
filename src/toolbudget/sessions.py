"""A pool of sessions for a shell that sees many conversations: a proxy, an MCP server.

:meth:`Sessions.for_request` finds the session a request belongs to, or
makes it. The id comes from the first of these that the request carries:

1. the ``x-toolbudget-session`` header, used as the id itself, so the
   shell's user can name it to ``toolbudget recall KEY --session ID``;
2. Claude Code's ``x-claude-code-session-id`` header, with
   ``x-claude-code-agent-id`` when a sub-agent sends it (a sub-agent is a
   conversation of its own under its parent's session id);
3. Codex's ``session_id`` (older) or ``session-id`` (newer) header;
4. a ``session_id`` inside the body's ``metadata.user_id``, where Claude Code
   puts one: a JSON object text with a ``session_id`` field, or the older
   ``user_..._session_<id>`` form;
5. the body's ``prompt_cache_key`` (OpenAI Chat and Responses), which Codex
   sets to its conversation id;
6. otherwise the conversation itself: :func:`~toolbudget.session.conversation_id`,
   a hash of its system prompt and its task, the same on every request of
   one conversation, in any process. Claude Code's attribution block (a
   system text starting ``x-anthropic-billing-header:``) is left out of the
   hash: its value may change between requests of one conversation.

Fields that do not name one conversation are not used: the rest of
``metadata.user_id`` names a user (many conversations), and Responses'
``previous_response_id`` changes with every turn.

A pool shared by several people keeps them apart with ``tenant``: the id
then becomes ``<tenant>-<id>``, so an id claimed in a header, or derived
from a conversation another tenant also has, selects only within the
caller's own namespace. The proxy passes a one-way hash of the request's
credential (:func:`toolbudget.proxy.tenancy.tenant_of`). Two conversations that
end up under one id share its archive harmlessly (keys are content hashes,
and what a session sends depends only on its id and the history).

The body is read once: its JSON is handed to the session, and the
``manage`` of that same body that follows uses it. An id the request names
costs no parse at all, and one derived from the conversation costs the parse
of its history's head alone (:func:`derived_id`): ``manage`` then parses only
the messages appended since the session's last request, which is most of a
proxy's saving on a long history. All the sessions of a pool share one parse
cache per API, so a history resent by any of them is not parsed again.

A pool holds at most ``max_sessions`` live sessions, dropping the least
recently used, and closes those unused for ``idle_seconds``. It also keeps
the JSON histories its sessions hold to resume from under ``max_held_bytes``
in all (a session holds about ten times its history in memory, so 1024 long
conversations would otherwise hold gigabytes), dropping the least recently
used past it; the one just asked for always stays. Closing a
session only lets go of its archive: the markers it wrote stay recallable
until the store's TTL has passed with nobody holding them, and a request of
that conversation later simply makes its session again, with the same id and
the same bytes. A pool is safe to use from many threads, and so is each
session it hands out.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import orjson

from . import wire
from .budget import message_chars
from .errors import InputError, StoreConfigError, StoreError
from .jsonio import to_body
from .model import Request, Text
from .policy import Policy
from .session import Session, TokenCounter, conversation_id, task_read_whole
from .store import Store, open_store

__all__ = ["SESSION_HEADER", "Sessions", "derived_id", "session_id_of"]

SESSION_HEADER = "x-toolbudget-session"
"""The header that names a request's session outright."""

_CLAUDE_SESSION = "x-claude-code-session-id"
_CLAUDE_AGENT = "x-claude-code-agent-id"
_CODEX_SESSION = ("session-id", "session_id")

BILLING_PREFIX = "x-anthropic-billing-header:"
"""How Claude Code's attribution block in ``system`` starts; its value is not part of the conversation."""

_LEGACY_USER_SESSION = re.compile(r"_session_([A-Za-z0-9-]{8,128})\Z")
_TENANT = re.compile(r"[a-z0-9]{1,32}")


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    """A header's value, its name matched case-insensitively; ``None`` when absent or empty."""
    if not headers:
        return None
    value = headers.get(name)
    if value is None:
        for key, given in headers.items():
            if key.lower() == name:
                value = given
                break
    if not isinstance(value, str):
        return None
    return value.strip() or None


def session_id_of(body: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> str | None:
    """The session id a request names explicitly (see the module's order), or ``None``."""
    named = _header(headers, SESSION_HEADER)
    if named is not None:
        return named
    claude = _header(headers, _CLAUDE_SESSION)
    if claude is not None:
        agent = _header(headers, _CLAUDE_AGENT)
        return f"claude-code-{claude}" + (f"-agent-{agent}" if agent is not None else "")
    for name in _CODEX_SESSION:
        codex = _header(headers, name)
        if codex is not None:
            return f"codex-{codex}"
    user_session = _user_id_session(body.get("metadata"))
    if user_session is not None:
        return f"claude-code-{user_session}"
    key = body.get("prompt_cache_key")
    if isinstance(key, str) and key:
        return f"prompt-cache-{key}"
    return None


def _user_id_session(metadata: Any) -> str | None:
    """The ``session_id`` that Claude Code puts in ``metadata.user_id``, or ``None``."""
    if not isinstance(metadata, Mapping):
        return None
    user = metadata.get("user_id")
    if not isinstance(user, str) or not user:
        return None
    if user.startswith("{"):
        try:
            said = orjson.loads(user)
        except orjson.JSONDecodeError:
            return None
        found = said.get("session_id") if isinstance(said, dict) else None
        return (found.strip() or None) if isinstance(found, str) else None
    legacy = _LEGACY_USER_SESSION.search(user)
    return legacy.group(1) if legacy is not None else None


def _without_billing(request: Request) -> Request:
    """``request`` without Claude Code's attribution block, for the conversation's hash only."""
    kept = tuple(p for p in request.system if not (isinstance(p, Text) and p.text.startswith(BILLING_PREFIX)))
    return request if len(kept) == len(request.system) else replace(request, system=kept)


# Where each API keeps its history, and the fields besides it that hold system text.
_PARTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "anthropic": ("messages", ("system",)),
    "openai-chat": ("messages", ()),
    "openai-responses": ("input", ("instructions",)),
    "gemini": ("contents", ("systemInstruction", "system_instruction")),
    "bedrock-converse": ("messages", ("system",)),
}
_SYSTEM_ROLES = frozenset({"system", "developer"})
"""The wire roles that any API reads as a system message."""


def derived_id(
    parsed: dict[str, Any], api: str, cache: wire.EntryCache | None = None
) -> tuple[str, Request | None]:
    """The id of a conversation that names none, and the whole body's parse if one was made.

    The id is :func:`~toolbudget.session.conversation_id` of the request
    without Claude Code's attribution block, but reached without parsing the
    whole history: only the system fields, the messages that may be system
    ones (any entry whose role is not plainly another) and the history's
    first entries, as far as the task's run of same-role messages goes, are
    parsed, by the API's own parser. Every other entry is read by no more
    than a look at its role, so a 500 KB history costs the parse of its head.
    The run's end is checked on the parse itself, reading further when the
    head holds all of it. A body that head does not parse (a bad entry, a
    history that is not a list) is parsed whole, as before, and that parse
    is handed back (``manage`` uses it, or raises what it raises).
    """
    key, system_keys = _PARTS[api]
    entries = parsed.get(key)
    if isinstance(entries, list):
        head = {name: parsed[name] for name in system_keys if name in parsed}
        try:
            return _head_id(head, key, entries, api, cache), None
        except InputError:
            pass  # the whole parse below raises what is wrong, or finds the id after all
    request = wire.parse(parsed, api, cache)
    return conversation_id(_without_billing(request)), request


def _head_id(
    head: dict[str, Any], key: str, entries: list[Any], api: str, cache: wire.EntryCache | None
) -> str:
    """The conversation's id from the parse of its history's head and its possible system messages."""
    system = [
        i
        for i, entry in enumerate(entries)
        if not isinstance(entry, dict) or entry.get("role") in _SYSTEM_ROLES
    ]
    taken = set(system)
    first = next((i for i in range(len(entries)) if i not in taken), len(entries))
    end = min(len(entries), first + 2)
    parse = wire.module(api).parse
    while True:
        later = [entries[i] for i in system if i >= end]
        request = parse({**head, key: [*entries[:end], *later]}, cache)
        if end == len(entries):
            break
        if task_read_whole(request.messages[:end]):
            break  # the task's runs end inside the head: later entries cannot change the id
        end = min(len(entries), first + 2 * (end - first))
    return conversation_id(_without_billing(request))


_RECENT = 64
"""How many of the sessions handed out last are weighed again at each ``get``."""
_REWEIGH_EVERY = 256
"""Every how many ``get`` calls all live sessions are weighed again."""


class Sessions:
    """Live sessions by id, for shells that manage requests of many conversations.

    ``store`` and ``policy`` are every session's (the store is opened once and
    shared); ``token_counter`` and ``write_later`` likewise (a shell that
    calls :meth:`Session.write_now` while the provider answers sets it). Use
    it as a context manager, or call :meth:`close`. ``clock`` is for tests.
    """

    def __init__(
        self,
        *,
        store: str | Store | None = None,
        policy: Policy | None = None,
        max_sessions: int = 256,
        idle_seconds: float = 3600.0,
        max_held_bytes: int = 64 * 1024 * 1024,
        token_counter: TokenCounter | None = None,
        clock: Callable[[], float] = time.monotonic,
        write_later: bool = False,
    ) -> None:
        if not isinstance(max_sessions, int) or isinstance(max_sessions, bool) or max_sessions < 1:
            raise InputError(f"max_sessions must be a whole number of at least 1, not {max_sessions!r}")
        if not isinstance(idle_seconds, (int, float)) or isinstance(idle_seconds, bool) or idle_seconds <= 0:
            raise InputError(f"idle_seconds must be a positive number, not {idle_seconds!r}")
        if not isinstance(max_held_bytes, int) or isinstance(max_held_bytes, bool) or max_held_bytes < 1:
            raise InputError(f"max_held_bytes must be a whole number of at least 1, not {max_held_bytes!r}")
        self.policy = policy if policy is not None else Policy.load()
        self.max_sessions = max_sessions
        self.idle_seconds = float(idle_seconds)
        self.max_held_bytes = max_held_bytes
        self.token_counter = token_counter
        self.write_later = write_later
        """Each session's ``write_later`` (:meth:`Session.write_now`)."""
        self._clock = clock
        self._lock = threading.Lock()
        self._live: OrderedDict[str, tuple[Session, float]] = OrderedDict()
        # What each live session held when last looked at, and their sum: a session's
        # history grows in its manage, after get, so get refreshes the ones it hands out.
        self._held: dict[str, int] = {}
        self._held_total = 0
        self._handed: list[str] = []
        self.dropped = 0
        """Sessions dropped so far (past a bound, or idle): what a shell may free memory after."""
        self._gets = 0
        self._closed = False
        # Made up front, so no thread ever adds one while another reads the dict.
        self._caches = {api: wire.EntryCache(measure=message_chars) for api in wire.APIS}
        self._owned: Store | None = None
        self._store: str | Store | None = store if store is not None else self.policy.store
        if not isinstance(self._store, Store):
            try:
                self._store = self._owned = open_store(self._store)
            except StoreConfigError:
                raise
            except StoreError:
                pass  # down now: each session opens it, and cuts say what could not be kept

    def __len__(self) -> int:
        with self._lock:
            return len(self._live)

    @property
    def held_bytes(self) -> int:
        """Bytes of JSON history the live sessions hold, as last weighed (kept under ``max_held_bytes``)."""
        with self._lock:
            return self._held_total

    @property
    def cached_entries(self) -> int:
        """Parsed history entries the pool's parse caches hold, over every API."""
        return sum(len(cache.entries) for cache in self._caches.values())

    def for_request(
        self,
        body: Any,
        *,
        api: str | None = None,
        headers: Mapping[str, str] | None = None,
        tenant: str | None = None,
    ) -> Session:
        """The session ``body`` belongs to (found, or made), ready for ``session.manage(body)``.

        The body's JSON is read here once, and the ``manage`` of this same
        body object uses it. A session a header or field names needs nothing
        more: the history is left for ``manage``, which parses only what an
        agent appended since its last request. An id derived from the
        conversation parses the history's head here, and the whole body only
        when the head cannot be read alone (``manage`` reuses that parse).
        A body that is not a JSON object raises here; one whose history is
        bad raises here or at its ``manage``, what ``manage`` would raise.
        With ``tenant`` (1 to 32 of ``[a-z0-9]``), the session is looked up
        and made only in that tenant's namespace (see the module).
        """
        if tenant is not None and (not isinstance(tenant, str) or not _TENANT.fullmatch(tenant)):
            raise InputError(f"a tenant is 1 to 32 lowercase letters and digits, not {tenant!r:.80}")
        parsed = to_body(body)
        name = wire.resolve_api(api) if api else wire.detect_api(parsed)
        sid = session_id_of(parsed, headers)
        request = None
        if sid is None:
            sid, request = derived_id(parsed, name, self._caches[name])
        session = self.get(sid if tenant is None else f"{tenant}-{sid}")
        session._prime(body, parsed, name, request)
        return session

    def get(self, id: str) -> Session:
        """The live session ``id``, made when there is none; it becomes the most recently used."""
        if not isinstance(id, str) or not id:
            raise InputError(f"a session id is a non-empty str, not {id!r}")
        closing: list[Session] = []
        try:
            with self._lock:
                if self._closed:
                    raise InputError("this pool of sessions is closed")
                now = self._clock()
                for old, (_, used) in list(self._live.items()):
                    if now - used < self.idle_seconds:
                        break  # in order of use: the rest were used since
                    closing.append(self._drop(old))
                found = self._live.pop(id, None)
                session = found[0] if found is not None else self._make(id)
                self._live[id] = (session, now)
                # The ones handed out lately may have grown since (their manage ran after
                # their get, and with many threads it may not have ended by the next get):
                # they are weighed again, and every live session once in a while.
                self._handed.append(id)
                self._gets += 1
                if self._gets % _REWEIGH_EVERY == 0:
                    self._handed = list(self._live)
                for seen in self._handed:
                    self._weigh(seen)
                self._handed = list(dict.fromkeys(self._handed))[-_RECENT:]
                while len(self._live) > self.max_sessions or (
                    self._held_total > self.max_held_bytes and len(self._live) > 1
                ):
                    closing.append(self._drop(next(iter(self._live))))
            return session
        finally:
            for old_session in closing:
                old_session.close()  # outside the lock: a store that hangs delays no other request

    def _weigh(self, id: str) -> None:
        live = self._live.get(id)
        if live is not None:
            held = live[0].held_bytes
            self._held_total += held - self._held.get(id, 0)
            self._held[id] = held

    def _drop(self, id: str) -> Session:
        self.dropped += 1
        self._held_total -= self._held.pop(id, 0)
        return self._live.pop(id)[0]

    def _make(self, id: str) -> Session:
        session = Session(
            id,
            store=self._store,
            policy=self.policy,
            token_counter=self.token_counter,
            write_later=self.write_later,
        )
        session._caches = self._caches
        return session

    def close(self) -> None:
        """Close every live session (their archives stay, see the module) and the store; never raises."""
        with self._lock:
            self._closed = True
            live = [session for session, _ in self._live.values()]
            self._live.clear()
            self._held.clear()
            self._held_total = 0
        _close_all(live)
        owned, self._owned = self._owned, None
        if owned is not None:
            with contextlib.suppress(StoreError):
                owned.close()

    def __enter__(self) -> Sessions:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_CLOSERS = 16
"""Sessions a pool closes at once."""


def _close_all(sessions: list[Session]) -> None:
    """Close ``sessions``, several at once: each close may wait its store's bound (a store that
    hangs), and a pool of 256 sessions closed one after the other on a stopped Redis waited
    256 times that. At once, the pool's close waits about ``len / 16`` bounds at most."""
    if len(sessions) < 2:
        for session in sessions:
            session.close()
        return
    left = iter(sessions)
    lock = threading.Lock()

    def close_some() -> None:
        while True:
            with lock:
                session = next(left, None)
            if session is None:
                return
            session.close()  # never raises

    started = []
    for _ in range(min(_CLOSERS, len(sessions)) - 1):  # and this thread
        thread = threading.Thread(target=close_some, name="toolbudget-close", daemon=True)
        try:
            thread.start()
        except RuntimeError:
            break  # at interpreter exit no thread may start: the rest are closed here
        started.append(thread)
    close_some()
    for thread in started:
        thread.join()
