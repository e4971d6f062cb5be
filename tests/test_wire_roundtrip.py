"""Round trips, shape errors and conversions for the OpenAI, Gemini and Bedrock wire modules.

The example bodies in ``wire_examples/<api>/`` are written from each API's
documented request shapes. An exact round trip is checked twice: once through
origin reuse (the very same dict comes back), and once with every origin
stripped, which forces the real render path to rebuild each object from the
canonical fields, extras and form hints alone.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import orjson
import pytest

from toolbudget.errors import ShapeError
from toolbudget.model import (
    Data,
    Media,
    Message,
    Opaque,
    Request,
    Text,
    Thinking,
    ToolCall,
    ToolDef,
    ToolResult,
)
from toolbudget.wire import anthropic, bedrock, gemini, openai_chat, openai_responses

EXAMPLES = Path(__file__).parent / "wire_examples"
MODULES: dict[str, ModuleType] = {
    "openai-chat": openai_chat,
    "openai-responses": openai_responses,
    "gemini": gemini,
    "bedrock-converse": bedrock,
}
CASES = [(api, path) for api in MODULES for path in sorted((EXAMPLES / api).glob("*.json"))]
CASE_IDS = [f"{api}/{path.stem}" for api, path in CASES]

T = TypeVar("T")


def load(api: str, name: str) -> dict[str, Any]:
    value = orjson.loads((EXAMPLES / api / f"{name}.json").read_bytes())
    assert isinstance(value, dict)
    return value


def strip(value: T) -> T:
    """Rebuild every dataclass through its constructor, which leaves ``origin`` empty."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kwargs = {f.name: strip(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
        return type(value)(**kwargs)
    if isinstance(value, tuple):
        return tuple(strip(v) for v in value)  # type: ignore[return-value]
    return value


def calls(request: Request) -> list[ToolCall]:
    return [p for m in request.messages for p in m.parts if isinstance(p, ToolCall)]


def results(request: Request) -> list[ToolResult]:
    return [p for m in request.messages for p in m.parts if isinstance(p, ToolResult)]


def walk(request: Request) -> Iterator[Any]:
    """Every canonical object of a request (messages, parts, nested result content, tools)."""
    yield request
    yield from request.system
    yield from request.tools
    for message in request.messages:
        yield message
        for part in message.parts:
            yield part
            if isinstance(part, ToolResult):
                yield from part.content


# --- exact round trips ---------------------------------------------------------------------


def test_every_api_has_examples() -> None:
    for api in MODULES:
        assert len(list((EXAMPLES / api).glob("*.json"))) >= 4, api


@pytest.mark.parametrize(("api", "path"), CASES, ids=CASE_IDS)
def test_round_trip_is_exact(api: str, path: Path) -> None:
    module = MODULES[api]
    body = orjson.loads(path.read_bytes())
    before = copy.deepcopy(body)
    request = module.parse(body)
    assert request.api == api
    assert module.render(request) is body
    stripped = strip(request)
    assert all(obj.origin is None for obj in walk(stripped))
    assert module.render(stripped) == body
    assert body == before


@pytest.mark.parametrize(("api", "path"), CASES, ids=CASE_IDS)
def test_round_trip_from_json_text(api: str, path: Path) -> None:
    module = MODULES[api]
    text = path.read_bytes()
    request = module.parse(text)
    assert orjson.loads(orjson.dumps(module.render(strip(request)))) == orjson.loads(text)


def _has_history_list(api: str, path: Path) -> bool:
    """Whether a body keeps its history as a list (a Responses ``input`` may be one string)."""
    key = {"openai-responses": "input", "gemini": "contents"}.get(api, "messages")
    entries = orjson.loads(path.read_bytes()).get(key)
    return isinstance(entries, list) and bool(entries)


@pytest.mark.parametrize(("api", "path"), CASES, ids=CASE_IDS)
def test_one_canonical_message_per_wire_entry(api: str, path: Path) -> None:
    body = orjson.loads(path.read_bytes())
    request = MODULES[api].parse(body)
    key = {"openai-responses": "input", "gemini": "contents"}.get(api, "messages")
    entries = body.get(key, [])
    assert len(request.messages) == (1 if isinstance(entries, str) else len(entries))


