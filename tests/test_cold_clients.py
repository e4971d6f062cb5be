"""The wrapped SDK clients tell the schedule when each call is made.

Each SDK sends for real to a scripted endpoint; the clock the wrappers read
(``toolbudget.clients._call.arrival_time``) is replaced by a script of
times, with one idle gap longer than the cache's TTL. The request after the
gap must go out as a session told that time would manage it: everything
eligible compacted, unlike the same calls made without the gap.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from bash_history import bash_history
from scripted_http import Answer, Script, scripted_server
from test_clients import (
    Upstream,
    anthropic_client,
    async_anthropic_client,
    async_openai_client,
    completion,
    message,
    openai_client,
    response,
    status,
)
from toolbudget import Policy, Session, to_request, wrap
from toolbudget.clients import _call
from toolbudget.model import Conversation
from toolbudget.replay import requests_of

GAP_AT = 7

# With aiohttp installed, google-genai's async client subclasses its session, which aiohttp warns about.
pytestmark = pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning")


def conversation(turns: int = 10, size: int = 3_200) -> Conversation:
    """Results just over the compaction minimum: only a cold request compacts them early."""
    return bash_history(turns, size, tool="bash")


def bodies(api: str, model: str = "m") -> list[dict[str, Any]]:
    return [to_request(prefix, api, model=model) for prefix in requests_of(conversation())]


def times(count: int, gap: float | None) -> list[float]:
    out, now = [], 2_000_000.0
    for n in range(count):
        now += gap if gap is not None and n == GAP_AT else 10.0
        out.append(now)
    return out


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[float]], None]:
    """Set the times the wrappers read, one per call."""

    def script(values: list[float]) -> None:
        left = iter(values)
        monkeypatch.setattr(_call, "arrival_time", lambda: next(left))

    return script


def expected(api: str, sent: list[dict[str, Any]], at: list[float]) -> list[dict[str, Any]]:
    """What one session told each arrival makes of the bodies as the SDK sent them unmanaged."""
    with Session("w", store="memory:", policy=Policy()) as session:
        return [
            orjson.loads(orjson.dumps(session.manage(b, api, now=t).body))
            for b, t in zip(sent, at, strict=True)
        ]


def markers(body: dict[str, Any]) -> int:
    return orjson.dumps(body).count(b"[toolbudget:")


def check(api: str, run: Callable[[list[float]], tuple[list[dict[str, Any]], list[dict[str, Any]]]]) -> None:
    """``run(times)`` makes every call through a wrapped client at those times; returns what
    the SDK sends of each body unwrapped, and what the endpoint received from the wrapped one."""
    count = len(bodies(api, MODEL.get(api, "m")))
    plain_in, plain_out = run(times(count, None))
    idle_in, idle_out = run(times(count, 600.0))
    assert plain_in == idle_in
    # The request after the gap: compacted as a session told the same times compacts it.
    assert idle_out == expected(api, idle_in, times(count, 600.0))
    assert plain_out[:GAP_AT] == idle_out[:GAP_AT]
    assert markers(idle_out[GAP_AT]) > markers(plain_out[GAP_AT])


Send = Callable[[Any, dict[str, Any]], Any]


def _mock(
    api: str, reply: Any, factory: Callable[[Upstream], Any], send: Send, clock: Callable[[list[float]], None]
) -> Callable[[list[float]], tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    def run(at: list[float]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        raw = Upstream(reply)
        client = factory(raw)
        for body in bodies(api):
            send(client, body)
        managed = Upstream(reply)
        clock(at)
        with Session("w", store="memory:", policy=Policy()) as session:
            wrapped = wrap(factory(managed), session=session)
            for body in bodies(api):
                send(wrapped, body)
        return raw.bodies, managed.bodies

    return run


def test_anthropic_messages_create(clock: Callable[[list[float]], None]) -> None:
    check(
        "anthropic",
        _mock("anthropic", message("ok"), anthropic_client, lambda c, b: c.messages.create(**b), clock),
    )


def test_async_anthropic_messages_create(clock: Callable[[list[float]], None]) -> None:
    def send(client: Any, body: dict[str, Any]) -> Any:
        return asyncio.run(client.messages.create(**body))

    check("anthropic", _mock("anthropic", message("ok"), async_anthropic_client, send, clock))


def test_openai_chat_completions(clock: Callable[[list[float]], None]) -> None:
    def send(client: Any, body: dict[str, Any]) -> Any:
        return client.chat.completions.create(**body)

    check("openai-chat", _mock("openai-chat", completion("ok"), openai_client, send, clock))


def test_async_openai_responses(clock: Callable[[list[float]], None]) -> None:
    def send(client: Any, body: dict[str, Any]) -> Any:
        return asyncio.run(client.responses.create(**body))

    check("openai-responses", _mock("openai-responses", response("ok"), async_openai_client, send, clock))


def test_counting_tokens_is_no_arrival(monkeypatch: pytest.MonkeyPatch) -> None:
    """A token count neither reads nor refreshes the cache: the wrappers read no clock for one."""

    def no_clock() -> float:
        raise AssertionError("a token count read the clock")

    monkeypatch.setattr(_call, "arrival_time", no_clock)
    upstream = Upstream(status(200, {"input_tokens": 5}))
    body = bodies("anthropic")[-1]
    with Session("w", store="memory:") as session:
        counted = wrap(anthropic_client(upstream), session=session).messages.count_tokens(
            model=body["model"], messages=body["messages"], tools=body["tools"]
        )
    assert counted.input_tokens == 5 and len(upstream.bodies) == 1


def test_the_one_hour_cache_asked_for_is_not_cold_after_ten_minutes(
    clock: Callable[[list[float]], None],
) -> None:
    """Anthropic's price model follows the request's ``cache_control``: ``ttl: "1h"`` lives an hour."""
    system = [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    count = len(bodies("anthropic"))

    def sent(at: list[float], one_hour: bool) -> list[dict[str, Any]]:
        upstream = Upstream(message("ok"))
        clock(at)
        with Session("w", store="memory:") as session:
            client = wrap(anthropic_client(upstream), session=session)
            for body in bodies("anthropic"):
                client.messages.create(**({**body, "system": system} if one_hour else body))
        return upstream.bodies

    warm = sent(times(count, None), True)
    assert sent(times(count, 600.0), True) == warm
    # Without the ttl asked, the five-minute cache is cold after the same gap.
    assert markers(sent(times(count, 600.0), False)[GAP_AT]) > markers(
        sent(times(count, None), False)[GAP_AT]
    )


# --- the SDKs that talk HTTP to the scripted endpoints: google-genai and botocore ------------------


SendAll = Callable[[Any, list[dict[str, Any]]], None]


def _scripted(
    api: str,
    answer: Answer,
    make: Callable[[str], Any],
    send_all: SendAll,
    clock: Callable[[list[float]], None],
) -> Callable[[list[float]], tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    def run(at: list[float]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        sent = bodies(api, MODEL[api])
        raw = Script([answer] * len(sent))
        with scripted_server(raw) as url:
            send_all(make(url), sent)
        managed = Script([answer] * len(sent))
        clock(at)
        with scripted_server(managed) as url, Session("w", store="memory:", policy=Policy()) as session:
            send_all(wrap(make(url), session=session), sent)
        return raw.bodies, managed.bodies

    return run


MODEL = {"gemini": "gemini-2.5-flash", "bedrock-converse": "anthropic.claude-sonnet-4-5"}


def _bedrock_client(url: str) -> Any:
    pytest.importorskip("botocore")
    import botocore.config
    import botocore.session

    return botocore.session.get_session().create_client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        config=botocore.config.Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )


def test_bedrock_converse(clock: Callable[[list[float]], None]) -> None:
    answer = Answer(
        data={
            "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": 100, "outputTokens": 7, "totalTokens": 107},
            "metrics": {"latencyMs": 10},
        }
    )

    def send(client: Any, sent: list[dict[str, Any]]) -> None:
        for body in sent:
            client.converse(modelId=MODEL["bedrock-converse"], **body)

    def run_check() -> None:
        run = _scripted("bedrock-converse", answer, _bedrock_client, send, clock)
        count = len(bodies("bedrock-converse", MODEL["bedrock-converse"]))
        plain_in, plain_out = run(times(count, None))
        idle_in, idle_out = run(times(count, 600.0))
        assert plain_in == idle_in
        # botocore sends the body without modelId (it is in the path): manage what the wrapper saw.
        seen = [{**b, "modelId": MODEL["bedrock-converse"]} for b in idle_in]
        want = [
            {k: v for k, v in b.items() if k != "modelId"}
            for b in expected("bedrock-converse", seen, times(count, 600.0))
        ]
        assert idle_out == want
        assert plain_out[:GAP_AT] == idle_out[:GAP_AT]
        assert markers(idle_out[GAP_AT]) > markers(plain_out[GAP_AT])

    run_check()


def test_gemini_generate_content_sync_and_async(clock: Callable[[list[float]], None]) -> None:
    genai = pytest.importorskip("google.genai")
    types = genai.types
    answer = Answer(
        data={
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 7, "totalTokenCount": 107},
            "modelVersion": MODEL["gemini"],
        }
    )

    def make(url: str) -> Any:
        return genai.Client(api_key="k", http_options=types.HttpOptions(base_url=url, api_version="v1beta"))

    def kwargs(body: dict[str, Any]) -> dict[str, Any]:
        contents = [types.Content.model_validate(c) for c in body["contents"]]
        config = types.GenerateContentConfig(
            tools=[types.Tool.model_validate(t) for t in body.get("tools", [])],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )
        return {"model": MODEL["gemini"], "contents": contents, "config": config}

    def send_sync(client: Any, sent: list[dict[str, Any]]) -> None:
        for body in sent:
            client.models.generate_content(**kwargs(body))

    def send_async(client: Any, sent: list[dict[str, Any]]) -> None:
        async def go() -> None:
            try:
                for body in sent:
                    await client.aio.models.generate_content(**kwargs(body))
            finally:
                await client.aio.aclose()

        asyncio.run(go())

    for send in (send_sync, send_async):
        check("gemini", _scripted("gemini", answer, make, send, clock))
