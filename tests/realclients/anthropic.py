"""The Anthropic Messages API as the scripted upstream speaks it.

Answers are written the way the real API writes them: a streamed answer is
``message_start``, per block ``content_block_start`` / ``content_block_delta``
(``text_delta``, ``input_json_delta`` in a few pieces) / ``content_block_stop``,
``message_delta`` with the stop reason and usage, ``message_stop``; errors are
the API's JSON error envelope with the real wording from
``shared/reference/providers.md``.

The pairing check here is written from the provider's rules, not taken from
toolbudget: the tests must catch a toolbudget bug, not agree with it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from .script import Reply, Result

__all__ = [
    "check_pairing",
    "check_thinking",
    "error_body",
    "message",
    "overflow_message",
    "results_of_last_turn",
    "stream_events",
    "thinking_on",
    "tool_names",
]


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    if isinstance(content, list):
        return content
    return []


def check_pairing(body: Mapping[str, Any]) -> list[str]:
    """Every pairing rule ``body`` breaks, each worded as the API words it.

    Each ``tool_use`` needs exactly one ``tool_result`` at the start of the
    next message, which is the user's; each ``tool_result`` must answer a
    ``tool_use`` of the message just before it. A history that ends on an
    assistant message with calls is refused too: no client sends one, and a hop
    that drops the last results must not pass.
    """
    messages = body.get("messages")
    if not isinstance(messages, list):
        return ["messages: Field required"]
    problems: list[str] = []
    for index, msg in enumerate(messages):
        blocks = _blocks(msg)
        if msg.get("role") == "assistant":
            uses = [b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
            if not uses:
                continue
            after = messages[index + 1] if index + 1 < len(messages) else None
            leading: list[Any] = []
            if after is not None and after.get("role") == "user":
                for block in _blocks(after):
                    if not (isinstance(block, dict) and block.get("type") == "tool_result"):
                        break
                    leading.append(block.get("tool_use_id"))
            missing = [u for u in uses if u not in leading]
            if missing:
                problems.append(
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(map(str, missing))}. Each `tool_use` block must "
                    "have a corresponding `tool_result` block in the next message."
                )
            if len(set(uses)) != len(uses):
                problems.append(f"messages.{index}: `tool_use` ids must be unique")
        elif msg.get("role") == "user":
            before = messages[index - 1] if index > 0 else None
            offered = {
                b.get("id")
                for b in (_blocks(before) if before is not None and before.get("role") == "assistant" else [])
                if isinstance(b, dict) and b.get("type") == "tool_use"
            }
            seen: set[Any] = set()
            in_lead = True
            for position, block in enumerate(blocks):
                is_result = isinstance(block, dict) and block.get("type") == "tool_result"
                if not is_result:
                    in_lead = False
                    continue
                call = block.get("tool_use_id")
                if call not in offered:
                    problems.append(
                        f"messages.{index}.content.{position}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {call}. Each `tool_result` block must have a "
                        "corresponding `tool_use` block in the previous message."
                    )
                elif call in seen:
                    problems.append(f"messages.{index}: found multiple `tool_result` blocks with id: {call}")
                elif not in_lead:
                    problems.append(
                        f"messages.{index}: Did not find {len(offered)} tool_result block(s) at the "
                        "beginning of this message. Messages following tool_use blocks must begin "
                        "with a matching number of tool_result blocks."
                    )
                seen.add(call)
    return problems


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def results_of_last_turn(body: Mapping[str, Any]) -> tuple[Result, ...]:
    """The ``tool_result`` blocks of the last message, when it is the user's."""
    messages = body.get("messages") or []
    if not messages or messages[-1].get("role") != "user":
        return ()
    return tuple(
        Result(str(b.get("tool_use_id")), _text_of(b.get("content")), bool(b.get("is_error")))
        for b in _blocks(messages[-1])
        if isinstance(b, dict) and b.get("type") == "tool_result"
    )


def tool_names(body: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(t.get("name")) for t in body.get("tools") or () if isinstance(t, dict))


def overflow_message(tokens: int, limit: int) -> str:
    return f"prompt is too long: {tokens} tokens > {limit} maximum"


def error_body(kind: str, message_text: str) -> bytes:
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": message_text}})