LIST_CASES = [(api, path) for api, path in CASES if _has_history_list(api, path)]


@pytest.mark.parametrize(("api", "path"), LIST_CASES, ids=[f"{a}/{p.stem}" for a, p in LIST_CASES])
def test_untouched_messages_are_reused_when_one_changes(api: str, path: Path) -> None:
    module = MODULES[api]
    body = orjson.loads(path.read_bytes())
    request = module.parse(body)
    last = request.messages[-1]
    changed = dataclasses.replace(request, messages=(*request.messages[:-1], dataclasses.replace(last)))
    out = module.render(changed)
    key = {"openai-responses": "input", "gemini": "contents"}.get(api, "messages")
    assert out is not body
    assert out == body
    assert all(a is b for a, b in zip(out[key][:-1], body[key][:-1], strict=True))


# --- what parsing reads --------------------------------------------------------------------


def test_chat_roles_calls_and_results() -> None:
    request = openai_chat.parse(load("openai-chat", "parallel_tools"))
    assert request.system == ()
    developer = request.messages[0]
    assert developer.role == "system"
    assert "role:developer" in developer.form
    call = calls(request)[0]
    assert call.id == "call_Q3sPz1"
    assert call.arguments == {"location": "Paris, France", "unit": "celsius"}
    assert call.arguments_json == '{"location": "Paris, France", "unit": "celsius"}'
    assert call.arguments_ok
    first, second = results(request)
    assert (first.call_id, second.call_id) == ("call_Q3sPz1", "call_8jHx0a")
    assert request.messages[3].role == "tool"
    assert second.content == (Text("Error: upstream weather service timed out"),)
    assert request.tools[0].extra["function"] == {"strict": True}


def test_chat_keeps_null_absent_and_empty_content_apart() -> None:
    request = openai_chat.parse(load("openai-chat", "content_variants"))
    forms = [m.form for m in request.messages]
    assert "content:str" in forms[1]
    assert request.messages[1].parts == (Text(""),)
    assert "content:absent" in forms[2]
    assert "content:null" in forms[6]
    assert request.messages[6].extra["tool_calls"] is None
    refusal = request.messages[5].parts[1]
    assert isinstance(refusal, Text)
    assert refusal.form == ("refusal",)


def test_chat_truncated_arguments_custom_and_legacy_calls() -> None:
    request = openai_chat.parse(load("openai-chat", "custom_and_legacy"))
    custom, legacy, cut = calls(request)
    assert custom.form == ("custom",)
    assert isinstance(custom.arguments, str)
    assert custom.arguments.startswith("*** Begin Patch")
    assert legacy.id is None
    assert legacy.arguments == {"tz": "UTC"}
    assert not cut.arguments_ok
    assert cut.arguments is None
    assert cut.arguments_json == '{"tz": "Europe/Par'
    function_result = results(request)[1]
    assert function_result.call_id is None
    assert function_result.name == "get_time"
    assert request.messages[4].form == ("role:function",)
    assert results(request)[2].name == "get_time"
    assert request.tools[0].form[0] == "type:custom"


def test_chat_media() -> None:
    request = openai_chat.parse(load("openai-chat", "media"))
    parts = request.messages[0].parts
    image = parts[2]
    assert isinstance(image, Media)
    assert image.media_type == "image/png"
    assert image.url is not None
    assert image.url.startswith("data:image/png;base64,")
    assert image.extra["image_url"] == {"detail": "low"}
    audio = parts[6]
    assert isinstance(audio, Media)
    assert (audio.kind, audio.media_type) == ("audio", "audio/wav")


def test_responses_items_map_one_to_one() -> None:
    request = openai_responses.parse(load("openai-responses", "function_calls"))
    roles = [m.role for m in request.messages]
    assert roles == ["system", "user", "assistant", "assistant", "tool", "tool", "assistant", "user"]
    assert "type:absent" in request.messages[0].form
    call = request.messages[2].parts[0]
    assert isinstance(call, ToolCall)
    assert call.id == "call_unLAR8MvFNptuiZK6K6HCy5k"
    assert call.extra["id"] == "fc_67ca09c6bedc8190a7abfec07b1a1332"
    assert "instructions:null" in request.form
    assert request.system == ()


