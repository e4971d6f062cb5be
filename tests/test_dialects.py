"""Wire dialects: replies read per API, streams folded as the SDKs fold them, Bedrock through Stretch."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from anthropic._models import construct_type as anthropic_construct
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import RawMessageStreamEvent
from openai._models import construct_type as openai_construct
from openai._types import omit
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent

from toolbudget import Policy, wire
from toolbudget.clients._observe import Tap
from toolbudget.model import Usage
from toolbudget.recall import recall_tool
from toolbudget.recovery.output import (
    Stretch,
    answer_text,
    continuation,
    escalated,
    finalize,
    is_cut_off,
    max_tokens_of,
    merge,
)

# --------------------------------------------------------------------------- usage, read per API


def test_usage_of_each_api_states_the_uncached_input_and_the_cache_apart() -> None:
    replies: dict[str, dict[str, Any]] = {
        "anthropic": {
            "usage": {
                "input_tokens": 10,
                "cache_creation_input_tokens": 27934,
                "cache_read_input_tokens": 500,
                "cache_creation": {"ephemeral_5m_input_tokens": 27934, "ephemeral_1h_input_tokens": 0},
                "output_tokens": 3,
            }
        },
        "openai-chat": {
            "usage": {
                "prompt_tokens": 2006,
                "completion_tokens": 300,
                "total_tokens": 2306,
                "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 256},
            }
        },
        "openai-responses": {
            "usage": {
                "input_tokens": 2006,
                "input_tokens_details": {"cached_tokens": 1920},
                "output_tokens": 300,
                "output_tokens_details": {"reasoning_tokens": 256},
                "total_tokens": 2306,
            }
        },
        "gemini": {
            "usageMetadata": {
                "promptTokenCount": 2006,
                "cachedContentTokenCount": 1920,
                "candidatesTokenCount": 44,
                "thoughtsTokenCount": 256,
                "totalTokenCount": 2306,
            }
        },
        "bedrock-converse": {
            "usage": {
                "inputTokens": 86,
                "outputTokens": 300,
                "totalTokens": 2306,
                "cacheReadInputTokens": 1920,
                "cacheWriteInputTokens": 0,
            }
        },
    }
    expected = {
        "anthropic": Usage(10, 3, 500, 27934),
        "openai-chat": Usage(86, 300, 1920, None),
        "openai-responses": Usage(86, 300, 1920, None),
        "gemini": Usage(86, 300, 1920, None),
        "bedrock-converse": Usage(86, 300, 1920, 0),
    }
    for api, reply in replies.items():
        usage = wire.dialect(api).usage(reply)
        assert usage == expected[api], api
    assert expected["openai-chat"].prompt == 2006
    assert wire.dialect("gemini").usage({"usage_metadata": {"prompt_token_count": 7}}) == Usage(7)


def test_a_reply_without_usage_has_none() -> None:
    for api in wire.APIS:
        assert wire.dialect(api).usage({}) is None, api


def _claude_code_messages(trajectories: Path) -> Iterator[dict[str, Any]]:
    for path in sorted((trajectories / "claude-code").rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            message = entry.get("message") if isinstance(entry, dict) else None
            if isinstance(message, dict) and message.get("role") == "assistant" and "usage" in message:
                yield message


def _chat_completions(trajectories: Path) -> Iterator[dict[str, Any]]:
    for path in sorted((trajectories / "mini-swe-agent").rglob("*.traj.json")):
        for message in json.loads(path.read_text(encoding="utf-8")).get("messages", []):
            response = (message.get("extra") or {}).get("response")
            if isinstance(response, dict) and isinstance(response.get("usage"), dict):
                yield response


@pytest.mark.shared
def test_usage_of_real_replies(trajectories: Path) -> None:
    claude = list(_claude_code_messages(trajectories))
    chat = list(_chat_completions(trajectories))
    assert claude and chat
    cached = 0
    for message in claude:
        raw, usage = message["usage"], wire.dialect("anthropic").usage(message)
        assert usage is not None
        assert usage.output == raw["output_tokens"]
        assert usage.cache_read == raw.get("cache_read_input_tokens")
        assert usage.cache_write == raw.get("cache_creation_input_tokens")
        cached += bool(usage.cache_read)
    for response in chat:
        raw, usage = response["usage"], wire.dialect("openai-chat").usage(response)
        assert usage is not None
        assert usage.prompt == raw["prompt_tokens"]
        assert usage.output == raw["completion_tokens"]
        assert usage.cache_read == (raw.get("prompt_tokens_details") or {}).get("cached_tokens")
        cached += bool(usage.cache_read)
    assert cached  # the real replies do read from the cache


# --------------------------------------------------------------------------- the recall tool


def test_recall_tool_dispatches_to_each_dialect() -> None:
    for api in wire.APIS:
        assert recall_tool(api) == wire.module(api).recall_tool() == wire.dialect(api).recall_tool()
    assert recall_tool("bedrock")["toolSpec"]["inputSchema"]["json"]["required"] == ["key"]
    strict = wire.openai_chat.strict_recall_tool()["function"]
    assert strict["strict"] is True and strict["parameters"]["additionalProperties"] is False


# --------------------------------------------------------------------------- folding streams


def fold(api: str, events: list[Any]) -> dict[str, Any] | None:
    """The reply a tap folds from ``events`` (dicts, or the SDK's own event objects)."""
    seen: list[dict[str, Any] | None] = []
    tap = Tap(api, lambda answer, _finished: seen.append(answer))
    for event in events:
        tap.see(event)
    tap.end(True)
    return seen[0]


ANTHROPIC_EVENTS: list[dict[str, Any]] = [
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 12,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 4000,
                "output_tokens": 1,
            },
        },
    },
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
    },
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me "}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "look."}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig=="}},
    {"type": "content_block_stop", "index": 0},
    {"type": "ping"},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Reading "}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "the file."}},
    {"type": "content_block_stop", "index": 1},
    {
        "type": "content_block_start",
        "index": 2,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "input_json_delta", "partial_json": '{"path": '},
    },
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "input_json_delta", "partial_json": '"a.py"}'},
    },
    {"type": "content_block_stop", "index": 2},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": 57},
    },
    {"type": "message_stop"},
]


