"""``toolbudget.wrap`` around the real anthropic and openai SDK clients, over an in-memory transport.

The SDKs are the real ones (their request building, error mapping, response
models and streams); only the network is replaced, by ``httpx2.MockTransport``
serving each provider's documented answers (``reference/providers.md``).
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pydantic
import pytest

from toolbudget import Policy, Session
from toolbudget.clients import CallReport, UnsupportedClient, wrap
from toolbudget.recovery import ErrorKind, RecoveryReport
from toolbudget.recovery.output import continuation_prompt
from toolbudget.store import DirStore

Reply = Callable[[dict[str, Any]], httpx2.Response]

TASK = "Fix the failing test in the parser."

# ------------------------------------------------------------------- the providers' documented answers

ANTHROPIC_OVERFLOW = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 250000 tokens > 200000 maximum",
    },
}
ANTHROPIC_RATE = {
    "type": "error",
    "error": {
        "type": "rate_limit_error",
        "message": "This request would exceed the rate limit for your organization",
    },
}
ANTHROPIC_OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
CHAT_OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in "
        "202868 tokens (202767 in the messages, 101 in the functions). Please reduce the length of the "
        "messages or functions.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
RESPONSES_OVERFLOW = {
    "error": {
        "message": "Your input exceeds the context window of this model. "
        "Please adjust your input and try again.",
        "type": "invalid_request_error",
        "param": "input",
        "code": "context_length_exceeded",
    }
}
OPENAI_RATE = {
    "error": {
        "message": "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): "
        "Limit 30000, Used 29000, Requested 5000. Please try again in 8s.",
        "type": "tokens",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}
OPENAI_SERVER = {
    "error": {"message": "The server had an error while processing your request.", "type": "server_error"}
}


def status(code: int, body: dict[str, Any]) -> Reply:
    return lambda _request: httpx2.Response(code, json=body)


def timeout() -> Reply:
    def reply(_request: dict[str, Any]) -> httpx2.Response:
        raise httpx2.ReadTimeout("timed out")

    return reply


def message(text: str | None, stop: str = "end_turn", *, out: int = 5, call: Any = None) -> Reply:
    def reply(_request: dict[str, Any]) -> httpx2.Response:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        if call is not None:
            content.append({"type": "tool_use", "id": "toolu_9", "name": "Read", "input": call})
        return httpx2.Response(
            200,
            json={
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-6",
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": 100, "output_tokens": out},
            },
            headers={"request-id": "req_123"},
        )

    return reply


def completion(
    text: str | None, finish: str = "stop", *, out: int = 5, arguments: str | None = None
) -> Reply:
    def reply(_request: dict[str, Any]) -> httpx2.Response:
        msg: dict[str, Any] = {"role": "assistant", "content": text}
        if arguments is not None:
            msg["tool_calls"] = [
                {"id": "call_9", "type": "function", "function": {"name": "Read", "arguments": arguments}}
            ]
        return httpx2.Response(
            200,
            json={
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o",
                "choices": [{"index": 0, "message": msg, "finish_reason": finish, "logprobs": None}],
                "usage": {"prompt_tokens": 100, "completion_tokens": out, "total_tokens": 100 + out},
            },
            headers={"x-request-id": "req_456"},
        )

    return reply


def response(text: str, status_: str = "completed") -> Reply:
    def reply(_request: dict[str, Any]) -> httpx2.Response:
        body: dict[str, Any] = {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "gpt-5",
            "status": status_,
            "output": [
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": status_,
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 100,
                "output_tokens": 5,
                "total_tokens": 105,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
        if status_ == "incomplete":
            body["incomplete_details"] = {"reason": "max_output_tokens"}
        return httpx2.Response(200, json=body)

    return reply


def sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> Reply:
    def reply(_request: dict[str, Any]) -> httpx2.Response:
        text = ""
        for event, data in events:
            if event:
                text += f"event: {event}\n"
            text += f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
        return httpx2.Response(200, content=text.encode(), headers={"content-type": "text/event-stream"})

    return reply


def anthropic_stream(text: str, stop: str) -> Reply:
    return sse(
        [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_s",
                        "type": "message",
                        "role": "assistant",
                        "model": "claude-sonnet-4-6",
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 100, "output_tokens": 1},
                    },
                },
            ),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


def chat_stream(pieces: list[str], finish: str, *, arguments: str | None = None) -> Reply:
    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-s",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-4o",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    events: list[tuple[str | None, dict[str, Any] | str]] = [
        (None, chunk({"role": "assistant", "content": ""}))
    ]
    events += [(None, chunk({"content": piece})) for piece in pieces]
    if arguments is not None:
        call = {
            "index": 0,
            "id": "call_1",
            "type": "function",
            "function": {"name": "Read", "arguments": arguments},
        }
        events.append((None, chunk({"tool_calls": [call]})))
    events += [(None, chunk({}, finish)), (None, "[DONE]")]
    return sse(events)


class Upstream:
    """A scripted provider: each request gets the next reply (the last one repeats), and is recorded."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        return reply(body)


def anthropic_client(upstream: Upstream) -> anthropic.Anthropic:
    http = httpx2.Client(transport=httpx2.MockTransport(upstream))
    return anthropic.Anthropic(api_key="k", base_url="http://upstream", http_client=http, max_retries=0)


def async_anthropic_client(upstream: Upstream) -> anthropic.AsyncAnthropic:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(upstream))
    return anthropic.AsyncAnthropic(api_key="k", base_url="http://upstream", http_client=http, max_retries=0)


def openai_client(upstream: Upstream) -> openai.OpenAI:
    http = httpx2.Client(transport=httpx2.MockTransport(upstream))
    return openai.OpenAI(api_key="k", base_url="http://upstream/v1", http_client=http, max_retries=0)


def async_openai_client(upstream: Upstream) -> openai.AsyncOpenAI:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(upstream))
    return openai.AsyncOpenAI(api_key="k", base_url="http://upstream/v1", http_client=http, max_retries=0)


# --------------------------------------------------------------------------- histories


