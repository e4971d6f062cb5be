"""Hand-written pairing cases: each rule, its provider wording and its repair."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from toolbudget import SYNTHETIC_TEXT, repair, validate


def A(*blocks: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def U(*blocks: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def use(i: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": i, "name": "Bash", "input": {"command": i}}


def res(i: str, text: str | None = None) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": i, "content": text or f"out {i}"}


def txt(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


TOOLS = [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}}]


def body(*messages: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "claude-x", "max_tokens": 100, "tools": TOOLS, "messages": list(messages), **extra}


def run(b: dict[str, Any]) -> tuple[list[str], Any]:
    before = copy.deepcopy(b)
    violations = [str(v) for v in validate(b, "anthropic")]
    repaired = repair(b, "anthropic")
    assert b == before, "input was mutated"
    assert validate(repaired.body, "anthropic") == []
    return violations, repaired


def test_valid_history_comes_back_as_the_same_object() -> None:
    b = body(U(txt("go")), A(use("a"), use("b")), U(res("a"), res("b")), A(txt("done")))
    violations, repaired = run(b)
    assert violations == []
    assert repaired.body is b
    assert not repaired.changed


def test_valid_bytes_come_back_as_the_same_bytes() -> None:
    raw = b'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}'
    assert repair(raw, "anthropic").body is raw


def test_missing_result_is_synthesised_as_an_error() -> None:
    violations, repaired = run(body(U(txt("go")), A(use("a"), use("b")), U(res("a")), A(txt("done"))))
    assert violations == [
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: b. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
    ]
    assert [(r.kind, r.index, r.call_id) for r in repaired.repairs] == [("synthesized_result", 1, "b")]
    results = repaired.body["messages"][2]["content"]
    assert [r["tool_use_id"] for r in results] == ["a", "b"]
    assert results[1]["is_error"] is True
    assert results[1]["content"] == SYNTHETIC_TEXT
    assert "outcome is unknown" in SYNTHETIC_TEXT and "check" in SYNTHETIC_TEXT


def test_orphan_result_is_removed_and_its_message_kept() -> None:
    violations, repaired = run(body(U(txt("go")), A(txt("hi")), U(res("zz"), txt("x")), A(txt("done"))))
    assert violations == [
        "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: zz. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
    ]
    assert [r.kind for r in repaired.repairs] == ["removed_orphan_result"]
    assert repaired.body["messages"][2] == {"role": "user", "content": [txt("x")]}


def test_separated_result_is_moved_back_not_deleted() -> None:
    b = body(
        U(txt("go")), A(use("a")), U(txt("stop")), A(txt("hmm")), U(res("a", "precious")), A(txt("done"))
    )
    violations, repaired = run(b)
    assert len(violations) == 2
    assert [r.kind for r in repaired.repairs] == ["moved_result"]
    assert repaired.body["messages"][2]["content"] == [res("a", "precious"), txt("stop")]


def test_text_before_results_is_reordered() -> None:
    violations, repaired = run(body(U(txt("go")), A(use("a")), U(txt("t"), res("a")), A(txt("done"))))
    assert violations == [
        "messages.2: Did not find 1 tool_result block(s) at the beginning of this message. "
        "Messages following tool_use blocks must begin with a matching number of tool_result blocks."
    ]
    assert repaired.body["messages"][2]["content"] == [res("a"), txt("t")]


def test_split_parallel_batch_is_joined() -> None:
    _, repaired = run(body(U(txt("go")), A(use("a")), A(use("b")), U(res("a"), res("b")), A(txt("ok"))))
    assert repaired.body["messages"][1]["content"] == [use("a"), use("b")]
    assert [r.kind for r in repaired.repairs] == ["merged_messages"]


def test_duplicates_in_one_turn_keep_the_first() -> None:
    b = body(U(txt("go")), A(use("a"), use("a")), U(res("a", "first"), res("a", "second")), A(txt("ok")))
    _, repaired = run(b)
    assert repaired.body["messages"][1]["content"] == [use("a")]
    assert repaired.body["messages"][2]["content"] == [res("a", "first")]
    assert sorted(r.kind for r in repaired.repairs) == ["removed_duplicate_call", "removed_duplicate_result"]


def test_id_reused_by_a_later_turn_is_renamed_with_its_result() -> None:
    b = body(U(txt("go")), A(use("a")), U(res("a", "one")), A(use("a")), U(res("a", "two")), A(txt("ok")))
    violations, repaired = run(b)
    assert violations == ["messages.3.content.0: `tool_use` ids must be unique"]
    messages = repaired.body["messages"]
    assert messages[3]["content"][0]["id"] == "a_2"
    assert messages[4]["content"][0] == res("a_2", "two")


def test_ids_the_api_refuses_are_rewritten() -> None:
    violations, repaired = run(body(U(txt("go")), A(use("web:0")), U(res("web:0")), A(txt("ok"))))
    assert violations == ["messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"]
    assert repaired.body["messages"][1]["content"][0]["id"] == "web_0"
    assert repaired.body["messages"][2]["content"][0]["tool_use_id"] == "web_0"


def test_trailing_call_waiting_to_run_is_left_alone_unless_closed() -> None:
    b = body(U(txt("go")), A(txt("running"), use("a")))
    assert validate(b, "anthropic") == []
    assert repair(b, "anthropic").body is b
    closed = repair(b, "anthropic", close_pending=True)
    assert [r.kind for r in closed.repairs] == ["closed_pending_call"]
    assert closed.body["messages"][-1]["content"][0]["tool_use_id"] == "a"


def test_thinking_is_never_stripped_and_its_absence_is_reported() -> None:
    thinking = {"type": "thinking", "thinking": "plan", "signature": "sig=="}
    b = body(
        U(txt("go")),
        A(thinking, use("a")),
        U(txt("interrupt")),
        U(res("a")),
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    _, repaired = run(b)
    assert repaired.body["messages"][1]["content"][0] == thinking

    missing = body(
        U(txt("go")), A(use("a")), U(res("a")), thinking={"type": "enabled", "budget_tokens": 1024}
    )
    assert [str(v) for v in validate(missing, "anthropic")] == [
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. "
        "When `thinking` is enabled, a final `assistant` message must start with a thinking block "
        "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). To avoid this requirement, "
        "disable `thinking`."
    ]
    assert repair(missing, "anthropic").body is missing  # nothing a repair may invent


@pytest.mark.parametrize("field", ["cache_control", "citations"])
def test_unmodelled_fields_survive_a_repair(field: str) -> None:
    extra = {"type": "ephemeral"} if field == "cache_control" else []
    marked = {**txt("keep me"), field: extra}
    b = body(U(marked), A(use("a")), U(txt("no result")), A(txt("ok")))
    _, repaired = run(b)
    assert repaired.body["messages"][0] is b["messages"][0]
    assert repaired.body["messages"][0]["content"][0] == marked


def test_tool_blocks_without_tools_get_placeholder_definitions() -> None:
    b = body(U(txt("go")), A(use("a")), U(res("a")), A(txt("ok")))
    del b["tools"]
    violations, repaired = run(b)
    assert violations == [
        "tools: Requests which include `tool_use` or `tool_result` blocks must define tools."
    ]
    assert [r.kind for r in repaired.repairs] == ["added_tool_definitions"]
    assert [t["name"] for t in repaired.body["tools"]] == ["Bash"]
    assert repaired.body["messages"] == b["messages"]