def _anthropic_sdk_final(events: list[dict[str, Any]]) -> dict[str, Any]:
    snapshot = None
    buffers: dict[int, bytes] = {}
    for event in events:
        typed = cast(RawMessageStreamEvent, anthropic_construct(type_=RawMessageStreamEvent, value=event))
        snapshot = accumulate_event(event=typed, current_snapshot=snapshot, json_bufs=buffers)
    assert snapshot is not None
    final: dict[str, Any] = snapshot.model_dump(mode="json", exclude_none=True)
    return final


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def test_anthropic_fold_matches_the_sdks_final_message() -> None:
    sdk = _anthropic_sdk_final(ANTHROPIC_EVENTS)
    for events in (
        ANTHROPIC_EVENTS,
        [anthropic_construct(type_=RawMessageStreamEvent, value=e) for e in ANTHROPIC_EVENTS],
    ):
        folded = fold("anthropic", events)
        assert folded is not None
        assert _without_none(folded) == sdk
    assert folded is not None
    assert folded["usage"]["cache_read_input_tokens"] == 4000 and folded["usage"]["output_tokens"] == 57


def test_anthropic_stream_cut_inside_a_call_leaves_it_unrunnable() -> None:
    folded = fold("anthropic", ANTHROPIC_EVENTS[:13])
    assert folded is not None
    assert folded["content"][2]["input"] == '{"path": '
    cut = is_cut_off(folded, "anthropic")
    assert cut is not None and cut.tool_call


def test_anthropic_folder_never_changes_the_events() -> None:
    events = copy.deepcopy(ANTHROPIC_EVENTS)
    folder = wire.dialect("anthropic").folder()
    for event in events:
        folder.see(event)
    reply = folder.reply()
    assert reply is not None
    reply["content"].clear()
    assert events == ANTHROPIC_EVENTS
    assert folder.reply() != reply  # every reply is a copy of its own


def _chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o",
        "choices": choices,
        **extra,
    }


