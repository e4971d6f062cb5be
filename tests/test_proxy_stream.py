"""Streams through the proxy: the same bytes as they arrive, cancelled with the client, closed on a reset."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from aiohttp import web

from proxy_upstream import Received, ScriptedUpstream, upstream
from toolbudget.policy import Policy
from toolbudget.proxy import ProxyConfig
from toolbudget.proxy.config import upstreams_of
from toolbudget.proxy.server import RunningProxy, running

SMALL = orjson.dumps(
    {"model": "m", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": "hello there"}]}
)
HEADERS = {"content-type": "application/json", "x-api-key": "k"}


@pytest.fixture
def up() -> Iterator[tuple[ScriptedUpstream, str]]:
    with upstream() as pair:
        yield pair


@pytest.fixture
def proxy(up: tuple[ScriptedUpstream, str], tmp_path: Path) -> Iterator[RunningProxy]:
    config = ProxyConfig(upstreams=upstreams_of(up[1]), store=f"dir:{tmp_path}", policy=Policy())
    with running(config) as served:
        yield served


def wait_until(check: Any, what: str) -> None:
    deadline = time.monotonic() + 20
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/messages", SMALL),
        ("/v1/chat/completions", b'{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}'),
        ("/v1/responses", b'{"model":"m","stream":true,"input":[{"role":"user","content":"hi"}]}'),
    ],
)
def test_a_stream_reaches_the_client_as_the_very_bytes_the_upstream_sent(
    proxy: RunningProxy, up: Any, path: str, body: bytes
) -> None:
    direct = httpx.post(up[1] + path, content=body, headers=HEADERS)
    through = httpx.post(proxy.url + path, content=body, headers=HEADERS)
    assert through.status_code == 200
    assert through.content == direct.content and len(through.content) > 200
    assert through.headers["content-type"] == "text/event-stream"
    assert up[0].received[-1].body == body


class Gate:
    """An upstream stream that sends its first event, then waits to be let go (or cancelled)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.cancelled = threading.Event()

    async def __call__(self, request: web.Request, _: Received) -> web.StreamResponse:
        answer = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await answer.prepare(request)
        await answer.write(b'event: message_start\ndata: {"type":"message_start"}\n\n')
        try:
            while not self.release.is_set():
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        await answer.write(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
        await answer.write_eof()
        return answer


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[tuple[Gate, RunningProxy, ScriptedUpstream]]:
    gate = Gate()
    with upstream(ScriptedUpstream(script=[gate])) as (up, url):
        config = ProxyConfig(upstreams=upstreams_of(url), store=f"dir:{tmp_path}", policy=Policy())
        with running(config) as proxy:
            yield gate, proxy, up


def test_each_chunk_is_passed_on_before_the_upstream_has_finished(gated: Any) -> None:
    gate, proxy, _ = gated
    with httpx.stream(
        "POST", proxy.url + "/v1/messages", content=SMALL, headers=HEADERS, timeout=30
    ) as answer:
        chunks = answer.iter_raw()
        first = next(chunks)
        assert first.startswith(b"event: message_start")
        assert not gate.release.is_set()  # the upstream is still holding the rest back
        gate.release.set()
        rest = b"".join(chunks)
    assert rest == b'event: message_stop\ndata: {"type":"message_stop"}\n\n'


def test_a_client_that_goes_away_mid_stream_cancels_the_upstream_call(
    gated: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolbudget.proxy")
    gate, proxy, _ = gated
    with httpx.stream(
        "POST", proxy.url + "/v1/messages", content=SMALL, headers=HEADERS, timeout=30
    ) as answer:
        next(answer.iter_raw())
    wait_until(gate.cancelled.is_set, "the upstream call cancelled after the client left")
    assert httpx.get(proxy.url + "/healthz").status_code == 200
    assert_counted_as_gone(proxy, caplog, "anthropic")


def assert_counted_as_gone(proxy: RunningProxy, caplog: pytest.LogCaptureFixture, api: str) -> None:
    """A request its client left is in the log (one line, status 499) and in the metrics."""
    wait_until(lambda: any('"status":499' in r.getMessage() for r in caplog.records), "a line for it")
    (line,) = [orjson.loads(r.getMessage()) for r in caplog.records if '"status":499' in r.getMessage()]
    assert line["api"] == api and "client went away" in line["note"]
    metrics = httpx.get(proxy.url + "/metrics").text
    assert f'toolbudget_requests_total{{api="{api}",status="499"}} 1.0' in metrics


def test_a_client_that_goes_away_before_a_whole_answer_cancels_the_upstream_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolbudget.proxy")
    waiting = threading.Event()
    cancelled = threading.Event()

    async def slow(request: web.Request, _: Received) -> web.StreamResponse:
        waiting.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return web.Response()

    with upstream(ScriptedUpstream(script=[slow])) as (_, url):
        config = ProxyConfig(upstreams=upstreams_of(url), store=f"dir:{tmp_path}", policy=Policy())
        with running(config) as proxy:
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(proxy.url + "/v1/chat/completions", json=body, timeout=httpx.Timeout(30, read=0.5))
            assert waiting.is_set()
            wait_until(cancelled.is_set, "the upstream call cancelled after the client left")
            assert_counted_as_gone(proxy, caplog, "openai-chat")


def test_an_upstream_that_resets_mid_stream_leaves_the_client_the_partial_stream_and_a_closed_connection(
    tmp_path: Path,
) -> None:
    with upstream(ScriptedUpstream(reset_after=3)) as (up, url):
        direct_events: list[bytes] = []
        with (
            pytest.raises(httpx.RemoteProtocolError),
            httpx.stream("POST", url + "/v1/messages", content=SMALL, headers=HEADERS) as answer,
        ):
            direct_events.extend(answer.iter_raw())
        config = ProxyConfig(upstreams=upstreams_of(url), store=f"dir:{tmp_path}", policy=Policy())
        with running(config) as proxy:
            got = bytearray()
            with (
                pytest.raises(httpx.RemoteProtocolError),
                httpx.stream("POST", proxy.url + "/v1/messages", content=SMALL, headers=HEADERS) as answer,
            ):
                for chunk in answer.iter_raw():
                    got += chunk
            assert bytes(got) == b"".join(direct_events) and got.startswith(b"event: message_start")
            assert b"message_stop" not in got
            up.reset_after = None
            again = httpx.post(proxy.url + "/v1/messages", content=SMALL, headers=HEADERS)
            assert again.status_code == 200 and b"message_stop" in again.content  # the proxy stayed up


def test_an_error_before_the_stream_starts_goes_back_with_its_status_and_body(
    proxy: RunningProxy, up: Any
) -> None:
    said = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    up[0].script.append((529, said))
    answer = httpx.post(proxy.url + "/v1/messages", content=SMALL, headers=HEADERS)
    assert answer.status_code == 529 and answer.content == said


def test_an_upstream_reset_mid_stream_is_logged_in_one_line_without_a_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)

    async def reset(request: web.Request, _got: Received) -> web.StreamResponse:
        answer = web.StreamResponse(status=200, headers={"Content-Type": "application/octet-stream"})
        await answer.prepare(request)
        await answer.write(b"some bytes of a download")
        assert request.transport is not None
        request.transport.close()
        return answer

    with upstream(ScriptedUpstream(reset_after=3)) as (up, url):
        config = ProxyConfig(upstreams=upstreams_of(url), store=f"dir:{tmp_path}", policy=Policy())
        with running(config) as proxy:
            for path in ("/v1/messages", "/v1/files/download"):  # managed, and passed through
                if path != "/v1/messages":
                    up.script.append(reset)
                with (
                    pytest.raises(httpx.RemoteProtocolError),
                    httpx.stream("POST", proxy.url + path, content=SMALL, headers=HEADERS) as answer,
                ):
                    for _ in answer.iter_raw():
                        pass
    records = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.exc_info for r in records] == [None, None], [r.getMessage()[:200] for r in records]
    lines = [orjson.loads(r.getMessage()) for r in records]
    assert [r.name for r in records] == ["toolbudget.proxy", "toolbudget.proxy"]
    assert [line["note"] for line in lines] == ["upstream reset mid-stream"] * 2
    assert lines[0]["api"] == "anthropic" and lines[1]["api"] == "passthrough"
    assert all(line["bytes_sent"] > 0 for line in lines)
