"""The one managed call (:mod:`toolbudget.flow`): a flow that does no I/O, driven sync and async alike.

Every shell runs this flow, so these tests drive it the ways shells do: by hand
(the protocol itself), with plain dict senders on each of the five APIs, and
through the wrapped SDK clients, sync against async, which must send the same
bytes and report the same things.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import openai
import orjson
import pytest

from toolbudget import Conversation, Message, Policy, Session, Text, ToolCall, ToolResult, to_request, wrap
from toolbudget.flow import ManagedCall, Outcome, adrive, drive
from toolbudget.recovery import ErrorKind, classify
from toolbudget.recovery.output import continuation_prompt

STORY = "Tell a story."


class Overflow(Exception):
    """A provider's overflow as a plain ``(status, body)`` error, as :func:`classify` reads it."""

    def __init__(self) -> None:
        super().__init__("prompt is too long")
        self.status_code = 400
        self.body = {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "prompt is too long: 9000 tokens > 4000"},
        }


# --------------------------------------------------------------------------- answers of each API, as JSON


def anthropic_answer(text: str, cut: bool) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "max_tokens" if cut else "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 7},
    }


def chat_answer(text: str, cut: bool) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "length" if cut else "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 7, "total_tokens": 17},
    }


def responses_answer(text: str, cut: bool) -> dict[str, Any]:
    return {
        "id": "r1",
        "object": "response",
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "output": [
            {
                "type": "message",
                "id": "m1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 10, "output_tokens": 7, "total_tokens": 17},
    }


def gemini_answer(text: str, cut: bool) -> dict[str, Any]:
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": "MAX_TOKENS" if cut else "STOP",
            }
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 7, "totalTokenCount": 17},
    }


def bedrock_answer(text: str, cut: bool) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "max_tokens" if cut else "end_turn",
        "usage": {"inputTokens": 10, "outputTokens": 7, "totalTokens": 17},
    }


def max_tokens(body: dict[str, Any], api: str) -> Any:
    if api == "gemini":
        return body["generationConfig"]["maxOutputTokens"]
    if api == "bedrock-converse":
        return body["inferenceConfig"]["maxTokens"]
    return body["max_output_tokens" if api == "openai-responses" else "max_tokens"]


def tool_session() -> Conversation:
    """The task, then six shell calls with results of 12,000 characters: a history the ladder can shrink."""
    messages = [Message("user", (Text(STORY),))]
    for i in range(6):
        messages.append(Message("assistant", (ToolCall(f"call_{i}", "bash", {"command": f"cat part_{i}"}),)))
        output = "".join(f"part {i} line {j}: once upon a time\n" for j in range(400))
        messages.append(Message("tool", (ToolResult(f"call_{i}", (Text(output),), name="bash"),)))
    messages.append(Message("user", (Text("Now tell it."),)))
    return Conversation("flow", "flow", tuple(messages), (Text("You tell stories."),))


def with_max_tokens(body: dict[str, Any], api: str, value: int) -> dict[str, Any]:
    if api == "gemini":
        return {**body, "generationConfig": {"maxOutputTokens": value}}
    if api == "bedrock-converse":
        return {**body, "inferenceConfig": {"maxTokens": value}}
    return {**body, "max_output_tokens" if api == "openai-responses" else "max_tokens": value}


MODELS = {"anthropic": "claude-sonnet-4-6", "openai-chat": "gpt-4o", "openai-responses": "gpt-5"}
BODIES: dict[str, dict[str, Any]] = {
    api: with_max_tokens(to_request(tool_session(), api, model=MODELS.get(api, "m")), api, 50)
    for api in ("anthropic", "openai-chat", "openai-responses", "gemini", "bedrock-converse")
}
ANSWERS: dict[str, Callable[[str, bool], dict[str, Any]]] = {
    "anthropic": anthropic_answer,
    "openai-chat": chat_answer,
    "openai-responses": responses_answer,
    "gemini": gemini_answer,
    "bedrock-converse": bedrock_answer,
}


def answer_text(answer: dict[str, Any], api: str) -> str:
    from toolbudget.recovery.output import answer_text as text

    return text([answer], api)


class Scripted:
    """A provider as a function of the body: an overflow first, then cut answers, then a whole one."""

    def __init__(self, api: str, *, overflow: bool = True) -> None:
        self.api = api
        self.bodies: list[bytes] = []
        self.overflow = overflow

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(orjson.dumps(body))
        turn = len(self.bodies) - (2 if self.overflow else 1)
        if turn < 0:
            raise Overflow()
        pieces = ["Once upon a ", "Once upon a time, ", "there was a flow."]
        return ANSWERS[self.api](pieces[min(turn, 2)], turn < 2)