CHAT_CHUNKS: list[dict[str, Any]] = [
    _chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]),
    _chunk([{"index": 0, "delta": {"content": "Reading "}, "finish_reason": None}]),
    _chunk([{"index": 0, "delta": {"content": "two files."}, "finish_reason": None}]),
    _chunk(
        [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "Read", "arguments": ""},
                        }
                    ]
                },
                "finish_reason": None,
            }
        ]
    ),
    _chunk(
        [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"path": "a.py"}'}}]}}]
    ),
    _chunk(
        [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 1,
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "Read", "arguments": ""},
                        }
                    ]
                },
            }
        ]
    ),
    _chunk([{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": '{"path": '}}]}}]),
    _chunk([{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": '"b.py"}'}}]}}]),
    _chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
    _chunk(
        [],
        usage={
            "prompt_tokens": 900,
            "completion_tokens": 40,
            "total_tokens": 940,
            "prompt_tokens_details": {"cached_tokens": 768},
        },
    ),
]


def test_chat_fold_matches_the_sdks_stream_state() -> None:
    state = ChatCompletionStreamState()
    for chunk in CHAT_CHUNKS:
        state.handle_chunk(
            cast(ChatCompletionChunk, openai_construct(type_=ChatCompletionChunk, value=chunk))
        )
    sdk = state.get_final_completion().model_dump(mode="json")
    folded = fold("openai-chat", CHAT_CHUNKS)
    assert folded is not None
    message, sdk_message = folded["choices"][0]["message"], sdk["choices"][0]["message"]
    assert message["content"] == sdk_message["content"] == "Reading two files."
    # The SDK's snapshot adds the stream's ``index`` and its parsed arguments; the API's reply has neither.
    assert message["tool_calls"] == [
        {
            "id": call["id"],
            "type": call["type"],
            "function": {"name": call["function"]["name"], "arguments": call["function"]["arguments"]},
        }
        for call in sdk_message["tool_calls"]
    ]
    assert folded["choices"][0]["finish_reason"] == sdk["choices"][0]["finish_reason"] == "tool_calls"
    assert folded["usage"] == _without_none(sdk["usage"])
    assert (folded["id"], folded["object"], folded["model"]) == (sdk["id"], sdk["object"], sdk["model"])
    assert wire.dialect("openai-chat").usage(folded) == Usage(132, 40, 768, None)


def test_chat_fold_reads_the_sdk_helpers_chunk_events_without_their_snapshots() -> None:
    from openai.lib.streaming.chat import ChunkEvent, ContentDeltaEvent

    state = ChatCompletionStreamState()
    events: list[Any] = []
    for raw in CHAT_CHUNKS:
        chunk = cast(ChatCompletionChunk, openai_construct(type_=ChatCompletionChunk, value=raw))
        events.extend(
            state.handle_chunk(chunk)
        )  # the helper's own events, as chat.completions.stream yields them
    assert {type(e) for e in events} >= {ChunkEvent, ContentDeltaEvent}
    converted: list[set[str]] = []

    class Watched:
        """An SDK event that records which of its fields a tap converted."""

        def __init__(self, event: Any) -> None:
            self.event, self.type = event, event.type

        def model_dump(self, **options: Any) -> Any:
            dumped = self.event.model_dump(**options)
            converted.append(set(dumped))
            return dumped

    assert fold("openai-chat", [Watched(e) for e in events]) == fold("openai-chat", CHAT_CHUNKS)
    assert converted and all(fields == {"type", "chunk"} for fields in converted)  # never the snapshot


def test_chat_stream_cut_inside_a_call_is_a_cut_call() -> None:
    folded = fold("openai-chat", CHAT_CHUNKS[:7])
    assert folded is not None
    cut = is_cut_off(folded, "openai-chat")
    assert cut is not None and cut.tool_call
    kept, dropped = finalize(folded, "openai-chat")
    assert dropped == 1 and [c["id"] for c in kept["choices"][0]["message"]["tool_calls"]] == ["call_a"]


RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1,
    "model": "gpt-5",
    "status": "in_progress",
    "output": [],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
}
MESSAGE_DONE: dict[str, Any] = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Reading a.py.", "annotations": []}],
}
CALL_DONE = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "Read",
    "arguments": '{"path": "a.py"}',
    "status": "completed",
}
USAGE = {
    "input_tokens": 900,
    "input_tokens_details": {"cached_tokens": 512},
    "output_tokens": 30,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 930,
}


def _responses_events(*, final_output: bool = True) -> list[dict[str, Any]]:
    part = {"type": "output_text", "text": "", "annotations": []}
    completed = {**RESPONSE, "status": "completed", "output": [MESSAGE_DONE, CALL_DONE], "usage": USAGE}
    if not final_output:
        del completed["output"]
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": RESPONSE},
        {"type": "response.in_progress", "response": RESPONSE},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**MESSAGE_DONE, "status": "in_progress", "content": []},
        },
        {
            "type": "response.content_part.added",
            "output_index": 0,
            "content_index": 0,
            "item_id": "msg_1",
            "part": part,
        },
        {
            "type": "response.output_text.delta",
            "output_index": 0,
            "content_index": 0,
            "item_id": "msg_1",
            "delta": "Reading ",
        },
        {
            "type": "response.output_text.delta",
            "output_index": 0,
            "content_index": 0,
            "item_id": "msg_1",
            "delta": "a.py.",
        },
        {
            "type": "response.output_text.done",
            "output_index": 0,
            "content_index": 0,
            "item_id": "msg_1",
            "text": "Reading a.py.",
        },
        {
            "type": "response.content_part.done",
            "output_index": 0,
            "content_index": 0,
            "item_id": "msg_1",
            "part": MESSAGE_DONE["content"][0],
        },
        {"type": "response.output_item.done", "output_index": 0, "item": MESSAGE_DONE},
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**CALL_DONE, "arguments": "", "status": "in_progress"},
        },
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 1,
            "item_id": "fc_1",
            "delta": '{"path": ',
        },
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 1,
            "item_id": "fc_1",
            "delta": '"a.py"}',
        },
        {
            "type": "response.function_call_arguments.done",
            "output_index": 1,
            "item_id": "fc_1",
            "arguments": CALL_DONE["arguments"],
        },
        {"type": "response.output_item.done", "output_index": 1, "item": CALL_DONE},
        {"type": "response.completed", "response": completed},
    ]
    return [{**e, "sequence_number": n} for n, e in enumerate(events)]


