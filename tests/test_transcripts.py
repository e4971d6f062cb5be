"""Transcript loaders: every shared trajectory file against its manifest, plus damaged and synthetic input.

The shared trajectories live outside the repository (``../shared`` next to the
repo root, or wherever ``TOOLBUDGET_SHARED`` points). On a fresh clone they are
absent and the tests that need them skip with that reason; the synthetic tests
still run.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from toolbudget import to_request, validate
from toolbudget.errors import EncodingError, InputError, TranscriptError
from toolbudget.model import Conversation, Media, Message, Text, Thinking, ToolCall, ToolResult, text_of
from toolbudget.transcripts import (
    FORMATS,
    Transcript,
    TranscriptWarning,
    detect_format,
    discover_sessions,
    load_transcript,
)

# --- where the shared data is ---------------------------------------------------------


def _shared_trajectories() -> Path:
    override = os.environ.get("TOOLBUDGET_SHARED")
    shared = Path(override) if override else Path(__file__).resolve().parents[1].parent / "shared"
    return shared / "data" / "trajectories"


DATA = _shared_trajectories()
ABSENT = (
    "../shared/data/trajectories is absent (fresh clone): "
    "point TOOLBUDGET_SHARED at the shared dir to run the real-data tests"
)


def _manifest() -> list[dict[str, Any]]:
    path = DATA / "manifest.json"
    if not path.is_file():
        return []
    entries: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return entries


MANIFEST = _manifest()


def _entries() -> list[Any]:
    """One parameter per manifest file, or one skipped placeholder saying why there are none."""
    if not MANIFEST:
        return [pytest.param(None, id="shared-absent", marks=pytest.mark.skip(reason=ABSENT))]
    return [pytest.param(entry, id=entry["file"]) for entry in MANIFEST]


@pytest.fixture
def shared() -> Path:
    if not (DATA / "manifest.json").is_file():
        pytest.skip(ABSENT)
    return DATA


@cache
def _load(file: str) -> Transcript:
    """Loaded once per run for the read-only checks (the determinism test loads afresh)."""
    return load_transcript(DATA / file)


def _parts(conversations: tuple[Conversation, ...], kind: type[Any]) -> list[Any]:
    return [p for c in conversations for m in c.messages for p in m.parts if isinstance(p, kind)]


def _results(transcript: Transcript) -> list[ToolResult]:
    return _parts(transcript.conversations, ToolResult)


def _calls(transcript: Transcript) -> list[ToolCall]:
    return _parts(transcript.conversations, ToolCall)


# --- every manifest file --------------------------------------------------------------

# The one way the loaded files differ from the manifest: tool calls that never got
# a result. The manifest counts results only; these calls are real calls the model
# made, so they stay in the conversation as its last, unanswered call.
UNANSWERED_CALLS: dict[str, tuple[list[str], str]] = {
    "openhands/evaluation/benchmarks/multi_swe_bench/examples/output.jsonl": (
        ["finish", "finish"],
        "two of the three runs end with a `finish` call, and OpenHands records no observation for finish",
    ),
    "openhands/tests/runtime/trajs/wrong_initial_state.json": (
        ["finish"],
        "the run ends with a `finish` call, which gets no observation",
    ),
}


@pytest.mark.shared
@pytest.mark.parametrize("entry", _entries())
def test_counts_match_manifest(entry: dict[str, Any]) -> None:
    transcript = _load(entry["file"])
    lengths = [len(text_of(r.content)) for r in _results(transcript)]
    assert transcript.format == entry["format"]
    assert len(transcript.conversations) == entry["n_traj"]
    assert len(lengths) == entry["n_results"]
    assert sum(lengths) == entry["total_chars"]
    assert max(lengths, default=0) == entry["max"]


@pytest.mark.shared
@pytest.mark.parametrize("entry", _entries())
def test_calls_match_results_except_named_ones(entry: dict[str, Any]) -> None:
    transcript = _load(entry["file"])
    expected, _reason = UNANSWERED_CALLS.get(entry["file"], ([], ""))
    answered = {id(p) for p in _answered_calls(transcript)}
    unanswered = [c.name for c in _calls(transcript) if id(c) not in answered]
    assert unanswered == expected
    assert len(_calls(transcript)) == entry["n_results"] + len(expected)


def _answered_calls(transcript: Transcript) -> Iterator[ToolCall]:
    for conversation in transcript.conversations:
        for turn, results in _turns(conversation):
            by_id = {c.id: c for c in turn.tool_calls()}
            yield from (by_id[r.call_id] for r in results if r.call_id in by_id)


def _turns(conversation: Conversation) -> Iterator[tuple[Message, list[ToolResult]]]:
    """Each assistant message with the results in the tool messages right after it."""
    messages = conversation.messages
    for index, message in enumerate(messages):
        if message.role != "assistant":
            continue
        results: list[ToolResult] = []
        for following in messages[index + 1 :]:
            if following.role != "tool":
                break
            results.extend(following.tool_results())
        yield message, results


@pytest.mark.shared
@pytest.mark.parametrize("entry", _entries())
def test_neutral_layout(entry: dict[str, Any]) -> None:
    """Every result answers, once, a call of the assistant message just before its tool messages."""
    transcript = _load(entry["file"])
    for conversation in transcript.conversations:
        assert conversation.source == entry["format"]
        previous: str | None = None
        for message in conversation.messages:
            assert message.parts, "no empty messages"
            if message.role == "tool":
                assert len(message.parts) == 1
                assert isinstance(message.parts[0], ToolResult)
                assert previous in ("assistant", "tool"), "a tool message follows its call"
            previous = message.role
        for turn, results in _turns(conversation):
            ids = [c.id for c in turn.tool_calls()]
            answered = [r.call_id for r in results]
            assert len(set(answered)) == len(answered), "a call is answered once"
            assert set(answered) <= set(ids)
            for result in results:
                call = next(c for c in turn.tool_calls() if c.id == result.call_id)
                assert result.name == call.name
    conversation_ids = [c.id for c in transcript.conversations]
    assert len(set(conversation_ids)) == len(conversation_ids)


# Formats without call ids get synthesised ones; they must suit the strictest provider.
NO_ID_FORMATS = {"mini-swe-agent-traj-v1", "swe-agent-traj"}
SAFE_ID = re.compile(r"^[A-Za-z0-9_-]+$")


@pytest.mark.shared
@pytest.mark.parametrize("entry", _entries())
def test_call_ids_are_safe(entry: dict[str, Any]) -> None:
    transcript = _load(entry["file"])
    for call in _calls(transcript):
        assert call.id is not None
        if entry["format"] in NO_ID_FORMATS:
            assert SAFE_ID.match(call.id)


@pytest.mark.shared
@pytest.mark.parametrize("entry", _entries())
def test_loading_is_deterministic(entry: dict[str, Any]) -> None:
    first = load_transcript(DATA / entry["file"])
    second = load_transcript(DATA / entry["file"])
    assert first == second


@pytest.mark.shared
@pytest.mark.parametrize("entry", _entries())
def test_detect_format(entry: dict[str, Any]) -> None:
    assert detect_format(DATA / entry["file"]) == entry["format"]


def test_formats_cover_the_manifest_and_the_resolver() -> None:
    assert {e["format"] for e in MANIFEST} <= set(FORMATS)
    assert "openhands-resolver-output-jsonl" in FORMATS
    assert len(set(FORMATS)) == len(FORMATS) == 10


def _large_results(shared: Path) -> list[dict[str, Any]]:
    lines = (shared / "LARGE_TOOL_RESULTS.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@pytest.mark.shared
def test_large_results_sit_where_the_index_says(shared: Path) -> None:
    """The index counts results in FORMATS.md order; ours must be the same order."""
    for item in _large_results(shared):
        transcript = _load(item["file"])
        result = _results(transcript)[item["result_ordinal"]]
        in_conversation = _parts((transcript.conversations[item["traj_index"]],), ToolResult)
        text = text_of(result.content)
        assert any(r is result for r in in_conversation)
        assert len(text) == item["chars"]
        assert text.startswith(item["head"])
        assert result.name == item["tool"] or _first_word_of_bash_call(transcript, result) == item["tool"]


def _first_word_of_bash_call(transcript: Transcript, result: ToolResult) -> str | None:
    """SWE-agent function-calling configs: the model called ``bash``; the index names the
    command's first word (``pip``), as it does for text configs."""
    for call in _calls(transcript):
        if call.id == result.call_id and call.name == "bash" and isinstance(call.arguments, dict):
            return str(call.arguments.get("command", "")).split()[0]
    return None


