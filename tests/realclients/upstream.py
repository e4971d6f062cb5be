"""A scripted model provider on a loopback port, for real clients to talk to.

:class:`Upstream` runs an aiohttp server in its own thread. It answers

- ``POST /v1/messages`` (Anthropic Messages, streamed or not) and
  ``POST /v1/messages/count_tokens``; ``HEAD /`` and ``GET /v1/models``;
- ``POST /v1/responses`` (OpenAI Responses, streamed or not); ``GET /v1/models``.

Every conversation request is first checked as the provider would check it:
the pairing rules (by this package's own strict check, and by
``toolbudget.validate`` for comparison) and a context limit on an estimate of
the body's size (a quarter of its bytes, in tokens). A request that breaks
either is answered with the provider's real error, status and wording, so a
client sees what it would see in production. Otherwise the script decides the
answer (:mod:`realclients.script`).

Every request is recorded (:class:`Recorded`): method, path, query, headers
without credentials, the decoded body, what the checks found and what was
answered. Everything the upstream makes is deterministic (ids count up per
server) so two runs of a test send the client the same bytes.
"""

from __future__ import annotations

import gzip
import hashlib
import threading
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import orjson
from aiohttp import web

import toolbudget

from . import anthropic, responses
from .script import Reply, Script, Steps, Turn
from .serving import ThreadedApp

__all__ = ["CREDENTIAL_HEADERS", "Recorded", "Upstream"]

# Headers whose values are secrets: recorded as present, never by value.
CREDENTIAL_HEADERS = frozenset(
    {"x-api-key", "authorization", "cookie", "proxy-authorization", "x-goog-api-key"}
)

MODELS = ("claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001", "gpt-5-codex")


@dataclass(frozen=True)
class Recorded:
    """One request the upstream received, and what it answered."""

    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    """Lower-cased names; credentials appear as ``<redacted>``."""
    body: Any
    """The JSON body (decoded from any content-encoding), or ``None``."""
    size: int
    """The body's bytes as decoded."""
    content_encoding: str | None
    api: str | None
    """``anthropic`` or ``openai-responses`` for conversation requests."""
    violations: tuple[str, ...] = ()
    """The pairing rules broken, by the upstream's own strict check."""
    toolbudget_violations: tuple[str, ...] = ()
    """The same request as ``toolbudget.validate`` sees it."""
    tokens: int = 0
    """The upstream's estimate of the request's size, in tokens."""
    answer: str = ""
    """``turn``, ``side``, ``overflow``, ``pairing``, ``count``, ``models``, ``probe`` or ``unknown``."""
    status: int = 200
    stream: bool = False
    turn: int | None = None
    reply: Reply | None = None


def _decode(raw: bytes, encoding: str | None) -> bytes:
    if not encoding or encoding == "identity":
        return raw
    if encoding == "gzip":
        return gzip.decompress(raw)
    if encoding == "deflate":
        return zlib.decompress(raw)
    if encoding == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    raise ValueError(f"unsupported content-encoding {encoding}")


def _headers(request: web.Request) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in request.headers.items():
        key = name.lower()
        out[key] = "<redacted>" if key in CREDENTIAL_HEADERS else value
    return out