def anthropic_history(turns: int = 12, size: int = 30_000) -> list[Any]:
    """A long tool session: the task, then ``turns`` calls whose results are ``size`` characters each."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for i in range(turns):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Step {i}."},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{i}",
                        "name": "Bash",
                        "input": {"command": f"cat f{i}"},
                    },
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{i}",
                        "content": f"line {i}\n" * (size // 7),
                    }
                ],
            }
        )
    messages.append({"role": "user", "content": "Go on."})
    return messages


def chat_history(turns: int = 12, size: int = 30_000) -> list[Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": TASK},
    ]
    for i in range(turns):
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {i}.",
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"cmd": f"cat f{i}"})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": f"line {i}\n" * (size // 7)})
    messages.append({"role": "user", "content": "Go on."})
    return messages


def responses_history(turns: int = 12, size: int = 30_000) -> list[Any]:
    items: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for i in range(turns):
        items.append(
            {
                "type": "function_call",
                "call_id": f"call_{i}",
                "name": "bash",
                "arguments": json.dumps({"cmd": f"cat f{i}"}),
            }
        )
        items.append(
            {"type": "function_call_output", "call_id": f"call_{i}", "output": f"line {i}\n" * (size // 7)}
        )
    return items


@pytest.fixture
def session() -> Iterator[Session]:
    with Session(store="memory:", policy=Policy(max_recovery_attempts=3)) as s:
        yield s


def sent_text(body: dict[str, Any]) -> str:
    return json.dumps(body)


class Reports(list[CallReport]):
    """An ``on_report`` callback that keeps what it hears."""

    def __call__(self, report: CallReport) -> None:
        self.append(report)


# --------------------------------------------------------------------------- overflow, recovered


def test_anthropic_overflow_is_recovered_on_retry(session: Session) -> None:
    upstream = Upstream(status(400, ANTHROPIC_OVERFLOW), message("Done."))
    history = anthropic_history()
    before = copy.deepcopy(history)
    reports = Reports()
    client = wrap(anthropic_client(upstream), session=session, on_report=reports)
    answer = client.messages.create(model="claude-sonnet-4-6", max_tokens=1024, messages=history)

    assert isinstance(answer, anthropic.types.Message)
    assert answer.content[0].type == "text"
    assert answer.content[0].text == "Done."
    assert answer._request_id == "req_123"
    assert history == before
    assert len(upstream.bodies) == 2
    assert len(sent_text(upstream.bodies[1])) < len(sent_text(upstream.bodies[0]))
    assert upstream.bodies[1]["messages"][0] == {"role": "user", "content": TASK}
    report = answer.toolbudget_report  # type: ignore[attr-defined]
    assert reports == [report]
    assert report.recovered
    assert report.level >= 1
    assert report.recovery.errors[0].kind is ErrorKind.CONTEXT_OVERFLOW
    assert report.complete
    # What was answered is the smaller history: its estimate, not the refused one's.
    assert report.tokens_sent == report.attempts[-1].tokens < report.managed.tokens_after
    assert report.tokens_sent * 4 <= len(json.dumps(upstream.bodies[1]))
    assert "toolbudget_report" not in answer.to_json()


def test_chat_overflow_is_recovered_on_retry(session: Session) -> None:
    upstream = Upstream(status(400, CHAT_OVERFLOW), completion("Done."))
    history = chat_history()
    before = copy.deepcopy(history)
    client = wrap(openai_client(upstream), session=session)
    answer = client.chat.completions.create(model="gpt-4o", messages=history, max_completion_tokens=500)

    assert isinstance(answer, openai.types.chat.ChatCompletion)
    assert answer.choices[0].message.content == "Done."
    assert history == before
    assert len(upstream.bodies) == 2
    retried = upstream.bodies[1]["messages"]
    assert retried[:2] == before[:2]  # the system prompt and the task
    report = answer.toolbudget_report  # type: ignore[attr-defined]
    assert report.recovered
    assert report.level >= 1


def test_responses_overflow_is_recovered_on_retry(session: Session) -> None:
    upstream = Upstream(status(400, RESPONSES_OVERFLOW), response("Done."))
    history = responses_history()
    before = copy.deepcopy(history)
    client = wrap(openai_client(upstream), session=session)
    answer = client.responses.create(model="gpt-5", input=history, instructions="Be brief.")

    assert isinstance(answer, openai.types.responses.Response)
    assert answer.output_text == "Done."
    assert history == before
    assert len(upstream.bodies) == 2
    assert json.dumps(upstream.bodies[1]["input"][0]).count(TASK) == 1
    assert answer.toolbudget_report.recovered  # type: ignore[attr-defined]


def test_async_anthropic_overflow_is_recovered(session: Session) -> None:
    upstream = Upstream(status(400, ANTHROPIC_OVERFLOW), message("Done."))
    history = anthropic_history()
    before = copy.deepcopy(history)
    reports = Reports()

    async def main() -> Any:
        client = wrap(async_anthropic_client(upstream), session=session, on_report=reports)
        return await client.messages.create(model="claude-sonnet-4-6", max_tokens=1024, messages=history)

    answer = asyncio.run(main())
    assert isinstance(answer, anthropic.types.Message)
    assert history == before
    assert len(upstream.bodies) == 2
    assert reports[0].recovered


def test_async_chat_overflow_is_recovered(session: Session) -> None:
    upstream = Upstream(status(400, CHAT_OVERFLOW), completion("Done."))
    history = chat_history()

    async def main() -> Any:
        client = wrap(async_openai_client(upstream), session=session)
        return await client.chat.completions.create(model="gpt-4o", messages=history)

    answer = asyncio.run(main())
    assert answer.choices[0].message.content == "Done."
    assert answer.toolbudget_report.level >= 1


def test_sdk_objects_in_the_history_are_sent_as_the_sdk_sends_them(session: Session) -> None:
    """Agents append ``answer.content`` (SDK models) to their history as is."""
    upstream = Upstream(message("Reading.", "tool_use", call={"path": "a.py"}), message("Done."))
    client = wrap(anthropic_client(upstream), session=session)
    first = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=100, messages=[{"role": "user", "content": TASK}]
    )
    history: list[Any] = [
        {"role": "user", "content": TASK},
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x = 1"}]},
    ]
    client.messages.create(model="claude-sonnet-4-6", max_tokens=100, messages=history)
    assert upstream.bodies[1]["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_9",
        "name": "Read",
        "input": {"path": "a.py"},
    }
    assert history[1]["content"] is first.content


# --------------------------------------------------------------------------- other errors, unchanged


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (status(429, ANTHROPIC_RATE), anthropic.RateLimitError),
        (status(529, ANTHROPIC_OVERLOADED), anthropic.InternalServerError),
        (timeout(), anthropic.APITimeoutError),
    ],
)
def test_anthropic_other_errors_pass_through_without_retry(
    session: Session, reply: Reply, error: type[Exception]
) -> None:
    upstream = Upstream(reply)
    history = anthropic_history(2, 100)
    before = copy.deepcopy(history)
    client = wrap(anthropic_client(upstream), session=session)
    with pytest.raises(error) as info:
        client.messages.create(model="claude-sonnet-4-6", max_tokens=100, messages=history)
    assert len(upstream.bodies) == 1
    assert not hasattr(info.value, "toolbudget_report")
    assert history == before


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (status(429, OPENAI_RATE), openai.RateLimitError),
        (status(500, OPENAI_SERVER), openai.InternalServerError),
        (timeout(), openai.APITimeoutError),
    ],
)
def test_openai_other_errors_pass_through_without_retry(
    session: Session, reply: Reply, error: type[Exception]
) -> None:
    upstream = Upstream(reply)
    client = wrap(openai_client(upstream), session=session)
    with pytest.raises(error):
        client.chat.completions.create(model="gpt-4o", messages=chat_history(2, 100))
    assert len(upstream.bodies) == 1


def test_exhausted_recovery_raises_the_original_error_with_the_report(session: Session) -> None:
    upstream = Upstream(status(400, ANTHROPIC_OVERFLOW))
    reports = Reports()
    client = wrap(anthropic_client(upstream), session=session, on_report=reports)
    history = anthropic_history()
    before = copy.deepcopy(history)
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model="claude-sonnet-4-6", max_tokens=100, messages=history)
    assert info.value.body == ANTHROPIC_OVERFLOW
    report = info.value.toolbudget_report  # type: ignore[attr-defined]
    assert isinstance(report, CallReport)
    assert isinstance(report.recovery, RecoveryReport)
    assert not report.recovered
    assert len(report.attempts) == session.policy.max_recovery_attempts
    assert len(upstream.bodies) == 1 + session.policy.max_recovery_attempts
    assert reports == [report]
    assert history == before


def test_an_overflow_then_a_rate_limit_raises_the_rate_limit(session: Session) -> None:
    upstream = Upstream(status(400, CHAT_OVERFLOW), status(429, OPENAI_RATE))
    client = wrap(openai_client(upstream), session=session)
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="gpt-4o", messages=chat_history())
    assert len(upstream.bodies) == 2


# --------------------------------------------------------------------------- cut-offs


def test_escalation_doubles_max_tokens(session: Session) -> None:
    upstream = Upstream(
        message("Once", "max_tokens", out=100),
        message("Once upon", "max_tokens", out=200),
        message("Once upon a time.", out=250),
    )
    history: list[Any] = [{"role": "user", "content": "Tell a story."}]
    before = copy.deepcopy(history)
    client = wrap(anthropic_client(upstream), session=session)
    answer = client.messages.create(model="claude-sonnet-4-6", max_tokens=100, messages=history)
    assert [b["max_tokens"] for b in upstream.bodies] == [100, 200, 400]
    assert answer.content[0].text == "Once upon a time."  # type: ignore[union-attr]
    assert answer.stop_reason == "end_turn"
    assert answer._request_id == "req_123"
    report = answer.toolbudget_report  # type: ignore[attr-defined]
    assert (report.escalations, report.continuations, report.complete) == (2, 0, True)
    assert [c.reason for c in report.cutoffs] == ["max_tokens", "max_tokens"]
    assert history == before


def test_continuation_merges_the_text_into_one_answer(session: Session) -> None:
    upstream = Upstream(
        message("Once upon a ", "max_tokens", out=100),
        message("Once upon a ", "max_tokens", out=200),
        message("Once upon a ", "max_tokens", out=400),
        message("time, the end.", "end_turn", out=4),
    )
    history: list[Any] = [{"role": "user", "content": "Tell a story."}]
    before = copy.deepcopy(history)
    client = wrap(anthropic_client(upstream), session=session)
    answer = client.messages.create(model="claude-sonnet-4-6", max_tokens=100, messages=history)

    assert isinstance(answer, anthropic.types.Message)
    assert [b.type for b in answer.content] == ["text"]
    assert answer.content[0].text == "Once upon a time, the end."  # type: ignore[union-attr]
    assert answer.stop_reason == "end_turn"
    assert answer.usage.output_tokens == 404  # the two pieces merged
    follow = upstream.bodies[3]["messages"]
    assert follow[0] == {"role": "user", "content": "Tell a story."}
    assert follow[1] == {"role": "assistant", "content": [{"type": "text", "text": "Once upon a "}]}
    assert follow[2]["content"][0]["text"] == continuation_prompt(False)
    report = answer.toolbudget_report  # type: ignore[attr-defined]
    assert (report.escalations, report.continuations) == (2, 1)
    assert history == before


def test_chat_continuation_uses_the_field_the_caller_used(session: Session) -> None:
    upstream = Upstream(completion("Once upon a ", "length"), completion("time.", "stop"))
    client = wrap(
        openai_client(upstream), session=Session(store="memory:", policy=Policy(max_token_escalations=0))
    )
    answer = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Story."}], max_tokens=50
    )
    assert answer.choices[0].message.content == "Once upon a time."
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage is not None
    assert answer.usage.completion_tokens == 10
    assert [b.get("max_tokens") for b in upstream.bodies] == [50, 50]
    assert "max_completion_tokens" not in upstream.bodies[1]
    session.close()


def test_responses_escalation_and_continuation(session: Session) -> None:
    upstream = Upstream(response("Once upon a ", "incomplete"), response("time.", "completed"))
    client = wrap(
        openai_client(upstream), session=Session(store="memory:", policy=Policy(max_token_escalations=1))
    )
    answer = client.responses.create(model="gpt-5", input="Story.", max_output_tokens=64)
    assert [b["max_output_tokens"] for b in upstream.bodies] == [64, 128]
    assert answer.output_text == "time."  # the escalated answer replaced the cut one


def test_a_cut_tool_call_is_asked_again_and_returned_whole(session: Session) -> None:
    upstream = Upstream(
        completion("Let me look.", "tool_calls", arguments='{"path": "src/pa'),
        completion(None, "tool_calls", arguments='{"path": "src/parser.py"}'),
    )
    no_escalation = Session(store="memory:", policy=Policy(max_token_escalations=0))
    client = wrap(openai_client(upstream), session=no_escalation)
    answer = client.chat.completions.create(
        model="gpt-4o", messages=chat_history(1, 100), max_completion_tokens=64
    )
    calls = answer.choices[0].message.tool_calls
    assert calls is not None
    assert calls[0].function.arguments == '{"path": "src/parser.py"}'  # type: ignore[union-attr]
    assert answer.choices[0].finish_reason == "tool_calls"
    assert answer.choices[0].message.content == "Let me look."
    assert "src/pa" not in json.dumps(upstream.bodies[1])
    assert upstream.bodies[1]["messages"][-2] == {"role": "assistant", "content": "Let me look."}
    assert upstream.bodies[1]["messages"][-1]["content"] == continuation_prompt(True)
    no_escalation.close()


def test_a_cut_tool_call_escalates_first(session: Session) -> None:
    upstream = Upstream(
        completion("Let me look.", "tool_calls", arguments='{"path": "src/pa'),
        completion(None, "tool_calls", arguments='{"path": "src/parser.py"}'),
    )
    client = wrap(openai_client(upstream), session=session)
    answer = client.chat.completions.create(
        model="gpt-4o", messages=chat_history(1, 100), max_completion_tokens=64
    )
    assert [b["max_completion_tokens"] for b in upstream.bodies] == [64, 128]
    assert upstream.bodies[1]["messages"] == upstream.bodies[0]["messages"]  # the same request, more room
    calls = answer.choices[0].message.tool_calls
    assert calls is not None
    assert calls[0].function.arguments == '{"path": "src/parser.py"}'  # type: ignore[union-attr]


def test_a_truncated_tool_call_is_never_returned_as_complete(session: Session) -> None:
    upstream = Upstream(message("Reading.", "max_tokens", call={"path": "src/pa"}))
    reports = Reports()
    client = wrap(anthropic_client(upstream), session=session, on_report=reports)
    answer = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=100, messages=[{"role": "user", "content": TASK}]
    )
    assert [b.type for b in answer.content] == ["text"]
    assert answer.stop_reason == "max_tokens"
    report = reports[0]
    assert report.dropped_calls == 1
    assert report.final_cutoff is not None
    assert not report.complete
    # two escalations, two continuations: every one asked for the call again, whole
    assert len(upstream.bodies) == 5
    assert "discarded" in json.dumps(upstream.bodies[-1]["messages"][-1])


def test_a_failed_follow_up_returns_the_answer_so_far(session: Session) -> None:
    upstream = Upstream(message("Once", "max_tokens"), status(429, ANTHROPIC_RATE))
    client = wrap(anthropic_client(upstream), session=session)
    answer = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=100, messages=[{"role": "user", "content": "Story."}]
    )
    assert answer.content[0].text == "Once"  # type: ignore[union-attr]
    assert answer.stop_reason == "max_tokens"
    report = answer.toolbudget_report  # type: ignore[attr-defined]
    assert report.followup_error is not None
    assert report.followup_error.kind is ErrorKind.RATE_LIMITED


def test_an_answer_cut_by_the_window_climbs_the_ladder(session: Session) -> None:
    upstream = Upstream(completion(None, "length", out=0), completion("Done."))
    client = wrap(openai_client(upstream), session=session)
    answer = client.chat.completions.create(model="gpt-4o", messages=chat_history(), max_completion_tokens=64)
    assert answer.choices[0].message.content == "Done."
    assert len(upstream.bodies) == 2
    assert upstream.bodies[1]["messages"][:2] == chat_history()[:2]
    report = answer.toolbudget_report  # type: ignore[attr-defined]
    assert report.recovered
    assert report.level >= 1


def test_an_answer_cut_by_the_window_to_the_end_is_returned_cut(session: Session) -> None:
    upstream = Upstream(completion(None, "length", out=0))
    client = wrap(openai_client(upstream), session=session)
    answer = client.chat.completions.create(model="gpt-4o", messages=chat_history(), max_completion_tokens=64)
    assert answer.choices[0].finish_reason == "length"
    report = answer.toolbudget_report  # type: ignore[attr-defined]
    assert report.final_cutoff is not None
    assert report.final_cutoff.context_window
    assert not report.recovered
    assert len(upstream.bodies) == 1 + session.policy.max_recovery_attempts


def test_async_escalation_and_continuation(session: Session) -> None:
    upstream = Upstream(
        completion("Once upon a ", "length"),
        completion("Once upon a ", "length"),
        completion("time.", "stop"),
    )
    policy = Policy(max_token_escalations=1)

    async def main() -> Any:
        async with wrap(
            async_openai_client(upstream), session=Session(store="memory:", policy=policy)
        ) as client:
            return await client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "Story."}], max_completion_tokens=8
            )

    answer = asyncio.run(main())
    assert answer.choices[0].message.content == "Once upon a time."
    assert [b["max_completion_tokens"] for b in upstream.bodies] == [8, 16, 16]


# --------------------------------------------------------------------------- streams


def test_anthropic_message_stream_recovers_before_the_first_event(session: Session) -> None:
    upstream = Upstream(status(400, ANTHROPIC_OVERFLOW), anthropic_stream("Hello there", "end_turn"))
    reports = Reports()
    client = wrap(anthropic_client(upstream), session=session, on_report=reports)
    history = anthropic_history()
    before = copy.deepcopy(history)
    with client.messages.stream(model="claude-sonnet-4-6", max_tokens=100, messages=history) as stream:
        assert stream.toolbudget_report.recovered  # type: ignore[attr-defined]
        assert reports == []  # told when the stream ends
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Hello there"
    assert final.stop_reason == "end_turn"
    assert len(upstream.bodies) == 2
    assert len(reports) == 1
    assert reports[0].stream_finished is True
    assert reports[0].complete
    assert reports[0].level >= 1
    assert history == before


def test_a_cut_stream_is_flagged_not_continued(session: Session) -> None:
    upstream = Upstream(status(400, CHAT_OVERFLOW), chat_stream(["Once ", "upon"], "length"))
    reports = Reports()
    client = wrap(openai_client(upstream), session=session, on_report=reports)
    stream = client.chat.completions.create(
        model="gpt-4o", messages=chat_history(), max_tokens=2, stream=True
    )
    assert isinstance(stream, openai.Stream)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "Once upon"
    assert len(upstream.bodies) == 2  # no escalation, no continuation
    (report,) = reports
    assert report.stream
    assert report.recovered
    assert report.final_cutoff is not None
    assert report.final_cutoff.reason == "length"
    assert not report.complete
    assert stream.toolbudget_report is report  # type: ignore[attr-defined]


def test_a_stream_with_a_cut_tool_call_says_so(session: Session) -> None:
    upstream = Upstream(chat_stream([], "length", arguments='{"path": "sr'))
    reports = Reports()
    client = wrap(openai_client(upstream), session=session, on_report=reports)
    with client.chat.completions.create(model="gpt-4o", messages=chat_history(1, 10), stream=True) as stream:
        for _ in stream:
            pass
    assert reports[0].final_cutoff is not None
    assert reports[0].final_cutoff.tool_call


def test_a_stream_closed_early_reports_once_unfinished(session: Session) -> None:
    upstream = Upstream(chat_stream(["a", "b", "c"], "stop"))
    reports = Reports()
    client = wrap(openai_client(upstream), session=session, on_report=reports)
    stream = client.chat.completions.create(model="gpt-4o", messages=chat_history(1, 10), stream=True)
    next(iter(stream))
    stream.close()
    stream.close()
    assert len(reports) == 1
    assert reports[0].stream_finished is False
    assert not reports[0].complete


def test_async_streams_recover_and_report(session: Session) -> None:
    upstream = Upstream(status(400, ANTHROPIC_OVERFLOW), anthropic_stream("Hi", "max_tokens"))
    reports = Reports()

    async def main() -> str:
        client = wrap(async_anthropic_client(upstream), session=session, on_report=reports)
        stream = await client.messages.create(
            model="claude-sonnet-4-6", max_tokens=5, messages=anthropic_history(), stream=True
        )
        assert isinstance(stream, anthropic.AsyncStream)
        out = ""
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                out += event.delta.text
        return out

    assert asyncio.run(main()) == "Hi"
    (report,) = reports
    assert report.recovered
    assert report.final_cutoff is not None
    assert report.final_cutoff.reason == "max_tokens"


def test_async_message_stream_manager(session: Session) -> None:
    upstream = Upstream(status(400, ANTHROPIC_OVERFLOW), anthropic_stream("Hi", "end_turn"))
    reports = Reports()

    async def main() -> str:
        client = wrap(async_anthropic_client(upstream), session=session, on_report=reports)
        async with client.messages.stream(
            model="claude-sonnet-4-6", max_tokens=5, messages=anthropic_history()
        ) as stream:
            return await stream.get_final_text()

    assert asyncio.run(main()) == "Hi"
    assert reports[0].recovered
    assert reports[0].stream_finished


def responses_sse() -> Reply:
    """A Responses stream cut by ``max_output_tokens``: created, one text delta, incomplete."""
    final = {
        "id": "resp_s",
        "object": "response",
        "created_at": 1,
        "model": "gpt-5",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [
            {
                "type": "message",
                "id": "msg_s",
                "role": "assistant",
                "status": "incomplete",
                "content": [{"type": "output_text", "text": "Once", "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    started = {**final, "status": "in_progress", "output": [], "incomplete_details": None}
    return sse(
        [
            ("response.created", {"type": "response.created", "sequence_number": 0, "response": started}),
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "sequence_number": 0,
                    "output_index": 0,
                    "item": {
                        "type": "message",
                        "id": "msg_s",
                        "role": "assistant",
                        "status": "in_progress",
                        "content": [],
                    },
                },
            ),
            (
                "response.content_part.added",
                {
                    "type": "response.content_part.added",
                    "sequence_number": 0,
                    "item_id": "msg_s",
                    "output_index": 0,
                    "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []},
                },
            ),
            (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "sequence_number": 1,
                    "item_id": "msg_s",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": "Once",
                    "logprobs": [],
                },
            ),
            (
                "response.incomplete",
                {"type": "response.incomplete", "sequence_number": 2, "response": final},
            ),
        ]
    )


def test_a_responses_stream_is_recovered_and_its_cut_off_seen(session: Session) -> None:
    upstream = Upstream(status(400, RESPONSES_OVERFLOW), responses_sse())
    reports = Reports()
    client = wrap(openai_client(upstream), session=session, on_report=reports)
    stream = client.responses.create(
        model="gpt-5", input=responses_history(), max_output_tokens=4, stream=True
    )
    kinds = [event.type for event in stream]
    assert kinds == [
        "response.created",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.incomplete",
    ]
    (report,) = reports
    assert report.recovered
    assert report.final_cutoff is not None
    assert report.final_cutoff.reason == "max_output_tokens"


def test_a_messages_stream_with_a_cut_tool_call_says_so(session: Session) -> None:
    start: dict[str, Any] = {
        "id": "msg_s",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 1},
    }
    block = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}
    upstream = Upstream(
        sse(
            [
                ("message_start", {"type": "message_start", "message": start}),
                ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "input_json_delta", "partial_json": '{"path": "src/pa'},
                    },
                ),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
                        "usage": {"output_tokens": 5},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
        )
    )
    reports = Reports()
    client = wrap(anthropic_client(upstream), session=session, on_report=reports)
    stream = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=5, messages=[{"role": "user", "content": TASK}], stream=True
    )
    for _ in stream:
        pass
    (report,) = reports
    assert report.final_cutoff is not None
    assert report.final_cutoff.tool_call
    assert report.final_cutoff.reason == "max_tokens"


def test_an_overflowing_stream_that_cannot_recover_raises_with_the_report(session: Session) -> None:
    upstream = Upstream(status(400, CHAT_OVERFLOW))
    client = wrap(openai_client(upstream), session=session)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="gpt-4o", messages=chat_history(), stream=True)
    assert isinstance(info.value.toolbudget_report, CallReport)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- the wrapper itself


def test_the_wrapped_client_looks_like_the_client(session: Session) -> None:
    upstream = Upstream(message("ok"))
    inner = anthropic_client(upstream)
    client = wrap(inner, session=session)
    assert isinstance(client, anthropic.Anthropic)
    assert client.api_key == "k"
    assert "messages" in dir(client)
    assert "toolbudget-managed" in repr(client)
    other = client.with_options(timeout=5.0)
    assert isinstance(other, anthropic.Anthropic)
    other.messages.create(
        model="claude-sonnet-4-6", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
    )
    assert hasattr(
        other.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}]),
        "toolbudget_report",
    )
    with client as same:
        assert same is client


def test_a_raw_response_is_managed_and_carries_the_report(session: Session) -> None:
    upstream = Upstream(message("ok"))
    reports = Reports()
    client: Any = wrap(anthropic_client(upstream), session=session, on_report=reports)
    raw = client.messages.with_raw_response.create(
        model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.http_response.status_code == 200
    assert raw.parse().content[0].text == "ok"
    assert raw.toolbudget_report is reports[0]


def test_sdk_options_are_passed_along_not_sent(session: Session) -> None:
    seen: list[httpx2.Request] = []
    upstream = Upstream(message("ok"))

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return upstream(request)

    http = httpx2.Client(transport=httpx2.MockTransport(handler))
    inner = anthropic.Anthropic(api_key="k", base_url="http://upstream", http_client=http, max_retries=0)
    client: Any = wrap(inner, session=session)
    client.messages.create(
        model="m",
        max_tokens=5,
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"x-test": "1"},
        extra_body={"custom": True},
        timeout=30.0,
    )
    assert seen[0].headers["x-test"] == "1"
    assert upstream.bodies[0]["custom"] is True
    assert "timeout" not in upstream.bodies[0]
    assert "extra_headers" not in upstream.bodies[0]


def test_the_sdks_own_argument_errors_are_its_own(session: Session) -> None:
    """A pydantic class as ``response_format`` belongs to ``parse()``: the SDK says so, not toolbudget."""

    class Answer(pydantic.BaseModel):
        text: str

    client: Any = wrap(openai_client(Upstream(completion("ok"))), session=session)
    create: Any = client.chat.completions.create
    with pytest.raises(TypeError, match="parse"):
        create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], response_format=Answer)


def test_other_clients_are_refused() -> None:
    with pytest.raises(UnsupportedClient, match="cannot wrap"):
        wrap(object())
    botocore_session = pytest.importorskip("botocore.session")
    s3 = botocore_session.get_session().create_client(
        "s3", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s"
    )
    with pytest.raises(UnsupportedClient, match="bedrock-runtime"):
        wrap(s3)  # botocore, but no conversation service


def test_wrapping_twice_wraps_the_same_client_again(session: Session) -> None:
    upstream = Upstream(message("ok"))
    reports = Reports()
    inner = anthropic_client(upstream)
    client: Any = wrap(wrap(inner, session=session), session=session, on_report=reports)
    client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert len(reports) == 1


def test_a_session_is_made_when_none_is_given_and_closed_with_the_client(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # the policy of a folder without settings
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # where the default workspace goes
    upstream = Upstream(message("ok"))
    root = tmp_path / "cache" / "toolbudget" / "archives"
    with wrap(anthropic_client(upstream)) as client:
        answer = client.messages.create(model="m", max_tokens=5, messages=anthropic_history(2, 50_000))
        report = answer.toolbudget_report  # type: ignore[attr-defined]
        session = report.managed.session
        assert session.startswith("conv-")
        assert report.managed.keys_written
        assert DirStore(root).live_holders(session)
    # Closed: the client lets go of the archive, which stays for its TTL (markers outlive it).
    assert not DirStore(root).live_holders(session)
    kept = {p.stem for p in root.rglob("*.txt")}
    assert set(report.managed.keys_written) <= kept


def test_async_clients_close_too(session: Session) -> None:
    upstream = Upstream(message("ok"))

    async def main() -> None:
        client: Any = wrap(async_anthropic_client(upstream), session=session)
        await client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        await client.close()

    asyncio.run(main())
    assert len(upstream.bodies) == 1


# --------------------------------------------------------------------------- None is absent


def test_none_and_the_sdk_sentinels_are_absent_not_null(session: Session) -> None:
    """``tools=None``, ``system=None``, ``NOT_GIVEN`` and ``omit`` are what the SDKs accept for "none"."""
    upstream = Upstream(message("ok"))
    client: Any = wrap(anthropic_client(upstream), session=session)
    history = [{"role": "user", "content": "hi"}]
    client.messages.create(model="m", max_tokens=5, messages=history, system=None, tools=None)
    client.messages.create(
        model="m", max_tokens=5, messages=history, system=anthropic.NOT_GIVEN, tools=anthropic.omit
    )
    for body in upstream.bodies:
        assert "system" not in body
        assert "tools" not in body
        assert body["messages"] == history

    chat = Upstream(completion("ok"))
    oclient: Any = wrap(openai_client(chat), session=session)
    oclient.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}], tools=None, tool_choice=openai.omit
    )
    assert "tools" not in chat.bodies[0]
    assert "tool_choice" not in chat.bodies[0]


def test_a_null_system_prompt_is_worded_with_both_valid_forms() -> None:
    from toolbudget import ShapeError, validate

    body = {"model": "m", "max_tokens": 5, "system": None, "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(
        ShapeError, match=r"^system: expected a string or an array of text blocks, found null$"
    ):
        validate(body, api="anthropic")


# --------------------------------------------------------------------------- every way in is managed

BIG = 12 * 30_000  # the characters of results in the long histories below


class Answer(pydantic.BaseModel):
    text: str


def count_reply(_request: dict[str, Any]) -> httpx2.Response:
    return httpx2.Response(200, json={"input_tokens": 1234})


def anthropic_paths() -> dict[str, Callable[[Any, list[Any]], Any]]:
    args: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 64}

    def streamed(manager: Any) -> Any:
        with manager as opened:
            return opened.get_final_message() if hasattr(opened, "get_final_message") else opened.parse()

    return {
        "messages.create": lambda c, h: c.messages.create(messages=h, **args),
        "messages.with_raw_response.create": lambda c, h: c.messages.with_raw_response.create(
            messages=h, **args
        ).parse(),
        "with_raw_response.messages.create": lambda c, h: c.with_raw_response.messages.create(
            messages=h, **args
        ).parse(),
        "messages.with_streaming_response.create": lambda c, h: streamed(
            c.messages.with_streaming_response.create(messages=h, **args)
        ),
        "with_streaming_response.beta.messages.create": lambda c, h: streamed(
            c.with_streaming_response.beta.messages.create(messages=h, **args)
        ),
        "beta.messages.create": lambda c, h: c.beta.messages.create(messages=h, **args),
        "beta.messages.with_raw_response.create": lambda c, h: c.beta.messages.with_raw_response.create(
            messages=h, **args
        ).parse(),
        "messages.parse": lambda c, h: c.messages.parse(messages=h, output_format=Answer, **args),
        "beta.messages.parse": lambda c, h: c.beta.messages.parse(messages=h, output_format=Answer, **args),
        "with_options().messages.create": lambda c, h: c.with_options(timeout=9.0).messages.create(
            messages=h, **args
        ),
        "copy().beta.messages.create": lambda c, h: c.copy().beta.messages.create(messages=h, **args),
        "with_middleware().messages.create": lambda c, h: c.with_middleware().messages.create(
            messages=h, **args
        ),
    }


@pytest.mark.parametrize("path", sorted(anthropic_paths()))
def test_every_anthropic_path_sends_the_managed_history(session: Session, path: str) -> None:
    upstream = Upstream(message('{"text": "ok"}'))
    client: Any = wrap(anthropic_client(upstream), session=session)
    history = anthropic_history()
    before = copy.deepcopy(history)
    anthropic_paths()[path](client, history)
    assert len(upstream.bodies) == 1
    assert len(sent_text(upstream.bodies[0])) < BIG / 4, path  # the results were cut
    assert "[toolbudget: omitted" in sent_text(upstream.bodies[0])
    assert history == before


@pytest.mark.parametrize("path", sorted(anthropic_paths()))
def test_every_anthropic_path_recovers_from_overflow(session: Session, path: str) -> None:
    upstream = Upstream(status(400, ANTHROPIC_OVERFLOW), message('{"text": "ok"}'))
    client: Any = wrap(anthropic_client(upstream), session=session)
    anthropic_paths()[path](client, anthropic_history())
    assert len(upstream.bodies) == 2
    assert len(sent_text(upstream.bodies[1])) < len(sent_text(upstream.bodies[0]))


def test_anthropic_stream_helpers_are_managed(session: Session) -> None:
    for path in ("messages", "beta.messages"):
        upstream = Upstream(status(400, ANTHROPIC_OVERFLOW), anthropic_stream("Done.", "end_turn"))
        client: Any = wrap(anthropic_client(upstream), session=session)
        resource: Any = client.beta.messages if path == "beta.messages" else client.messages
        with resource.stream(model="m", max_tokens=64, messages=anthropic_history()) as s:
            assert s.get_final_text() == "Done."
        assert len(upstream.bodies) == 2, path
        assert len(sent_text(upstream.bodies[0])) < BIG / 4, path


def test_counting_tokens_counts_the_managed_history(session: Session) -> None:
    upstream = Upstream(count_reply)
    client: Any = wrap(anthropic_client(upstream), session=session)
    counted = client.messages.count_tokens(model="m", messages=anthropic_history())
    assert counted.input_tokens == 1234
    assert len(sent_text(upstream.bodies[0])) < BIG / 4
    assert counted.toolbudget_report.managed.results_cut > 0


def test_async_anthropic_paths_are_managed(session: Session) -> None:
    upstream = Upstream(message('{"text": "ok"}'))

    async def main() -> None:
        client: Any = wrap(async_anthropic_client(upstream), session=session)
        args: dict[str, Any] = {"model": "m", "max_tokens": 64}
        await client.messages.create(messages=anthropic_history(), **args)
        raw = await client.messages.with_raw_response.create(messages=anthropic_history(), **args)
        assert (await raw.parse()).content[0].text == '{"text": "ok"}'
        await client.with_raw_response.beta.messages.create(messages=anthropic_history(), **args)
        await client.beta.messages.create(messages=anthropic_history(), **args)
        async with client.messages.with_streaming_response.create(messages=anthropic_history(), **args) as r:
            await r.parse()
        await client.messages.parse(messages=anthropic_history(), output_format=Answer, **args)
        await client.with_options(timeout=9.0).beta.messages.create(messages=anthropic_history(), **args)
        await client.close()

    asyncio.run(main())
    assert len(upstream.bodies) == 7
    for body in upstream.bodies:
        assert len(sent_text(body)) < BIG / 4


def openai_paths() -> dict[str, Callable[[Any], Any]]:
    def streamed(manager: Any) -> Any:
        with manager as opened:
            return opened.parse()

    def chat(c: Any) -> dict[str, Any]:
        return {"model": "gpt-4o", "messages": chat_history()}

    return {
        "chat.completions.create": lambda c: c.chat.completions.create(**chat(c)),
        "chat.completions.with_raw_response.create": lambda c: c.chat.completions.with_raw_response.create(
            **chat(c)
        ).parse(),
        "with_raw_response.chat.completions.create": lambda c: c.with_raw_response.chat.completions.create(
            **chat(c)
        ).parse(),
        "chat.completions.with_streaming_response.create": lambda c: streamed(
            c.chat.completions.with_streaming_response.create(**chat(c))
        ),
        "beta.chat.completions.create": lambda c: c.beta.chat.completions.create(**chat(c)),
        "chat.completions.parse": lambda c: c.chat.completions.parse(response_format=Answer, **chat(c)),
        "with_options().chat.completions.create": lambda c: c.with_options(
            timeout=9.0
        ).chat.completions.create(**chat(c)),
        "copy().chat.completions.create": lambda c: c.copy().chat.completions.create(**chat(c)),
    }


@pytest.mark.parametrize("path", sorted(openai_paths()))
def test_every_chat_path_sends_the_managed_history_and_recovers(session: Session, path: str) -> None:
    upstream = Upstream(status(400, CHAT_OVERFLOW), completion('{"text": "ok"}'))
    client: Any = wrap(openai_client(upstream), session=session)
    openai_paths()[path](client)
    assert len(upstream.bodies) == 2
    assert len(sent_text(upstream.bodies[0])) < BIG / 4, path
    assert len(sent_text(upstream.bodies[1])) < len(sent_text(upstream.bodies[0]))


def test_the_chat_stream_helper_is_managed(session: Session) -> None:
    upstream = Upstream(status(400, CHAT_OVERFLOW), chat_stream(["Do", "ne."], "stop"))
    client: Any = wrap(openai_client(upstream), session=session)
    with client.chat.completions.stream(model="gpt-4o", messages=chat_history()) as s:
        final = s.get_final_completion()
    assert final.choices[0].message.content == "Done."
    assert len(upstream.bodies) == 2
    assert len(sent_text(upstream.bodies[0])) < BIG / 4
    assert s.toolbudget_report.stream_finished is True
    assert s.toolbudget_report.final_cutoff is None

    cut = Upstream(chat_stream(["Do"], "length"))
    client = wrap(openai_client(cut), session=session)
    with client.chat.completions.stream(model="gpt-4o", messages=chat_history()) as s:
        s.until_done()
    assert s.toolbudget_report.final_cutoff is not None
    assert s.toolbudget_report.final_cutoff.reason == "length"


def responses_paths() -> dict[str, Callable[[Any], Any]]:
    def args() -> dict[str, Any]:
        return {"model": "gpt-5", "input": responses_history()}

    return {
        "responses.create": lambda c: c.responses.create(**args()),
        "responses.with_raw_response.create": lambda c: c.responses.with_raw_response.create(
            **args()
        ).parse(),
        "with_raw_response.responses.create": lambda c: c.with_raw_response.responses.create(
            **args()
        ).parse(),
        "beta.responses.create": lambda c: c.beta.responses.create(**args()),
        "responses.parse": lambda c: c.responses.parse(text_format=Answer, **args()),
    }


@pytest.mark.parametrize("path", sorted(responses_paths()))
def test_every_responses_path_sends_the_managed_history_and_recovers(session: Session, path: str) -> None:
    upstream = Upstream(status(400, RESPONSES_OVERFLOW), response('{"text": "ok"}'))
    client: Any = wrap(openai_client(upstream), session=session)
    responses_paths()[path](client)
    assert len(upstream.bodies) == 2
    assert len(sent_text(upstream.bodies[0])) < BIG / 4, path
    assert len(sent_text(upstream.bodies[1])) < len(sent_text(upstream.bodies[0]))


def test_responses_input_is_managed_when_counted_compacted_and_decided(session: Session) -> None:
    upstream = Upstream(
        lambda _r: httpx2.Response(200, json={"object": "response.input_tokens", "input_tokens": 7})
    )
    client: Any = wrap(openai_client(upstream), session=session)
    client.responses.input_tokens.count(model="gpt-5", input=responses_history())
    compacted = Upstream(response("ok"))
    wrap(openai_client(compacted), session=session).responses.compact(
        model="gpt-5", input=responses_history()
    )
    decided = Upstream(lambda _r: httpx2.Response(200, json={"id": "d", "object": "decision", "answers": []}))
    deciding: Any = wrap(openai_client(decided), session=session)
    deciding.decisions.create(
        model="gpt-6-luna", input=responses_history(), questions=[{"type": "predicate", "question": "ok?"}]
    )
    assert decided.bodies[0]["questions"] == [{"type": "predicate", "question": "ok?"}]
    for body in (upstream.bodies[0], compacted.bodies[0], decided.bodies[0]):
        assert len(sent_text(body)) < BIG / 4


def test_async_openai_paths_are_managed(session: Session) -> None:
    upstream = Upstream(completion("ok"))

    async def main() -> None:
        client: Any = wrap(async_openai_client(upstream), session=session)
        await client.chat.completions.create(model="gpt-4o", messages=chat_history())
        raw = await client.chat.completions.with_raw_response.create(model="gpt-4o", messages=chat_history())
        assert raw.parse().choices[0].message.content == "ok"  # the legacy raw response parses at once
        await client.with_raw_response.chat.completions.create(model="gpt-4o", messages=chat_history())
        await client.beta.chat.completions.create(model="gpt-4o", messages=chat_history())
        async with client.chat.completions.with_streaming_response.create(
            model="gpt-4o", messages=chat_history()
        ) as r:
            await r.parse()
        await client.copy().chat.completions.create(model="gpt-4o", messages=chat_history())
        await client.close()

    asyncio.run(main())
    assert len(upstream.bodies) == 6
    for body in upstream.bodies:
        assert len(sent_text(body)) < BIG / 4


def test_what_cannot_be_managed_is_refused_by_name(session: Session) -> None:
    from toolbudget.errors import ToolbudgetError
    from toolbudget.errors import UnsupportedClient as FromErrors

    assert UnsupportedClient is FromErrors
    assert issubclass(UnsupportedClient, ToolbudgetError)
    upstream = Upstream(message("ok"))
    client: Any = wrap(anthropic_client(upstream), session=session)
    ochat: Any = wrap(openai_client(upstream), session=session)
    refused: dict[str, Callable[[], Any]] = {
        "messages.batches.create": lambda: client.messages.batches.create(requests=[]),
        "beta.messages.batches.create": lambda: client.beta.messages.batches.create(requests=[]),
        "beta.messages.tool_runner": lambda: client.beta.messages.tool_runner,
        "beta.messages.thread": lambda: client.beta.messages.thread,
        "responses.connect": lambda: ochat.responses.connect,
        "post('/v1/messages')": lambda: client.post("/v1/messages", body={}, cast_to=object),
        "post('/chat/completions')": lambda: ochat.post("/chat/completions", body={}, cast_to=object),
    }
    for name, attempt in refused.items():
        with pytest.raises(UnsupportedClient) as caught:
            attempt()
        assert name.split("(")[0] in str(caught.value), name
    assert upstream.bodies == []
    # what sends no conversation is the SDK's own; a method this version does not know is refused
    from anthropic.resources.messages.messages import Messages

    setattr(Messages, "create_v2", lambda self, **kwargs: None)  # noqa: B010
    try:
        with pytest.raises(UnsupportedClient, match=r"messages\.create_v2 is not managed"):
            getattr(client.messages, "create_v2")  # noqa: B009
    finally:
        delattr(Messages, "create_v2")
    with pytest.raises(AttributeError):
        getattr(client.messages, "no_such_method")  # noqa: B009
    assert client.messages.batches.list is not None
    assert ochat.responses.retrieve is not None
    assert callable(client.models.list)


def test_parse_keeps_the_callers_pydantic_tools(session: Session) -> None:
    """Tools left unchanged go to the SDK as the caller's objects, so ``parse`` still parses them."""

    class Read(pydantic.BaseModel):
        path: str

    upstream = Upstream(completion(None, "tool_calls", arguments='{"path": "a.py"}'))
    client: Any = wrap(openai_client(upstream), session=session, recall=True)
    tools = [openai.pydantic_function_tool(Read)]
    parsed = client.chat.completions.parse(model="gpt-4o", messages=chat_history(), tools=tools)
    call = parsed.choices[0].message.tool_calls[0]
    assert isinstance(call.function.parsed_arguments, Read)
    assert [t["function"]["name"] for t in upstream.bodies[0]["tools"]] == ["Read", "toolbudget_recall"]
    assert upstream.bodies[0]["tools"][1]["function"]["strict"] is True
    assert len(tools) == 1
    # the strict form's nulls read as absent
    answer = client.toolbudget.handle_recall({"key": "nope", "lines": None, "grep": None, "chars": None})
    assert "not found" in answer