# --- what each real format must show ---------------------------------------------------

CLAUDE = "claude-code/tests/integration/session/fixtures/"


@pytest.mark.shared
def test_claude_parallel_calls_form_one_turn(shared: Path) -> None:
    transcript = _load(CLAUDE + "claude/incremental-subagents/turn-2.jsonl")
    (conversation,) = transcript.conversations
    turns = [m for m in conversation.messages if m.role == "assistant"]
    assert max(len(list(m.tool_calls())) for m in turns) == 3
    first = turns[0].parts
    assert isinstance(first[0], Thinking)
    assert first[0].source == "anthropic"
    assert first[0].signature
    assert conversation.meta["model"] == "claude-sonnet-4-5-20250929"
    assert not conversation.sidechain


@pytest.mark.shared
def test_claude_sidechain_file(shared: Path) -> None:
    transcript = _load(CLAUDE + "claude/incremental-subagents/turn-2/subagents/agent-a485154.jsonl")
    (conversation,) = transcript.conversations
    assert conversation.sidechain
    assert conversation.id == "agent-a485154"
    assert conversation.meta["session_id"] == "e9fb405b-169f-40eb-9396-7e75076f045d"


@pytest.mark.shared
def test_claude_compaction_keeps_the_whole_session(shared: Path) -> None:
    (conversation,) = _load(CLAUDE + "session-624a4a58.jsonl").conversations
    assert conversation.meta["compactions"] == 1
    summaries = [
        m for m in conversation.messages if m.role == "user" and "being continued" in text_of(m.parts)
    ]
    assert len(summaries) == 1


@pytest.mark.shared
def test_claude_text_after_results_is_a_user_message(shared: Path) -> None:
    (conversation,) = _load(CLAUDE + "session-9eda1058.jsonl").conversations
    roles = [m.role for m in conversation.messages[:5]]
    assert roles == ["user", "assistant", "tool", "user", "user"]
    rejected = conversation.messages[2].parts[0]
    assert isinstance(rejected, ToolResult)
    assert rejected.is_error
    assert text_of(conversation.messages[3].parts) == "[Request interrupted by user for tool use]"


CODEX = (
    "codex-cli/src/agents/plugins/codex/__tests__/fixtures/"
    "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
)


@pytest.mark.shared
def test_codex_session(shared: Path) -> None:
    (conversation,) = _load(CODEX).conversations
    assert conversation.id == "019e1625-789d-76c0-80ab-3724b5ddb799"
    assert text_of(conversation.system[:1]).startswith("You are Codex")
    assert len(conversation.system) == 5, "base instructions, then the four leading developer texts"
    assert conversation.meta["model"] == "gpt-5.5"
    assert conversation.meta["web_searches"] == 3
    thinking = [p for m in conversation.messages for p in m.parts if isinstance(p, Thinking)]
    assert thinking
    assert all(t.source == "openai" and t.signature and t.redacted for t in thinking)
    patches = [c for c in _calls(_load(CODEX)) if c.name == "apply_patch"]
    assert len(patches) == 3
    assert all(isinstance(c.arguments, str) and c.arguments_json is None for c in patches)
    commands = [c for c in _calls(_load(CODEX)) if c.name == "exec_command"]
    assert all(c.arguments_ok and c.arguments_json and isinstance(c.arguments, dict) for c in commands)


