"""The proxy in front of a local recording upstream: what goes up, what comes back, and what it refuses."""

from __future__ import annotations

import gzip
import io
import logging
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import brotli
import httpx
import orjson
import pytest
import zstandard

from proxy_upstream import Received, ScriptedUpstream, upstream
from toolbudget import MARKER_RE, Sessions
from toolbudget.policy import Policy
from toolbudget.proxy import ProxyConfig
from toolbudget.proxy.config import upstreams_of
from toolbudget.proxy.server import RunningProxy, running
from toolbudget.proxy.tenancy import tenant_of
from toolbudget.store import DirStore

BIG = "".join(f"line {i:05d} of a long build log with some words in it\n" for i in range(20_000))


def tool_history(result: str = BIG, *, tools: bool = True) -> dict[str, Any]:
    """An Anthropic body whose last tool result is ``result``, with every field manage must keep."""
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1; cch=abc;"},
            {"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}},
        ],
        "metadata": {"user_id": "someone"},
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
        "thinking": {"type": "enabled", "budget_tokens": 2000},
        "an_unknown_field": {"kept": [1, 2.5, "three"]},
        "messages": [
            {"role": "user", "content": "build it"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "I will run make.", "signature": "sig=="},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "make"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": result,
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            },
        ],
    }
    if tools:
        body["tools"] = [
            {"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object"}},
            {
                "name": "Read",
                "description": "Read a file.",
                "input_schema": {"type": "object"},
                "cache_control": {"type": "ephemeral"},
            },
        ]
    return body


@pytest.fixture
def up() -> Iterator[tuple[ScriptedUpstream, str]]:
    with upstream() as pair:
        yield pair


@pytest.fixture
def proxy(up: tuple[ScriptedUpstream, str], tmp_path: Path) -> Iterator[RunningProxy]:
    config = ProxyConfig(upstreams=upstreams_of(up[1]), store=f"dir:{tmp_path / 'archive'}", policy=Policy())
    with running(config) as served:
        yield served


def post(proxy: RunningProxy, path: str, body: bytes | dict[str, Any], **headers: str) -> httpx.Response:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    sent = {"content-type": "application/json", "x-api-key": "sk-one", **headers}
    return httpx.post(proxy.url + path, content=data, headers=sent, timeout=60)


def last(up: tuple[ScriptedUpstream, str]) -> Received:
    return up[0].received[-1]


# --- what goes upstream --------------------------------------------------------------------------


def test_a_body_manage_leaves_alone_goes_upstream_as_the_clients_own_bytes(
    proxy: RunningProxy, up: Any
) -> None:
    # Odd spacing, key order and a float that orjson would write otherwise: a re-serialisation shows.
    raw = (
        b'{ "max_tokens":10,"model" : "m", "temperature": 1.50,\n'
        b' "messages":[{"role":"user","content":"hi"}]}'
    )
    answer = post(proxy, "/v1/messages?beta=true", raw)
    assert answer.status_code == 200
    assert last(up).body == raw
    assert last(up).path_qs == "/v1/messages?beta=true"
    raw_chat = b'{"model":"m","messages":[{"role":"user","content":"hi"}],  "stream_options": null}'
    assert post(proxy, "/v1/chat/completions", raw_chat).status_code == 200
    assert last(up).body == raw_chat


def test_a_managed_body_keeps_every_number_the_client_wrote(proxy: RunningProxy, up: Any) -> None:
    # The cut makes the proxy write the body again: an integer past 64 bits must not become a
    # float, and literals orjson would spell otherwise keep their own text, as through the library.
    raw = orjson.dumps(tool_history()).replace(
        b'"an_unknown_field":{"kept":[1,2.5,"three"]}',
        b'"an_unknown_field":{"kept":[123456789012345678901234567890,1.50,1E5,-0]}',
    )
    assert b"123456789012345678901234567890" in raw
    answer = post(proxy, "/v1/messages", raw)
    assert answer.status_code == 200
    sent = last(up).body
    assert len(sent) < len(raw) / 4  # the result was cut, so the body was written again
    assert b'"an_unknown_field":{"kept":[123456789012345678901234567890,1.50,1E5,-0]}' in sent