# --------------------------------------------------------------------------- the session, recall, closing


def test_the_session_is_exposed_and_recall_is_offered_and_answered(session: Session) -> None:
    from toolbudget import RECALL_TOOL, recall_tool

    upstream = Upstream(message("ok"))
    client: Any = wrap(anthropic_client(upstream), session=session, recall=True)
    assert client.toolbudget is session
    tools = [{"name": "Bash", "input_schema": {"type": "object"}}]
    client.messages.create(model="m", max_tokens=5, messages=anthropic_history(), tools=tools)
    sent = upstream.bodies[0]
    assert [t["name"] for t in sent["tools"]] == ["Bash", RECALL_TOOL]
    assert sent["tools"][1] == recall_tool("anthropic")
    assert len(tools) == 1  # the caller's list is not changed
    # no tools given: the recall tool is the one; already defined: not added twice
    client.messages.create(model="m", max_tokens=5, messages=anthropic_history())
    client.messages.create(model="m", max_tokens=5, messages=anthropic_history(), tools=sent["tools"])
    assert [t["name"] for t in upstream.bodies[1]["tools"]] == [RECALL_TOOL]
    assert [t["name"] for t in upstream.bodies[2]["tools"]] == ["Bash", RECALL_TOOL]
    # the model's call is answered from the session's archive
    key = re.search(r"<<tb:([^>]+)>>", sent_text(sent))
    assert key is not None
    answer = client.toolbudget.handle_recall({"key": key.group(1), "lines": "1:3"})
    assert "line 0" in answer
    # every API gets the definition in its own form
    chat = Upstream(completion("ok"))
    wrap(openai_client(chat), session=session, recall=True).chat.completions.create(
        model="gpt-4o", messages=chat_history()
    )
    assert chat.bodies[0]["tools"] == [recall_tool("openai-chat")]
    resp = Upstream(response("ok"))
    wrap(openai_client(resp), session=session, recall=True).responses.create(
        model="gpt-5", input=responses_history()
    )
    assert resp.bodies[0]["tools"] == [recall_tool("openai-responses")]
    # a method without tools gets none (the SDK would refuse the argument)
    compacted = Upstream(response("ok"))
    compacting: Any = wrap(openai_client(compacted), session=session, recall=True)
    compacting.responses.compact(model="gpt-5", input=responses_history())
    assert "tools" not in compacted.bodies[0]
    counted = Upstream(count_reply)
    counting: Any = wrap(anthropic_client(counted), session=session, recall=True)
    counting.messages.with_raw_response.count_tokens(model="m", messages=anthropic_history())
    assert [t["name"] for t in counted.bodies[0]["tools"]] == [RECALL_TOOL]