def run_sync(api: str, policy: Policy) -> tuple[Outcome, Scripted]:
    provider = Scripted(api)
    with Session("flow", store="memory:", policy=policy) as session:
        outcome = drive(ManagedCall(session, copy.deepcopy(BODIES[api]), api), provider)
    return outcome, provider


def run_async(api: str, policy: Policy) -> tuple[Outcome, Scripted]:
    provider = Scripted(api)

    async def send(body: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        return provider(body)

    async def go() -> Outcome:
        with Session("flow", store="memory:", policy=policy) as session:
            return await adrive(ManagedCall(session, copy.deepcopy(BODIES[api]), api), send)

    return asyncio.run(go()), provider


# --------------------------------------------------------------------------- the protocol


def test_the_flow_yields_bodies_and_is_sent_answers_without_doing_io() -> None:
    body = {"model": "claude-sonnet-4-6", "max_tokens": 50, "messages": [{"role": "user", "content": STORY}]}
    before = copy.deepcopy(body)
    with Session("steps", store="memory:", policy=Policy(max_token_escalations=1)) as session:
        steps = ManagedCall(session, body, "anthropic").steps()
        first = next(steps)
        assert STORY in str(first["messages"])
        second = steps.send(anthropic_answer("Once upon a ", True))  # cut off: escalate
        assert second["max_tokens"] == 100
        third = steps.send(anthropic_answer("Once upon a time, ", True))  # still cut: continue
        assert third["messages"][-1]["content"][0]["text"] == continuation_prompt(False)
        with pytest.raises(StopIteration) as done:
            steps.send(anthropic_answer("there was a flow.", False))
    outcome: Outcome = done.value.value
    assert outcome.changed and outcome.data is not None
    assert answer_text(outcome.data, "anthropic") == "Once upon a time, there was a flow."
    assert (outcome.report.escalations, outcome.report.continuations) == (1, 1)
    assert body == before  # the caller's body is never changed


def test_an_error_that_is_not_an_overflow_comes_out_of_the_flow_unchanged() -> None:
    with Session("other", store="memory:") as session:
        steps = ManagedCall(session, BODIES["openai-chat"], "openai-chat").steps()
        next(steps)
        error = ConnectionError("reset by peer")
        with pytest.raises(ConnectionError) as info:
            steps.throw(error)
    assert info.value is error


def test_an_overflow_thrown_in_gets_a_smaller_body_and_the_give_up_carries_the_report() -> None:
    huge = {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "Fix it."},
            *(
                m
                for i in range(6)
                for m in (
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"n": i}}],
                    },
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "x\n" * 3000}],
                    },
                )
            ),
        ],
    }
    with Session("ladder", store="memory:", policy=Policy(max_recovery_attempts=1)) as session:
        steps = ManagedCall(session, huge, "anthropic").steps()
        sent = next(steps)
        smaller = steps.throw(Overflow())
        assert len(orjson.dumps(smaller)) < len(orjson.dumps(sent))
        last = Overflow()
        with pytest.raises(Overflow) as info:
            steps.throw(last)
    report = info.value.toolbudget_report  # type: ignore[attr-defined]
    assert not report.recovered and len(report.attempts) == 1
    assert classify(info.value).kind is ErrorKind.CONTEXT_OVERFLOW


# --------------------------------------------------------------------------- five APIs, two drivers


@pytest.mark.parametrize("api", list(BODIES))
def test_every_api_recovers_escalates_and_continues_with_either_driver(api: str) -> None:
    policy = Policy(max_token_escalations=1)
    outcome, provider = run_sync(api, policy)
    sent = [orjson.loads(b) for b in provider.bodies]
    assert len(sent) == 4  # refused, answered cut, escalated (cut again), continued
    assert max_tokens(sent[2], api) == 2 * max_tokens(sent[1], api)
    assert STORY in str(sent[3]) and "Once upon a time, " in str(sent[3])
    assert len(provider.bodies[1]) < len(provider.bodies[0])  # the refused history was shrunk
    assert outcome.data is not None and outcome.changed
    assert answer_text(outcome.data, api) == "Once upon a time, there was a flow."
    report = outcome.report
    assert (report.escalations, report.continuations, report.complete) == (1, 1, True)
    assert report.recovered and report.level >= 1

    again, provider_async = run_async(api, policy)
    assert provider_async.bodies == provider.bodies  # the same bytes, in the same order
    assert again.report.as_dict() == report.as_dict()
    assert again.data == outcome.data


