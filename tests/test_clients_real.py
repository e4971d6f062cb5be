"""``toolbudget.wrap`` around the real anthropic and openai SDK clients, against a real llama.cpp server.

One server (SmolLM2-135M, a ``N_CTX``-token window, no context shift) serves
the whole file; it really tokenises, really refuses a prompt over its window
(HTTP 400 ``exceed_context_size_error``) and really stops at ``max_tokens``.
Every history here is bigger than the window, so the unwrapped call fails with
the server's own error and the wrapped one must climb the ladder.

Prompt processing is the cost (about 150 tokens a second on two cores), and an
oversized prompt is refused right after tokenising, so each recovery costs
about one window of processing. The server keeps the last prompt's cache, so a
test that resends the same recovered history (escalations, a stream after the
same call) pays only for the new tokens.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from conftest import trajectories_dir
from llama_server import llama_server, require_llama_server
from toolbudget import (
    Conversation,
    Message,
    Policy,
    Session,
    Text,
    ToolCall,
    ToolResult,
    load_transcript,
    to_request,
)
from toolbudget.clients import CallReport, wrap
from toolbudget.recovery import ErrorKind, classify

pytestmark = pytest.mark.slow

N_CTX = 1024
MODEL = "smollm2"  # the server serves its one model whatever the name
TASK = "Find why the parser test fails and fix it."
TRANSCRIPT = "claude-code/tests/integration/session/fixtures/session-9eda1058.jsonl"
SHARED_MISSING = "../shared/data/trajectories is absent (fresh clone)"
NEXT_TURN = "Summarise what you found in one sentence."


def sdk(name: str) -> Any:
    """An SDK the test needs; skip without it, but fail under CI."""
    try:
        return importlib.import_module(name)
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed; CI must run the real llama.cpp tests")
        pytest.skip(f"{name} is not installed")


@pytest.fixture(scope="module")
def llama_url() -> Iterator[str]:
    require_llama_server()
    with llama_server(n_ctx=N_CTX) as url:
        yield url


@dataclass
class Wire:
    """What went over the wire: each request's JSON body and the status it got."""

    bodies: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)

    def request(self, request: Any) -> None:
        self.bodies.append(json.loads(request.content))

    def response(self, response: Any) -> None:
        self.statuses.append(response.status_code)

    def answered(self) -> list[dict[str, Any]]:
        """The bodies that got an answer (200), in order."""
        return [b for b, s in zip(self.bodies, self.statuses, strict=True) if s == 200]


def http_client(wire: Wire) -> Any:
    httpx2 = sdk("httpx2")
    return httpx2.Client(event_hooks={"request": [wire.request], "response": [wire.response]}, timeout=120)


def chat_client(url: str, wire: Wire) -> Any:
    return sdk("openai").OpenAI(
        base_url=f"{url}/v1", api_key="x", max_retries=0, http_client=http_client(wire)
    )


def messages_client(url: str, wire: Wire) -> Any:
    return sdk("anthropic").Anthropic(base_url=url, api_key="x", max_retries=0, http_client=http_client(wire))


def session() -> Session:
    return Session(store="memory:", policy=Policy(max_token_escalations=0))


# --------------------------------------------------------------------------- histories


def synthetic() -> Conversation:
    """A long tool session: the task, then eight shell calls of 2,300 characters each (about 6,000 tokens)."""
    messages = [Message("user", (Text(TASK),))]
    for i in range(8):
        call = ToolCall(f"call_{i}", "bash", {"command": f"pytest tests/test_parser.py -k case_{i}"})
        messages.append(Message("assistant", (Text(f"Running case {i}."), call)))
        output = "".join(f"tests/test_parser.py::case_{i}_{j} PASSED   [{j:3d}%]\n" for j in range(50))
        messages.append(Message("tool", (ToolResult(f"call_{i}", (Text(output),), name="bash"),)))
    messages.append(Message("user", (Text(NEXT_TURN),)))
    return Conversation("synthetic", "synthetic", tuple(messages), (Text("You are a coding agent."),))


