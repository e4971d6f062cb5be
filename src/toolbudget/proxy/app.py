"""The proxy's handlers: HTTP to wire bodies at the edge, then the one managed call.

A managed request (``POST /v1/messages``, ``/v1/chat/completions``,
``/v1/responses``, Gemini ``:generateContent`` / ``:streamGenerateContent``)
is read whole, decoded, checked to be a JSON object, given its session by the
pool (in its credential's namespace) and driven through
:class:`~toolbudget.ManagedCall` with a ``send`` that posts each body upstream:

- a **stream** is an opaque answer: the flow recovers from an overflow the
  upstream states before its first byte (its error status comes first), and
  once the upstream answers with success, its status, headers and bytes go to
  the client as they arrive, never buffered or rewritten; a side copy is read
  for usage;
- any other answer is read as JSON, so it gets all the flow gives: recovery,
  ``max_tokens`` escalation and continuation, and a truncated tool call never
  handed back runnable. An answer the flow did not change goes back as the
  very bytes the upstream sent.

A body the flow did not change goes upstream as the client's own bytes. An
upstream error goes back with its status, headers and body as they came. What
the proxy itself refuses (not JSON, a shape no API has) gets the API's own
error envelope with status 400, and nothing is sent upstream; an upstream that
cannot be reached gets a 502 (504 when it is too slow) in that envelope.

Everything else passes through byte for byte, streamed both ways.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import ClientError, ClientResponse, ClientSession, ClientTimeout, TCPConnector, web

from ..callreport import CallReport
from ..errors import (
    InputError,
    InvalidJSON,
    NotFoundError,
    RecoveryExhausted,
    ShapeError,
    StoreError,
    UpstreamError,
)
from ..flow import ManagedCall, Outcome, adrive, opaque
from ..jsonio import dumps, keep_literals, utf8_error
from ..model import Usage
from ..policy import Policy
from ..session import Report, Session
from ..sessions import Sessions
from .bodies import decode_body
from .config import ProxyConfig
from .errors import error_body
from .memory import trim
from .metrics import Metrics
from .offload import Offload
from .routes import Route, route_of
from .streaming import UsageTap, usage_of_reply
from .tenancy import tenant_of
from .upstream import forwarded, upstream_url

__all__ = ["PROXY_KEY", "Proxy", "create_app"]

_log = logging.getLogger("toolbudget.proxy")

_JSON = "application/json"
CLIENT_CLOSED = 499
"""The status a request's log line and metrics give it when its client went away before the answer ended."""
_LARGE_BODY = 1 << 20
"""aiohttp's own threshold for a body it would rather read from a buffer."""


def arrival_time() -> float:
    """When a managed request reached the proxy: wall-clock seconds (:func:`time.time`).

    The schedule compares it with the previous request's arrival to tell an
    idle gap longer than the cache's TTL, and the previous one may have
    reached another replica sharing the store: so the wall clock, which
    replicas agree on, not a monotonic clock, which they do not.
    """
    return time.time()


