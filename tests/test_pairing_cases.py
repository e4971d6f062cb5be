"""Hand-written pairing cases: each rule, its provider wording and its repair."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from toolbudget import SYNTHETIC_TEXT, ShapeError, repair, validate, wire
from toolbudget.pairing import plainly_paired
from toolbudget.pairing.check import check
from toolbudget.pairing.rules import rules_for


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


def test_an_id_ending_in_a_newline_is_refused_and_rewritten() -> None:
    """The pattern holds for the whole id: a final newline is not taken for the end of it."""
    violations, repaired = run(body(U(txt("go")), A(use("toolu_1\n")), U(res("toolu_1\n")), A(txt("ok"))))
    assert violations == ["messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"]
    assert repaired.body["messages"][1]["content"][0]["id"] == "toolu_1_"
    assert repaired.body["messages"][2]["content"][0]["tool_use_id"] == "toolu_1_"


def test_plain_answered_turns_take_the_walk_and_every_shape_the_check_flags_is_left_to_it() -> None:
    """The walk (``plainly_paired``) knows the shape agents send, and leaves each shape a rule of
    the check flags to the check: one case per rule, so taking a part of the walk out fails."""
    plain = wire.parse(
        body(U(txt("go")), A(use("toolu_1")), U(res("toolu_1")), A(use("toolu_2"))), "anthropic"
    )
    rules = rules_for("anthropic")
    assert plainly_paired(plain.messages, rules, True)
    assert plainly_paired(plain.messages[1:3], rules, True)
    assert not plainly_paired(plain.messages, rules, False)  # tool blocks need tool definitions
    assert not plainly_paired(plain.messages[2:], rules, True)  # a result with no call before it
    flagged = [
        (A(use("t")), U(txt("first"), res("t"))),  # a result after text
        (A(use("t"), use("t")), U(res("t"), res("t"))),  # one id twice
        (A(use("t")), U(res("t"), res("t"))),  # answered twice
        (A(use("bad id")), U(res("bad id"))),  # an id the API refuses
        (A(use("t")), U(txt("no answer")), U(res("t"))),  # the answer not right after the call
        (A(use("t")), U(res("t")), A(use("t")), U(res("t"))),  # an id a later turn uses again
    ]
    for turn in flagged:
        request = wire.parse(body(U(txt("go")), *turn), "anthropic")
        assert check(request, rules)
        assert not plainly_paired(request.messages[1:], rules, True)


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


# --- OpenAI Responses and Gemini ------------------------------------------------------


def fc(i: str, name: str = "Bash") -> dict[str, Any]:
    return {"type": "function_call", "call_id": i, "name": name, "arguments": "{}"}


def fo(i: str, output: str | None = None) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": i, "output": output or f"out {i}"}


def responses(*items: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-x", "input": [{"role": "user", "content": "go"}, *items], **extra}


def gemini(*contents: Any) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": "go"}]}, *contents]}


def call(name: str, i: str | None = None, **extra: Any) -> dict[str, Any]:
    inner: dict[str, Any] = {"name": name, "args": {}}
    if i is not None:
        inner["id"] = i
    return {"functionCall": inner, **extra}


def response(name: str, i: str | None = None, output: str = "ok") -> dict[str, Any]:
    inner: dict[str, Any] = {"name": name, "response": {"output": output}}
    if i is not None:
        inner["id"] = i
    return {"functionResponse": inner}


def settled(b: dict[str, Any], api: str) -> Any:
    """Repair once: the result is valid, and a second repair changes nothing."""
    repaired = repair(b, api)
    assert [str(v) for v in validate(repaired.body, api)] == []
    assert repair(repaired.body, api).body is repaired.body
    return repaired


@pytest.mark.parametrize("opener", ["message", "reasoning"])
def test_responses_id_reused_by_a_later_turn_is_renamed_not_dropped(opener: str) -> None:
    later = (
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "ENC=="}
        if opener == "reasoning"
        else {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "now"}]}
    )
    b = responses(fc("c0", "Read"), fo("c0", "read"), later, fc("c0", "Bash"), fo("c0", "bash"))
    repaired = settled(b, "openai-responses")
    assert [(r.kind, r.index, r.call_id) for r in repaired.repairs] == [("renamed_call_id", 4, "c0")]
    assert repaired.body["input"][3] == later
    assert repaired.body["input"][4:] == [fc("c0_2", "Bash"), fo("c0_2", "bash")]


def test_responses_output_before_pending_calls_closes_the_turn_in_one_pass() -> None:
    b = responses(fo("a", "A"), fc("a"), fc("b"))
    repaired = settled(b, "openai-responses")
    assert [(r.kind, r.call_id) for r in repaired.repairs] == [
        ("moved_result", "a"),
        ("closed_pending_call", "b"),
    ]
    synthetic = repaired.body["input"][-1]
    # Only documented fields: the API refuses unknown ones on an input item.
    assert synthetic == {"type": "function_call_output", "call_id": "b", "output": SYNTHETIC_TEXT}


def test_responses_output_is_not_placed_among_trailing_calls() -> None:
    b = responses(fc("a"), fc("x"), fo("x"), fc("p"))
    repaired = settled(b, "openai-responses")
    assert [r.kind for r in repaired.repairs] == ["synthesized_result"]
    # No output after the row answers `a`, so `a` ran before `x` was made: its output goes right after it.
    assert [i.get("call_id") for i in repaired.body["input"][1:]] == ["a", "a", "x", "x", "p"]


PARTLY_ANSWERED_PENDING = {
    "anthropic": body(U(txt("go"), res("a")), A(use("a"), use("b"))),
    "openai-chat": {
        "model": "m",
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "tool", "tool_call_id": "a", "content": "A"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in "ab"
                ],
            },
        ],
    },
    "gemini": {
        "contents": [
            {"role": "user", "parts": [{"text": "go"}, response("f", "a")]},
            {"role": "model", "parts": [call("f", "a"), call("f", "b")]},
        ]
    },
    "bedrock-converse": {
        "modelId": "m",
        "toolConfig": {"tools": [{"toolSpec": {"name": "f", "inputSchema": {"json": {"type": "object"}}}}]},
        "messages": [
            {"role": "user", "content": [{"toolResult": {"toolUseId": "a", "content": [{"text": "A"}]}}]},
            {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": i, "name": "f", "input": {}}} for i in "ab"],
            },
        ],
    },
    "openai-responses": responses(fo("a", "A"), fc("a"), fc("b")),
}


@pytest.mark.parametrize("api", sorted(PARTLY_ANSWERED_PENDING))
def test_a_pending_turn_with_one_misplaced_result_is_closed_alike_on_every_api(api: str) -> None:
    repaired = settled(PARTLY_ANSWERED_PENDING[api], api)
    kinds = [(r.kind, r.call_id) for r in repaired.repairs]
    assert ("moved_result", "a") in kinds
    assert ("closed_pending_call", "b") in kinds


def test_gemini_orphan_removal_joins_the_model_turns_in_the_same_pass() -> None:
    b = gemini(
        {"role": "model", "parts": [{"text": "Let me look."}]},
        {"role": "user", "parts": [response("f", "c0", "orphan")]},
        {"role": "model", "parts": [call("f", "c1")]},
        {"role": "user", "parts": [response("f", "c1")]},
    )
    repaired = settled(b, "gemini")
    assert [r.kind for r in repaired.repairs] == ["removed_orphan_result", "merged_messages"]
    assert repaired.body["contents"][1] == {
        "role": "model",
        "parts": [{"text": "Let me look."}, call("f", "c1")],
    }


def test_gemini_calls_of_one_name_without_ids_are_answered_in_order() -> None:
    b = gemini(
        {"role": "model", "parts": [call("read_file"), call("read_file")]},
        {"role": "user", "parts": [response("read_file", output="A"), response("read_file", output="B")]},
    )
    assert validate(b, "gemini") == []
    assert repair(b, "gemini").body is b


def test_gemini_signature_of_a_dropped_duplicate_call_is_kept() -> None:
    b = gemini(
        {"role": "model", "parts": [call("f", "a"), call("f", "a", thoughtSignature="SIG==")]},
        {"role": "user", "parts": [response("f", "a")]},
    )
    repaired = settled(b, "gemini")
    assert [r.kind for r in repaired.repairs] == ["removed_duplicate_call"]
    assert repaired.body["contents"][1]["parts"] == [call("f", "a", thoughtSignature="SIG==")]


UNFIXABLE = {
    "openai-responses": responses(
        {"type": "reasoning", "id": "rs_0", "summary": [], "encrypted_content": "ENC=="},
        {"role": "user", "content": "hurry"},
    ),
    "anthropic": body(
        U(txt("go")), A(use("a")), U(res("a")), thinking={"type": "enabled", "budget_tokens": 1024}
    ),
}


@pytest.mark.parametrize("api", sorted(UNFIXABLE))
def test_remaining_lists_what_no_repair_can_fix(api: str) -> None:
    b = UNFIXABLE[api]
    repaired = repair(b, api)
    assert repaired.body is b
    assert repaired.remaining == tuple(validate(b, api))
    assert len(repaired.remaining) == 1


@pytest.mark.parametrize(
    "b",
    [
        {"messages": "nope"},
        {"messages": [{"role": "wizard", "content": "x"}]},
        {"contents": [{"role": "user", "parts": [{"bogus": 1}]}]},
        {"model": "gpt-x"},
    ],
)
def test_responses_refuses_a_body_of_another_shape(b: dict[str, Any]) -> None:
    with pytest.raises(ShapeError, match="Responses body") as caught:
        validate(b, "openai-responses")
    assert "\n" not in str(caught.value)


def test_responses_body_held_on_the_server_needs_no_input() -> None:
    b = {"model": "gpt-x", "previous_response_id": "resp_1"}
    assert validate(b, "openai-responses") == []
    assert repair(b, "openai-responses").body is b


def test_a_bedrock_cache_point_beside_tool_results_is_valid_and_stays_put() -> None:
    body: dict[str, Any] = {
        "modelId": "m",
        "messages": [
            {"role": "user", "content": [{"text": "task"}]},
            {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "f", "input": {}}}]},
            {
                "role": "user",
                "content": [
                    {"toolResult": {"toolUseId": "t1", "content": [{"text": "ok"}]}},
                    {"cachePoint": {"type": "default"}},
                    {"text": "and a note"},
                ],
            },
        ],
        "toolConfig": {"tools": [{"toolSpec": {"name": "f", "inputSchema": {"json": {"type": "object"}}}}]},
    }
    valid = copy.deepcopy(body)
    del valid["messages"][2]["content"][2]
    assert validate(valid, "bedrock-converse") == []
    assert repair(valid, "bedrock-converse").body is valid
    fixed = repair(body, "bedrock-converse").body
    assert validate(fixed, "bedrock-converse") == []
    assert fixed["messages"][2]["content"][1] == {"cachePoint": {"type": "default"}}


@pytest.mark.parametrize("held", [{"conversation": "conv_1"}, {"conversation": {"id": "conv_1"}}])
def test_a_responses_conversation_holds_the_calls_its_outputs_answer(held: dict[str, Any]) -> None:
    body = {
        "model": "m",
        **held,
        "input": [{"type": "function_call_output", "call_id": "c1", "output": "42"}],
    }
    assert validate(body, "openai-responses") == []
    assert repair(body, "openai-responses").body is body
