"""A ``system`` message inside the history of an API that takes the system prompt only at the top."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from toolbudget import ShapeError, repair, validate

ANTHROPIC_TEXT = (
    'messages: Unexpected role "system". The Messages API accepts a top-level `system` parameter, '
    'not "system" as an input message role.'
)


def _settled(body: dict[str, Any], api: str) -> Any:
    before = copy.deepcopy(body)
    repaired = repair(body, api)
    assert body == before, "input was mutated"
    assert [str(v) for v in validate(repaired.body, api)] == []
    assert repair(repaired.body, api).body is repaired.body
    return repaired


def test_anthropic_reports_a_system_message_as_the_api_does() -> None:
    body = {
        "model": "m",
        "max_tokens": 5,
        "messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}],
    }
    assert [str(v) for v in validate(body, "anthropic")] == [ANTHROPIC_TEXT]


def test_anthropic_leading_system_message_moves_to_the_top_level_system() -> None:
    body = {
        "model": "m",
        "max_tokens": 5,
        "messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}],
    }
    repaired = _settled(body, "anthropic")
    assert [(r.kind, r.index) for r in repaired.repairs] == [("moved_to_system", 0)]
    assert repaired.body["system"] == "Be terse."
    assert repaired.body["messages"] == [{"role": "user", "content": "hi"}]


def test_anthropic_system_text_goes_after_an_existing_system_prompt_and_keeps_its_fields() -> None:
    marked = {"type": "text", "text": "Rules.", "cache_control": {"type": "ephemeral"}}
    body = {
        "model": "m",
        "max_tokens": 5,
        "system": "You are a coder.",
        "messages": [{"role": "system", "content": [marked]}, {"role": "user", "content": "hi"}],
    }
    repaired = _settled(body, "anthropic")
    assert repaired.body["system"] == [{"type": "text", "text": "You are a coder."}, marked]


def test_anthropic_system_message_mid_history_becomes_a_user_message() -> None:
    body: dict[str, Any] = {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "system", "content": "Reminder: run the tests."},
            {"role": "user", "content": "go"},
        ],
    }
    repaired = _settled(body, "anthropic")
    assert [(r.kind, r.index) for r in repaired.repairs] == [("system_message_made_user", 2)]
    assert "system" not in repaired.body
    assert repaired.body["messages"][2] == {"role": "user", "content": "Reminder: run the tests."}
    assert repaired.body["messages"][3] is body["messages"][3]


@pytest.mark.parametrize("api", ["anthropic", "bedrock-converse"])
def test_an_unknown_role_lists_only_the_roles_the_api_takes(api: str) -> None:
    content: Any = "x" if api == "anthropic" else [{"text": "x"}]
    with pytest.raises(ShapeError, match=r"unknown role 'wizard' \(expected one of: assistant, user\)"):
        validate({"messages": [{"role": "wizard", "content": content}]}, api)


def test_gemini_unknown_role_does_not_offer_system() -> None:
    with pytest.raises(ShapeError) as caught:
        validate({"contents": [{"role": "wizard", "parts": [{"text": "x"}]}]}, "gemini")
    assert "system" not in str(caught.value)


def test_bedrock_system_message_is_reported_and_moved() -> None:
    body = {
        "modelId": "m",
        "messages": [
            {"role": "system", "content": [{"text": "Be terse."}]},
            {"role": "user", "content": [{"text": "hi"}]},
            {"role": "assistant", "content": [{"text": "hello"}]},
            {"role": "system", "content": [{"text": "Reminder."}]},
            {"role": "user", "content": [{"text": "go"}]},
        ],
    }
    violations = [str(v) for v in validate(body, "bedrock-converse")]
    assert (
        "messages.0.role: 1 validation error detected: Value 'system' at 'messages.0.member.role' failed "
        "to satisfy constraint: Member must satisfy enum value set: [user, assistant]"
    ) in violations
    assert any("'messages.3.member.role'" in v for v in violations)
    repaired = _settled(body, "bedrock-converse")
    assert repaired.body["system"] == [{"text": "Be terse."}]
    # The later one is read where it was, as the user's, joined with the user turn after it.
    assert repaired.body["messages"][2:] == [
        {"role": "user", "content": [{"text": "Reminder."}, {"text": "go"}]},
    ]


def test_gemini_system_content_is_reported_and_moved() -> None:
    body = {
        "contents": [
            {"role": "system", "parts": [{"text": "Be terse."}]},
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [{"text": "hello"}]},
            {"role": "system", "parts": [{"text": "Reminder."}]},
        ]
    }
    assert [str(v) for v in validate(body, "gemini")] == [
        "contents.0.role: Please use a valid role: user, model.",
        "contents.3.role: Please use a valid role: user, model.",
    ]
    repaired = _settled(body, "gemini")
    assert [(r.kind, r.index) for r in repaired.repairs] == [
        ("moved_to_system", 0),
        ("system_message_made_user", 3),
    ]
    assert repaired.body["systemInstruction"] == {"parts": [{"text": "Be terse."}]}
    assert repaired.body["contents"][-1] == {"role": "user", "parts": [{"text": "Reminder."}]}


@pytest.mark.parametrize(
    ("api", "body"),
    [
        (
            "openai-chat",
            {
                "model": "m",
                "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
            },
        ),
        (
            "openai-responses",
            {"model": "m", "input": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]},
        ),
    ],
)
def test_openai_apis_take_system_messages_as_they_are(api: str, body: dict[str, Any]) -> None:
    assert validate(body, api) == []
    assert repair(body, api).body is body