@dataclass(frozen=True, slots=True)
class _Answer:
    """A whole upstream answer: what the flow reads, and the bytes the client gets when nothing changed."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


class Proxy:
    """The state of one proxy app: its settings, sessions, upstream connection pool and metrics."""

    def __init__(self, config: ProxyConfig, sessions: Sessions | None = None) -> None:
        self.config = config
        self.policy = config.policy if config.policy is not None else Policy.load()
        store = config.store if config.store is not None else (self.policy.store or "dir:")
        self.sessions = (
            sessions
            if sessions is not None
            else Sessions(
                store=store,
                policy=self.policy,
                max_sessions=config.max_sessions,
                max_held_bytes=config.max_held_bytes,
                idle_seconds=config.idle_seconds,
                # The records no marker names are written while the upstream answers (see _settled).
                write_later=True,
            )
        )
        self._own_sessions = sessions is None
        self.metrics = Metrics()
        pool = self.sessions
        self.metrics.watch(lambda: len(pool), lambda: pool.held_bytes, lambda: pool.cached_entries)
        self.client: ClientSession | None = None
        # Managing off the loop when the store is slow: its waits stall no other client (see .offload).
        self.offload = None if config.offload == "never" else Offload(always=config.offload == "always")

    async def _trimming(self, every: float) -> None:
        """Hand freed memory back to the system after sessions were dropped, at most once per ``every`` s."""
        loop = asyncio.get_running_loop()
        seen = self.sessions.dropped
        while True:
            await asyncio.sleep(every)
            dropped = self.sessions.dropped
            if dropped != seen:
                seen = dropped
                await loop.run_in_executor(None, trim)  # off the loop: the call holds no interpreter lock

    async def start(self, _app: web.Application) -> AsyncIterator[None]:
        every = self.config.trim_seconds
        trimming = (
            asyncio.get_running_loop().create_task(self._trimming(every)) if every is not None else None
        )
        timeout = ClientTimeout(
            total=None, sock_connect=self.config.connect_timeout, sock_read=self.config.read_timeout
        )
        self.client = ClientSession(
            connector=TCPConnector(limit=1000, limit_per_host=500),
            timeout=timeout,
            auto_decompress=False,  # bytes go back as the upstream encoded them
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
            cookie_jar=None,
        )
        try:
            yield
        finally:
            if trimming is not None:
                trimming.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await trimming
            await self.client.close()
            if self.offload is not None:
                self.offload.close()
            if self._own_sessions:
                self.sessions.close()

    # --- dispatch ------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        headers = request.headers
        route = route_of(request.method, request.path, headers)
        if headers.get("upgrade", "").lower() == "websocket":
            # Codex falls back to HTTP when its handshake is refused; a socket is never managed.
            return _error(route.family, 426, "WebSocket is not served here; send the request over HTTP")
        if route.kind == "metrics":
            return web.Response(body=self.metrics.render(), content_type="text/plain", charset="utf-8")
        if route.kind == "healthz":
            return web.json_response({"status": "ok"})
        started = time.perf_counter()
        if route.kind == "recall":
            answer = await self._recall(request)
            self._log(_Line(route, answer.status, started, path=request.path))
            return answer
        try:
            if route.kind == "passthrough":
                return await self._passthrough(request, route)
            return await self._managed(request, route)
        except asyncio.CancelledError:
            self._gone(route, started)
            raise

    def _gone(self, route: Route, started: float) -> None:
        """A request cancelled before its answer ended (its client went away): counted and logged too.

        Without this line the requests a client gave up on, often the slowest, were missing from
        the metrics and the log alike. The status is nginx's 499 (client closed the request).
        """
        self.metrics.requests.labels(route.api or "passthrough", str(CLIENT_CLOSED)).inc()
        line = {
            "api": route.api or "passthrough",
            "status": CLIENT_CLOSED,
            "ms": round((time.perf_counter() - started) * 1000, 2),
            "note": "cancelled before the answer ended: the client went away",
        }
        _log.info(orjson.dumps(line).decode())

    # --- managed calls -------------------------------------------------------------------

    async def _read_body(self, request: web.Request, route: Route) -> bytes | web.Response:
        limit = self.config.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            return _error(route.family, 413, f"the request body is over {limit} bytes")
        raw = await request.read()
        try:
            return decode_body(raw, request.headers.get("content-encoding"), limit)
        except InputError as exc:
            return _error(route.family, 400, str(exc))

    async def _managed(self, request: web.Request, route: Route) -> web.StreamResponse:
        started = time.perf_counter()
        arrived = arrival_time()
        assert route.api is not None
        body = await self._read_body(request, route)
        if isinstance(body, web.Response):
            return self._done(route, body, started)
        try:
            parsed = _read_json(body)
        except _BeyondDouble as exc:
            return await self._unmanaged(request, route, exc)
        except InputError as exc:
            return self._done(route, _error(route.family, 400, str(exc)), started)
        if not isinstance(parsed, dict):
            message = f"the request body must be a JSON object, not {type(parsed).__name__}"
            return self._done(route, _error(route.family, 400, message), started)
        stream = route.stream if route.stream is not None else parsed.get("stream") is True
        # The flow holds the parsed body (a whole answer's lengthening reads it, and managing a dict
        # costs half what bytes do); a body it leaves alone goes upstream as the client's own bytes.
        given: Any = parsed
        tenant = tenant_of(request.headers)
        try:
            session = self.sessions.for_request(given, api=route.api, headers=request.headers, tenant=tenant)
        except ShapeError as exc:
            return await self._unmanaged(request, route, exc)
        except InputError as exc:
            return self._done(route, _error(route.family, 400, str(exc)), started)
        if route.kind == "count":
            return await self._count(request, route, session, given, body, started)
        read = opaque if stream else _read_answer
        call = ManagedCall(session, given, route.api, read=read, stream=stream, now=arrived)
        out_headers = forwarded(request.headers.items(), drop=("content-encoding", "accept-encoding"))
        url = upstream_url(self.config.upstream(route.family), request.path_qs)
        timing: dict[str, float] = {}
        went = [0]  # bodies sent upstream: once one has gone, an unwritable retry is an error
        writing: list[asyncio.Future[None]] = []

        async def send(sent: Any) -> Any:
            if "manage" not in timing:
                timing["manage"] = time.perf_counter() - started
                self.metrics.manage_seconds.observe(timing["manage"])
            # Unchanged by the flow: the client's own bytes go upstream, not a re-serialisation.
            try:
                data = body if sent is given else _written(sent, given, body)
            except ShapeError as exc:
                raise exc if went[0] else _Unwritable(str(exc)) from None
            went[0] += 1
            if session.writes_pending:
                # The session's records are written while the upstream answers (see _settled).
                writing.append(asyncio.ensure_future(self._write_now(session)))
            return await self._send(url, out_headers, data, stream=stream)

        outcome: Outcome | None = None
        try:
            outcome = await (adrive(call, send) if self.offload is None else self.offload.drive(call, send))
        except _Unwritable as exc:  # nothing went upstream: the client's own bytes go
            return await self._unmanaged(request, route, exc)
        except ShapeError as exc:
            if "manage" in timing:  # something went upstream already: it is not sent twice
                return self._done(route, _error(route.family, 400, str(exc)), started)
            return await self._unmanaged(request, route, exc)
        except InputError as exc:
            return self._done(route, _error(route.family, 400, str(exc)), started)
        except RecoveryExhausted as exc:
            self._count_call(call, exc.report)
            if isinstance(exc.error, UpstreamError):
                return self._done(route, _upstream_error(exc.error), started, exc.report)
            return self._done(route, _error(route.family, 502, str(exc)), started, exc.report)
        except UpstreamError as exc:
            self._count_call(call, None)
            return self._done(route, _upstream_error(exc), started)
        except (ClientError, OSError) as exc:  # TimeoutError is an OSError
            self._count_call(call, None)
            return self._done(route, self._unreachable(route, exc), started)
        finally:
            if outcome is None or not stream:
                await self._settled(session, writing)  # a stream's wait is taken in _stream_back
        self._count_call(call, outcome.report)
        if stream:
            return await self._stream_back(request, route, outcome, started, session, writing)
        answer, usage = self._whole_back(route, outcome)
        self._finish(route, answer.status, started, outcome.report, usage)
        return answer

    async def _write_now(self, session: Session) -> None:
        """The session's records written, where its managing runs (:class:`Offload`)."""
        if self.offload is None:
            session.write_now()
        else:
            await self.offload.run(session.write_now)

    async def _settled(self, session: Session, writing: Sequence[asyncio.Future[None]]) -> None:
        """Make sure the session's records are in the store before the client hears back.

        They are written while the upstream answers (``write_later``): the
        next request of the conversation, which may reach another replica,
        comes only after this answer, so every replica then reads them.
        """
        for task in writing:
            await task
        if session.writes_pending:
            await self._write_now(session)

    async def _send(self, url: str, headers: list[tuple[str, str]], data: bytes, *, stream: bool) -> Any:
        """Post one body upstream: a stream's open response, or the whole answer; an error status raises."""
        assert self.client is not None
        sent = [*headers, ("Accept-Encoding", "identity")]
        response = await self.client.post(url, data=_payload(data), headers=sent)
        try:
            if response.status >= 400:
                raw = await response.read()
                raise UpstreamError(response.status, _pairs(response.raw_headers), raw)
            if stream:
                return response  # the caller streams it, then releases it
            return _Answer(response.status, _pairs(response.raw_headers), await response.read())
        except BaseException:
            response.release()
            raise

    async def _stream_back(
        self,
        request: web.Request,
        route: Route,
        outcome: Outcome,
        started: float,
        session: Session,
        writing: Sequence[asyncio.Future[None]],
    ) -> web.StreamResponse:
        upstream: ClientResponse = outcome.first
        assert route.api is not None
        self.metrics.ttfb_seconds.observe(time.perf_counter() - started)
        answer = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        _copy_headers(answer, upstream.raw_headers)
        answer.headers.setdefault("X-Accel-Buffering", "no")
        self._report_headers(answer, outcome.report)
        tap = UsageTap(route.api)
        written = 0
        try:
            await answer.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    if not written:
                        # Once a chunk is in hand: a reset that came meanwhile would lose what was read.
                        await self._settled(session, writing)
                    tap.feed(chunk)
                    await answer.write(chunk)
                    written += len(chunk)
            except (ClientError, OSError, TimeoutError) as exc:
                self.metrics.modified.inc(tap.bytes - written)
                self._reset(request, route, upstream.status, started, written, exc, outcome.report)
                return answer
            if not written:
                await self._settled(session, writing)
            await answer.write_eof()
        finally:
            upstream.release()
        self.metrics.modified.inc(tap.bytes - written)
        self.metrics.usage(tap.usage)
        self._finish(route, upstream.status, started, outcome.report, tap.usage)
        return answer

    def _whole_back(self, route: Route, outcome: Outcome) -> tuple[web.Response, Usage | None]:
        """The whole answer for the client, and the usage it states (for the metrics and the log line)."""
        assert route.api is not None
        first: _Answer = outcome.first
        if outcome.changed and outcome.data is not None:
            body = dumps(outcome.data)
            pairs = [(k, v) for k, v in first.headers if k.lower() != "content-encoding"]
        else:
            body, pairs = first.body, list(first.headers)
        answer = web.Response(status=first.status, body=body)
        _copy_headers(answer, pairs)
        self._report_headers(answer, outcome.report)
        usage = usage_of_reply(outcome.data, route.api) if outcome.data is not None else None
        self.metrics.usage(usage)
        return answer, usage

    async def _count(
        self, request: web.Request, route: Route, session: Session, given: Any, body: bytes, started: float
    ) -> web.StreamResponse:
        """Count the managed body upstream: the client sees what would really be sent, never an estimate."""
        try:
            if self.offload is None:
                managed = session.manage(given, route.api)
            else:
                managed = await self.offload.run(session.manage, given, route.api)
        except ShapeError as exc:
            return await self._unmanaged(request, route, exc)
        except InputError as exc:
            return self._done(route, _error(route.family, 400, str(exc)), started)
        try:
            data = body if managed.body is given else _written(managed.body, given, body)
        except ShapeError as exc:
            return await self._unmanaged(request, route, exc)
        out_headers = forwarded(request.headers.items(), drop=("content-encoding", "accept-encoding"))
        url = upstream_url(self.config.upstream(route.family), request.path_qs)
        writing = [asyncio.ensure_future(self._write_now(session))] if session.writes_pending else []
        try:
            answer = await self._send(url, out_headers, data, stream=False)
        except UpstreamError as exc:
            return self._done(route, _upstream_error(exc), started)
        except (ClientError, OSError) as exc:  # TimeoutError is an OSError
            return self._done(route, self._unreachable(route, exc), started)
        finally:
            await self._settled(session, writing)
        response = web.Response(status=answer.status, body=answer.body)
        _copy_headers(response, answer.headers)
        return self._done(route, response, started)

    def _unreachable(self, route: Route, exc: BaseException) -> web.Response:
        """The API's own error for an upstream that timed out (504) or could not be reached (502).

        aiohttp's read timeout is both a ``TimeoutError`` and a ``ClientError``,
        so the timeout is told first.
        """
        if isinstance(exc, TimeoutError):
            message = f"the upstream sent nothing for {self.config.read_timeout:g} s"
            return _error(route.family, 504, message)
        return _error(route.family, 502, f"the upstream could not be reached: {exc}")

    # --- passthrough ---------------------------------------------------------------------

    async def _unmanaged(self, request: web.Request, route: Route, exc: InputError) -> web.StreamResponse:
        """A body whose history toolbudget cannot read goes upstream as the client sent it.

        A block type, role or field newer than this version is the usual cause, or a number
        past a double's range (valid JSON that orjson does not read): the provider
        may take it, and then the agent goes on (unmanaged for this request). When the
        provider refuses it, the client gets the provider's own error, whose wording its
        retries match, not toolbudget's. The log line says why; ``toolbudget_unmanaged_total``
        counts them.
        """
        self.metrics.unmanaged.labels(route.api or "passthrough").inc()
        # Read already (aiohttp keeps the bytes as they came, before any content-encoding is undone).
        raw = await request.read()
        return await self._passthrough(request, route, raw, note=f"sent unmanaged: {exc}")

    async def _passthrough(
        self, request: web.Request, route: Route, data: bytes | None = None, note: str | None = None
    ) -> web.StreamResponse:
        """Any other request: method, path, query, body and headers as they came; the answer likewise."""
        assert self.client is not None
        started = time.perf_counter()
        url = upstream_url(self.config.upstream(route.family), request.path_qs)
        if data is None and request.can_read_body:
            data = await request.read()
        try:
            upstream = await self.client.request(
                request.method,
                url,
                data=_payload(data),
                headers=forwarded(request.headers.items()),
                allow_redirects=False,
            )
        except (ClientError, OSError) as exc:  # TimeoutError is an OSError
            return self._done(route, self._unreachable(route, exc), started)
        answer = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        _copy_headers(answer, upstream.raw_headers)
        if upstream.headers.get("content-length") is not None and request.method != "HEAD":
            answer.content_length = int(upstream.headers["content-length"])
        read = written = 0
        try:
            await answer.prepare(request)
            if request.method != "HEAD":
                try:
                    async for chunk in upstream.content.iter_any():
                        read += len(chunk)
                        await answer.write(chunk)
                        written += len(chunk)
                except (ClientError, OSError, TimeoutError) as exc:
                    self.metrics.modified.inc(read - written)
                    self._reset(request, route, upstream.status, started, written, exc, None)
                    return answer
            await answer.write_eof()
        finally:
            upstream.release()
        self.metrics.modified.inc(read - written)
        self._finish(route, upstream.status, started, None, None, note, request.path)
        return answer

    # --- the proxy's own recall ----------------------------------------------------------

    async def _recall(self, request: web.Request) -> web.Response:
        """``GET /toolbudget/recall/SESSION/KEY``: an archived original, in the caller's namespace only.

        The store is read on a thread: a store that hangs holds up this
        request for its bound, never the loop and the other clients' bytes.
        """
        parts = request.path.split("/")
        if len(parts) != 5 or not parts[3] or not parts[4]:
            return _error("openai", 404, "use /toolbudget/recall/SESSION/KEY")
        tenant = tenant_of(request.headers)
        # The id as the client names it, or as x-toolbudget-session shows it: in the caller's namespace.
        named = parts[3] if parts[3].startswith(f"{tenant}-") else f"{tenant}-{parts[3]}"
        try:
            text = await asyncio.to_thread(self._original, named, parts[4])
        except NotFoundError as exc:
            self.metrics.recalls.labels("not_found").inc()
            return _error("openai", 404, str(exc))
        except StoreError as exc:
            self.metrics.recalls.labels("store_error").inc()
            return _error("openai", 503, f"the archive could not be read: {exc}")
        self.metrics.recalls.labels("found").inc()
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    def _original(self, session_id: str, key: str) -> str:
        return self.sessions.get(session_id).original(key)

    # --- accounting ----------------------------------------------------------------------

    def _count_call(self, call: ManagedCall, report: CallReport | None) -> None:
        climb = call.climb
        if climb is None:
            return
        managed: Report = climb.managed.report
        m = self.metrics
        m.tokens.labels("before", "none").inc(managed.tokens_before)
        m.tokens.labels("after", "none").inc(
            report.tokens_sent if report is not None else managed.tokens_after
        )
        m.results_cut.inc(managed.results_cut)
        m.store_fallbacks.inc(managed.store_fallbacks)
        for cut in managed.cuts:
            m.chars_removed.labels(cut.reason).inc(max(0, cut.before - cut.after))
        for attempt in climb.attempts:
            m.recovery.labels(str(attempt.level)).inc()
        if report is not None:
            if report.escalations:
                m.escalations.labels("escalation").inc(report.escalations)
            if report.continuations:
                m.escalations.labels("continuation").inc(report.continuations)

    def _reset(
        self,
        request: web.Request,
        route: Route,
        status: int,
        started: float,
        written: int,
        exc: BaseException,
        report: CallReport | None,
    ) -> None:
        """The upstream died after the answer began: the client gets what was sent and a closed
        connection (never a clean end, which would pass a cut answer off as whole), and the log
        one warning line. Raising instead would have the server log a traceback per reset, and a
        flaky upstream would flood the log with them."""
        self.metrics.requests.labels(route.api or "passthrough", str(status)).inc()
        line: dict[str, Any] = {
            "api": route.api or "passthrough",
            "status": status,
            "ms": round((time.perf_counter() - started) * 1000, 2),
            "note": "upstream reset mid-stream",
            "bytes_sent": written,
            "error": " ".join(f"{type(exc).__name__}: {exc}".split())[:300],
        }
        if report is not None:
            line["session"] = report.managed.session
        _log.warning(orjson.dumps(line).decode())
        if request.transport is not None:
            request.transport.close()  # what was written is flushed first, then the connection ends

    def _report_headers(self, answer: web.StreamResponse, report: CallReport | None) -> None:
        if not self.config.report_headers or report is None:
            return
        managed = report.managed
        answer.headers["x-toolbudget-session"] = managed.session
        answer.headers["x-toolbudget-tokens-before"] = str(managed.tokens_before)
        answer.headers["x-toolbudget-tokens-after"] = str(report.tokens_sent)
        answer.headers["x-toolbudget-results-cut"] = str(managed.results_cut)
        answer.headers["x-toolbudget-level"] = str(report.level)

    def _done(
        self, route: Route, answer: web.Response, started: float, report: CallReport | None = None
    ) -> web.Response:
        self._finish(route, answer.status, started, report, None)
        return answer

    def _finish(
        self,
        route: Route,
        status: int,
        started: float,
        report: CallReport | None,
        usage: Usage | None,
        note: str | None = None,
        path: str | None = None,
    ) -> None:
        elapsed = time.perf_counter() - started
        self.metrics.requests.labels(route.api or "passthrough", str(status)).inc()
        self.metrics.request_seconds.observe(elapsed)
        self._log(_Line(route, status, started, note, path), report, usage)

    def _log(self, said: _Line, report: CallReport | None = None, usage: Usage | None = None) -> None:
        """One line per request: what was done and how big, never a body or a credential.

        A request that is not a managed call (passed through, or a recall) says its path,
        without the query, which may hold a key (Gemini's ``?key=``).
        """
        note = said.note
        if note is None and not _log.isEnabledFor(logging.INFO):
            return
        line: dict[str, Any] = {
            "api": said.route.api or said.route.kind,
            "status": said.status,
            "ms": round((time.perf_counter() - said.started) * 1000, 2),
        }
        if said.path is not None:
            line["path"] = said.path[:200]
        if report is not None:
            managed = report.managed
            line.update(
                session=managed.session,
                chars_before=managed.chars_before,
                chars_after=managed.chars_after,
                tokens_before=managed.tokens_before,
                tokens_after=report.tokens_sent,
                results_cut=managed.results_cut,
                store_fallbacks=managed.store_fallbacks,
                level=report.level,
                escalations=report.escalations,
                continuations=report.continuations,
            )
        if usage is not None:
            line.update(
                usage_input=usage.input,
                usage_cache_read=usage.cache_read,
                usage_cache_write=usage.cache_write,
            )
        if note is not None:
            line["note"] = " ".join(note.split())[:300]
            _log.warning(orjson.dumps(line).decode())
            return
        _log.info(orjson.dumps(line).decode())