def transcript() -> Conversation:
    """A real Claude Code session (14,000 tokens) from the shared trajectories, with the next user turn."""
    path = trajectories_dir() / TRANSCRIPT
    if not path.is_file():
        pytest.skip(SHARED_MISSING)
    conversation = load_transcript(path).conversations[0]
    turn = Message("user", (Text(NEXT_TURN),))
    return Conversation(
        conversation.id, conversation.source, (*conversation.messages, turn), conversation.system
    )


def body(conversation: Conversation, api: str, max_tokens: int) -> dict[str, Any]:
    out = to_request(conversation, api, model=MODEL)
    out["max_tokens"] = max_tokens
    return out


def first_user_text(conversation: Conversation) -> str:
    first = next(m for m in conversation.messages if m.role == "user")
    return "".join(p.text for p in first.parts if isinstance(p, Text))


def task_of(sent: dict[str, Any]) -> str:
    """The text of the first user message of a Chat or Messages body."""
    first = next(m for m in sent["messages"] if m["role"] == "user")
    content = first["content"]
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))


def assert_real_overflow(error: BaseException) -> None:
    classified = classify(error)
    assert classified.kind is ErrorKind.CONTEXT_OVERFLOW
    assert classified.provider == "llama.cpp"
    assert classified.limit == N_CTX
    assert classified.prompt_tokens is not None
    assert classified.prompt_tokens > N_CTX


def assert_recovered(report: CallReport, wire: Wire, conversation: Conversation) -> None:
    assert report.recovered
    assert report.level >= 1
    assert report.recovery.errors[0].provider == "llama.cpp"
    assert wire.statuses[0] == 400  # the managed history still overflowed
    recovered = wire.answered()[0]
    assert task_of(recovered) == first_user_text(conversation)
    assert len(json.dumps(recovered)) < len(json.dumps(wire.bodies[0]))


# --------------------------------------------------------------------------- overflow, recovered


def overflow_then_recover(url: str, conversation: Conversation, api: str) -> tuple[Any, CallReport, Wire]:
    """The call unwrapped fails with the server's error; wrapped, it is answered. Both on one client."""
    request = body(conversation, api, max_tokens=8)
    wire = Wire()
    if api == "openai-chat":
        with chat_client(url, wire) as client, pytest.raises(sdk("openai").BadRequestError) as refused:
            client.chat.completions.create(**request, temperature=0)
        assert_real_overflow(refused.value)
        wire.bodies.clear()
        wire.statuses.clear()
        with chat_client(url, wire) as client, session() as managed:
            answer = wrap(client, session=managed).chat.completions.create(**request, temperature=0)
        assert isinstance(answer, sdk("openai").types.chat.ChatCompletion)
        assert answer.choices[0].message.content
    else:
        options = {"extra_body": {"temperature": 0}}
        with messages_client(url, wire) as client, pytest.raises(sdk("anthropic").BadRequestError) as refused:
            client.messages.create(**request, **options)
        assert_real_overflow(refused.value)
        wire.bodies.clear()
        wire.statuses.clear()
        with messages_client(url, wire) as client, session() as managed:
            answer = wrap(client, session=managed).messages.create(**request, **options)
        assert isinstance(answer, sdk("anthropic").types.Message)
        assert answer.content[0].text
    report = answer.toolbudget_report
    assert isinstance(report, CallReport)
    assert_recovered(report, wire, conversation)
    return answer, report, wire


@pytest.mark.parametrize("api", ["openai-chat", "anthropic"])
def test_a_synthetic_tool_session_over_the_window_is_recovered(llama_url: str, api: str) -> None:
    overflow_then_recover(llama_url, synthetic(), api)


@pytest.mark.shared
@pytest.mark.parametrize("api", ["openai-chat", "anthropic"])
def test_a_real_transcript_over_the_window_is_recovered(llama_url: str, api: str) -> None:
    overflow_then_recover(llama_url, transcript(), api)


