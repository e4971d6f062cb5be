"""A local upstream for the proxy's tests: it records every request and answers like the providers.

It speaks Anthropic Messages (``/v1/messages``, ``/v1/messages/count_tokens``),
OpenAI Chat (``/v1/chat/completions``) and Responses (``/v1/responses``),
streamed (server-sent events, in the providers' own event grammars, usage
with cache counts included) or not. A body over ``limit_chars`` gets the
provider's real overflow error (Anthropic's ``prompt is too long: N tokens >
M maximum``, OpenAI's ``context_length_exceeded``), so the proxy's recovery
meets the wording it meets in production. ``script`` holds answers to give
instead, first in first out: a status and body, or an async handler of the request.
Any other path is echoed as JSON, with the body's length, so a passthrough
test sees what arrived.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from toolbudget.proxy.server import RunningProxy

__all__ = ["Received", "ScriptedUpstream", "upstream"]


@dataclass(frozen=True)
class Received:
    method: str
    path_qs: str
    headers: dict[str, str]
    raw_headers: tuple[tuple[bytes, bytes], ...]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


Scripted = Callable[[web.Request, Received], Awaitable[web.StreamResponse]] | tuple[int, bytes]
"""A scripted answer: a status and a JSON body, or a handler of the request (it may stream)."""


@dataclass
class ScriptedUpstream:
    limit_chars: int | None = None
    received: list[Received] = field(default_factory=list)
    script: list[Scripted] = field(default_factory=list)
    chunk_delay: float = 0.0
    """Seconds between stream events (a slow model)."""
    reset_after: int | None = None
    """Close the connection after this many stream events (an upstream that dies mid-stream)."""
    cancelled: int = 0
    """Requests whose client went away before their answer was finished."""
    model: Callable[[Received], Scripted] | None = None
    """Plays the model when the script is empty: given each request, it says how to answer."""

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        got = Received(
            request.method,
            request.path_qs,
            {k.lower(): v for k, v in request.headers.items()},
            tuple(request.raw_headers),
            body,
        )
        self.received.append(got)
        if self.script:
            step = self.script.pop(0)
            if isinstance(step, tuple):
                return web.Response(status=step[0], body=step[1], content_type="application/json")
            return await step(request, got)
        if self.model is not None:
            chosen = self.model(got)
            if isinstance(chosen, tuple):
                return web.Response(status=chosen[0], body=chosen[1], content_type="application/json")
            return await chosen(request, got)
        path = request.path
        try:
            if path == "/v1/messages/count_tokens":
                return web.json_response({"input_tokens": len(body) // 4})
            if path == "/v1/messages":
                return await self._answer(request, got, "anthropic")
            if path == "/v1/chat/completions":
                return await self._answer(request, got, "openai-chat")
            if path == "/v1/responses":
                return await self._answer(request, got, "openai-responses")
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return web.json_response(
            {"method": request.method, "path_qs": request.path_qs, "length": len(body)},
            headers={"x-upstream-echo": "1"},
        )

    async def _answer(self, request: web.Request, got: Received, api: str) -> web.StreamResponse:
        data = got.json()
        size = len(got.body)
        if self.limit_chars is not None and size > self.limit_chars:
            return _overflow(api, size // 4, self.limit_chars // 4)
        text = f"seen {len(data.get('messages', data.get('input', [])))} messages"
        if data.get("stream") is True:
            return await self._stream(request, api, text, size)
        return web.json_response(_whole(api, text, size))

    async def _stream(self, request: web.Request, api: str, text: str, size: int) -> web.StreamResponse:
        answer = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        await answer.prepare(request)
        for number, event in enumerate(_events(api, text, size)):
            if self.reset_after is not None and number >= self.reset_after:
                assert request.transport is not None
                request.transport.close()
                return answer
            await answer.write(event)
            if self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
        await answer.write_eof()
        return answer


def _overflow(api: str, tokens: int, limit: int) -> web.Response:
    if api == "anthropic":
        error = {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": f"prompt is too long: {tokens} tokens > {limit} maximum",
            },
        }
    else:
        error = {
            "error": {
                "message": f"This model's maximum context length is {limit} tokens. However, your messages "
                f"resulted in {tokens} tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
    return web.json_response(error, status=400, headers={"request-id": "req_overflow"})


def _whole(api: str, text: str, size: int) -> dict[str, Any]:
    if api == "anthropic":
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": size // 4,
                "output_tokens": 3,
                "cache_read_input_tokens": 7,
                "cache_creation_input_tokens": 5,
            },
        }
    if api == "openai-chat":
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-test",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {
                "prompt_tokens": size // 4,
                "completion_tokens": 3,
                "total_tokens": size // 4 + 3,
                "prompt_tokens_details": {"cached_tokens": 7},
            },
        }
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "gpt-test",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "usage": {
            "input_tokens": size // 4,
            "output_tokens": 3,
            "total_tokens": size // 4 + 3,
            "input_tokens_details": {"cached_tokens": 7},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


def _events(api: str, text: str, size: int) -> list[bytes]:
    whole = _whole(api, text, size)
    if api == "anthropic":
        start = {**whole, "content": [], "stop_reason": None}
        start["usage"] = {**whole["usage"], "output_tokens": 1}
        return [
            _sse("message_start", {"type": "message_start", "message": start}),
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            _sse("ping", {"type": "ping"}),
            *[
                _sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": word + " "},
                    },
                )
                for word in text.split()
            ],
            _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 3},
                },
            ),
            _sse("message_stop", {"type": "message_stop"}),
        ]
    if api == "openai-chat":
        base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test"}
        chunks = [
            {
                **base,
                "choices": [
                    {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
                ],
            },
            *[
                {**base, "choices": [{"index": 0, "delta": {"content": word + " "}, "finish_reason": None}]}
                for word in text.split()
            ],
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {**base, "choices": [], "usage": whole["usage"]},
        ]
        return [_sse(None, chunk) for chunk in chunks] + [b"data: [DONE]\n\n"]
    created = {**whole, "status": "in_progress", "output": [], "usage": None}
    item = whole["output"][0]
    return [
        _sse("response.created", {"type": "response.created", "sequence_number": 0, "response": created}),
        _sse(
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "sequence_number": 1,
                "output_index": 0,
                "item": {**item, "content": [], "status": "in_progress"},
            },
        ),
        _sse(
            "response.content_part.added",
            {
                "type": "response.content_part.added",
                "sequence_number": 1,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []},
            },
        ),
        _sse(
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "sequence_number": 2,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": text,
                "logprobs": [],
            },
        ),
        _sse(
            "response.output_item.done",
            {"type": "response.output_item.done", "sequence_number": 3, "output_index": 0, "item": item},
        ),
        _sse("response.completed", {"type": "response.completed", "sequence_number": 4, "response": whole}),
    ]


@contextmanager
def upstream(scripted: ScriptedUpstream | None = None) -> Iterator[tuple[ScriptedUpstream, str]]:
    """A scripted upstream serving on a free port for the ``with`` block: it, and its URL."""
    scripted = scripted if scripted is not None else ScriptedUpstream()
    server = RunningProxy(scripted.app(), "127.0.0.1")
    server.start()
    try:
        yield scripted, server.url
    finally:
        server.stop()


def anthropic_events(message: dict[str, Any]) -> bytes:
    """``message`` (a whole Messages reply) as the event stream the API would send for it."""
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    out = [_sse("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            opened = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": orjson.dumps(block["input"]).decode()}
        else:
            opened = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        out.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opened},
            )
        )
        out.append(
            _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        )
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    out.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        )
    )
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return b"".join(out)


def anthropic_reply(content: list[dict[str, Any]], stop: str = "end_turn") -> Scripted:
    """A scripted Messages answer holding ``content``, streamed when the request asks for a stream."""

    async def handler(request: web.Request, got: Received) -> web.StreamResponse:
        message = {
            "id": "msg_s",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": len(got.body) // 4, "output_tokens": 9},
        }
        if got.json().get("stream") is not True:
            return web.json_response(message)
        answer = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await answer.prepare(request)
        await answer.write(anthropic_events(message))
        await answer.write_eof()
        return answer

    return handler