@dataclass(frozen=True, slots=True)
class _Line:
    """What every request's log line says, whatever was done for it."""

    route: Route
    status: int
    started: float
    note: str | None = None
    """Why the request was sent unmanaged: the line is then a warning."""
    path: str | None = None


def _read_json(body: bytes) -> Any:
    """The request body read as JSON; ``InputError`` saying what is wrong.

    orjson calls any byte that is not UTF-8 a surrogate at the first
    character; the library's readers point at the byte. An integer past 64
    bits is read as a float here, as orjson reads it: nothing the proxy
    manages is a number, and a body it changes is written with the client's
    own literals (:func:`_written`), so the float never goes upstream. Reading
    it exactly would look at every byte of every body again (as long as
    orjson's whole parse of it, measured), for a number a body rarely holds.
    """
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if "infinity" in str(exc):
            raise _BeyondDouble(f"the request body holds a number past a double's range: {exc}") from None
        if "depth limit exceeded" in str(exc):
            raise _BeyondDouble(f"the request body is nested deeper than the proxy reads: {exc}") from None
        raise utf8_error(body, "the request body") or InvalidJSON(
            f"the request body is not JSON: {exc}"
        ) from None


class _Unwritable(ShapeError):
    """A managed body JSON cannot hold once written (nested past what a writer can go): nothing
    was sent yet, so the client's own bytes go upstream unmanaged."""