# --------------------------------------------------------------------------- streams


def test_a_chat_stream_is_recovered_before_its_first_chunk(llama_url: str) -> None:
    conversation = synthetic()
    wire = Wire()
    reports: list[CallReport] = []
    with (
        session() as managed,
        wrap(chat_client(llama_url, wire), session=managed, on_report=reports.append) as client,
    ):
        stream = client.chat.completions.create(
            **body(conversation, "openai-chat", 8), temperature=0, stream=True
        )
        assert isinstance(stream, sdk("openai").Stream)
        assert wire.statuses[0] == 400  # refused before anything streamed
        chunks = [c.choices[0] for c in stream if c.choices]
    assert "".join(c.delta.content or "" for c in chunks)
    finish = chunks[-1].finish_reason
    assert finish in ("length", "stop")
    (report,) = reports
    assert report.stream
    assert report.stream_finished
    assert_recovered(report, wire, conversation)
    assert len(wire.bodies) == len(report.attempts) + 1  # a stream is neither escalated nor continued
    # the report saw what the stream said: cut off at max_tokens, or finished
    assert (report.final_cutoff.reason if report.final_cutoff else "stop") == finish


def test_a_messages_stream_is_recovered_before_its_first_event(llama_url: str) -> None:
    conversation = synthetic()
    wire = Wire()
    reports: list[CallReport] = []
    with (
        session() as managed,
        wrap(messages_client(llama_url, wire), session=managed, on_report=reports.append) as client,
    ):
        request = body(conversation, "anthropic", 8)
        with client.messages.stream(**request, extra_body={"temperature": 0}) as stream:
            assert wire.statuses[0] == 400
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
    assert text
    assert final.stop_reason in ("max_tokens", "end_turn")
    (report,) = reports
    assert_recovered(report, wire, conversation)
    assert len(wire.bodies) == len(report.attempts) + 1
    assert (report.final_cutoff.reason if report.final_cutoff else "end_turn") == final.stop_reason


# --------------------------------------------------------------------------- max_tokens=5, lengthened

STORY = [{"role": "user", "content": "Tell me a long story about a dragon who learns to cook."}]


def test_max_tokens_5_is_escalated_and_continued_on_chat(llama_url: str) -> None:
    wire = Wire()
    with chat_client(llama_url, wire) as client:
        short = client.chat.completions.create(model=MODEL, messages=STORY, max_tokens=5, temperature=0)
    assert short.choices[0].finish_reason == "length"
    wire.bodies.clear()
    wire.statuses.clear()
    with chat_client(llama_url, wire) as client, Session(store="memory:", policy=Policy()) as managed:
        answer = wrap(client, session=managed).chat.completions.create(
            model=MODEL, messages=STORY, max_tokens=5, temperature=0
        )
    report = answer.toolbudget_report
    text = answer.choices[0].message.content
    assert [b["max_tokens"] for b in wire.bodies[:3]] == [5, 10, 20]
    assert (report.escalations, report.continuations) == (2, 2)
    assert [c.reason for c in report.cutoffs][:3] == ["length"] * 3
    assert text.startswith(short.choices[0].message.content)  # greedy: the longer answer begins the same
    assert len(text) > 2 * len(short.choices[0].message.content)
    pieces = [json.loads(json.dumps(b)) for b in wire.bodies[3:]]
    assert pieces[0]["messages"][-2]["role"] == "assistant"
    assert answer.usage.completion_tokens > 20  # the continued pieces, summed
    assert answer.choices[0].finish_reason == ("length" if report.final_cutoff else "stop")
    print(f"\nmax_tokens=5 on chat, merged ({answer.usage.completion_tokens} tokens): {text!r}")