def _responses_sdk_final(events: list[dict[str, Any]]) -> dict[str, Any]:
    state = ResponseStreamState(input_tools=omit, text_format=omit)
    final = None
    for event in events:
        for out in state.handle_event(openai_construct(type_=ResponseStreamEvent, value=event)):  # type: ignore[arg-type]
            if out.type == "response.completed":
                final = out.response
    assert final is not None
    dumped: dict[str, Any] = final.model_dump(mode="json", exclude_none=True)
    return dumped


@pytest.mark.parametrize("final_output", [True, False], ids=["final-output", "final-without-output"])
def test_responses_fold_matches_the_sdks_final_response(final_output: bool) -> None:
    events = _responses_events(final_output=final_output)
    sdk = _responses_sdk_final(events)
    folded = fold("openai-responses", events)
    assert folded is not None
    assert folded["status"] == sdk["status"] == "completed"
    assert folded["usage"] == sdk["usage"]
    sdk_output = [{k: v for k, v in item.items() if k != "parsed_arguments"} for item in sdk["output"]]
    assert _without_none(folded["output"]) == sdk_output == [MESSAGE_DONE, CALL_DONE]


def test_responses_stream_cut_before_its_final_event_still_folds() -> None:
    events = _responses_events()
    text_only = fold("openai-responses", events[:6])
    assert text_only is not None
    assert answer_text([text_only], "openai-responses") == "Reading a.py."
    in_call = fold("openai-responses", events[:11])
    assert in_call is not None
    assert in_call["output"][1]["arguments"] == '{"path": '
    cut = is_cut_off(in_call, "openai-responses")
    assert cut is not None and cut.tool_call
    # A call whose arguments parse but whose item never finished is not run either.
    whole_text = fold("openai-responses", events[:12])
    assert whole_text is not None and finalize(whole_text, "openai-responses")[1] == 1