class Upstream:
    """The scripted provider. Start it with :meth:`start` (or use it as a context manager).

    ``script`` answers the turns (requests that offer tools); ``context_limit`` is
    the window in estimated tokens (``None``: no limit); ``overflow_in_stream`` makes
    a streamed Responses overflow a ``response.failed`` event in a 200 stream
    instead of an HTTP 400. A test may change them between client runs.
    """

    def __init__(
        self,
        script: Script | None = None,
        *,
        context_limit: int | None = None,
        overflow_in_stream: bool = False,
        side_text: str = "ok",
    ) -> None:
        self.script: Script = script if script is not None else Steps(())
        self.context_limit = context_limit
        self.overflow_in_stream = overflow_in_stream
        self.side_text = side_text
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._counter = 0
        self._turns = 0
        self._signatures: set[str] = set()
        self._server = ThreadedApp(self._handle, "scripted-upstream")

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The root URL (no ``/v1``): what ``ANTHROPIC_BASE_URL`` takes."""
        return self._server.url

    def start(self) -> Upstream:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> Upstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what the tests read ---------------------------------------------------------------

    def conversation_requests(self, api: str | None = None) -> list[Recorded]:
        """The recorded requests that carry a conversation (of ``api``, when given)."""
        with self._lock:
            found = [r for r in self.requests if r.api is not None]
        return [r for r in found if api is None or r.api == api]

    def turns(self) -> list[Recorded]:
        """The requests the script answered."""
        with self._lock:
            return [r for r in self.requests if r.answer == "turn"]

    # -- serving ---------------------------------------------------------------------------

    def _next_id(self) -> int:
        with self._lock:
            self._counter += 1
            return self._counter

    def _record(self, recorded: Recorded) -> None:
        with self._lock:
            self.requests.append(recorded)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        encoding = request.headers.get("content-encoding")
        decoded = _decode(raw, encoding.lower() if encoding else None)
        body: Any = None
        if decoded:
            try:
                body = orjson.loads(decoded)
            except orjson.JSONDecodeError:
                body = None
        base = Recorded(
            method=request.method,
            path=request.path,
            query=dict(request.query),
            headers=_headers(request),
            body=body,
            size=len(decoded),
            content_encoding=encoding,
            api=None,
        )
        path = request.path.rstrip("/")
        if request.method == "POST" and path == "/v1/messages" and isinstance(body, dict):
            return await self._conversation(request, base, "anthropic", body, len(decoded))
        if request.method == "POST" and path == "/v1/responses" and isinstance(body, dict):
            return await self._conversation(request, base, "openai-responses", body, len(decoded))
        if request.method == "POST" and path == "/v1/messages/count_tokens" and isinstance(body, dict):
            tokens = len(decoded) // 4
            self._record(_replace(base, api=None, answer="count", tokens=tokens))
            return web.json_response({"input_tokens": tokens})
        if request.method == "GET" and path == "/v1/models":
            self._record(_replace(base, answer="models"))
            data = [
                {"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                for m in MODELS
            ]
            return web.json_response(
                {"data": data, "has_more": False, "first_id": MODELS[0], "last_id": MODELS[-1]}
            )
        if request.method == "HEAD" and path == "":
            self._record(_replace(base, answer="probe"))
            return web.Response(status=200)
        self._record(_replace(base, answer="unknown", status=404))
        return web.json_response(
            {"type": "error", "error": {"type": "not_found_error", "message": f"no route {request.path}"}},
            status=404,
        )

    async def _conversation(
        self, request: web.Request, base: Recorded, api: str, body: dict[str, Any], size: int
    ) -> web.StreamResponse:
        wire = anthropic if api == "anthropic" else responses
        violations = tuple(wire.check_pairing(body))
        if api == "anthropic":
            with self._lock:
                issued = frozenset(self._signatures)
            violations += tuple(anthropic.check_thinking(body, issued))
        try:
            theirs = tuple(str(v) for v in toolbudget.validate(body, api=api))
        except toolbudget.ToolbudgetError as exc:
            theirs = (f"toolbudget could not parse the body: {exc}",)
        tokens = size // 4
        stream = bool(body.get("stream"))
        model = str(body.get("model") or MODELS[0])
        recorded = _replace(
            base, api=api, violations=violations, toolbudget_violations=theirs, tokens=tokens, stream=stream
        )
        if violations:
            self._record(_replace(recorded, answer="pairing", status=400))
            if api == "anthropic":
                return _json_error(400, anthropic.error_body("invalid_request_error", violations[0]))
            return _json_error(400, responses.error_body(violations[0], code=None, param="input"))
        if self.context_limit is not None and tokens > self.context_limit:
            in_stream = api == "openai-responses" and stream and self.overflow_in_stream
            self._record(_replace(recorded, answer="overflow", status=200 if in_stream else 400))
            if api == "anthropic":
                text = anthropic.overflow_message(tokens, self.context_limit)
                return _json_error(400, anthropic.error_body("invalid_request_error", text))
            if in_stream:
                resp_id = f"resp_{self._next_id():06d}"
                events = responses.failed_event(
                    responses.OVERFLOW_MESSAGE, code="context_length_exceeded", resp_id=resp_id, model=model
                )
                return await _sse(request, events)
            return _json_error(
                400,
                responses.error_body(
                    responses.OVERFLOW_MESSAGE, code="context_length_exceeded", param="input"
                ),
            )
        tools = wire.tool_names(body)
        if tools:
            with self._lock:
                number = self._turns
                self._turns += 1
            turn = Turn(api, body, number, wire.results_of_last_turn(body), tools)
            reply = self.script(turn)
            self._record(_replace(recorded, answer="turn", turn=number, reply=reply))
        else:
            reply = Reply(text=self.side_text)
            self._record(_replace(recorded, answer="side", reply=reply))
        serial = self._next_id()
        prefix = "toolu_" if api == "anthropic" else "call_"
        ids = [f"{prefix}{serial:06d}{i:02d}" for i in range(len(reply.calls))]
        if api == "anthropic":
            msg_id = f"msg_{serial:06d}"
            thinking = self._thinking(body, msg_id) if anthropic.thinking_on(body) else None
            if stream:
                events = anthropic.stream_events(
                    reply, msg_id=msg_id, ids=ids, model=model, input_tokens=tokens, thinking=thinking
                )
                return await _sse(request, events)
            answer = anthropic.message(
                reply, msg_id=msg_id, ids=ids, model=model, input_tokens=tokens, thinking=thinking
            )
            return web.json_response(answer)
        resp_id = f"resp_{serial:06d}"
        if stream:
            return await _sse(
                request,
                responses.stream_events(reply, resp_id=resp_id, ids=ids, model=model, input_tokens=tokens),
            )
        return web.json_response(
            responses.response(reply, resp_id=resp_id, ids=ids, model=model, input_tokens=tokens)
        )

    def _thinking(self, body: Mapping[str, Any], msg_id: str) -> tuple[str, str]:
        """A thinking block for an answer, as a model with thinking on leads with one.

        Its signature is remembered: a later request must send it back unchanged.
        """
        signature = "sig" + hashlib.sha256(msg_id.encode()).hexdigest()
        with self._lock:
            self._signatures.add(signature)
        display = body.get("thinking", {}).get("display")
        return ("" if display == "omitted" else "Choosing the next step.", signature)


def _replace(recorded: Recorded, **changes: Any) -> Recorded:
    return replace(recorded, **changes)


def _json_error(status: int, payload: bytes) -> web.Response:
    return web.Response(status=status, body=payload, content_type="application/json")


async def _sse(request: web.Request, events: Iterable[bytes] | Iterator[bytes]) -> web.StreamResponse:
    response = web.StreamResponse(
        status=200, headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    for chunk in events:
        await response.write(chunk)
    await response.write_eof()
    return response