def test_an_integer_past_64_bits_stays_exact_when_no_other_literal_is_odd(
    proxy: RunningProxy, up: Any
) -> None:
    # With no other literal to keep (no 1.50, no 1E5), the writer found nothing to keep and the
    # float orjson read went upstream: 98765432109876543210987 became 9.876543210987654e+22.
    body = tool_history()
    body["metadata"] = {"user_id": "someone", "n": 1}
    body["messages"][1]["content"][1]["input"] = {"command": "make", "seed": 2}
    raw = (
        orjson.dumps(body)
        .replace(b'"n":1}', b'"n":98765432109876543210987}')
        .replace(b'"seed":2}', b'"seed":-12345678901234567890123}')
        .replace(b'"max_tokens":1000', b'"max_tokens":18446744073709551616')
    )
    answer = post(proxy, "/v1/messages", raw)
    assert answer.status_code == 200
    sent = last(up).body
    assert len(sent) < len(raw) / 4  # the result was cut, so the body was written again
    assert b'"metadata":{"user_id":"someone","n":98765432109876543210987}' in sent
    assert b'"seed":-12345678901234567890123}' in sent
    assert b'"max_tokens":18446744073709551616' in sent


def test_a_body_that_is_not_utf8_is_refused_naming_the_byte(proxy: RunningProxy, up: Any) -> None:
    raw = b'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a\xffb"}]}'
    answer = post(proxy, "/v1/messages", raw)
    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    assert "byte 0xff at offset 67" in message and "surrogate" not in message
    assert up[0].received == []


def test_a_big_result_is_cut_with_a_readable_path_and_every_other_field_travels_untouched(
    proxy: RunningProxy, up: Any
) -> None:
    body = tool_history()
    answer = post(proxy, "/v1/messages", body, **{"anthropic-beta": "context-management-2025-06-27"})
    assert answer.status_code == 200
    sent = last(up).json()
    assert len(last(up).body) < len(orjson.dumps(body)) / 4
    for field in (
        "system",
        "tools",
        "metadata",
        "context_management",
        "thinking",
        "an_unknown_field",
        "model",
    ):
        assert sent[field] == body[field], field
    assert sent["messages"][:2] == body["messages"][:2]  # the thinking block and its signature
    result = sent["messages"][2]["content"][0]
    assert result["cache_control"] == {"type": "ephemeral"}
    marker = MARKER_RE.search(result["content"])
    assert marker is not None and marker["path"] is not None and marker["tool"] is None
    assert Path(marker["path"]).read_text(encoding="utf-8") == BIG  # the agent's own Read gets it back
    assert last(up).headers["anthropic-beta"] == "context-management-2025-06-27"


def test_a_marker_names_the_recall_tool_when_the_request_defines_it_as_an_mcp_tool(
    proxy: RunningProxy, up: Any
) -> None:
    body = tool_history()
    body["tools"].append(
        {"name": "mcp__toolbudget__recall", "description": "Recall.", "input_schema": {"type": "object"}}
    )
    assert post(proxy, "/v1/messages", body).status_code == 200
    sent = last(up).json()
    marker = MARKER_RE.search(sent["messages"][2]["content"][0]["content"])
    assert marker is not None and marker["tool"] == "mcp__toolbudget__recall"
    assert [tool["name"] for tool in sent["tools"]] == [
        "Bash",
        "Read",
        "mcp__toolbudget__recall",
    ]  # none added