def test_responses_fold_of_the_sdk_helpers_events_never_converts_their_snapshots() -> None:
    state = ResponseStreamState(input_tools=omit, text_format=omit)
    events: list[Any] = []
    for raw in _responses_events():
        typed = openai_construct(type_=ResponseStreamEvent, value=raw)
        events.extend(state.handle_event(typed))  # type: ignore[arg-type]
    assert any(hasattr(e, "snapshot") for e in events)
    converted: list[set[str]] = []

    class Watched:
        def __init__(self, event: Any) -> None:
            self.event, self.type = event, event.type

        def model_dump(self, **options: Any) -> Any:
            dumped = self.event.model_dump(**options)
            converted.append(set(dumped))
            return dumped

    folded = fold("openai-responses", [Watched(e) for e in events])
    assert folded is not None
    assert _without_none(folded["output"]) == [MESSAGE_DONE, CALL_DONE]
    assert converted and not any("snapshot" in fields for fields in converted)


GEMINI_CHUNKS: list[dict[str, Any]] = [
    {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "Thinking about", "thought": True}]}, "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 900, "totalTokenCount": 900},
        "modelVersion": "gemini-2.5-pro",
        "responseId": "r1",
    },
    {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": " the file.", "thought": True}]}, "index": 0}
        ],
        "modelVersion": "gemini-2.5-pro",
        "responseId": "r1",
    },
    {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Reading "}]}, "index": 0}],
        "modelVersion": "gemini-2.5-pro",
        "responseId": "r1",
    },
    {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "a.py."},
                        {
                            "functionCall": {"name": "Read", "args": {"path": "a.py"}},
                            "thoughtSignature": "c2ln",
                        },
                    ],
                },
                "index": 0,
            }
        ],
        "modelVersion": "gemini-2.5-pro",
        "responseId": "r1",
    },
    {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "Done"}]},
                "finishReason": "MAX_TOKENS",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 900,
            "cachedContentTokenCount": 600,
            "candidatesTokenCount": 20,
            "thoughtsTokenCount": 12,
            "totalTokenCount": 932,
        },
        "modelVersion": "gemini-2.5-pro",
        "responseId": "r1",
    },
]


def test_gemini_fold_appends_parts_and_joins_neighbouring_text() -> None:
    from google.genai import types

    dumped = [
        types.GenerateContentResponse.model_validate(c).model_dump(
            mode="json", by_alias=True, exclude_unset=True
        )
        for c in GEMINI_CHUNKS
    ]
    for events in (
        GEMINI_CHUNKS,
        [types.GenerateContentResponse.model_validate(c) for c in GEMINI_CHUNKS],
        dumped,
    ):
        folded = fold("gemini", events)
        assert folded == {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [
                            {"text": "Thinking about the file.", "thought": True},
                            {"text": "Reading a.py."},
                            {
                                "functionCall": {"name": "Read", "args": {"path": "a.py"}},
                                "thoughtSignature": "c2ln",
                            },
                            {"text": "Done"},
                        ],
                    },
                    "finishReason": "MAX_TOKENS",
                    "index": 0,
                }
            ],
            "usageMetadata": GEMINI_CHUNKS[-1]["usageMetadata"],
            "modelVersion": "gemini-2.5-pro",
            "responseId": "r1",
        }
    assert folded is not None
    assert answer_text([folded], "gemini") == "Reading a.py.Done"
    assert wire.dialect("gemini").usage(folded) == Usage(300, 32, 600, None)
    assert is_cut_off(folded, "gemini") is not None


BEDROCK_EVENTS: list[dict[str, Any]] = [
    {"messageStart": {"role": "assistant"}},
    {
        "contentBlockDelta": {
            "delta": {"reasoningContent": {"text": "The user wants "}},
            "contentBlockIndex": 0,
        }
    },
    {"contentBlockDelta": {"delta": {"reasoningContent": {"text": "a.py."}}, "contentBlockIndex": 0}},
    {"contentBlockDelta": {"delta": {"reasoningContent": {"signature": "sig"}}, "contentBlockIndex": 0}},
    {"contentBlockStop": {"contentBlockIndex": 0}},
    {"contentBlockDelta": {"delta": {"text": "Reading "}, "contentBlockIndex": 1}},
    {"contentBlockDelta": {"delta": {"text": "a.py."}, "contentBlockIndex": 1}},
    {"contentBlockStop": {"contentBlockIndex": 1}},
    {
        "contentBlockStart": {
            "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "Read"}},
            "contentBlockIndex": 2,
        }
    },
    {"contentBlockDelta": {"delta": {"toolUse": {"input": '{"path": '}}, "contentBlockIndex": 2}},
    {"contentBlockDelta": {"delta": {"toolUse": {"input": '"a.py"}'}}, "contentBlockIndex": 2}},
    {"contentBlockStop": {"contentBlockIndex": 2}},
    {"messageStop": {"stopReason": "tool_use"}},
    {
        "metadata": {
            "usage": {
                "inputTokens": 40,
                "outputTokens": 25,
                "totalTokens": 1065,
                "cacheReadInputTokens": 1000,
                "cacheWriteInputTokens": 0,
            },
            "metrics": {"latencyMs": 812},
        }
    },
]


