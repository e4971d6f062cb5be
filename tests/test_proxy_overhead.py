"""What the proxy spends on a request besides the upstream's answer: parses avoided, the loop kept free."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from toolbudget import Session, Sessions, wire

_OUTPUT = "".join(f"output line {i:05d} of a command that printed a lot\n" for i in range(1000))


def _history(turns: int) -> dict[str, Any]:
    """An Anthropic body with ``turns`` tool calls and their long results: an agent's request."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "build the project"}]
    for turn in range(turns):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": f"toolu_{turn}",
                        "name": "Bash",
                        "input": {"command": f"make {turn}"},
                    }
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{turn}", "content": f"{turn}\n{_OUTPUT}"}
                ],
            }
        )
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "system": "You are a coding agent.",
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": messages,
    }


def _counting_parse(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    parses: list[int] = []
    real_parse = wire.parse

    def parse(*args: Any, **kwargs: Any) -> Any:
        parses.append(1)
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(wire, "parse", parse)
    return parses


@pytest.mark.parametrize("as_bytes", [False, True])
def test_a_named_session_parses_only_what_its_next_request_appends(
    monkeypatch: pytest.MonkeyPatch, as_bytes: bool
) -> None:
    """A header names the session: finding it parses nothing, and ``manage`` of a request that
    extends the last one parses only the new messages, with the bytes a fresh session sends."""
    headers = {"x-claude-code-session-id": "s1"}
    first, second = _history(3), _history(4)
    with Sessions(store="memory:") as pool:
        given = orjson.dumps(first) if as_bytes else first
        pool.for_request(given, api="anthropic", headers=headers).manage(given, "anthropic")
        parses = _counting_parse(monkeypatch)
        given = orjson.dumps(second) if as_bytes else second
        session = pool.for_request(given, api="anthropic", headers=headers)
        sent = session.manage(given, "anthropic")
        assert parses == []  # the history of four results was not parsed whole, not even once
        assert sent.report.results_cut >= 1
    monkeypatch.undo()
    with Session("claude-code-s1", store="memory:") as alone:
        alone.manage(first, "anthropic")
        expected = alone.manage(second, "anthropic").body
    assert (sent.body if as_bytes else orjson.dumps(sent.body)) == orjson.dumps(expected)


def test_a_named_session_with_a_bad_history_is_refused_by_its_manage() -> None:
    """Finding a named session no longer reads the history; its ``manage`` still refuses a bad one."""
    from toolbudget import InputError

    with Sessions(store="memory:") as pool:
        session = pool.for_request({"messages": 7}, api="anthropic", headers={"x-toolbudget-session": "s"})
        with pytest.raises(InputError):
            session.manage({"messages": 7}, "anthropic")
