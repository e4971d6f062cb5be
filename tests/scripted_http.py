"""A scripted provider endpoint on localhost, for a real SDK client (botocore, google-genai) to talk to.

The SDK signs, serialises and parses for real. Each reply is taken from a
script in order: a JSON answer with a status and headers (an error is one
too, as the provider words it), Server-Sent Events (Gemini's
``streamGenerateContent?alt=sse``), or the AWS event-stream binary framing
(``application/vnd.amazon.eventstream``, Bedrock's ``converse_stream``).
Every request's path and JSON body are recorded.
"""

from __future__ import annotations

import binascii
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson


@dataclass(frozen=True)
class Answer:
    """One scripted reply: JSON (an answer or an error), SSE chunks, or AWS event-stream events."""

    data: dict[str, Any] | None = None
    events: list[dict[str, Any]] | None = None
    """AWS event-stream events, each ``{event type: payload}``."""
    sse: list[dict[str, Any]] | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Script:
    answers: list[Answer]
    paths: list[str] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message: prelude, CRC, string headers, payload, CRC."""
    raw = b"".join(
        bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(value)) + value.encode()
        for name, value in headers.items()
    )
    total = 12 + len(raw) + len(payload) + 4
    prelude = struct.pack(">II", total, len(raw))
    start = prelude + struct.pack(">I", binascii.crc32(prelude)) + raw + payload
    return start + struct.pack(">I", binascii.crc32(start))


def event_frames(events: list[dict[str, Any]]) -> bytes:
    """Converse stream events (``{"messageStart": {...}}``...) as event-stream frames."""
    out = b""
    for event in events:
        ((kind, payload),) = event.items()
        headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
        out += frame(headers, orjson.dumps(payload))
    return out


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = orjson.loads(self.rfile.read(length) or b"{}")
            with lock:
                script.paths.append(self.path)
                script.bodies.append(body)
                answer = script.answers[min(len(script.bodies), len(script.answers)) - 1]
            if answer.events is not None:
                self._send(event_frames(answer.events), "application/vnd.amazon.eventstream", answer)
            elif answer.sse is not None:
                chunks = b"".join(b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in answer.sse)
                self._send(chunks, "text/event-stream", answer)
            else:
                self._send(orjson.dumps(answer.data or {}), "application/json", answer)

        def _send(self, data: bytes, kind: str, answer: Answer) -> None:
            self.send_response(answer.status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def scripted_server(script: Script) -> Iterator[str]:
    """Serve ``script`` on a free port; yields the endpoint URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