def test_responses_instructions_and_string_input() -> None:
    request = openai_responses.parse(load("openai-responses", "plain_string"))
    assert request.system == (Text("Talk like a pirate."),)
    assert request.messages == (Message("user", (Text("Are semicolons optional in JavaScript?"),)),)


def test_responses_reasoning() -> None:
    request = openai_responses.parse(load("openai-responses", "reasoning"))
    thinking = request.messages[2].parts[0]
    assert isinstance(thinking, Thinking)
    assert (
        thinking.text
        == "**Reading the file**\n\nI should open utils.py first.\n\n**Planning**\n\nThen run the tests."
    )
    assert thinking.signature == "gAAAAABoIPOFgHsNt3rQmZ4L0Xw=="
    assert thinking.extra["id"] == "rs_6820f383d7c08191846711c5df8233bc"
    empty = request.messages[5].parts[0]
    assert isinstance(empty, Thinking)
    assert empty.text is None
    assert empty.redacted


def test_responses_reasoning_summary_is_rebuilt_when_text_changes() -> None:
    request = openai_responses.parse(load("openai-responses", "reasoning"))
    thinking = request.messages[2].parts[0]
    assert isinstance(thinking, Thinking)
    edited = dataclasses.replace(thinking, text="shorter")
    message = dataclasses.replace(request.messages[2], parts=(edited,))
    out = openai_responses.render(
        dataclasses.replace(request, messages=(*request.messages[:2], message, *request.messages[3:]))
    )
    item = out["input"][2]
    assert item["summary"] == [{"type": "summary_text", "text": "shorter"}]
    assert item["encrypted_content"] == "gAAAAABoIPOFgHsNt3rQmZ4L0Xw=="
    assert item["id"] == "rs_6820f383d7c08191846711c5df8233bc"


def test_responses_previous_response_id_and_builtin_items() -> None:
    request = openai_responses.parse(load("openai-responses", "content_types"))
    assert request.extra["previous_response_id"].startswith("resp_")
    output = results(request)[0]
    assert isinstance(output.content[1], Media)
    builtin = openai_responses.parse(load("openai-responses", "builtin_items"))
    kinds = [(m.role, m.parts[0].type) for m in builtin.messages if isinstance(m.parts[0], Opaque)]
    assert ("assistant", "web_search_call") in kinds
    assert ("tool", "computer_call_output") in kinds
    assert ("assistant", "item_reference") in kinds
    assert [t.kind for t in builtin.tools][:3] == ["web_search", "file_search", "mcp"]
    custom = [c for c in calls(builtin) if "custom" in c.form]
    assert [c.id for c in custom] == ["call_patch_1"]


def test_gemini_parts() -> None:
    request = gemini.parse(load("gemini", "function_calling"))
    first = calls(request)[0]
    assert first.id == "8f2b1a0c"
    assert first.extra["thoughtSignature"].startswith("CqgCAcu98")
    ok, failed, data = results(request)
    assert ok.content == (Text("18C, cloudy"),)
    assert not ok.is_error
    assert failed.is_error
    assert failed.content == (Text("service unavailable"),)
    assert data.content == (Data({"brightness": 25, "colorTemperature": "warm"}),)
    assert data.name == "set_light_values"
    assert [t.name for t in request.tools] == [
        "get_current_temperature",
        "set_light_values",
        "googleSearch",
        "schedule_meeting",
        "urlContext",
    ]
    assert request.tools[2].kind == "googleSearch"