def test_credentials_go_upstream_untouched_and_never_into_the_log(
    proxy: RunningProxy, up: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolbudget.proxy")
    secret = "sk-ant-secret-0123456789"
    answer = post(
        proxy,
        "/v1/messages",
        tool_history(),
        **{
            "x-api-key": secret,
            "authorization": f"Bearer {secret}",
            "x-custom": "kept",
            "x-claude-code-session-id": "s-1",
        },
    )
    assert answer.status_code == 200
    got = last(up).headers
    assert (
        got["x-api-key"] == secret
        and got["authorization"] == f"Bearer {secret}"
        and got["x-custom"] == "kept"
    )
    assert got["x-claude-code-session-id"] == "s-1"
    lines = [r.getMessage() for r in caplog.records if r.name == "toolbudget.proxy"]
    assert lines, "one structured line per request"
    logged = orjson.loads(lines[-1])
    assert logged["api"] == "anthropic" and logged["results_cut"] == 1 and logged["status"] == 200
    assert all(secret not in line and "build log" not in line for line in lines)


def test_a_passed_through_or_recall_request_logs_its_path_never_its_query(
    proxy: RunningProxy, up: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolbudget.proxy")
    secret = "AIza-secret-key-0123"
    assert httpx.get(f"{proxy.url}/v1beta/models?key={secret}").status_code == 200
    assert httpx.get(f"{proxy.url}/toolbudget/recall/nobody/{'0' * 32}").status_code == 404
    lines = [orjson.loads(r.getMessage()) for r in caplog.records if r.name == "toolbudget.proxy"]
    assert [(line["api"], line["status"], line["path"]) for line in lines] == [
        ("passthrough", 200, "/v1beta/models"),
        ("recall", 404, f"/toolbudget/recall/nobody/{'0' * 32}"),
    ]
    assert all(secret not in orjson.dumps(line).decode() for line in lines)


@pytest.mark.parametrize("stream", [False, True])
def test_the_log_line_tells_the_usage_the_upstream_stated_whole_or_streamed(
    proxy: RunningProxy, up: Any, caplog: pytest.LogCaptureFixture, stream: bool
) -> None:
    caplog.set_level(logging.INFO, logger="toolbudget.proxy")
    answer = post(proxy, "/v1/messages", {**tool_history(), "stream": stream})
    assert answer.status_code == 200
    stated = orjson.loads(answer.content)["usage"] if not stream else None
    deadline = (
        time.monotonic() + 10
    )  # a stream's line follows its last chunk, which the client may read first
    while not (lines := [r.getMessage() for r in caplog.records if r.name == "toolbudget.proxy"]):
        assert time.monotonic() < deadline, "no log line"
        time.sleep(0.01)
    logged = orjson.loads(lines[-1])
    assert logged["usage_cache_read"] == 7 and logged["usage_cache_write"] == 5
    if stated is not None:
        assert logged["usage_input"] == stated["input_tokens"]


def test_count_tokens_counts_the_managed_body_upstream(proxy: RunningProxy, up: Any) -> None:
    body = tool_history()
    del body["max_tokens"]
    answer = post(proxy, "/v1/messages/count_tokens?beta=true", body)
    assert answer.status_code == 200
    counted = last(up)
    assert counted.path_qs == "/v1/messages/count_tokens?beta=true"
    assert answer.json() == {"input_tokens": len(counted.body) // 4}
    assert len(counted.body) < len(orjson.dumps(body)) / 4  # what will really be sent, not the original


def _zstd_frames(data: bytes) -> bytes:
    out = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(out, closefd=False) as writer:
        writer.write(data[:1000])
        writer.flush(zstandard.FLUSH_FRAME)
        writer.write(data[1000:])
    return out.getvalue()


# Concatenated gzip members and zstd frames are each one valid stream too: only the first used to
# be read, and the body was refused as "not JSON: unexpected end of data".
@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("br", brotli.compress),
        ("zstd", lambda data: zstandard.ZstdCompressor().compress(data)),
        ("gzip", lambda data: gzip.compress(data[:1000]) + gzip.compress(data[1000:])),
        ("zstd", _zstd_frames),
    ],
)
def test_compressed_request_bodies_are_decoded_and_managed(
    proxy: RunningProxy, up: Any, encoding: str, encode: Any
) -> None:
    raw = orjson.dumps(tool_history())
    answer = post(proxy, "/v1/messages", encode(raw), **{"content-encoding": encoding})
    assert answer.status_code == 200, answer.text
    assert "content-encoding" not in last(up).headers
    assert MARKER_RE.search(last(up).body.decode()) is not None


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("gzip", gzip.compress),
        ("gzip", lambda data: gzip.compress(data[:1000]) + gzip.compress(data[1000:])),
        ("br", brotli.compress),
        ("zstd", lambda data: zstandard.ZstdCompressor().compress(data)),
        ("zstd", _zstd_frames),
    ],
)
def test_a_body_that_decodes_past_the_size_limit_is_refused_in_every_encoding(
    up: Any, tmp_path: Path, encoding: str, encode: Any
) -> None:
    # br was decoded without a bound: a small body could decode to any size.
    config = ProxyConfig(
        upstreams=upstreams_of(up[1]), store=f"dir:{tmp_path}", policy=Policy(), max_body_bytes=100_000
    )
    raw = orjson.dumps(tool_history())
    assert len(raw) > 1_000_000
    with running(config) as served:
        answer = post(served, "/v1/messages", encode(raw), **{"content-encoding": encoding})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["message"] == "the request body decodes to more than 100000 bytes"
    assert up[0].received == []


