"""A pool of sessions for a shell that sees many conversations: a proxy, an MCP server.

:meth:`Sessions.for_request` finds the session a request belongs to, or
makes it. The id comes from the first of these that the request carries:

1. the ``x-toolbudget-session`` header, used as the id itself, so the
   shell's user can name it to ``toolbudget recall KEY --session ID``;
2. Claude Code's ``x-claude-code-session-id`` header, with
   ``x-claude-code-agent-id`` when a sub-agent sends it (a sub-agent is a
   conversation of its own under its parent's session id);
3. the body's ``prompt_cache_key`` (OpenAI Chat and Responses), which Codex
   sets to its conversation id;
4. otherwise the conversation itself: :func:`~toolbudget.session.conversation_id`,
   a hash of its system prompt and its task, the same on every request of
   one conversation, in any process.

Fields that do not name one conversation are not used: Anthropic's
``metadata.user_id`` names a user (many conversations), and Responses'
``previous_response_id`` changes with every turn. Two conversations that
end up under one id share its archive harmlessly (keys are content hashes,
and what a session sends depends only on its id and the history).

The body is parsed once: the parse that derives the id is handed to the
session, and the ``manage`` of that same body that follows uses it. All the
sessions of a pool share one parse cache per API, so a history resent by
any of them is not parsed again.

A pool holds at most ``max_sessions`` live sessions, dropping the least
recently used, and closes those unused for ``idle_seconds``. Closing a
session only lets go of its archive: the markers it wrote stay recallable
until the store's TTL has passed with nobody holding them, and a request of
that conversation later simply makes its session again, with the same id and
the same bytes. A pool is safe to use from many threads, and so is each
session it hands out.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from . import wire
from .budget import message_chars
from .errors import InputError, StoreConfigError, StoreError
from .jsonio import to_body
from .policy import Policy
from .session import Session, TokenCounter, conversation_id
from .store import Store, open_store

__all__ = ["SESSION_HEADER", "Sessions", "session_id_of"]

SESSION_HEADER = "x-toolbudget-session"
"""The header that names a request's session outright."""

_CLAUDE_SESSION = "x-claude-code-session-id"
_CLAUDE_AGENT = "x-claude-code-agent-id"


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
    key = body.get("prompt_cache_key")
    if isinstance(key, str) and key:
        return f"prompt-cache-{key}"
    return None


class Sessions:
    """Live sessions by id, for shells that manage requests of many conversations.

    ``store`` and ``policy`` are every session's (the store is opened once and
    shared); ``token_counter`` likewise. Use it as a context manager, or call
    :meth:`close`. ``clock`` is for tests.
    """

    def __init__(
        self,
        *,
        store: str | Store | None = None,
        policy: Policy | None = None,
        max_sessions: int = 256,
        idle_seconds: float = 3600.0,
        token_counter: TokenCounter | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not isinstance(max_sessions, int) or isinstance(max_sessions, bool) or max_sessions < 1:
            raise InputError(f"max_sessions must be a whole number of at least 1, not {max_sessions!r}")
        if not isinstance(idle_seconds, (int, float)) or isinstance(idle_seconds, bool) or idle_seconds <= 0:
            raise InputError(f"idle_seconds must be a positive number, not {idle_seconds!r}")
        self.policy = policy if policy is not None else Policy.load()
        self.max_sessions = max_sessions
        self.idle_seconds = float(idle_seconds)
        self.token_counter = token_counter
        self._clock = clock
        self._lock = threading.Lock()
        self._live: OrderedDict[str, tuple[Session, float]] = OrderedDict()
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

    def for_request(
        self, body: Any, *, api: str | None = None, headers: Mapping[str, str] | None = None
    ) -> Session:
        """The session ``body`` belongs to (found, or made), ready for ``session.manage(body)``.

        The body is parsed here once, and the ``manage`` of this same body
        object uses that parse. Bad input raises what ``manage`` would raise.
        """
        parsed = to_body(body)
        name = wire.resolve_api(api) if api else wire.detect_api(parsed)
        cache = self._caches[name]
        sid = session_id_of(parsed, headers)
        request = None
        if sid is None:
            request = wire.parse(parsed, name, cache)
            sid = conversation_id(request)
        session = self.get(sid)
        if request is None:
            request = wire.parse(parsed, name, cache)
        session._prime(body, parsed, request)
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
                    closing.append(self._live.pop(old)[0])
                found = self._live.pop(id, None)
                session = found[0] if found is not None else self._make(id)
                self._live[id] = (session, now)
                while len(self._live) > self.max_sessions:
                    closing.append(self._live.popitem(last=False)[1][0])
            return session
        finally:
            for old_session in closing:
                old_session.close()  # outside the lock: a store that hangs delays no other request

    def _make(self, id: str) -> Session:
        session = Session(id, store=self._store, policy=self.policy, token_counter=self.token_counter)
        session._caches = self._caches
        return session

    def close(self) -> None:
        """Close every live session (their archives stay, see the module) and the store; never raises."""
        with self._lock:
            self._closed = True
            live = [session for session, _ in self._live.values()]
            self._live.clear()
        for session in live:
            session.close()
        owned, self._owned = self._owned, None
        if owned is not None:
            with contextlib.suppress(StoreError):
                owned.close()

    def __enter__(self) -> Sessions:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