def test_gemini_roles_thoughts_and_missing_ids() -> None:
    request = gemini.parse(load("gemini", "thinking"))
    thought = request.messages[1].parts[0]
    assert isinstance(thought, Thinking)
    assert thought.text.startswith("**Calculating**")  # type: ignore[union-attr]
    assert [m.role for m in request.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert request.messages[2].form == ("role:function",)
    assert all(c.id is None for c in calls(request))
    noop = calls(request)[2]
    assert noop.arguments == {}
    assert "args:absent" in noop.form


def test_gemini_snake_case_and_system() -> None:
    request = gemini.parse(load("gemini", "snake_case"))
    assert request.system == (Text("Answer tersely."), Text("Use metric units."))
    assert "system:snake" in request.form
    assert request.extra["system_instruction"] == {"role": "user"}
    image = request.messages[0].parts[1]
    assert isinstance(image, Media)
    assert (image.kind, image.media_type) == ("image", "image/jpeg")
    assert calls(request)[0].extra["thought_signature"] == "c2lnbmF0dXJl"
    pdf = request.messages[3].parts[0]
    assert isinstance(pdf, Media)
    assert pdf.url == "https://generativelanguage.googleapis.com/v1beta/files/abc-123"
    assert "tool_config" in request.extra


def test_bedrock_blocks() -> None:
    request = bedrock.parse(load("bedrock-converse", "tool_use"))
    json_result, error_result, _ = results(request)
    assert json_result.content == (Data({"song": "Elemental Hotel", "artist": "8 Storey Hike"}),)
    assert not json_result.is_error
    assert "status" not in json_result.form
    assert error_result.is_error
    assert "status" in error_result.form
    assert request.extra["toolConfig"] == {"toolChoice": {"auto": {}}}
    assert [t.kind for t in request.tools] == ["function", "function", "cachePoint"]
    assert request.tools[0].parameters["required"] == ["sign"]
    reasoning = bedrock.parse(load("bedrock-converse", "reasoning")).messages[1].parts
    signed, redacted, unsigned = reasoning[:3]
    assert isinstance(signed, Thinking)
    assert signed.signature == "ErcBCkgIAhABGAIiQL0nZGt0b2tlbg=="
    assert isinstance(redacted, Thinking)
    assert redacted.redacted
    assert isinstance(unsigned, Thinking)
    assert unsigned.signature is None
    assert "signature" not in unsigned.form


def test_bedrock_media() -> None:
    request = bedrock.parse(load("bedrock-converse", "media"))
    image, pdf, s3_doc, text_doc, video = request.messages[0].parts[1:6]
    assert isinstance(image, Media)
    assert (image.kind, image.media_type, image.data) == (
        "image",
        "image/png",
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB",
    )
    assert isinstance(pdf, Media)
    assert pdf.extra["document"] == {"format": "pdf", "name": "Quarterly report"}
    assert isinstance(s3_doc, Media)
    assert s3_doc.url == "s3://amzn-s3-demo-bucket/notes.txt"
    assert isinstance(text_doc, Media)
    assert text_doc.form == ("source",)
    assert isinstance(video, Media)
    assert video.url is None


# --- shape errors --------------------------------------------------------------------------

SHAPE_ERRORS: list[tuple[str, Any, str]] = [
    ("openai-chat", {"model": "m"}, ""),
    ("openai-chat", {"messages": {}}, "messages"),
    ("openai-chat", {"messages": [{"role": "robot", "content": "x"}]}, "messages.0.role"),
    ("openai-chat", {"messages": [{"role": "user", "content": 3}]}, "messages.0.content"),
    (
        "openai-chat",
        {"messages": [{"role": "user", "content": [{"type": "video"}]}]},
        "messages.0.content.0.type",
    ),
    ("openai-chat", {"messages": [{"role": "user", "content": ["x"]}]}, "messages.0.content.0"),
    ("openai-chat", {"messages": [{"role": "tool", "content": "x"}]}, "messages.0.tool_call_id"),
    (
        "openai-chat",
        {
            "messages": [
                {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {}}]}
            ]
        },
        "messages.0.tool_calls.0.function.arguments",
    ),
    ("openai-chat", {"messages": [], "tools": [{"function": {}}]}, "tools.0.type"),
    ("openai-responses", {"input": 3}, "input"),
    ("openai-responses", {"input": [{"type": "telepathy"}]}, "input.0.type"),
    ("openai-responses", {"input": [{"role": "moderator", "content": "x"}]}, "input.0.role"),
    (
        "openai-responses",
        {"input": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]},
        "input.0.content.0.type",
    ),
    (
        "openai-responses",
        {"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]},
        "input.0.call_id",
    ),
    ("openai-responses", {"input": [{"type": "function_call_output", "call_id": "c"}]}, "input.0.output"),
    ("openai-responses", {"input": [{"type": "reasoning", "id": "rs", "summary": "x"}]}, "input.0.summary"),
    ("openai-responses", {"input": "x", "instructions": 1}, "instructions"),
    ("gemini", {"model": "m"}, ""),
    ("gemini", {"contents": [{"role": "robot", "parts": []}]}, "contents.0.role"),
    ("gemini", {"contents": [{"role": "user", "parts": [{"video": {}}]}]}, "contents.0.parts.0"),
    ("gemini", {"contents": [{"role": "user", "parts": [{"text": 5}]}]}, "contents.0.parts.0.text"),
    (
        "gemini",
        {"contents": [{"role": "model", "parts": [{"functionCall": {"args": {}}}]}]},
        "contents.0.parts.0.functionCall.name",
    ),
    (
        "gemini",
        {"contents": [{"parts": [{"functionResponse": {"name": "f", "response": "ok"}}]}]},
        "contents.0.parts.0.functionResponse.response",
    ),
    ("gemini", {"contents": [], "systemInstruction": {"parts": "x"}}, "systemInstruction.parts"),
    (
        "gemini",
        {"contents": [], "tools": [{"functionDeclarations": [{"description": "d"}]}]},
        "tools.0.functionDeclarations.0.name",
    ),
    ("bedrock-converse", {"system": []}, ""),
    ("bedrock-converse", {"messages": [{"role": "bot", "content": []}]}, "messages.0.role"),
    ("bedrock-converse", {"messages": [{"role": "user", "content": "hi"}]}, "messages.0.content"),
    (
        "bedrock-converse",
        {"messages": [{"role": "user", "content": [{"hologram": {}}]}]},
        "messages.0.content.0",
    ),
    (
        "bedrock-converse",
        {
            "messages": [
                {"role": "user", "content": [{"toolResult": {"toolUseId": "t", "content": [{"audio": {}}]}}]}
            ]
        },
        "messages.0.content.0.toolResult.content.0",
    ),
    (
        "bedrock-converse",
        {"messages": [{"role": "assistant", "content": [{"toolUse": {"toolUseId": "t", "name": "n"}}]}]},
        "messages.0.content.0.toolUse",
    ),
    ("bedrock-converse", {"messages": [], "system": [{"image": {}}]}, "system.0"),
    (
        "bedrock-converse",
        {"messages": [], "toolConfig": {"tools": [{"toolSpec": {}}]}},
        "toolConfig.tools.0.toolSpec.name",
    ),
]