def test_other_paths_pass_through_byte_for_byte(proxy: RunningProxy, up: Any) -> None:
    answer = httpx.get(proxy.url + "/v1/models?limit=1000", headers={"x-api-key": "k", "x-odd": "1"})
    assert answer.status_code == 200 and answer.headers["x-upstream-echo"] == "1"
    assert answer.json() == {"method": "GET", "path_qs": "/v1/models?limit=1000", "length": 0}
    assert last(up).headers["x-odd"] == "1"
    raw = b"not json at all \x00\xff"
    compact = httpx.post(
        proxy.url + "/v1/responses/compact", content=raw, headers={"content-encoding": "gzip"}
    )
    assert compact.status_code == 200
    assert last(up).body == raw and last(up).headers["content-encoding"] == "gzip"  # never decoded or read
    assert httpx.head(proxy.url + "/").status_code == 200


def test_a_websocket_upgrade_is_refused_so_the_client_falls_back_to_http(
    proxy: RunningProxy, up: Any
) -> None:
    answer = httpx.get(
        proxy.url + "/v1/responses",
        headers={
            "connection": "Upgrade",
            "upgrade": "websocket",
            "sec-websocket-version": "13",
            "sec-websocket-key": "x3JJHMbDL1EzLkh9GBhXDw==",
        },
    )
    assert answer.status_code == 426
    assert "WebSocket" in answer.json()["error"]["message"]
    assert up[0].received == []


# --- what the proxy refuses -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "family"),
    [
        ("/v1/messages", "anthropic"),
        ("/v1/chat/completions", "openai"),
        ("/v1/responses", "openai"),
        ("/v1beta/models/gemini-2.5-flash:generateContent", "gemini"),
    ],
)
def test_a_body_that_is_not_json_gets_the_apis_own_error_and_nothing_goes_upstream(
    proxy: RunningProxy, up: Any, path: str, family: str
) -> None:
    answer = post(proxy, path, b"{not json")
    assert answer.status_code == 400
    error = answer.json()
    if family == "anthropic":
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
        message = error["error"]["message"]
    elif family == "gemini":
        assert error["error"]["status"] == "INVALID_ARGUMENT" and error["error"]["code"] == 400
        message = error["error"]["message"]
    else:
        assert error["error"]["type"] == "invalid_request_error"
        message = error["error"]["message"]
    assert "not JSON" in message and "\n" not in message
    wrong = post(proxy, path, b"[1, 2]")
    assert wrong.status_code == 400 and "JSON object" in wrong.text
    assert up[0].received == []


ANTHROPIC_REFUSAL = (
    b'{"type":"error","error":{"type":"invalid_request_error",'
    b'"message":"messages: Input should be a valid list"},"request_id":"req_shape"}'
)


