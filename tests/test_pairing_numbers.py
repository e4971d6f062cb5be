"""A repaired body keeps every number's own text and the caller's field order."""

from __future__ import annotations

import pickle
from typing import Any

import orjson
import pytest

from toolbudget import repair, validate
from toolbudget.jsonio import ExactFloat, ExactInt, dumps, loads_exact

# Literals a plain reading would write back differently, and one it keeps (2.5).
LITERALS = '"x":1E5,"y":1.0000000000000000000001,"z":-0,"w":1.50,"v":2.5e-3,"ok":2.5'

ASSISTANT = (
    '{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{' + LITERALS + "}}]}"
)
# The call has no result, so the repair must rewrite the body.
RAW = (
    '{"messages":[{"role":"user","content":"go"},' + ASSISTANT + ',{"role":"user","content":"next"}],'
    '"temperature":1E-1,"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":{"type":"object"}}]}'
)


@pytest.mark.parametrize("form", ["bytes", "str"])
def test_a_repaired_body_keeps_number_literals_and_field_order(form: str) -> None:
    given: Any = RAW.encode() if form == "bytes" else RAW
    repaired = repair(given, "anthropic")
    assert [r.kind for r in repaired.repairs] == ["synthesized_result"]
    out = repaired.body
    assert isinstance(out, bytes if form == "bytes" else str)
    text = out.decode() if isinstance(out, bytes) else out
    # The untouched assistant message is the caller's bytes, literal for literal.
    assert ASSISTANT in text
    assert text.startswith('{"messages":[{"role":"user","content":"go"},' + ASSISTANT)
    assert text.endswith(
        '"temperature":1E-1,"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":{"type":"object"}}]}'
    )
    assert validate(out, "anthropic") == []
    assert list(orjson.loads(out)) == ["messages", "temperature", "model", "max_tokens", "tools"]


def test_literals_survive_the_exact_integer_path_too() -> None:
    # An integer past 64 bits sends the body through the standard library's writer.
    raw = RAW.replace('"ok":2.5', '"ok":2.5,"big":123456789012345678901234567890')
    out = repair(raw, "anthropic").body
    assert '"x":1E5,"y":1.0000000000000000000001,"z":-0,"w":1.50,"v":2.5e-3' in out
    assert '"big":123456789012345678901234567890' in out


def test_field_order_is_kept_when_every_number_is_plain() -> None:
    raw = RAW.replace(LITERALS, '"ok":2.5').replace("1E-1", "0.1")
    assert loads_exact(raw) is None  # the common path: no second reading
    out = repair(raw, "anthropic").body
    assert list(orjson.loads(out)) == ["messages", "temperature", "model", "max_tokens", "tools"]


def test_a_dict_body_keeps_its_own_float_objects() -> None:
    t, x = 1e-7, 0.1 + 0.2
    body = {
        "temperature": t,
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {"x": x}}],
            },
            {"role": "user", "content": "next"},
        ],
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
    }
    out = repair(body, "anthropic").body
    assert out["temperature"] is t
    assert out["messages"][1]["content"][0]["input"]["x"] is x
    assert list(out) == list(body)


def test_kept_literals_are_their_numbers() -> None:
    exact = loads_exact("[1E5, 1.50, -0, 1.0000000000000000000001, 7, 2.5]")
    assert exact == [100000.0, 1.5, 0, 1.0, 7, 2.5]
    assert [type(v) for v in exact] == [ExactFloat, ExactFloat, ExactInt, ExactFloat, int, float]
    assert dumps(exact) == b"[1E5,1.50,-0,1.0000000000000000000001,7,2.5]"
    assert pickle.loads(pickle.dumps(exact[0])).literal == "1E5"
    assert loads_exact("[1, 2.5, 1e-7, 100000.0]") is None


def test_with_literals_swaps_what_came_from_the_input_and_leaves_the_rest() -> None:
    from toolbudget.jsonio import loads, with_literals

    raw = b'{"a":{"x":1E5,"n":-0},"b":[1.50,2.5],"t":1E-1,"plain":{"y":3.5}}'
    parsed = loads(raw)
    exact = loads_exact(raw)
    out = {"t": parsed["t"], "a": parsed["a"], "new": {"b": parsed["b"], "z": 1e5}, "plain": parsed["plain"]}
    swapped = with_literals(out, parsed, exact)
    assert (
        dumps(swapped)
        == b'{"t":1E-1,"a":{"x":1E5,"n":-0},"new":{"b":[1.50,2.5],"z":100000.0},"plain":{"y":3.5}}'
    )
    assert swapped["plain"] is parsed["plain"]  # nothing to swap: the very object
    assert out["a"] is parsed["a"] and type(out["t"]) is float  # out itself is not changed


def test_a_top_level_minus_zero_keeps_its_literal() -> None:
    # The repaired body is a new object; its top-level fields are the caller's, -0 included.
    raw = RAW.replace('"temperature":1E-1', '"temperature":1E-1,"seed":-0')
    out = repair(raw, "anthropic").body
    assert '"temperature":1E-1,"seed":-0,' in out
    raw_dict_alone = '{"seed":-0,' + RAW[1:]
    assert '{"seed":-0,"messages"' in repair(raw_dict_alone.encode(), "anthropic").body.decode()