@pytest.mark.shared
def test_gemini_session(shared: Path) -> None:
    file = "gemini-cli/tests/integration/metrics/fixtures/gemini/session-2025-12-01T21-45-5b959dae.json"
    (conversation,) = _load(file).conversations
    assert conversation.id == "5b959dae-8655-4cd1-b10f-720b8c336ea2"
    assert conversation.meta["model"] == "gemini-3-pro-image-preview"
    thinking = [p for m in conversation.messages for p in m.parts if isinstance(p, Thinking)]
    assert thinking
    assert all(t.source == "gemini" for t in thinking)


@pytest.mark.shared
def test_mini_swe_agent_nags_are_not_results(shared: Path) -> None:
    file = (
        "mini-swe-agent/swebench_results/20251118_gemini-3-pro-74pct/trajs/"
        "sphinx-doc__sphinx-10466/sphinx-doc__sphinx-10466.traj.json"
    )
    (conversation,) = _load(file).conversations
    nags = [m for m in conversation.messages if text_of(m.parts).startswith("Please always provide EXACTLY")]
    assert len(nags) == 9
    assert all(m.role == "user" for m in nags)
    assert conversation.id == "sphinx-doc__sphinx-10466"
    assert conversation.meta["model"] == "google/gemini-3-pro-preview"
    calls = _calls(_load(file))
    assert [c.id for c in calls[:2]] == ["call_0000", "call_0001"]
    assert calls[0].arguments == {"command": "ls -la"}


@pytest.mark.shared
def test_swe_agent_text_and_function_calling(shared: Path) -> None:
    text_file = "swe-agent/trajectories/demonstrations/ctf/crypto/BabyEncryption.traj"
    call = _calls(_load(text_file))[0]
    assert (call.id, call.name, call.arguments) == ("call_0000", "open", "chall.py")
    fc_file = (
        "swe-agent/tests/test_data/trajectories/gpt4__swe-agent-test-repo__default_from_url__t-0.00__p-0.95"
        "__c-3.00__install-1/6e44b9__sweagenttestrepo-1c2844.traj"
    )
    calls = _calls(_load(fc_file))
    assert calls[0].id == "call_fJuazlMUN5fQDQ73G6XSpYpx"
    assert calls[0].arguments_json == '{"file_name":"missing_colon.py"}'
    # The last step (submit) is not in history, so its id is synthesised from its step number.
    assert calls[-1].id == "call_0004"


@pytest.mark.shared
def test_openhands_eval_output(shared: Path) -> None:
    transcript = _load("openhands/evaluation/benchmarks/multi_swe_bench/examples/output.jsonl")
    ids = [c.id for c in transcript.conversations]
    assert ids == ["ponylang__ponyc-4595", "ponylang__ponyc-4593", "ponylang__ponyc-4588"]
    first = transcript.conversations[0]
    assert text_of(first.system).startswith("You are OpenHands agent")
    assert {t.name for t in first.tools} >= {"execute_bash", "str_replace_editor", "finish"}
    # An error observation without tool metadata reached the model as a user message.
    errors = [
        m for m in transcript.conversations[1].messages if text_of(m.parts).startswith("Parameter 'command'")
    ]
    assert [m.role for m in errors] == ["user"]


@pytest.mark.shared
def test_tau_bench_ids(shared: Path) -> None:
    transcript = _load("tau-bench/historical_trajectories/gpt-4o-airline.json")
    assert transcript.conversations[0].id == "task-0-trial-0"
    assert text_of(transcript.conversations[0].system).startswith("# Airline Agent Policy")
    tau2 = _load("tau2-bench/results/whissle/airline_run1.json")
    assert tau2.conversations[0].meta["model"] == "whissle"