def test_a_history_toolbudget_cannot_read_goes_upstream_as_sent_and_the_providers_own_error_comes_back(
    proxy: RunningProxy, up: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolbudget.proxy")
    up[0].script.append((400, ANTHROPIC_REFUSAL))
    raw = b'{"model":"m","max_tokens":5,"messages":"hello"}'
    answer = post(proxy, "/v1/messages", raw)
    # The client's retries match the provider's wording, so it is the provider who answers.
    assert answer.status_code == 400 and answer.content == ANTHROPIC_REFUSAL
    assert [got.body for got in up[0].received] == [raw]
    # The line is logged once the answer is written: the client may hold it a moment before.
    deadline = time.monotonic() + 5
    while True:
        lines = [r.getMessage() for r in caplog.records if r.name == "toolbudget.proxy"]
        noted = [orjson.loads(line) for line in lines if "sent unmanaged" in line]
        if noted or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert len(noted) == 1 and "messages" in noted[0]["note"] and noted[0]["status"] == 400
    assert 'toolbudget_unmanaged_total{api="anthropic"} 1.0' in httpx.get(proxy.url + "/metrics").text


@pytest.mark.parametrize("stream", [False, True])
def test_a_block_type_newer_than_toolbudget_does_not_stop_the_agent(
    proxy: RunningProxy, up: Any, stream: bool
) -> None:
    body = tool_history()
    body["stream"] = stream
    body["messages"][0]["content"] = [
        {"type": "text", "text": "fix the bug"},
        {"type": "a_block_type_from_next_year", "payload": {"n": 1e5}},
    ]
    raw = orjson.dumps(body)
    answer = post(proxy, "/v1/messages", raw)
    assert answer.status_code == 200
    if stream:
        assert "event: message_stop" in answer.text
    else:
        assert answer.json()["content"][0]["text"].startswith("seen ")
    # Not managed, not rewritten: the bytes the client sent, the oversized result and all.
    assert last(up).body == raw


def test_a_number_past_a_doubles_range_goes_upstream_as_written(proxy: RunningProxy, up: Any) -> None:
    raw = orjson.dumps(tool_history()).replace(b'"kept":[1,', b'"kept":[1e400,')
    assert b"1e400" in raw
    reply = b'{"type":"message","role":"assistant","content":[{"type":"text","text":"done"}]}'
    up[0].script.append((200, reply))
    answer = post(proxy, "/v1/messages", raw)
    assert answer.status_code == 200 and answer.content == reply
    assert last(up).body == raw


@pytest.mark.parametrize(("depth", "number"), [(990, b"1"), (600, b"1.50")])
@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
def test_a_body_nested_too_deep_to_write_back_goes_upstream_as_sent(
    proxy: RunningProxy, up: Any, depth: int, number: bytes, path: str
) -> None:
    # orjson reads 1,024 levels but writes 254; past that, Python's json writes about 990 levels,
    # and the writer that keeps a literal such as 1.50 about 500. The managed body (its oversized
    # result cut) cannot be written, and nothing has gone upstream yet.
    nested = b"[" * depth + number + b"]" * depth
    raw = orjson.dumps(tool_history()).replace(b'"kept":[1,', b'"kept":[' + nested + b",1,")
    assert orjson.loads(raw)["an_unknown_field"]["kept"][1] == 1
    answer = post(proxy, path, raw)
    assert answer.status_code == 200, answer.text
    assert last(up).body == raw  # not a bare 500: the client's own bytes, unmanaged


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
def test_a_body_nested_past_what_the_proxy_reads_goes_upstream_as_sent(
    proxy: RunningProxy, up: Any, path: str
) -> None:
    # orjson reads 1,024 levels; past that this valid JSON was refused with 400 "not JSON: depth
    # limit exceeded", where a body the fast parser cannot read (like 1e400) goes upstream as sent.
    nested = b"[" * 1100 + b"1" + b"]" * 1100
    raw = orjson.dumps(tool_history()).replace(b'"kept":[1,', b'"kept":[' + nested + b",1,")
    reply = b'{"input_tokens":9}'  # scripted: the recording upstream cannot read this body either
    up[0].script.append((200, reply))
    answer = post(proxy, path, raw)
    assert answer.status_code == 200, answer.text
    assert answer.content == reply
    assert last(up).body == raw


def test_an_unreadable_count_tokens_body_is_counted_upstream_as_sent(proxy: RunningProxy, up: Any) -> None:
    raw = b'{"model":"m","messages":[{"role":"user","content":[{"type":"a_new_block"}]}]}'
    answer = post(proxy, "/v1/messages/count_tokens", raw)
    assert answer.status_code == 200 and answer.json() == {"input_tokens": len(raw) // 4}
    assert last(up).body == raw


def test_an_upstream_error_goes_back_unmodified_with_its_status(proxy: RunningProxy, up: Any) -> None:
    said = (
        b'{"type":"error","error":{"type":"rate_limit_error",'
        b'"message":"Number of request tokens has exceeded your per-minute rate limit"}}'
    )
    up[0].script.append((429, said))
    answer = post(proxy, "/v1/messages", tool_history())
    assert answer.status_code == 429
    assert answer.content == said
    assert len(up[0].received) == 1  # not an overflow: never retried


def test_an_upstream_that_is_down_gets_a_provider_style_502_and_the_proxy_stays_up(tmp_path: Path) -> None:
    with upstream() as (_, url):
        dead = url
    config = ProxyConfig(upstreams=upstreams_of(dead), store=f"dir:{tmp_path}", policy=Policy())
    with running(config) as proxy:
        answer = post(proxy, "/v1/messages", tool_history())
        assert answer.status_code == 502
        assert answer.json()["error"]["type"] == "api_error"
        chat = post(
            proxy, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        )
        assert chat.status_code == 502 and chat.json()["error"]["type"] == "server_error"
        assert httpx.get(proxy.url + "/healthz").json() == {"status": "ok"}


# --- recovery and lengthening (non-streaming: everything the flow gives) --------------------------


def test_an_overflow_is_recovered_at_the_next_level_before_any_byte(tmp_path: Path) -> None:
    body = tool_history(BIG[:30_000])
    for index in range(6):  # an old, long history that must shrink to fit
        body["messages"][:0] = [
            {"role": "user", "content": f"turn {index} " + "words " * 2_000},
            {"role": "assistant", "content": "ok"},
        ]
    with upstream(ScriptedUpstream(limit_chars=30_000)) as (up, url):
        config = ProxyConfig(
            upstreams=upstreams_of(url), store=f"dir:{tmp_path}", policy=Policy(), report_headers=True
        )
        with running(config) as proxy:
            answer = post(proxy, "/v1/messages", body)
            assert answer.status_code == 200, answer.text
            assert len(up.received) >= 2
            assert b"prompt is too long" not in answer.content
            assert len(up.received[-1].body) <= 30_000 < len(up.received[0].body)
            # The headers tell of the history that was answered, not of the one refused.
            assert int(answer.headers["x-toolbudget-level"]) >= 1
            after = int(answer.headers["x-toolbudget-tokens-after"])
            assert after * 4 <= len(up.received[-1].body) < int(answer.headers["x-toolbudget-tokens-before"])
            streamed = post(proxy, "/v1/messages", {**body, "stream": True})
            assert streamed.status_code == 200 and b"event: message_stop" in streamed.content
            metrics = httpx.get(proxy.url + "/metrics").text
            assert 'toolbudget_recovery_attempts_total{level="' in metrics


def test_an_answer_cut_off_by_max_tokens_is_escalated_and_returned_whole(
    proxy: RunningProxy, up: Any
) -> None:
    async def cut(request: Any, got: Received) -> Any:
        from aiohttp import web

        return web.json_response(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [
                    {"type": "text", "text": "Let me run"},
                    {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {}},
                ],
                "stop_reason": "max_tokens",
                "usage": {"input_tokens": 10, "output_tokens": 5},
            }
        )

    up[0].script.append(cut)
    body = {"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": "go"}]}
    answer = post(proxy, "/v1/messages", body)
    assert answer.status_code == 200
    assert len(up[0].received) == 2
    assert up[0].received[1].json()["max_tokens"] > 5  # escalated
    assert answer.json()["stop_reason"] == "end_turn"
    assert all(block["type"] != "tool_use" for block in answer.json()["content"])