def test_bedrock_fold_is_the_converse_reply() -> None:
    folded = fold("bedrock-converse", BEDROCK_EVENTS)
    assert folded == {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "reasoningContent": {
                            "reasoningText": {"text": "The user wants a.py.", "signature": "sig"}
                        }
                    },
                    {"text": "Reading a.py."},
                    {"toolUse": {"toolUseId": "tooluse_1", "name": "Read", "input": {"path": "a.py"}}},
                ],
            }
        },
        "stopReason": "tool_use",
        "usage": BEDROCK_EVENTS[-1]["metadata"]["usage"],
        "metrics": {"latencyMs": 812},
    }
    assert wire.dialect("bedrock-converse").usage(folded) == Usage(40, 25, 1000, 0)
    assert is_cut_off(folded, "bedrock-converse") is None


def test_bedrock_fold_follows_the_documented_converse_output_shape() -> None:
    """The folded reply validates against botocore's own ``ConverseResponse`` shape."""
    import botocore.session
    from botocore.validate import ParamValidator

    model = botocore.session.get_session().get_service_model("bedrock-runtime")
    shape = model.operation_model("Converse").output_shape
    folded = fold("bedrock-converse", BEDROCK_EVENTS)
    report = ParamValidator().validate(folded, shape)
    assert not report.has_errors(), report.generate_report()
    stops = set(model.shape_for("StopReason").enum)
    assert wire.dialect("bedrock-converse").cut_stops <= stops


def test_bedrock_stream_cut_inside_a_tool_use_leaves_it_unrunnable() -> None:
    folded = fold("bedrock-converse", BEDROCK_EVENTS[:10])
    assert folded is not None
    assert folded["output"]["message"]["content"][2]["toolUse"]["input"] == '{"path": '
    cut = is_cut_off(folded, "bedrock-converse")
    assert cut is not None and cut.tool_call
    kept, dropped = finalize(folded, "bedrock-converse")
    assert dropped == 1 and len(kept["output"]["message"]["content"]) == 2


# --------------------------------------------------------------------------- Bedrock through Stretch


def converse_reply(text: str, stop: str, *, call: Any = None, out: int = 50) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"text": text}] if text else []
    if call is not None:
        content.append({"toolUse": {"toolUseId": "tooluse_1", "name": "Read", "input": call}})
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {
            "inputTokens": 100,
            "outputTokens": out,
            "totalTokens": 100 + out,
            "cacheReadInputTokens": 0,
        },
        "metrics": {"latencyMs": 300},
    }


def converse_body(max_tokens: int | None = 100) -> dict[str, Any]:
    body: dict[str, Any] = {
        "modelId": "anthropic.claude-sonnet-4-5",
        "messages": [{"role": "user", "content": [{"text": "Write a story."}]}],
        "system": [{"text": "be brief"}],
    }
    if max_tokens is not None:
        body["inferenceConfig"] = {"maxTokens": max_tokens, "temperature": 0}
    return body


def test_bedrock_cut_off_reply_is_detected() -> None:
    assert is_cut_off(converse_reply("Once", "end_turn"), "bedrock-converse") is None
    cut = is_cut_off(converse_reply("Once", "max_tokens"), "bedrock-converse")
    assert cut is not None and (cut.api, cut.reason, cut.context_window, cut.output_tokens) == (
        "bedrock-converse",
        "max_tokens",
        False,
        50,
    )
    window = is_cut_off(converse_reply("Once", "model_context_window_exceeded"), "bedrock-converse")
    assert window is not None and window.context_window


