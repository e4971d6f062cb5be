"""JSON in and out: bodies are never altered by the parser's limits, and failures are our errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolbudget import Session
from toolbudget.errors import EncodingError, ShapeError
from toolbudget.jsonio import dumps, loads
from toolbudget.marker import MARKER_RE

BIG = 12345678901234567890123


def nested(depth: int) -> Any:
    value: Any = {"leaf": 1}
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("number", [BIG, -BIG, 2**64, -(2**63) - 1, 2**64 - 1, -(2**63)])
def test_integers_of_any_size_read_and_write_exactly(number: int) -> None:
    assert loads(f'{{"n": {number}}}') == {"n": number}
    assert dumps({"n": number}) == f'{{"n":{number}}}'.encode()


def test_deep_values_are_written_like_shallow_ones() -> None:
    value = nested(300)
    assert loads(dumps(value)) == value
    assert dumps(value) == json.dumps(value, separators=(",", ":")).encode()


def test_what_json_cannot_hold_is_a_shape_or_encoding_error() -> None:
    with pytest.raises(ShapeError):
        dumps({"when": object()})
    with pytest.raises(ShapeError):
        dumps({"n": 2**64, "x": float("nan")})
    with pytest.raises(EncodingError):
        dumps({"n": 2**64, "text": "\ud800"})


def test_a_text_body_with_huge_integers_is_managed_and_recalled_exactly() -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "task"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"id": BIG}}}]},
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "f", "response": {"result": {"ids": [BIG] * 2_000}}}}
                ],
            },
        ]
    }
    with Session("big", store="memory:") as session:
        out = json.loads(session.manage(json.dumps(body), "gemini").body)
        assert out["contents"][1] == body["contents"][1]
        sent = json.dumps(out["contents"][2])
        marker = MARKER_RE.search(sent)
        assert marker is not None
        assert str(BIG) in session.original(marker.group("key"))
        assert json.loads(session.original(marker.group("key"))) == {"result": {"ids": [BIG] * 2_000}}


def test_deeply_nested_tool_input_is_managed() -> None:
    body = {
        "model": "m",
        "max_tokens": 5,
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "task"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {"v": nested(300)}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]},
        ],
    }
    with Session("deep", store="memory:") as session:
        assert json.loads(session.manage(json.dumps(body), "anthropic").body) == body
        assert session.manage(body, "anthropic").body == body