class _BeyondDouble(InvalidJSON):
    """Valid JSON that orjson does not read (a number past a double's range such as ``1e400``, or
    nesting past its 1,024 levels): sent upstream unmanaged, not refused."""


def _written(sent: Any, given: Any, body: bytes) -> bytes:
    """A body the flow changed, as JSON, with every number it kept from ``body`` in its own literal.

    ``given`` is ``body`` as read; ``sent`` shares its untouched objects. A
    number orjson would write another way (``1E5``, ``1.50``, more digits than
    a double holds) travels as the client wrote it, as through the library.
    """
    return dumps(keep_literals(sent, given, body))


def _read_answer(answer: Any) -> Mapping[str, Any] | None:
    """The JSON of a whole answer, for the flow; ``None`` when it is not a JSON object."""
    if not isinstance(answer, _Answer):
        return None
    try:
        data = orjson.loads(answer.body)
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _pairs(raw: Any) -> tuple[tuple[str, str], ...]:
    return tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in raw)


def _copy_headers(answer: web.StreamResponse, pairs: Any) -> None:
    """The upstream's answer headers, as they came, without those of its connection."""
    if pairs and isinstance(next(iter(pairs))[0], bytes):
        pairs = _pairs(pairs)
    for name, value in forwarded(pairs):
        answer.headers.add(name, value)