# --- synthetic files ------------------------------------------------------------------


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def _claude(uuid: str, parent: str | None, kind: str, content: Any, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message |= {"id": extra.pop("message_id"), "model": "claude-test"}
    return {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s1", "message": message, **extra}


def _use(call_id: str) -> list[dict[str, Any]]:
    return [{"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": "ls"}}]


def _answer(call_id: str, content: Any = "out") -> list[dict[str, Any]]:
    return [{"type": "tool_result", "tool_use_id": call_id, "content": content}]


def test_claude_rewind_takes_the_latest_branch(tmp_path: Path) -> None:
    lines = [
        _claude("u1", None, "user", "hello"),
        _claude("a1", "u1", "assistant", [{"type": "text", "text": "hi"}], message_id="m1"),
        _claude("u2", "a1", "user", "old question"),
        _claude("a2", "u2", "assistant", _use("old"), message_id="m2"),
        _claude("r2", "a2", "user", _answer("old")),
        # The user rewinds to a1 and asks again; the new reply calls two tools in parallel.
        _claude("u3", "a1", "user", "new question"),
        _claude("a3", "u3", "assistant", _use("t1"), message_id="m3"),
        _claude("a4", "a3", "assistant", _use("t2"), message_id="m3"),
        _claude("r4", "a4", "user", _answer("t2")),
        _claude(
            "r3", "a3", "user", _answer("t1", [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
        ),
        _claude("a5", "r3", "assistant", [{"type": "text", "text": "done"}], message_id="m4"),
        {"type": "summary", "summary": "title", "leafUuid": "a5"},
    ]
    (conversation,) = load_transcript(_write_jsonl(tmp_path / "s.jsonl", lines)).conversations
    assert [m.role for m in conversation.messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert text_of(conversation.messages[2].parts) == "new question"
    assert [c.id for c in conversation.messages[3].tool_calls()] == ["t1", "t2"]
    results = [r for m in conversation.messages for r in m.tool_results()]
    assert [r.call_id for r in results] == ["t2", "t1"], "results in the order they were written"
    assert text_of(results[1].content) == "a\nb"
    assert conversation.id == "s1"
    assert conversation.meta["model"] == "claude-test"


def test_claude_sidechain_lines_and_images(tmp_path: Path) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    lines = [
        _claude("u1", None, "user", "go"),
        _claude("a1", "u1", "assistant", _use("t1"), message_id="m1"),
        _claude("r1", "a1", "user", [*_answer("t1", [image]), {"type": "text", "text": "look"}]),
        _claude("s1", None, "user", "sub task", isSidechain=True, agentId="x1"),
        _claude(
            "s2", "s1", "assistant", [{"type": "text", "text": "sub done"}], message_id="m9", isSidechain=True
        ),
    ]
    main, side = load_transcript(_write_jsonl(tmp_path / "s.jsonl", lines)).conversations
    assert not main.sidechain
    assert side.sidechain
    assert side.id == "agent-x1"
    result = main.messages[2].parts[0]
    assert isinstance(result, ToolResult)
    assert result.content == (Media(kind="image", media_type="image/png", data="AAAA", form=("base64",)),)
    assert main.messages[3] == Message("user", (Text("look"),))


def _codex(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "t", "type": kind, "payload": payload}


def test_codex_developer_messages_and_bad_arguments(tmp_path: Path) -> None:
    def text(role: str, value: str) -> dict[str, Any]:
        kind = "output_text" if role == "assistant" else "input_text"
        return {"type": "message", "role": role, "content": [{"type": kind, "text": value}]}

    lines = [
        _codex("session_meta", {"id": "sid", "base_instructions": {"text": "be good"}}),
        _codex("response_item", text("developer", "rules")),
        _codex("response_item", text("user", "do it")),
        _codex("response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": "hmm"}]}),
        _codex(
            "response_item", {"type": "function_call", "name": "f", "arguments": '{"a": 1', "call_id": "c1"}
        ),
        _codex("response_item", {"type": "function_call_output", "call_id": "c1", "output": "bad args"}),
        _codex("response_item", {"type": "web_search_call", "action": {"query": "q"}}),
        _codex("response_item", text("developer", "mid-session note")),
        _codex("event_msg", {"type": "agent_message", "message": "ignored"}),
        _codex("response_item", text("assistant", "done")),
    ]
    (conversation,) = load_transcript(_write_jsonl(tmp_path / "rollout-x.jsonl", lines)).conversations
    assert conversation.system == (Text("be good"), Text("rules"))
    assert [m.role for m in conversation.messages] == ["user", "assistant", "tool", "system", "assistant"]
    thinking, call = conversation.messages[1].parts
    assert thinking == Thinking(text="hmm", source="openai")
    assert isinstance(call, ToolCall)
    assert (call.arguments, call.arguments_json, call.arguments_ok) == (None, '{"a": 1', False)


# --- Codex prompts kept only as events ------------------------------------------------------


def _prompt_event(text: str, **extra: Any) -> dict[str, Any]:
    return _codex("event_msg", {"type": "user_message", "message": text, "images": [], **extra})


def _user_item(*texts: str) -> dict[str, Any]:
    content = [{"type": "input_text", "text": t} for t in texts]
    return _codex("response_item", {"type": "message", "role": "user", "content": content})


def _reply(text: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text}]
    return _codex("response_item", {"type": "message", "role": "assistant", "content": content})


def _exec(call_id: str) -> list[dict[str, Any]]:
    return [
        _codex(
            "response_item",
            {
                "type": "function_call",
                "name": "exec_command",
                "arguments": '{"cmd": "ls"}',
                "call_id": call_id,
            },
        ),
        _codex("event_msg", {"type": "exec_command_end", "call_id": call_id, "exit_code": 0}),
        _codex("response_item", {"type": "function_call_output", "call_id": call_id, "output": "a.py"}),
    ]


def _rollout_0128() -> list[dict[str, Any]]:
    """Two turns as cli_version 0.128 writes them: each prompt only as a ``user_message`` event."""
    return [
        _codex("session_meta", {"id": "s128", "cli_version": "0.128.0", "originator": "codex_exec"}),
        _codex("turn_context", {"model": "gpt-5.4"}),
        _codex("event_msg", {"type": "task_started"}),
        _prompt_event("fix the bug"),
        *_exec("c1"),
        _reply("fixed"),
        _codex("event_msg", {"type": "agent_message", "message": "fixed"}),
        _codex("event_msg", {"type": "task_started"}),
        _prompt_event("now run the tests"),
        *_exec("c2"),
        _reply("they pass"),
    ]


def _roles(conversation: Conversation) -> list[str]:
    return [m.role for m in conversation.messages]


def test_codex_prompts_kept_only_as_events(tmp_path: Path) -> None:
    (conversation,) = load_transcript(
        _write_jsonl(tmp_path / "rollout-a.jsonl", _rollout_0128())
    ).conversations
    assert _roles(conversation) == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert conversation.messages[0] == Message("user", (Text("fix the bug"),))
    assert conversation.messages[4] == Message("user", (Text("now run the tests"),))
    # The second answer is its own message, not joined to the first one's text.
    assert text_of(conversation.messages[3].parts) == "fixed"
    assert [c.id for c in conversation.messages[5].tool_calls()] == ["c2"]
    for api in ("anthropic", "openai-chat", "openai-responses", "gemini", "bedrock-converse"):
        assert validate(to_request(conversation, api), api) == [], api


@pytest.mark.parametrize("order", ["item-first", "event-first"])
def test_codex_prompt_in_both_places_is_read_once(tmp_path: Path, order: str) -> None:
    lines = _rollout_0128()
    for position, text in ((10, "now run the tests"), (3, "fix the bug")):
        assert lines[position] == _prompt_event(text)
        pair = [_user_item(text), lines[position]]
        lines[position : position + 1] = pair if order == "item-first" else pair[::-1]
    (conversation,) = load_transcript(_write_jsonl(tmp_path / "rollout-b.jsonl", lines)).conversations
    prompts = [text_of(m.parts) for m in conversation.messages if m.role == "user"]
    assert prompts == ["fix the bug", "now run the tests"]