def test_max_tokens_5_is_escalated_and_continued_on_messages(llama_url: str) -> None:
    wire = Wire()
    options = {"extra_body": {"temperature": 0}}
    with messages_client(llama_url, wire) as client:
        short = client.messages.create(model=MODEL, messages=STORY, max_tokens=5, **options)
    assert short.stop_reason == "max_tokens"
    wire.bodies.clear()
    wire.statuses.clear()
    with messages_client(llama_url, wire) as client, Session(store="memory:", policy=Policy()) as managed:
        answer = wrap(client, session=managed).messages.create(
            model=MODEL, messages=STORY, max_tokens=5, **options
        )
    report = answer.toolbudget_report
    assert [b["max_tokens"] for b in wire.bodies[:3]] == [5, 10, 20]
    assert report.escalations == 2
    assert report.continuations >= 1
    assert len(answer.content) == 1
    text = answer.content[0].text
    assert text.startswith(short.content[0].text)
    assert len(text) > 2 * len(short.content[0].text)
    assert answer.usage.output_tokens > 20
    assert answer.stop_reason == ("max_tokens" if report.final_cutoff else "end_turn")
    print(f"\nmax_tokens=5 on messages, merged ({answer.usage.output_tokens} tokens): {text!r}")


# --------------------------------------------------------------------------- a task of three windows

LOG_TASK_HEAD = "One step of this deployment log failed. Read it and say which."
LOG_TASK_TAIL = "Which step failed? Answer with its number only."


def pasted_log_task() -> str:
    """A user task that is itself about three windows: a pasted log between its ask and its question."""
    log = "".join(f"12:{i // 60:02d}:{i % 60:02d} deploy step {i} finished ok\n" for i in range(180))
    return f"{LOG_TASK_HEAD}\n{log}{LOG_TASK_TAIL}"


def send_once(url: str, api: str, request: dict[str, Any], wire: Wire, managed: Session | None) -> Any:
    """One call of ``api``'s real SDK, wrapped with ``managed`` (or not, when it is ``None``)."""
    if api == "openai-chat":
        with chat_client(url, wire) as client:
            sdk_client = client if managed is None else wrap(client, session=managed)
            return sdk_client.chat.completions.create(**request, temperature=0)
    with messages_client(url, wire) as client:
        sdk_client = client if managed is None else wrap(client, session=managed)
        return sdk_client.messages.create(**request, extra_body={"temperature": 0})


@pytest.mark.parametrize("api", ["openai-chat", "anthropic"])
def test_a_task_of_three_windows_is_cut_answered_and_recallable(llama_url: str, api: str) -> None:
    task = pasted_log_task()
    request = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": task}]}
    refusals = {"openai-chat": sdk("openai").BadRequestError, "anthropic": sdk("anthropic").BadRequestError}
    with pytest.raises(refusals[api]) as refused:
        send_once(llama_url, api, request, Wire(), None)
    assert_real_overflow(refused.value)
    assert 2.5 * N_CTX < (classify(refused.value).prompt_tokens or 0) < 3.5 * N_CTX  # three windows
    wire = Wire()
    with session() as managed:
        answer = send_once(llama_url, api, request, wire, managed)
        report = answer.toolbudget_report
        assert isinstance(report, CallReport)
        assert report.recovered and report.level == 3 and wire.statuses[0] == 400
        sent = task_of(wire.answered()[0])
        assert sent.startswith(LOG_TASK_HEAD) and sent.endswith(LOG_TASK_TAIL)
        (key,) = report.attempts[-1].task_keys
        assert f"<<tb:{key}>>" in sent
        assert managed.original(key) == task  # byte for byte, through the session
        assert "deploy step 150 finished ok" in managed.handle_recall({"key": key, "grep": "step 150 "})
    tokens = [e.prompt_tokens for e in report.recovery.errors]
    print(f"\n{api}: a task of {len(task)} chars refused at {tokens} tokens; {len(sent)} chars answered")


# --------------------------------------------------------------------------- the next turn