def _payload(data: bytes | None) -> bytes | io.BytesIO | None:
    """A body for aiohttp: over a mebibyte it is written from a buffer in pieces, as aiohttp asks
    (it warns that raw bytes that large may hold up the event loop)."""
    return io.BytesIO(data) if data is not None and len(data) > _LARGE_BODY else data


def _upstream_error(error: UpstreamError) -> web.Response:
    """An upstream's error answer, returned as it came: clients match the provider's own wording."""
    answer = web.Response(status=error.status, body=error.body)
    _copy_headers(answer, error.headers)
    return answer


def _error(family: str, status: int, message: str) -> web.Response:
    return web.Response(status=status, body=error_body(family, status, message), content_type=_JSON)


PROXY_KEY: web.AppKey[Proxy] = web.AppKey("toolbudget_proxy", Proxy)


def create_app(config: ProxyConfig | None = None, *, sessions: Sessions | None = None) -> web.Application:
    """The proxy as an aiohttp application: serve it with :func:`toolbudget.proxy.server.serve`.

    ``sessions`` is a pool to use instead of one made from the config (a test's
    store); the app closes only the pool it made.
    """
    proxy = Proxy(config if config is not None else ProxyConfig(), sessions)
    app = web.Application(client_max_size=proxy.config.max_body_bytes + 1, handler_args=None)
    app[PROXY_KEY] = proxy
    app.cleanup_ctx.append(proxy.start)
    app.router.add_route("*", "/{tail:.*}", proxy.handle)
    return app
