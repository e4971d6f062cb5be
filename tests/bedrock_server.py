"""A scripted Bedrock Runtime endpoint on localhost, for a real botocore client to talk to.

botocore signs, serialises and parses for real: ``converse`` is REST-JSON on
``POST /model/{modelId}/converse``, ``converse_stream`` answers in the AWS
event-stream binary framing (``application/vnd.amazon.eventstream``), and an
error is a status with ``x-amzn-ErrorType`` and a JSON ``message``, which
botocore turns into a ``ClientError``. Each reply is taken from a script in
order; every request's path and JSON body are recorded.
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
    """One scripted reply: a JSON answer, a list of stream events, or an error."""

    data: dict[str, Any] | None = None
    events: list[dict[str, Any]] | None = None
    status: int = 200
    error: str = ""
    message: str = ""


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
            if answer.error:
                self._send(
                    answer.status, orjson.dumps({"message": answer.message}), "application/json", answer
                )
            elif answer.events is not None:
                self._send(200, event_frames(answer.events), "application/vnd.amazon.eventstream", answer)
            else:
                self._send(200, orjson.dumps(answer.data or {}), "application/json", answer)

        def _send(self, status: int, data: bytes, kind: str, answer: Answer) -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.send_header("x-amzn-requestid", "req-1")
            if answer.error:
                self.send_header("x-amzn-errortype", f"{answer.error}:http://internal.amazon.com/coral/")
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def bedrock_server(script: Script) -> Iterator[str]:
    """Serve ``script`` on a free port; yields the endpoint URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def client(url: str) -> Any:
    """A real botocore ``bedrock-runtime`` client aimed at ``url``, with dummy credentials, no retries."""
    import botocore.config
    import botocore.session

    return botocore.session.get_session().create_client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        config=botocore.config.Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )
