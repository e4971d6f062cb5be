"""``Managed`` carries both requests parsed, and a managed body is read from its JSON once."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from toolbudget import Session, wire
from toolbudget.model import Request


def _body(size: int = 60_000) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-6",
        "max_tokens": 1024,
        "temperature": 0.5,
        "tools": [{"name": "Bash", "description": "runs a command", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "line\n" * (size // 5)}],
            },
        ],
    }


def _same(a: Request, b: Request) -> bool:
    return wire.render(a) == wire.render(b)


@pytest.mark.parametrize("form", ["dict", "bytes", "str"])
def test_managed_holds_the_original_and_the_managed_request(form: str) -> None:
    body: Any = _body()
    if form != "dict":
        body = orjson.dumps(body) if form == "bytes" else orjson.dumps(body).decode()
    with Session("m", store="memory:") as session:
        for _ in range(2):  # the second time is answered from the last request
            managed = session.manage(body, "anthropic")
            assert _same(managed.original, wire.parse(body, "anthropic"))
            assert _same(managed.request, wire.parse(managed.body, "anthropic"))
            assert managed.request is not managed.original


def test_an_unchanged_body_has_one_request() -> None:
    body = _body(100)
    with Session("u", store="memory:") as session:
        managed = session.manage(body, "anthropic")
        assert managed.body is body and managed.request is managed.original


def _exact_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the standard library's literal-keeping reads of a body."""
    calls: list[int] = []
    real = json.loads

    def counting(*args: Any, **kwargs: Any) -> Any:
        if "parse_float" in kwargs:
            calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(json, "loads", counting)
    return calls


def test_a_compact_body_is_not_read_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """A body written compactly (as orjson and httpx write one) holds no literal that writing it
    back would change, so a changed body is not read again to keep its literals."""
    calls = _exact_reads(monkeypatch)
    body = orjson.dumps(_body())
    with Session("c", store="memory:") as session:
        managed = session.manage(body, "anthropic")
    assert managed.body != body and not calls


def test_a_literal_that_would_change_is_still_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _exact_reads(monkeypatch)
    body = orjson.dumps(_body()).replace(b'"temperature":0.5', b'"temperature":5E-1')
    with Session("l", store="memory:") as session:
        managed = session.manage(body, "anthropic")
    assert calls and b'"temperature":5E-1' in managed.body
