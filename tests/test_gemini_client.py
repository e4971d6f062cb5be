"""``wrap(google.genai.Client(...))``: the real google-genai SDK, managed, against a scripted endpoint.

The SDK serialises, sends and parses for real (its ``base_url`` points at a
local server playing the documented ``generateContent`` shapes and Gemini's
own overflow error), sync and async.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import orjson
import pytest

from scripted_http import Answer, Script, scripted_server
from toolbudget import CallReport, Policy, Session, UnsupportedClient, wrap
from toolbudget.recovery.output import continuation_prompt

genai = pytest.importorskip("google.genai")
# With aiohttp installed, google-genai's async client subclasses its session, which aiohttp warns about.
pytestmark = pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning")
types = genai.types

MODEL = "gemini-2.5-flash"
OVERFLOW = Answer(
    status=400,
    data={
        "error": {
            "code": 400,
            "message": "The input token count (1200293) exceeds the maximum number of tokens allowed "
            "(1048576).",
            "status": "INVALID_ARGUMENT",
        }
    },
)


def reply(text: str, stop: str) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": stop, "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 7, "totalTokenCount": 107},
        "modelVersion": MODEL,
    }


def script() -> Script:
    return Script(
        [
            OVERFLOW,
            Answer(data=reply("Once upon a ", "MAX_TOKENS")),
            Answer(data=reply("Once upon a time, ", "MAX_TOKENS")),
            Answer(data=reply("there was a flow.", "STOP")),
        ]
    )


def turns(lines: int = 600) -> list[Any]:
    out: list[Any] = [types.Content(role="user", parts=[types.Part(text="Find the bug.")])]
    for i in range(8):
        output = "".join(f"line {j} of result {i}: value={j * i}\n" for j in range(lines))
        call = types.FunctionCall(id=f"c{i}", name="bash", args={"i": i})
        out.append(types.Content(role="model", parts=[types.Part(function_call=call)]))
        answer = types.FunctionResponse(id=f"c{i}", name="bash", response={"output": output})
        out.append({"role": "user", "parts": [{"function_response": answer.model_dump(exclude_none=True)}]})
    return out


def config(limit: int = 64) -> Any:
    declaration = types.FunctionDeclaration(
        name="bash", description="run", parameters_json_schema={"type": "object"}
    )
    return types.GenerateContentConfig(
        max_output_tokens=limit,
        system_instruction="Be brief.",
        tools=[types.Tool(function_declarations=[declaration])],
        temperature=0.2,
    )


def client(url: str) -> Any:
    return genai.Client(api_key="k", http_options=types.HttpOptions(base_url=url, api_version="v1beta"))


def session(name: str) -> Session:
    return Session(name, store="memory:", policy=Policy(max_token_escalations=1))


def limits(bodies: list[dict[str, Any]]) -> list[Any]:
    return [b.get("generationConfig", {}).get("maxOutputTokens") for b in bodies]


def test_generate_content_recovers_escalates_continues_and_merges() -> None:
    played, reports = script(), list[CallReport]()
    history = turns()
    before = copy.deepcopy(history)
    with scripted_server(played) as url, session("gemini") as s:
        raw = client(url)
        gemini = wrap(raw, session=s, on_report=reports.append)
        assert isinstance(gemini, type(raw))
        got = gemini.models.generate_content(model=MODEL, contents=history, config=config())
    assert isinstance(got, types.GenerateContentResponse)
    assert got.text == "Once upon a time, there was a flow."
    assert got.candidates[0].finish_reason == types.FinishReason.STOP
    assert history == before  # the caller's turns are untouched
    bodies = played.bodies
    assert len(bodies) == 4 and len(orjson.dumps(bodies[1])) < len(orjson.dumps(bodies[0]))
    assert all(p.endswith(f"/v1beta/models/{MODEL}:generateContent") for p in played.paths)
    assert limits(bodies) == [64, 64, 128, 128]
    assert all(b["generationConfig"]["temperature"] == 0.2 for b in bodies)  # the rest of the config kept
    assert bodies[3]["contents"][-2] == {"role": "model", "parts": [{"text": "Once upon a time, "}]}
    assert bodies[3]["contents"][-1]["parts"][0]["text"] == continuation_prompt(False)
    report = got.toolbudget_report
    assert reports == [report]
    assert report.recovered and (report.escalations, report.continuations) == (1, 1)


def test_the_async_client_sends_the_same_bytes_and_reports_the_same() -> None:
    sync, asyn = script(), script()
    with scripted_server(sync) as url, session("a") as s:
        answer = wrap(client(url), session=s).models.generate_content(
            model=MODEL, contents=turns(), config=config()
        )

    async def go(url: str) -> Any:
        raw = client(url)
        with session("a") as s:
            try:
                return await wrap(raw, session=s).aio.models.generate_content(
                    model=MODEL, contents=turns(), config=config()
                )
            finally:
                await raw.aio.aclose()

    with scripted_server(asyn) as url:
        again = asyncio.run(go(url))
    assert asyn.bodies == sync.bodies
    assert again.text == answer.text
    assert again.toolbudget_report.as_dict() == answer.toolbudget_report.as_dict()


def chunks(text: str, stop: str) -> list[dict[str, Any]]:
    first = {"candidates": [{"content": {"role": "model", "parts": [{"text": text[:4]}]}, "index": 0}]}
    return [first, reply(text[4:], stop)]


def test_a_stream_is_recovered_before_its_first_chunk_and_watched_to_its_end() -> None:
    played = Script([OVERFLOW, Answer(sse=chunks("Once upon", "MAX_TOKENS"))])
    reports: list[CallReport] = []
    with scripted_server(played) as url, session("stream") as s:
        stream = wrap(client(url), session=s, on_report=reports.append).models.generate_content_stream(
            model=MODEL, contents=turns(), config=config()
        )
        assert len(played.bodies) == 2  # the overflow was met, and recovered, before the caller read a chunk
        text = "".join(chunk.text for chunk in stream)
    assert text == "Once upon"
    assert all(":streamGenerateContent" in p for p in played.paths)
    (report,) = reports
    assert report.recovered and report.stream_finished
    assert report.final_cutoff is not None and report.final_cutoff.reason == "MAX_TOKENS"


def test_count_tokens_counts_the_managed_turns() -> None:
    played = Script([Answer(data={"totalTokens": 42})])
    history = turns(6000)  # results past the per-result cap
    with scripted_server(played) as url, session("count") as s:
        got = wrap(client(url), session=s).models.count_tokens(model=MODEL, contents=history)
    assert got.total_tokens == 42
    sent = played.bodies[0]["contents"]
    given = [
        t.model_dump(mode="json", by_alias=True, exclude_none=True) if hasattr(t, "model_dump") else t
        for t in history
    ]
    assert len(orjson.dumps(sent)) < len(orjson.dumps(given)) / 2


def test_what_cannot_be_managed_is_refused_and_a_single_turn_is_the_sdks_own() -> None:
    played = Script([Answer(data=reply("ok", "STOP"))])

    def tool(path: str) -> str:
        """Read a file."""
        return path

    with scripted_server(played) as url, session("refuse") as s:
        gemini = wrap(client(url), session=s, recall=True)
        with pytest.raises(UnsupportedClient, match="chat"):
            _ = gemini.chats
        with pytest.raises(UnsupportedClient, match="automatic function calling"):
            gemini.models.generate_content(model=MODEL, contents=turns()[:1], config={"tools": [tool]})
        off = {"tools": [tool], "automatic_function_calling": {"disable": True}}
        gemini.models.generate_content(model=MODEL, contents=turns()[:1], config=off)
        assert gemini.models.generate_content(model=MODEL, contents="Hello").text == "ok"
    assert len(played.bodies) == 2  # the refused calls sent nothing
    names = [d["name"] for t in played.bodies[0]["tools"] for d in t["functionDeclarations"]]
    assert names == ["tool", "toolbudget_recall"]  # the caller's callable, and recall added once
    assert "tools" not in played.bodies[1]  # a single string turn: sent as the SDK makes it


def test_the_example_agent_finishes_with_results_cut_recalled_and_every_request_valid() -> None:
    import runpy
    from pathlib import Path

    import httpx

    import toolbudget

    example = runpy.run_path(str(Path(__file__).resolve().parents[1] / "examples" / "gemini_agent.py"))
    sent: list[dict[str, Any]] = []

    def model(request: httpx.Request) -> httpx.Response:
        sent.append(orjson.loads(request.content))
        answer: httpx.Response = example["scripted"](request)
        return answer

    http = httpx.Client(transport=httpx.MockTransport(model))
    raw = genai.Client(api_key="offline", http_options=types.HttpOptions(httpx_client=http))
    shown = example["run"](raw, "scripted")
    assert len(shown) == 9 and len(sent) == 10  # eight searches, one recall, and the answer
    assert all(toolbudget.MARKER_RE.search(text) for text in shown[:8])
    assert all(len(text) < 60_000 / 5 for text in shown[:8])  # never the whole output
    assert shown[8].splitlines()[1] == example["search_logs"]("q0").splitlines()[0]  # recalled, exactly
    for body in sent:
        assert toolbudget.validate(body, api="gemini") == []
    offered = [d["name"] for t in sent[0]["tools"] for d in t["functionDeclarations"]]
    assert offered == ["search_logs", toolbudget.RECALL_TOOL]