@pytest.mark.parametrize(
    ("api", "body", "location"), SHAPE_ERRORS, ids=[f"{a}:{loc or 'body'}" for a, _, loc in SHAPE_ERRORS]
)
def test_shape_errors_name_the_spot(api: str, body: Any, location: str) -> None:
    with pytest.raises(ShapeError) as info:
        MODULES[api].parse(body)
    assert info.value.location == (location or None)


@pytest.mark.parametrize("api", MODULES)
def test_bodies_that_are_not_objects_are_refused(api: str) -> None:
    with pytest.raises(ShapeError):
        MODULES[api].parse([])


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(ShapeError, match=r"unknown role 'robot' \(expected one of: assistant, developer"):
        openai_chat.parse({"messages": [{"role": "robot", "content": "x"}]})
    with pytest.raises(ShapeError, match="unknown part field 'video'"):
        gemini.parse({"contents": [{"parts": [{"video": {}}]}]})


# --- converting between APIs --------------------------------------------------------------

TARGETS: dict[str, ModuleType] = {**MODULES, "anthropic": anthropic}
CONVERSIONS = [(api, path, target) for api, path in CASES for target in TARGETS if target != api]


def _pairs(request: Request) -> tuple[list[str | None], list[str | None]]:
    return [c.id for c in calls(request)], [r.call_id for r in results(request)]


@pytest.mark.parametrize(
    ("api", "path", "target"), CONVERSIONS, ids=[f"{a}/{p.stem}->{t}" for a, p, t in CONVERSIONS]
)
def test_conversion_parses_back_with_calls_paired(api: str, path: Path, target: str) -> None:
    source = MODULES[api].parse(orjson.loads(path.read_bytes()))
    module = TARGETS[target]
    body = module.render(source)
    orjson.dumps(body)  # plain JSON all the way down
    again = module.parse(body)
    assert len(calls(again)) == len(calls(source))
    assert len(results(again)) == len(results(source))
    call_ids, result_ids = _pairs(again)
    old_calls, old_results = _pairs(source)
    if target == "gemini":
        # Ids are optional on this wire; where the source had them they survive unchanged.
        assert call_ids == old_calls
        assert result_ids == old_results
        names = {c.id: c.name for c in calls(again)}
        assert all(r.name == names[r.call_id] for r in results(again) if r.call_id in names)
        return
    assert all(call_ids) and len(set(call_ids)) == len(call_ids)
    # A result answered a call of the source exactly when it answers one here.
    answered = {i for i in old_results if i in old_calls} if None not in old_calls else None
    paired = [i for i in result_ids if i in set(call_ids)]
    if answered is not None:
        assert len(paired) == len([i for i in old_results if i in answered])
    else:
        assert len(paired) == len(results(source))