def test_bedrock_escalation_doubles_inference_config_max_tokens() -> None:
    body = converse_body(100)
    bigger = escalated(body, "bedrock", 1000)
    assert bigger is not None
    assert bigger["inferenceConfig"] == {"maxTokens": 200, "temperature": 0}
    assert body["inferenceConfig"]["maxTokens"] == 100  # the caller's body is left alone
    assert max_tokens_of(bigger, "bedrock-converse") == 200
    assert escalated(converse_body(None), "bedrock-converse", 1000) is None


def test_bedrock_continuation_and_merge() -> None:
    body = converse_body()
    follow = continuation(body, "bedrock-converse", "Once upon")
    assert follow["messages"][-2] == {"role": "assistant", "content": [{"text": "Once upon"}]}
    assert follow["messages"][-1]["role"] == "user"
    assert follow["inferenceConfig"] == body["inferenceConfig"]
    merged = merge(
        [converse_reply("Once upon", "max_tokens"), converse_reply(" a time.", "end_turn")], "bedrock"
    )
    assert merged["output"]["message"]["content"] == [{"text": "Once upon a time."}]
    assert merged["stopReason"] == "end_turn"
    assert merged["usage"]["outputTokens"] == 100


def test_bedrock_truncated_tool_use_is_dropped_by_finalize() -> None:
    reply = converse_reply("Reading.", "max_tokens", call={"path": "a."})
    kept, dropped = finalize(reply, "bedrock-converse")
    assert dropped == 1
    assert kept["output"]["message"]["content"] == [{"text": "Reading."}]
    assert kept["stopReason"] == "max_tokens"
    claimed = converse_reply("Reading.", "tool_use", call='{"path": "a.')
    kept, dropped = finalize(claimed, "bedrock-converse")
    assert dropped == 1 and kept["stopReason"] == "max_tokens"


def test_stretch_reads_the_model_of_a_converse_call_for_its_cap() -> None:
    body = {**converse_body(), "modelId": "us.anthropic.claude-sonnet-4-5-20250929-v1:0"}
    assert Stretch(body, "bedrock-converse", Policy()).cap == 64_000
    assert Stretch(request_with_model("claude-sonnet-4-5"), "anthropic", Policy()).cap == 64_000


def request_with_model(model: str) -> dict[str, Any]:
    return {"model": model, "max_tokens": 100, "messages": [{"role": "user", "content": "Hi"}]}


def test_bedrock_end_to_end_through_stretch() -> None:
    plan = Stretch(converse_body(100), "bedrock-converse", Policy(max_token_escalations=1))
    first = plan.next_body(converse_reply("Once upon", "max_tokens"))
    assert first is not None and first["inferenceConfig"]["maxTokens"] == 200
    second = plan.next_body(converse_reply("Once upon a", "max_tokens"))
    assert second is not None and second["messages"][-2]["content"] == [{"text": "Once upon a"}]
    assert second["inferenceConfig"]["maxTokens"] == 200
    assert plan.next_body(converse_reply(" time.", "tool_use", call={"path": "a.py"})) is None
    result, dropped = plan.result()
    assert dropped == 0
    assert result["output"]["message"]["content"] == [
        {"text": "Once upon a time."},
        {"toolUse": {"toolUseId": "tooluse_1", "name": "Read", "input": {"path": "a.py"}}},
    ]
    assert result["stopReason"] == "tool_use"
    assert (plan.escalations, plan.continuations) == (1, 1)


@pytest.mark.parametrize(
    ("api", "events"),
    [
        ("anthropic", ANTHROPIC_EVENTS),
        ("openai-chat", CHAT_CHUNKS),
        ("openai-responses", _responses_events(final_output=False)),
        ("gemini", GEMINI_CHUNKS),
        ("bedrock-converse", BEDROCK_EVENTS),
    ],
)
def test_reading_the_reply_at_every_event_changes_nothing(api: str, events: list[dict[str, Any]]) -> None:
    """Text waits in pieces until the reply is read; reading it mid-stream must not lose or double any."""
    once = wire.dialect(api).folder()
    every = wire.dialect(api).folder()
    for event in events:
        once.see(event)
        every.see(event)
        every.reply()
    assert every.reply() == once.reply()
    assert once.reply() == fold(api, events)