def thinking_on(body: Mapping[str, Any]) -> bool:
    config = body.get("thinking")
    return isinstance(config, dict) and config.get("type") in ("enabled", "adaptive")


def check_thinking(body: Mapping[str, Any], signatures: frozenset[str]) -> list[str]:
    """With thinking on, the assistant message that opened the current tool loop must start
    with its thinking block, and every signature must be one this upstream issued, unchanged."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not thinking_on(body):
        return []
    problems: list[str] = []
    for index, msg in enumerate(messages):
        if msg.get("role") != "assistant":
            continue
        for position, block in enumerate(_blocks(msg)):
            if isinstance(block, dict) and block.get("type") == "thinking":
                if block.get("signature") not in signatures:
                    problems.append(
                        f"messages.{index}.content.{position}: Invalid `signature` in `thinking` block"
                    )
    last = messages[-1] if messages else None
    if last is not None and last.get("role") == "user" and len(messages) >= 2:
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in _blocks(last)):
            opener = _blocks(messages[-2])
            first = opener[0] if opener else None
            if not (isinstance(first, dict) and first.get("type") in ("thinking", "redacted_thinking")):
                found = first.get("type") if isinstance(first, dict) else "text"
                problems.append(
                    f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or "
                    f"`redacted_thinking`, but found `{found}`. When `thinking` is enabled, a final "
                    "`assistant` message must start with a thinking block (preceeding the lastmost set "
                    "of `tool_use` and `tool_result` blocks). To avoid this requirement, disable `thinking`."
                )
    return problems


def _content(reply: Reply, ids: list[str], thinking: tuple[str, str] | None) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if thinking is not None:
        content.append({"type": "thinking", "thinking": thinking[0], "signature": thinking[1]})
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for call, call_id in zip(reply.calls, ids, strict=True):
        content.append({"type": "tool_use", "id": call_id, "name": call.name, "input": dict(call.arguments)})
    return content


def _usage(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
    }


def message(
    reply: Reply,
    *,
    msg_id: str,
    ids: list[str],
    model: str,
    input_tokens: int,
    thinking: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The non-streaming answer; ``thinking`` is the (text, signature) of a thinking block to lead it."""
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _content(reply, ids, thinking),
        "stop_reason": "tool_use" if reply.calls else "end_turn",
        "stop_sequence": None,
        "usage": _usage(input_tokens, max(1, len(reply.text) // 4)),
    }


def _event(name: str, data: Mapping[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps({"type": name, **data}) + b"\n\n"


def _pieces(text: str, count: int = 3) -> list[str]:
    """``text`` in ``count`` pieces, as a model streams it (a JSON value split mid-token)."""
    if not text:
        return []
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def stream_events(
    reply: Reply,
    *,
    msg_id: str,
    ids: list[str],
    model: str,
    input_tokens: int,
    thinking: tuple[str, str] | None = None,
) -> Iterator[bytes]:
    """The streamed answer, one SSE event at a time."""
    start = message(reply, msg_id=msg_id, ids=ids, model=model, input_tokens=input_tokens, thinking=thinking)
    final = start["content"]
    yield _event(
        "message_start",
        {"message": {**start, "content": [], "stop_reason": None, "usage": _usage(input_tokens, 1)}},
    )
    yield _event("ping", {})
    for index, block in enumerate(final):
        if block["type"] == "thinking":
            yield _event(
                "content_block_start",
                {"index": index, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
            )
            for piece in _pieces(block["thinking"]):
                yield _event(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "thinking_delta", "thinking": piece}},
                )
            yield _event(
                "content_block_delta",
                {"index": index, "delta": {"type": "signature_delta", "signature": block["signature"]}},
            )
        elif block["type"] == "text":
            yield _event(
                "content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}
            )
            for piece in _pieces(block["text"]):
                yield _event(
                    "content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": piece}}
                )
        else:
            yield _event(
                "content_block_start",
                {"index": index, "content_block": {**block, "input": {}}},
            )
            for piece in _pieces(orjson.dumps(block["input"]).decode()):
                yield _event(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "input_json_delta", "partial_json": piece}},
                )
        yield _event("content_block_stop", {"index": index})
    yield _event(
        "message_delta",
        {
            "delta": {"stop_reason": start["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": start["usage"]["output_tokens"]},
        },
    )
    yield _event("message_stop", {})
