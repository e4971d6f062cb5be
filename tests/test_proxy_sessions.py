"""Which session a proxied request lands in: the ids clients state, the conversation, the tenant."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from toolbudget import InputError, Sessions
from toolbudget.policy import Policy


def body(
    billing: str = "cc_version=2.1.90; cch=aaaa;", task: str = "fix the bug", **extra: Any
) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 10,
        "system": [
            {"type": "text", "text": f"x-anthropic-billing-header: {billing}"},
            {"type": "text", "text": "You are Claude Code."},
        ],
        "messages": [{"role": "user", "content": task}],
        **extra,
    }


@pytest.fixture
def pool() -> Any:
    with Sessions(store="memory:", policy=Policy()) as sessions:
        yield sessions


def test_claude_codes_changing_attribution_block_does_not_split_a_conversation(pool: Sessions) -> None:
    first = pool.for_request(body("cc_version=2.1.90; cch=aaaa;"), api="anthropic")
    again = pool.for_request(body("cc_version=2.1.90; cch=bbbb;"), api="anthropic")
    other = pool.for_request(body("cc_version=2.1.90; cch=aaaa;", task="write the docs"), api="anthropic")
    assert first.id == again.id
    assert other.id != first.id


def test_codex_session_headers_name_the_session(pool: Sessions) -> None:
    chat = {"model": "m", "input": [{"role": "user", "content": "hi"}], "prompt_cache_key": "pck"}
    assert pool.for_request(chat, api="openai-responses", headers={"session-id": "abc"}).id == "codex-abc"
    assert pool.for_request(chat, api="openai-responses", headers={"Session_Id": "old"}).id == "codex-old"
    assert pool.for_request(chat, api="openai-responses").id == "prompt-cache-pck"


def test_the_session_id_inside_metadata_user_id_names_the_session(pool: Sessions) -> None:
    said = orjson.dumps({"device_id": "d", "account_uuid": "", "session_id": "5f0c-77"}).decode()
    assert pool.for_request(body(metadata={"user_id": said}), api="anthropic").id == "claude-code-5f0c-77"
    legacy = "user_abc123_account__session_0b7c1d2e-1111-2222-3333-444455556666"
    found = pool.for_request(body(metadata={"user_id": legacy}), api="anthropic")
    assert found.id == "claude-code-0b7c1d2e-1111-2222-3333-444455556666"
    plain = pool.for_request(body(metadata={"user_id": "just-a-user"}), api="anthropic")
    assert plain.id.startswith("conv-")  # a user alone names many conversations: not used
    header = pool.for_request(
        body(metadata={"user_id": said}), api="anthropic", headers={"x-claude-code-session-id": "h"}
    )
    assert header.id == "claude-code-h"


def test_a_tenant_selects_only_within_its_own_namespace(pool: Sessions) -> None:
    headers = {"x-toolbudget-session": "s1"}
    alice = pool.for_request(body(), api="anthropic", headers=headers, tenant="a1")
    bob = pool.for_request(body(), api="anthropic", headers=headers, tenant="b2")
    assert alice.id == "a1-s1" and bob.id == "b2-s1"
    assert pool.for_request(body(), api="anthropic", tenant="a1").id.startswith("a1-conv-")
    with pytest.raises(InputError, match="tenant"):
        pool.for_request(body(), api="anthropic", tenant="../x")