def test_codex_same_prompt_twice_kept_once_per_turn(tmp_path: Path) -> None:
    """A prompt the item carries in one turn does not hide the same words typed again later."""
    lines = [
        _codex("session_meta", {"id": "s"}),
        _user_item("continue"),
        _prompt_event("continue"),
        _reply("one"),
        _prompt_event("continue"),
        _reply("two"),
    ]
    (conversation,) = load_transcript(_write_jsonl(tmp_path / "rollout-c.jsonl", lines)).conversations
    assert _roles(conversation) == ["user", "assistant", "user", "assistant"]


def test_codex_prompt_matching_ignores_the_request_heading_and_image_tags(tmp_path: Path) -> None:
    image = {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}
    item = {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "## My request for Codex:\nlook at this"},
            {"type": "input_text", "text": "<image name=[Image #1]>"},
            image,
            {"type": "input_text", "text": "</image>"},
        ],
    }
    lines = [
        _codex("session_meta", {"id": "s"}),
        _codex("response_item", item),
        _prompt_event("look at this", local_images=["/tmp/shot.png"]),
        _reply("I see it"),
    ]
    (conversation,) = load_transcript(_write_jsonl(tmp_path / "rollout-d.jsonl", lines)).conversations
    assert _roles(conversation) == ["user", "assistant"]


def test_codex_prompt_event_images_and_paginated_items(tmp_path: Path) -> None:
    url = "data:image/png;base64,AAAA"
    item = {
        "type": "UserMessage",
        "id": "u1",
        "content": [
            {"type": "text", "text": "what is this", "text_elements": []},
            {"type": "image", "image_url": url},
        ],
    }
    lines = [
        _codex("session_meta", {"id": "s"}),
        _prompt_event("", images=[url]),
        _reply("a cat"),
        _codex("event_msg", {"type": "item_completed", "turn_id": "t2", "item": item}),
        _reply("still a cat"),
        # One prompt written both ways (legacy event and paginated item) is one prompt.
        _prompt_event("again"),
        _codex(
            "event_msg",
            {"type": "item_completed", "item": item | {"content": [{"type": "text", "text": "again"}]}},
        ),
        _reply("yes"),
    ]
    (conversation,) = load_transcript(_write_jsonl(tmp_path / "rollout-e.jsonl", lines)).conversations
    assert _roles(conversation) == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert conversation.messages[0].parts == (Media(kind="image", url=url),)
    assert conversation.messages[2].parts == (Text("what is this"), Media(kind="image", url=url))
    assert conversation.messages[4].parts == (Text("again"),)


def test_codex_bare_rollout(tmp_path: Path) -> None:
    """The first Rust releases wrote the meta line and the Responses items bare, with state markers."""
    lines: list[dict[str, Any]] = [
        {
            "id": "bare-1",
            "timestamp": "2025-08-18T01:16:13.522Z",
            "instructions": "be brief",
            "git": {"branch": "main"},
        },
        {"record_type": "state"},
        {
            "type": "message",
            "id": None,
            "role": "user",
            "content": [{"type": "input_text", "text": "list files"}],
        },
        {"record_type": "state"},
        {"type": "function_call", "name": "shell", "arguments": '{"command": ["ls"]}', "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": '{"output": "a.py"}'},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a.py"}]},
    ]
    path = _write_jsonl(tmp_path / "rollout-2025-08-18.jsonl", lines)
    assert detect_format(path) == "codex-rollout-jsonl"
    (conversation,) = load_transcript(path).conversations
    assert conversation.id == "bare-1"
    assert conversation.system == (Text("be brief"),)
    assert _roles(conversation) == ["user", "assistant", "tool", "assistant"]
    (call,) = conversation.messages[1].tool_calls()
    assert (call.id, call.name, call.arguments) == ("c1", "shell", {"command": ["ls"]})