# --- tenants --------------------------------------------------------------------------------------


class _SlowReads(DirStore):
    """A directory store whose reads wait while its gate is shut (a store that hangs)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gate = threading.Event()
        self.gate.set()

    def get(self, session: str, key: str) -> bytes | None:
        self.gate.wait(10)
        return super().get(session, key)


def test_a_recall_from_a_store_that_hangs_holds_up_no_other_client(up: Any, tmp_path: Path) -> None:
    store = _SlowReads(tmp_path / "archive")
    config = ProxyConfig(upstreams=upstreams_of(up[1]), policy=Policy())
    with (
        Sessions(store=store, policy=Policy(store_timeout=3.0)) as pool,
        running(config, sessions=pool) as proxy,
    ):
        headers = {"x-claude-code-session-id": "slow"}
        assert post(proxy, "/v1/messages", tool_history(), **headers).status_code == 200
        marker = MARKER_RE.search(last(up).body.decode())
        assert marker is not None and marker["key"]
        store.gate.clear()
        answers: list[httpx.Response] = []
        url = f"{proxy.url}/toolbudget/recall/claude-code-slow/{marker['key']}"
        reader = threading.Thread(
            target=lambda: answers.append(httpx.get(url, headers={"x-api-key": "sk-one"}, timeout=30))
        )
        reader.start()
        time.sleep(0.3)  # the recall is waiting on the store
        started = time.monotonic()
        assert httpx.get(proxy.url + "/healthz", timeout=10).status_code == 200
        assert time.monotonic() - started < 0.5
        assert not answers
        store.gate.set()
        reader.join(30)
    assert answers and answers[0].status_code == 200 and answers[0].text == BIG


def test_one_credential_cannot_recall_anothers_keys(proxy: RunningProxy, up: Any) -> None:
    headers = {"x-claude-code-session-id": "shared-claim"}
    assert (
        post(proxy, "/v1/messages", tool_history(), **{**headers, "x-api-key": "sk-alice"}).status_code == 200
    )
    marker = MARKER_RE.search(last(up).body.decode())
    assert marker is not None and marker["key"]
    key = marker["key"]
    mine = httpx.get(
        f"{proxy.url}/toolbudget/recall/claude-code-shared-claim/{key}", headers={"x-api-key": "sk-alice"}
    )
    assert mine.status_code == 200 and mine.text == BIG
    theirs = httpx.get(
        f"{proxy.url}/toolbudget/recall/claude-code-shared-claim/{key}", headers={"x-api-key": "sk-bob"}
    )
    assert theirs.status_code == 404 and "not found" in theirs.json()["error"]["message"]
    # Bob sending the very same conversation under the same claimed id gets his own namespace.
    assert (
        post(proxy, "/v1/messages", tool_history(), **{**headers, "x-api-key": "sk-bob"}).status_code == 200
    )
    bob = MARKER_RE.search(last(up).body.decode())
    assert bob is not None and bob["path"] != marker["path"]
    # The namespace is the credential's one-way hash, never the credential.
    assert tenant_of({"x-api-key": "sk-alice"}) in marker["path"] and "sk-alice" not in marker["path"]


# --- observability --------------------------------------------------------------------------------


def test_metrics_count_requests_tokens_cuts_and_no_modified_bytes(proxy: RunningProxy, up: Any) -> None:
    post(proxy, "/v1/messages", tool_history())
    post(proxy, "/v1/messages", {**tool_history(), "stream": True})
    text = httpx.get(proxy.url + "/metrics").text
    assert 'toolbudget_requests_total{api="anthropic",status="200"} 2.0' in text
    assert "toolbudget_results_cut_total 2.0" in text
    assert 'toolbudget_tokens_total{cache="read",stage="upstream"} 14.0' in text
    assert 'toolbudget_tokens_total{cache="creation",stage="upstream"} 10.0' in text
    assert "toolbudget_passthrough_bytes_modified_total 0.0" in text
    assert "toolbudget_store_fallbacks_total 0.0" in text


def test_report_headers_are_off_by_default_and_on_when_asked(up: Any, tmp_path: Path) -> None:
    config = ProxyConfig(upstreams=upstreams_of(up[1]), store=f"dir:{tmp_path}", policy=Policy())
    with running(config) as proxy:
        assert not [
            h for h in post(proxy, "/v1/messages", tool_history()).headers if h.startswith("x-toolbudget")
        ]
    config = ProxyConfig(
        upstreams=upstreams_of(up[1]), store=f"dir:{tmp_path}", policy=Policy(), report_headers=True
    )
    with running(config) as proxy:
        answer = post(proxy, "/v1/messages", tool_history())
        assert answer.headers["x-toolbudget-results-cut"] == "1"
        assert int(answer.headers["x-toolbudget-tokens-after"]) < int(
            answer.headers["x-toolbudget-tokens-before"]
        )


def gemini_body() -> dict[str, Any]:
    return {
        "systemInstruction": {"parts": [{"text": "You are a coding agent."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "build it"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "bash", "args": {"cmd": "make"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "bash", "response": {"output": BIG}}}]},
        ],
        "tools": [{"functionDeclarations": [{"name": "bash", "parameters": {"type": "object"}}]}],
    }


@pytest.mark.parametrize("action", ["generateContent", "streamGenerateContent?alt=sse", "countTokens"])
def test_gemini_calls_are_managed_on_their_own_paths(proxy: RunningProxy, up: Any, action: str) -> None:
    path = f"/v1beta/models/gemini-2.5-flash:{action}"
    answer = post(proxy, path, gemini_body(), **{"x-goog-api-key": "AIza-test"})
    assert answer.status_code == 200, answer.text
    got = last(up)
    assert got.path_qs == path and got.headers["x-goog-api-key"] == "AIza-test"
    assert MARKER_RE.search(got.body.decode()) is not None
    assert len(got.body) < len(BIG) / 4
    assert got.json()["tools"] == gemini_body()["tools"]


def test_an_upstream_slower_than_the_read_timeout_gets_a_provider_style_504(tmp_path: Path) -> None:
    import asyncio

    from aiohttp import web

    async def stall(request: web.Request, _: Received) -> web.StreamResponse:
        await asyncio.sleep(30)
        return web.Response()

    with upstream(ScriptedUpstream(script=[stall, stall])) as (_, url):
        config = ProxyConfig(
            upstreams=upstreams_of(url), store=f"dir:{tmp_path}", policy=Policy(), read_timeout=0.3
        )
        with running(config) as proxy:
            answer = post(proxy, "/v1/messages", tool_history())
            assert answer.status_code == 504
            assert answer.json()["error"]["type"] == "timeout_error"
            gemini = post(proxy, "/v1beta/models/g:generateContent", gemini_body())
            assert gemini.status_code == 504 and gemini.json()["error"]["status"] == "DEADLINE_EXCEEDED"
            assert httpx.get(proxy.url + "/healthz").status_code == 200


def responses_history(output: str = BIG) -> dict[str, Any]:
    """A Responses body (as Codex sends it) whose last item is a big function call output."""
    return {
        "model": "gpt-5-codex",
        "instructions": "You are Codex.",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "build it"}]},
            {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": '{"cmd":"make"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": output},
        ],
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
        "prompt_cache_key": "conversation-1",
    }


def test_codex_with_a_chatgpt_login_is_managed_on_its_backend_path(proxy: RunningProxy, up: Any) -> None:
    """Codex logged in with ChatGPT posts the same Responses body to ``/backend-api/codex/responses``."""
    body = responses_history()
    answer = post(proxy, "/backend-api/codex/responses", body, authorization="Bearer chatgpt-token")
    assert answer.status_code == 200, answer.text
    assert last(up).path_qs == "/backend-api/codex/responses"
    assert last(up).headers["authorization"] == "Bearer chatgpt-token"
    sent = last(up).json()
    assert len(last(up).body) < len(orjson.dumps(body)) / 4
    assert sent["input"][:2] == body["input"][:2] and sent["prompt_cache_key"] == "conversation-1"
    marker = MARKER_RE.search(sent["input"][2]["output"])
    assert marker is not None and marker["path"] is not None
    assert Path(marker["path"]).read_text(encoding="utf-8") == BIG


def test_the_chatgpt_backend_has_its_own_upstream_and_its_other_paths_pass_through() -> None:
    assert upstreams_of()["chatgpt"] == "https://chatgpt.com"
    assert upstreams_of("http://127.0.0.1:9")["chatgpt"] == "http://127.0.0.1:9"
    from toolbudget.proxy.routes import route_of

    assert route_of("POST", "/backend-api/codex/responses", {}).api == "openai-responses"
    compact = route_of("POST", "/backend-api/codex/responses/compact", {})
    assert (compact.kind, compact.family) == ("passthrough", "chatgpt")