@pytest.mark.parametrize("api", ["openai-chat", "anthropic"])
def test_the_next_turn_starts_at_the_level_that_fit(llama_url: str, api: str) -> None:
    """A session refused once: its next, bigger request is answered at the first try."""
    conversation = synthetic()
    with session() as managed:
        wire = Wire()
        first = send_once(llama_url, api, body(conversation, api, 8), wire, managed)
        assert wire.statuses[0] == 400 and wire.statuses[-1] == 200 and len(wire.statuses) >= 2
        level = first.toolbudget_report.level
        text = first.choices[0].message.content if api == "openai-chat" else first.content[0].text
        grown = Conversation(
            conversation.id,
            conversation.source,
            (*conversation.messages, Message("assistant", (Text(text),)), Message("user", (Text(TASK),))),
            conversation.system,
        )
        wire = Wire()
        second = send_once(llama_url, api, body(grown, api, 8), wire, managed)
        report = second.toolbudget_report
        # One request for the prompt, answered at once; any others continue the cut answer.
        assert wire.statuses == [200] * (1 + report.escalations + report.continuations)
        assert report.recovery.remembered and not report.recovery.errors and report.level >= level
        assert len(report.attempts) == 1
        assert task_of(wire.bodies[0]) == TASK
    print(f"\n{api}: first call level {level}, second call level {report.level}, statuses {wire.statuses}")


# --------------------------------------------------------------------------- sync and async alike


@pytest.mark.parametrize("api", ["openai-chat", "anthropic"])
def test_sync_and_async_clients_send_the_same_bytes_to_the_real_server(llama_url: str, api: str) -> None:
    """One scripted call, over the window and cut by ``max_tokens``, through both clients: one flow."""
    import asyncio

    httpx2 = sdk("httpx2")
    greedy = {"temperature": 0} if api == "openai-chat" else {"extra_body": {"temperature": 0}}
    request = {**body(synthetic(), api, 4), **greedy}
    policy = Policy(max_token_escalations=1)

    def sync_call() -> tuple[list[bytes], Any]:
        sent: list[bytes] = []
        http = httpx2.Client(event_hooks={"request": [lambda r: sent.append(r.content)]}, timeout=120)
        with Session("parity", store="memory:", policy=policy) as managed:
            if api == "openai-chat":
                client: Any = wrap(
                    sdk("openai").OpenAI(
                        base_url=f"{llama_url}/v1", api_key="x", max_retries=0, http_client=http
                    ),
                    session=managed,
                )
                answer = client.chat.completions.create(**request)
            else:
                client = wrap(
                    sdk("anthropic").Anthropic(
                        base_url=llama_url, api_key="x", max_retries=0, http_client=http
                    ),
                    session=managed,
                )
                answer = client.messages.create(**request)
        http.close()
        return sent, answer

    async def async_call() -> tuple[list[bytes], Any]:
        sent: list[bytes] = []

        async def record(r: Any) -> None:
            sent.append(r.content)

        http = httpx2.AsyncClient(event_hooks={"request": [record]}, timeout=120)
        with Session("parity", store="memory:", policy=policy) as managed:
            if api == "openai-chat":
                client: Any = wrap(
                    sdk("openai").AsyncOpenAI(
                        base_url=f"{llama_url}/v1", api_key="x", max_retries=0, http_client=http
                    ),
                    session=managed,
                )
                answer = await client.chat.completions.create(**request)
            else:
                client = wrap(
                    sdk("anthropic").AsyncAnthropic(
                        base_url=llama_url, api_key="x", max_retries=0, http_client=http
                    ),
                    session=managed,
                )
                answer = await client.messages.create(**request)
        await http.aclose()
        return sent, answer

    varying = {"id", "created", "timings"}  # the server's own ids and clocks
    sent, answer = sync_call()
    sent_async, answer_async = asyncio.run(async_call())
    report = answer.toolbudget_report
    assert report.recovered and report.escalations == 1
    assert len(sent) == len(report.attempts) + 1 + report.escalations + report.continuations
    assert sent_async == sent  # byte for byte, request by request
    assert answer_async.toolbudget_report.as_dict() == report.as_dict()
    assert answer_async.model_dump(exclude=varying) == answer.model_dump(exclude=varying)