# --------------------------------------------------------------------------- the SDK wrappers, sync and async


class Recorder:
    """A scripted provider behind a mock transport: records each request's bytes."""

    def __init__(self, replies: list[Callable[[], httpx2.Response]]) -> None:
        self.replies = replies
        self.bodies: list[bytes] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(request.content)
        return self.replies[min(len(self.bodies) - 1, len(self.replies) - 1)]()


def reply(code: int, data: dict[str, Any]) -> Callable[[], httpx2.Response]:
    return lambda: httpx2.Response(code, json=data, headers={"request-id": "req_1"})


OVERFLOW_BODY: dict[str, dict[str, Any]] = {
    "anthropic": {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 250000 tokens > 200000 maximum",
        },
    },
    "openai": {
        "error": {
            "message": "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 150000 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    },
}


def long_history(api: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find the bug."}]
    for i in range(8):
        output = "".join(f"line {j} of result {i}: value={j * i}\n" for j in range(600))
        if api == "anthropic":
            messages.append(
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"i": i}}],
                }
            )
            messages.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": output}],
                }
            )
        elif api == "openai-chat":
            call = {
                "id": f"c{i}",
                "type": "function",
                "function": {"name": "bash", "arguments": f'{{"i": {i}}}'},
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": output})
        else:
            messages.append(
                {"type": "function_call", "call_id": f"c{i}", "name": "bash", "arguments": f'{{"i": {i}}}'}
            )
            messages.append({"type": "function_call_output", "call_id": f"c{i}", "output": output})
    return messages


def script(api: str) -> list[Callable[[], httpx2.Response]]:
    overflow = reply(400, OVERFLOW_BODY["anthropic" if api == "anthropic" else "openai"])
    full = {"anthropic": anthropic_answer, "openai-chat": chat_answer, "openai-responses": responses_answer}[
        api
    ]
    return [
        overflow,
        reply(200, full("Once upon a ", True)),
        reply(200, full("Once upon a time, ", True)),
        reply(200, full("there was a flow.", False)),
    ]


def wrapped(api: str, recorder: Recorder, *, asynchronous: bool) -> tuple[Any, Session]:
    """The SDK client of ``api`` (sync or async) over ``recorder``, wrapped with a fresh session."""
    http: Any = (httpx2.AsyncClient if asynchronous else httpx2.Client)(
        transport=httpx2.MockTransport(recorder)
    )
    if api == "anthropic":
        kind: Any = anthropic.AsyncAnthropic if asynchronous else anthropic.Anthropic
        url = "http://up"
    else:
        kind, url = (openai.AsyncOpenAI if asynchronous else openai.OpenAI), "http://up/v1"
    session = Session("parity", store="memory:", policy=Policy(max_token_escalations=1))
    return wrap(kind(api_key="k", base_url=url, http_client=http, max_retries=0), session=session), session


def create(client: Any, api: str) -> Any:
    """The one call of the script: the SDK's create, sync or async (then awaitable)."""
    history = long_history(api)
    if api == "anthropic":
        return client.messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=history)
    if api == "openai-chat":
        return client.chat.completions.create(model="gpt-4o", max_tokens=64, messages=history)
    return client.responses.create(model="gpt-5", max_output_tokens=64, input=history)


def call_sync(api: str, recorder: Recorder) -> Any:
    client, session = wrapped(api, recorder, asynchronous=False)
    with session:
        return create(client, api)


def call_async(api: str, recorder: Recorder) -> Any:
    async def go() -> Any:
        client, session = wrapped(api, recorder, asynchronous=True)
        with session:
            return await create(client, api)

    return asyncio.run(go())


@pytest.mark.parametrize("api", ["anthropic", "openai-chat", "openai-responses"])
def test_sync_and_async_wrappers_send_the_same_bytes_and_report_the_same(api: str) -> None:
    sync, asyn = Recorder(script(api)), Recorder(script(api))
    answer = call_sync(api, sync)
    again = call_async(api, asyn)
    assert len(sync.bodies) == 4  # refused, cut, escalated and cut, continued
    assert asyn.bodies == sync.bodies
    report, report_async = answer.toolbudget_report, again.toolbudget_report
    assert report.as_dict() == report_async.as_dict()
    assert report.recovered and (report.escalations, report.continuations) == (1, 1)
    assert answer.model_dump() == again.model_dump()
    assert type(answer) is type(again)