def test_without_recall_no_tool_is_added(session: Session) -> None:
    upstream = Upstream(message("ok"))
    client: Any = wrap(anthropic_client(upstream), session=session)
    client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert "tools" not in upstream.bodies[0]


def test_a_made_session_is_exposed_and_closed_with_the_client(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "cache" / "toolbudget" / "archives"
    client: Any = wrap(anthropic_client(Upstream(message("ok"))))
    made = client.toolbudget
    assert isinstance(made, Session)
    client.messages.create(model="m", max_tokens=5, messages=anthropic_history(2, 50_000))
    assert DirStore(root).live_holders(made.id)
    client.close()
    # Closed with the client: it lets go of the archive, which stays for its TTL.
    assert made._closed and not DirStore(root).live_holders(made.id)
    assert list(root.rglob("*.txt"))


def test_leaving_the_block_never_raises_for_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolbudget.errors import StoreError

    def broken(self: Session) -> None:
        raise StoreError("the disk went away")

    upstream = Upstream(message("ok"))
    with pytest.warns(RuntimeWarning, match="the disk went away"), wrap(anthropic_client(upstream)) as client:
        client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        monkeypatch.setattr(Session, "close", broken)
    # the block's own error is the one raised
    with pytest.raises(KeyError), pytest.warns(RuntimeWarning), wrap(anthropic_client(upstream)) as client:
        client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        raise KeyError("mine")

    async def main() -> None:
        async with wrap(async_anthropic_client(upstream)) as aclient:
            await aclient.messages.create(
                model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
            )

    with pytest.warns(RuntimeWarning):
        asyncio.run(main())


def test_the_responses_stream_helper_is_managed_sync_and_async(session: Session) -> None:
    upstream = Upstream(status(400, RESPONSES_OVERFLOW), responses_sse())
    client: Any = wrap(openai_client(upstream), session=session)
    with client.responses.stream(model="gpt-5", input=responses_history()) as s:
        kinds = [event.type for event in s]
    assert kinds[-1] == "response.incomplete"
    assert s.toolbudget_report.recovered
    assert s.toolbudget_report.final_cutoff.reason == "max_output_tokens"
    assert len(upstream.bodies) == 2
    assert len(sent_text(upstream.bodies[0])) < BIG / 4

    again = Upstream(status(400, RESPONSES_OVERFLOW), responses_sse())
    chat = Upstream(status(400, CHAT_OVERFLOW), chat_stream(["Hi"], "stop"))

    async def main() -> None:
        aclient: Any = wrap(async_openai_client(again), session=session)
        async with aclient.responses.stream(model="gpt-5", input=responses_history()) as stream:
            async for _event in stream:
                pass
        assert stream.toolbudget_report.recovered
        achat: Any = wrap(async_openai_client(chat), session=session)
        async with achat.chat.completions.stream(model="gpt-4o", messages=chat_history()) as cs:
            final = await cs.get_final_completion()
        assert final.choices[0].message.content == "Hi"
        async with achat.beta.chat.completions.with_streaming_response.create(
            model="gpt-4o", messages=chat_history()
        ) as response:
            await response.parse()

    asyncio.run(main())
    assert len(again.bodies) == 2
    assert len(chat.bodies) == 3
    for body in (*again.bodies, *chat.bodies):
        assert len(sent_text(body)) < BIG / 4
