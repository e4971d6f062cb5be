"""The OpenAI Responses API as the scripted upstream speaks it.

A streamed answer is ``response.created``, ``response.in_progress``, per
output item ``response.output_item.added``, its deltas
(``response.output_text.delta`` inside a content part, or
``response.function_call_arguments.delta``) and ``.done`` events, then
``response.completed`` with usage; every event carries ``sequence_number``
and there is no ``[DONE]``. Errors use the API's envelope and wording
(``shared/reference/providers.md`` §4.1 and §5.3).

The pairing check is written from the provider's rules, independently of
toolbudget's own.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from .script import Reply, Result

__all__ = [
    "OVERFLOW_MESSAGE",
    "check_pairing",
    "error_body",
    "failed_event",
    "response",
    "results_of_last_turn",
    "stream_events",
    "tool_names",
]

OVERFLOW_MESSAGE = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)


def _is_call(item: Mapping[str, Any]) -> bool:
    kind = str(item.get("type", ""))
    return kind.endswith("_call") and "call_id" in item


def _is_output(item: Mapping[str, Any]) -> bool:
    return str(item.get("type", "")).endswith("_call_output")


def _items(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    items = body.get("input")
    if isinstance(items, list):
        return [i for i in items if isinstance(i, dict)]
    return []


def check_pairing(body: Mapping[str, Any]) -> list[str]:
    """Every pairing rule ``body`` breaks: each call has exactly one output after it, and
    each output answers a call before it (a body continuing ``previous_response_id`` may
    answer calls held by the server)."""
    problems: list[str] = []
    calls: dict[str, int] = {}
    answered: dict[str, int] = {}
    server_held = bool(body.get("previous_response_id"))
    for position, item in enumerate(_items(body)):
        call_id = str(item.get("call_id"))
        if _is_call(item):
            if call_id in calls:
                problems.append(f"Duplicate item found with call_id {call_id}.")
            calls[call_id] = position
        elif _is_output(item):
            if call_id not in calls and not server_held:
                problems.append(f"No tool call found for function call output with call_id {call_id}.")
            elif call_id in answered:
                problems.append(f"Duplicate tool output found for function call {call_id}.")
            answered[call_id] = position
    problems.extend(f"No tool output found for function call {c}." for c in calls if c not in answered)
    return problems


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    if isinstance(output, dict):
        return str(output.get("content", output.get("output", "")))
    return ""


def results_of_last_turn(body: Mapping[str, Any]) -> tuple[Result, ...]:
    """The outputs at the end of ``input``, after the newest message."""
    found: list[Result] = []
    for item in reversed(_items(body)):
        if _is_output(item):
            found.append(Result(str(item.get("call_id")), _output_text(item.get("output"))))
        elif not _is_call(item) and item.get("type") != "reasoning":
            break
    return tuple(reversed(found))


def tool_names(body: Mapping[str, Any]) -> tuple[str, ...]:
    names: list[str] = []
    for tool in body.get("tools") or ():
        if isinstance(tool, dict):
            names.append(str(tool.get("name") or tool.get("type")))
    return tuple(names)


def error_body(message_text: str, *, code: str | None, param: str | None) -> bytes:
    return orjson.dumps(
        {"error": {"message": message_text, "type": "invalid_request_error", "param": param, "code": code}}
    )


def _output(reply: Reply, ids: list[str], msg_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text:
        items.append(
            {
                "type": "message",
                "id": msg_id,
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for call, call_id in zip(reply.calls, ids, strict=True):
        items.append(
            {
                "type": "function_call",
                "id": "fc_" + call_id.removeprefix("call_"),
                "call_id": call_id,
                "name": call.name,
                "arguments": orjson.dumps(dict(call.arguments)).decode(),
                "status": "completed",
            }
        )
    return items


def response(
    reply: Reply, *, resp_id: str, ids: list[str], model: str, input_tokens: int, status: str = "completed"
) -> dict[str, Any]:
    output_tokens = max(1, len(reply.text) // 4)
    return {
        "id": resp_id,
        "object": "response",
        "created_at": 1_700_000_000,
        "status": status,
        "model": model,
        "output": _output(reply, ids, "msg_" + resp_id.removeprefix("resp_")),
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
    }


def _pieces(text: str, count: int = 3) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def stream_events(
    reply: Reply, *, resp_id: str, ids: list[str], model: str, input_tokens: int
) -> Iterator[bytes]:
    """The streamed answer, one SSE event at a time."""
    done = response(reply, resp_id=resp_id, ids=ids, model=model, input_tokens=input_tokens)
    sequence = 0

    def event(name: str, **data: Any) -> bytes:
        nonlocal sequence
        payload = {"type": name, "sequence_number": sequence, **data}
        sequence += 1
        return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"

    pending = {**done, "status": "in_progress", "output": [], "usage": None}
    yield event("response.created", response=pending)
    yield event("response.in_progress", response=pending)
    for index, item in enumerate(done["output"]):
        if item["type"] == "message":
            yield event("response.output_item.added", output_index=index, item={**item, "content": []})
            part = {"type": "output_text", "text": "", "annotations": []}
            yield event(
                "response.content_part.added",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=part,
            )
            text = item["content"][0]["text"]
            for piece in _pieces(text):
                yield event(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=piece,
                )
            yield event(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=text,
            )
            yield event(
                "response.content_part.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=item["content"][0],
            )
        else:
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "arguments": "", "status": "in_progress"},
            )
            for piece in _pieces(item["arguments"]):
                yield event(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=piece,
                )
            yield event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            )
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=done)


def failed_event(message_text: str, *, code: str, resp_id: str, model: str) -> Iterator[bytes]:
    """An overflow reported inside a 200 stream, as the API may do: ``response.failed``."""
    pending = {
        "id": resp_id,
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "in_progress",
        "model": model,
        "output": [],
        "usage": None,
    }
    failed = {**pending, "status": "failed", "error": {"code": code, "message": message_text}}
    for sequence, (name, data) in enumerate(
        (("response.created", pending), ("response.in_progress", pending), ("response.failed", failed))
    ):
        payload = {"type": name, "sequence_number": sequence, "response": data}
        yield b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"