def test_codex_saved_rollout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The TypeScript CLI saved a session as one JSON document of Responses items."""
    doc = {
        "session": {"timestamp": "2025-04-20T10:00:00.000Z", "id": "ts-1", "instructions": "be kind"},
        "items": [
            {
                "id": "msg_1",
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "hi"}],
            },
            {
                "id": "fc_1",
                "type": "function_call",
                "call_id": "c1",
                "name": "shell",
                "arguments": '{"command": ["ls"]}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": '{"output": "a.py"}'},
            {
                "id": "msg_2",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            },
        ],
    }
    sessions = tmp_path / ".codex" / "sessions"
    sessions.mkdir(parents=True)
    path = _write_json(sessions / "rollout-2025-04-20-ts-1.json", doc)
    assert detect_format(path) == "codex-rollout-jsonl"
    (conversation,) = load_transcript(path).conversations
    assert (conversation.id, conversation.system) == ("ts-1", (Text("be kind"),))
    assert _roles(conversation) == ["user", "assistant", "tool", "assistant"]
    monkeypatch.setenv("HOME", str(tmp_path))
    assert discover_sessions() == [path]


@pytest.mark.shared
def test_codex_real_rollout_with_prompts_only_as_events(shared: Path, tmp_path: Path) -> None:
    """The shared rollout with its prompt items taken out (as 0.128 writes it) reads the same."""
    rows = (shared / CODEX).read_bytes().splitlines()
    records = [json.loads(row) for row in rows]
    prompts = {r["payload"]["message"] for r in records if r["payload"].get("type") == "user_message"}
    assert len(prompts) == 2
    kept = [
        row
        for row, r in zip(rows, records, strict=True)
        if not (r["type"] == "response_item" and _item_text(r["payload"]) in prompts)
    ]
    assert len(kept) == len(rows) - 2
    stripped = tmp_path / "rollout-stripped.jsonl"
    stripped.write_bytes(b"\n".join(kept) + b"\n")
    transcript = load_transcript(stripped)
    assert transcript.conversations == _load(CODEX).conversations
    assert transcript.warnings == ()


def _item_text(payload: dict[str, Any]) -> str | None:
    if payload.get("type") != "message" or payload.get("role") != "user":
        return None
    return "".join(block.get("text", "") for block in payload["content"])


def test_no_user_message_warns(tmp_path: Path) -> None:
    lines = [_claude("a1", None, "assistant", [{"type": "text", "text": "hi"}], message_id="m1")]
    path = _write_jsonl(tmp_path / "s.jsonl", lines)
    with pytest.warns(TranscriptWarning, match="conversation 's1' has no user message") as caught:
        transcript = load_transcript(path)
    assert len(caught) == 1
    assert transcript.warnings == (str(caught[0].message),)
    assert str(path) in transcript.warnings[0]


def test_codex_rollout_without_any_prompt_warns(tmp_path: Path) -> None:
    lines = [line for line in _rollout_0128() if line["payload"].get("type") != "user_message"]
    with pytest.warns(TranscriptWarning, match="conversation 's128' has no user message"):
        load_transcript(_write_jsonl(tmp_path / "rollout-f.jsonl", lines))


def test_gemini_error_result(tmp_path: Path) -> None:
    call = {
        "id": "c1",
        "name": "read_file",
        "args": {"path": "x"},
        "status": "error",
        "result": [
            {"functionResponse": {"id": "c1", "name": "read_file", "response": {"error": "no such file"}}}
        ],
    }
    doc = {
        "sessionId": "g1",
        "messages": [
            {"id": "1", "type": "user", "content": "read x"},
            {"id": "2", "type": "gemini", "content": "", "toolCalls": [call], "model": "gemini-x"},
            {"id": "3", "type": "info", "content": "notice"},
        ],
    }
    (conversation,) = load_transcript(_write_json(tmp_path / "session.json", doc)).conversations
    assert [m.role for m in conversation.messages] == ["user", "assistant", "tool"]
    assert conversation.messages[2].parts == (
        ToolResult("c1", (Text("no such file"),), is_error=True, name="read_file"),
    )


def _telecom_messages() -> list[dict[str, Any]]:
    """A tau2 telecom simulation in the documented shape: the simulated user has tools of their own."""

    def call(call_id: str, name: str, arguments: dict[str, Any], requestor: str) -> dict[str, Any]:
        return {"id": call_id, "name": name, "arguments": arguments, "requestor": requestor}

    def result(call_id: str, content: str, requestor: str, error: bool = False) -> dict[str, Any]:
        return {"role": "tool", "id": call_id, "content": content, "requestor": requestor, "error": error}

    return [
        {"role": "assistant", "content": "Hi! How can I help you today?", "tool_calls": None},
        {"role": "user", "content": "My phone has no service.", "tool_calls": None},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("a1", "get_customer_by_phone", {"phone": "555-0100"}, "assistant")],
        },
        result("a1", '{"customer_id": "C1"}', "assistant"),
        {"role": "assistant", "content": "Could you check your status bar?", "tool_calls": None},
        # The user's turn: two of their own tools (one fails), then what they tell the agent.
        {
            "role": "user",
            "content": None,
            "tool_calls": [
                call("u1", "check_status_bar", {}, "user"),
                call("u2", "toggle_airplane_mode", {}, "user"),
            ],
        },
        {
            "role": "tool",
            "tool_messages": [
                result("u1", "Airplane mode: ON", "user"),
                result("u2", "Permission denied", "user", error=True),
            ],
        },
        {"role": "user", "content": "Airplane mode is on and I cannot turn it off.", "tool_calls": None},
        # The agent reuses an id the user's tool had used.
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("u1", "reset_network", {"id": "C1"}, "assistant")],
        },
        result("u1", "done", "assistant"),
        {"role": "assistant", "content": "Please try again now.", "tool_calls": None},
    ]


def _tau2_doc(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "info": {"agent_info": {"llm": "m"}, "environment_info": {"domain_name": "telecom"}},
        "simulations": [{"task_id": "7", "trial": 1, "messages": messages}],
    }


def test_tau2_user_tool_calls_stay_on_the_user_side(tmp_path: Path) -> None:
    path = _write_json(tmp_path / "results.json", _tau2_doc(_telecom_messages()))
    (conversation,) = load_transcript(path).conversations
    assert conversation.id == "task-7-trial-1"
    assert _roles(conversation) == [
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    calls = [c for m in conversation.messages for c in m.tool_calls()]
    assert [(c.id, c.name) for c in calls] == [("a1", "get_customer_by_phone"), ("u1", "reset_network")]
    results = [r for m in conversation.messages for r in m.tool_results()]
    assert [(r.call_id, r.name, text_of(r.content)) for r in results] == [
        ("a1", "get_customer_by_phone", '{"customer_id": "C1"}'),
        ("u1", "reset_network", "done"),
    ]
    # One user turn: the user's tool calls and what came back, then what they told the agent.
    assert conversation.messages[5] == Message(
        "user",
        (
            Text("[user tool call] check_status_bar {}"),
            Text("[user tool call] toggle_airplane_mode {}"),
            Text("[user tool result] check_status_bar: Airplane mode: ON"),
            Text("[user tool error] toggle_airplane_mode: Permission denied"),
            Text("Airplane mode is on and I cannot turn it off."),
        ),
    )
    assert conversation.meta["user_tool_calls"] == 2
    for api in ("anthropic", "openai-chat", "openai-responses", "gemini", "bedrock-converse"):
        rules = [v.rule for v in validate(to_request(conversation, api), api)]
        # tau2's agent greets first; Bedrock's body gets a placeholder user turn before it.
        assert rules == [], api


def test_tau2_user_tool_call_with_text_and_no_requestor_on_the_result(tmp_path: Path) -> None:
    """A result without ``requestor`` belongs to whoever made the latest call with its id."""
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "content": "hello", "tool_calls": None},
        {
            "role": "user",
            "content": "let me check",
            "tool_calls": [
                {"id": "u1", "name": "check_phone", "arguments": {"deep": True}, "requestor": "user"}
            ],
        },
        {"role": "tool", "id": "u1", "content": "ok"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "a1", "name": "lookup", "arguments": {"x": 1}, "requestor": "assistant"}],
        },
        {"role": "tool", "id": "a1", "content": "nope", "requestor": "assistant", "error": True},
    ]
    (conversation,) = load_transcript(
        _write_json(tmp_path / "results.json", _tau2_doc(messages))
    ).conversations
    assert _roles(conversation) == ["assistant", "user", "assistant", "tool"]
    assert conversation.messages[1].parts == (
        Text("let me check"),
        Text('[user tool call] check_phone {"deep":true}'),
        Text("[user tool result] check_phone: ok"),
    )
    last = conversation.messages[3].parts[0]
    assert isinstance(last, ToolResult)
    assert (last.name, last.is_error) == ("lookup", True)


def test_openhands_resolver_output(tmp_path: Path) -> None:
    history = [
        {"action": "run", "command": "ls", "thought": "look around"},
        {"observation": "run", "content": "a.py", "command": "ls", "exit_code": 0},
        {"action": "run_ipython", "code": "print(1)", "thought": ""},
        {"observation": "run_ipython", "content": "1", "code": "print(1)"},
        {"action": "message", "content": "I fixed it", "thought": ""},
        {"action": "finish", "thought": "bye"},
    ]
    record = {
        "issue": {"owner": "o", "repo": "r", "number": 5},
        "issue_type": "issue",
        "instruction": "fix the bug",
        "history": history,
        "success": True,
    }
    path = _write_jsonl(tmp_path / "output.jsonl", [record, record | {"issue": {"number": 6}}])
    assert detect_format(path) == "openhands-resolver-output-jsonl"
    first, second = load_transcript(path).conversations
    assert (first.id, second.id) == ("o/r#5", "issue-6")
    assert [m.role for m in first.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "assistant",
    ]
    calls = [c for m in first.messages for c in m.tool_calls()]
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_0000", "run", {"command": "ls"}),
        ("call_0001", "run_ipython", {"code": "print(1)"}),
    ]
    assert [text_of(r.content) for m in first.messages for r in m.tool_results()] == ["a.py", "1"]


# --- bad input ------------------------------------------------------------------------


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    with pytest.raises(TranscriptError, match="is empty"):
        load_transcript(path)


def test_whitespace_only_file(tmp_path: Path) -> None:
    path = tmp_path / "blank.json"
    path.write_bytes(b" \n\n")
    with pytest.raises(TranscriptError, match="is empty"):
        detect_format(path)


# --- a session cut off mid-write ---------------------------------------------------------
#
# An agent appends one line per event, so a session still being written (or whose
# writer was killed) ends in part of a line. Everything before it is read, and the
# loss is warned about; a damaged line anywhere else is still an error.


def _load_cut(path: Path) -> Transcript:
    with pytest.warns(TranscriptWarning, match="is cut off") as caught:
        transcript = load_transcript(path)
    assert [str(w.message) for w in caught] == list(transcript.warnings)
    return transcript


def _cut_session() -> list[dict[str, Any]]:
    return [
        _claude("u1", None, "user", "hello"),
        _claude("a1", "u1", "assistant", [{"type": "text", "text": "hi → there"}], message_id="m"),
        _claude("u2", "a1", "user", "more → please"),
    ]


def test_truncated_last_line_is_left_out_with_a_warning(tmp_path: Path) -> None:
    lines = _cut_session()
    whole = "".join(json.dumps(r) + "\n" for r in lines[:2])
    path = tmp_path / "cut.jsonl"
    path.write_text(whole + json.dumps(lines[2])[:25], encoding="utf-8")
    transcript = _load_cut(path)
    (warning,) = transcript.warnings
    assert warning == (
        f"{path}: line 3 is cut off in the middle of a JSON value (the session was still being written, "
        "or its writer stopped); read the 2 complete line(s) before it"
    )
    assert (
        transcript.conversations
        == load_transcript(_write_jsonl(tmp_path / "two.jsonl", lines[:2])).conversations
    )
    assert [m.role for m in transcript.conversations[0].messages] == ["user", "assistant"]


def test_truncated_last_line_inside_a_character(tmp_path: Path) -> None:
    """A writer stopped between the bytes of one character leaves bytes that are not UTF-8."""
    lines = _cut_session()
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines).encode("utf-8").rstrip(b"\n")
    arrow = data.rindex("→".encode())
    path = tmp_path / "cut.jsonl"
    path.write_bytes(data[: arrow + 1])
    transcript = _load_cut(path)
    assert "line 3 is cut off in the middle of a character" in transcript.warnings[0]
    assert [m.role for m in transcript.conversations[0].messages] == ["user", "assistant"]
    # One complete line and a cut one is a one-record JSONL file, not a JSON document.
    first_end = data.index(b"\n")
    path.write_bytes(data[: data.index("→".encode(), first_end) + 2])
    assert [m.role for m in _load_cut(path).conversations[0].messages] == ["user"]


def test_truncated_last_line_in_every_jsonl_format(tmp_path: Path) -> None:
    """The tolerance is the reader's, so Codex rollouts and OpenHands outputs get it too."""
    rollout = [
        _codex("session_meta", {"id": "sid"}),
        _codex("response_item", {"type": "message", "role": "user", "content": "go"}),
        _codex("response_item", {"type": "message", "role": "assistant", "content": "done"}),
    ]
    data = "".join(json.dumps(r) + "\n" for r in rollout)
    path = tmp_path / "rollout-x.jsonl"
    path.write_text(data + data.splitlines()[-1][:30], encoding="utf-8")
    (conversation,) = _load_cut(path).conversations
    assert [m.role for m in conversation.messages] == ["user", "assistant"]
    record = {"issue": {"number": 5}, "instruction": "fix", "history": [{"action": "run", "command": "ls"}]}
    path = tmp_path / "output.jsonl"
    path.write_text(
        json.dumps(record) + "\n" + json.dumps(record | {"issue": {"number": 6}})[:40], encoding="utf-8"
    )
    transcript = _load_cut(path)
    assert transcript.format == "openhands-resolver-output-jsonl"
    assert [c.id for c in transcript.conversations] == ["issue-5"]