def test_chat_to_gemini_groups_results_signs_calls_and_names_results() -> None:
    body = gemini.render(openai_chat.parse(load("openai-chat", "parallel_tools")))
    contents = body["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user", "model"]
    assert body["systemInstruction"] == {"parts": [{"text": "Use the tools when you need live data."}]}
    model = contents[1]["parts"]
    assert model[0]["thoughtSignature"] == gemini.SKIP_SIGNATURE
    assert "thoughtSignature" not in model[1]
    responses = [p["functionResponse"] for p in contents[2]["parts"]]
    assert [r["name"] for r in responses] == ["get_weather", "get_weather"]
    assert responses[0]["response"] == {"output": '{"temperature": 14, "conditions": "cloudy"}'}
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Get the current weather in a given location",
                    "parametersJsonSchema": load("openai-chat", "parallel_tools")["tools"][0]["function"][
                        "parameters"
                    ],
                },
                {"name": "no_args"},
            ]
        }
    ]


def test_gemini_error_result_from_bedrock_status() -> None:
    body = gemini.render(bedrock.parse(load("bedrock-converse", "tool_use")))
    responses = [
        p["functionResponse"] for c in body["contents"] for p in c["parts"] if "functionResponse" in p
    ]
    assert responses[0]["response"] == {"song": "Elemental Hotel", "artist": "8 Storey Hike"}
    assert responses[1]["response"] == {"error": "Station WKRP not found"}
    assert responses[0]["name"] == "top_song"


def test_gemini_ids_are_filled_for_apis_that_pair_by_id() -> None:
    source = gemini.parse(load("gemini", "thinking"))
    for module in (openai_chat, openai_responses, bedrock):
        again = module.parse(module.render(source))
        ids = [c.id for c in calls(again)]
        assert all(ids)
        assert [r.call_id for r in results(again)] == ids


def test_bedrock_moves_user_text_beside_results_into_the_last_result() -> None:
    layout = Request(
        None,
        (
            Message("user", (Text("go"),)),
            Message("assistant", (ToolCall("a", "f", {}), ToolCall("b", "f", {}))),
            Message("tool", (ToolResult("a", (Text("one"),)),)),
            Message("tool", (ToolResult("b", (Text("two"),), is_error=True),)),
            Message("user", (Text("and now?"), Text(""))),
        ),
    )
    body = bedrock.render(layout)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    last = body["messages"][2]["content"]
    assert [next(iter(block)) for block in last] == ["toolResult", "toolResult"]
    assert last[1]["toolResult"]["content"] == [{"text": "two"}, {"text": "and now?"}]
    assert last[1]["toolResult"]["status"] == "error"
    assert "status" not in last[0]["toolResult"]


def test_responses_to_chat_merges_parallel_calls_and_drops_reasoning() -> None:
    body = openai_chat.render(openai_responses.parse(load("openai-responses", "reasoning")))
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    parallel = openai_chat.render(openai_responses.parse(load("openai-responses", "function_calls")))
    assistant = parallel["messages"][2]
    assert [c["id"] for c in assistant["tool_calls"]] == [
        "call_unLAR8MvFNptuiZK6K6HCy5k",
        "call_9Xq2LwX0F1JdM3hB7Q5kT8vY",
    ]
    assert assistant["tool_calls"][0]["function"]["arguments"] == '{"location":"Paris, France"}'
    assert [m["role"] for m in parallel["messages"][3:5]] == ["tool", "tool"]


def test_chat_to_responses_items() -> None:
    body = openai_responses.render(openai_chat.parse(load("openai-chat", "parallel_tools")))
    kinds = [item.get("type") for item in body["input"]]
    calls_then_outputs = ["function_call"] * 2 + ["function_call_output"] * 2
    assert kinds == ["message", "message", *calls_then_outputs, "message"]
    assert body["input"][2]["arguments"] == '{"location": "Paris, France", "unit": "celsius"}'
    assert body["input"][-1]["content"] == [
        {
            "type": "output_text",
            "text": "Paris is 14 °C and cloudy; I could not get Tokyo's weather.",
            "annotations": [],
        }
    ]
    assert body["tools"][0]["strict"] is False
    assert "instructions" not in body


def test_anthropic_layout_to_chat_puts_results_first() -> None:
    source = Request(
        None,
        (
            Message("system", (Text("sys"),)),
            Message("assistant", (Thinking("hmm", "sig", source="anthropic"), ToolCall("t1", "f", {"x": 1}))),
            Message("user", (ToolResult("t1", (Data({"ok": True}),)), Text("more"))),
        ),
        system=(Text("top"),),
    )
    body = openai_chat.render(source)
    call = {"id": "t1", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}
    assert body["messages"] == [
        {"role": "system", "content": "top"},
        {"role": "system", "content": "sys"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "t1", "content": '{"ok":true}'},
        {"role": "user", "content": "more"},
    ]


def test_media_converts_between_data_urls_and_inline_bytes() -> None:
    chat = openai_chat.parse(load("openai-chat", "media"))
    parts = gemini.render(chat)["contents"][0]["parts"]
    assert parts[1] == {
        "fileData": {"mimeType": "application/octet-stream", "fileUri": chat.messages[0].parts[1].url}  # type: ignore[union-attr]
    }
    assert parts[2]["inlineData"]["mimeType"] == "image/png"
    assert parts[2]["inlineData"]["data"].startswith("iVBORw0KGgo")
    blocks = bedrock.render(chat)["messages"][0]["content"]
    assert blocks[2] == {"image": {"source": {"bytes": parts[2]["inlineData"]["data"]}, "format": "png"}}
    assert blocks[3]["document"]["format"] == "pdf"
    back = openai_chat.render(bedrock.parse(load("bedrock-converse", "media")))
    image = back["messages"][0]["content"][1]
    assert image == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"},
    }


def test_portable_fields_go_where_each_api_wants_them() -> None:
    source = openai_chat.parse(
        {"model": "gpt-4o", "temperature": 0.3, "top_p": 0.9, "stream": True, "messages": []}
    )
    assert gemini.adapt(source).model == "gpt-4o"
    assert gemini.render(source) == {"generationConfig": {"temperature": 0.3, "topP": 0.9}, "contents": []}
    assert bedrock.render(source) == {"inferenceConfig": {"temperature": 0.3, "topP": 0.9}, "messages": []}
    assert openai_responses.render(source)["stream"] is True


def test_converted_tools_get_each_api_required_fields() -> None:
    tools = (ToolDef("f", "does f", None), ToolDef("g", None, {"type": "object"}))
    request = Request(None, (Message("user", (Text("hi"),)),), tools=tools)
    assert bedrock.render(request)["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"] == {
        "json": {"type": "object", "properties": {}}
    }
    responses_tools = openai_responses.render(request)["tools"]
    assert responses_tools[0]["parameters"] == {"type": "object", "properties": {}}
    assert openai_chat.render(request)["tools"][0] == {
        "type": "function",
        "function": {"name": "f", "description": "does f"},
    }
    assert gemini.render(request)["tools"] == [
        {
            "functionDeclarations": [
                {"name": "f", "description": "does f"},
                {"name": "g", "parametersJsonSchema": {"type": "object"}},
            ]
        }
    ]


# --- performance ----------------------------------------------------------------------------


def test_parse_does_not_copy_payloads() -> None:
    body = load("openai-chat", "media")
    request = openai_chat.parse(body)
    url = body["messages"][0]["content"][2]["image_url"]["url"]
    image = request.messages[0].parts[2]
    assert isinstance(image, Media)
    assert image.url is url
    bedrock_body = load("bedrock-converse", "media")
    image = bedrock.parse(bedrock_body).messages[0].parts[1]
    assert isinstance(image, Media)
    assert image.data is bedrock_body["messages"][0]["content"][1]["image"]["source"]["bytes"]