def test_a_damaged_line_before_the_last_is_still_an_error(tmp_path: Path) -> None:
    lines = _cut_session()
    rows = [json.dumps(r) for r in lines]
    path = tmp_path / "damaged.jsonl"
    path.write_text("\n".join([rows[0], rows[1][:30], rows[2]]) + "\n", encoding="utf-8")
    with pytest.raises(TranscriptError, match=r"line 2 is not valid JSON .*cut off") as caught:
        load_transcript(path)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("tail", ['{"type": "user"}}', "not json at all", '{"type": "user", x}'])
def test_a_last_line_that_is_wrong_rather_than_short_is_an_error(tmp_path: Path, tail: str) -> None:
    """Only a value that stops early is a cut-off line; other bad text is damage."""
    path = tmp_path / "bad-end.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _cut_session()) + tail, encoding="utf-8")
    with pytest.raises(TranscriptError, match="line 4 is not valid JSON"):
        load_transcript(path)


def test_a_file_that_is_only_a_cut_line_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    path.write_text(json.dumps(_cut_session()[0])[:30], encoding="utf-8")
    with pytest.raises(InputError, match="not valid JSON"):
        load_transcript(path)


@pytest.mark.shared
@pytest.mark.parametrize("file", [CLAUDE + "session-9eda1058.jsonl", CODEX], ids=["claude-code", "codex"])
def test_real_session_cut_mid_line(shared: Path, tmp_path: Path, file: str) -> None:
    """A real session cut in the middle of its last line reads as the session without that line."""
    data = (shared / file).read_bytes().rstrip(b"\n")
    last = data.rindex(b"\n")
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: last + (len(data) - last) // 2])
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(data[: last + 1])
    transcript = _load_cut(cut)
    assert transcript.conversations == load_transcript(whole).conversations
    assert transcript.conversations[0].messages, "the lines before the cut are read"


def test_invalid_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(b'{"sessionId": "\xff", "messages": []}')
    with pytest.raises(EncodingError, match=r"not UTF-8 text \(byte 0xff at offset 15, line 1, column 16\)"):
        load_transcript(path)
    # In a JSON Lines session, the line is what a reader looks for (the README: value, offset,
    # line and column).
    lines = tmp_path / "bad.jsonl"
    lines.write_bytes(b'{"type": "user"}\n{"type": "x", "a": "\xe9"}\n')
    with pytest.raises(EncodingError, match=r"byte 0xe9 at offset 37, line 2, column 21\)"):
        load_transcript(lines)


@pytest.mark.parametrize("value", [{"hello": 1}, [], [1, 2], "text", 3])
def test_unknown_shape_names_the_formats_tried(tmp_path: Path, value: Any) -> None:
    path = _write_json(tmp_path / "other.json", value)
    with pytest.raises(TranscriptError, match="not a transcript in any known format") as caught:
        detect_format(path)
    assert all(fmt in str(caught.value) for fmt in FORMATS)


def test_broken_json_document(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    path.write_text('{\n  "sessionId": "x",\n  "messages": [\n', encoding="utf-8")
    with pytest.raises(InputError, match="not valid JSON"):
        load_transcript(path)


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="does not exist"):
        load_transcript(tmp_path / "nope.jsonl")


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="is a directory"):
        load_transcript(tmp_path)


def test_damaged_record_is_one_line_error(tmp_path: Path) -> None:
    path = _write_json(
        tmp_path / "s.json", {"sessionId": "g", "messages": [{"type": "gemini", "toolCalls": [3]}]}
    )
    with pytest.raises(TranscriptError, match=r"messages\.0: toolCalls: expected an object, found a number"):
        load_transcript(path)


# --- discovering the user's own sessions ----------------------------------------------


def test_discover_sessions_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert discover_sessions() == []


def test_discover_sessions_newest_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    files = {
        ".claude/projects/-p/abc.jsonl": 300,
        ".claude/projects/-p/abc/subagents/agent-1.jsonl": 100,
        ".codex/sessions/2026/05/11/rollout-1.jsonl": 200,
        ".gemini/tmp/hash/chats/session-1.json": 400,
        ".codex/sessions/2026/05/11/notes.jsonl": 500,  # not a rollout
        ".gemini/tmp/hash/logs.json": 600,  # not in chats/
    }
    for relative, mtime in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}", encoding="utf-8")
        os.utime(path, (mtime, mtime))
    found = [p.relative_to(tmp_path).as_posix() for p in discover_sessions()]
    assert found == [
        ".gemini/tmp/hash/chats/session-1.json",
        ".claude/projects/-p/abc.jsonl",
        ".codex/sessions/2026/05/11/rollout-1.jsonl",
        ".claude/projects/-p/abc/subagents/agent-1.jsonl",
    ]


def test_a_path_under_the_home_directory_may_start_with_a_tilde(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The README's own example reads "~/.claude/projects/...": the library must find it as a shell does.
    monkeypatch.setenv("HOME", str(tmp_path))
    project = tmp_path / ".claude" / "projects" / "p"
    project.mkdir(parents=True)
    lines = [
        _claude("u1", None, "user", "go"),
        _claude("a1", "u1", "assistant", _use("t1"), message_id="m1"),
        _claude("r1", "a1", "user", _answer("t1")),
    ]
    _write_jsonl(project / "s.jsonl", lines)
    transcript = load_transcript("~/.claude/projects/p/s.jsonl")
    assert transcript.format == "claude-code-jsonl"
    assert [m.role for m in transcript.conversations[0].messages] == ["user", "assistant", "tool"]
    assert detect_format(Path("~/.claude/projects/p/s.jsonl")) == "claude-code-jsonl"
