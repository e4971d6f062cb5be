"""Session.manage on real histories: caps hold, every cut recalls byte for byte, determinism."""

from __future__ import annotations

import copy
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from histories import bash_body
from toolbudget import to_request, validate, wire
from toolbudget.budget import MIN_PREVIEW_CHARS, result_text
from toolbudget.errors import InputError, NotFoundError
from toolbudget.jsonio import dumps
from toolbudget.marker import MARKER_RE, find_markers
from toolbudget.model import Conversation, Message, Text, ToolCall, ToolResult
from toolbudget.policy import Policy
from toolbudget.previews._stderr import find_stderr
from toolbudget.session import Session, count_chars

APIS = ("anthropic", "openai-chat")
TIGHT = Policy(
    result_max_chars=3000,
    turn_budget_chars=9000,
    tool_caps={},
    preview_head_chars=800,
    preview_tail_chars=300,
)
POLICIES = {"default": Policy(), "tight": TIGHT}


def results(body: dict[str, Any], api: str) -> Iterator[tuple[int, ToolResult, str | None]]:
    """Every tool result with its message index and its tool's name."""
    request = wire.parse(body, api)
    names = {p.id: p.name for m in request.messages for p in m.parts if isinstance(p, ToolCall)}
    for i, message in enumerate(request.messages):
        for part in message.parts:
            if isinstance(part, ToolResult):
                yield i, part, names.get(part.call_id) or part.name


def hunks(diff: str) -> list[str]:
    """The hunks of a unified diff, each as its header line and body lines."""
    out: list[list[str]] = []
    for line in diff.split("\n"):
        if line.startswith("@@"):
            out.append([line])
        elif out and line[:1] in (" ", "+", "-", "\\") and not line.startswith(("--- ", "+++ ")):
            out[-1].append(line)
        elif out and line:
            out.append([])
    return ["\n".join(h) for h in out if h]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("policy_name", sorted(POLICIES))
def test_caps_hold_and_every_cut_recalls_exactly(
    api: str, policy_name: str, real: list[tuple[str, Conversation]], tmp_path: Path
) -> None:
    policy = POLICIES[policy_name]
    cut_kinds: set[str] = set()
    cuts = 0
    for n, (name, conversation) in enumerate(real):
        body = to_request(conversation, api, model="m")
        before = copy.deepcopy(body)
        with Session(f"s{n}", store=f"dir:{tmp_path}", policy=policy) as session:
            managed = session.manage(body, api)
            assert body == before, name
            out = managed.body
            assert validate(out, api) == [], name
            originals = {result_text(r) for _, r, _ in results(body, api)}
            for cut in managed.report.cuts:
                cut_kinds.add(cut.kind)
            for i, result, tool in results(out, api):
                text = result_text(result) or ""
                cap = policy.cap_for(tool, is_error=result.is_error)
                # stderr is capped apart, and more generously: up to the error cap on top.
                allowance = policy.error_max_chars if find_stderr(text, 0, len(text)) else 0
                assert len(text) <= cap + allowance, (name, i, tool)
                for marker in find_markers(text):
                    assert marker.key is not None, name
                    original = session.original(marker.key)
                    assert original in originals, (name, i)
                    assert marker.total == len(original)
                    cuts += 1
                if "[toolbudget: " in text:
                    assert len(MARKER_RE.findall(text)) == 1, (name, i)
            for cut in managed.report.cuts:
                if cut.kind == "json":
                    (result,) = [
                        r for i, r, _ in results(out, api) if i == cut.index and r.call_id == cut.call_id
                    ]
                    orjson.loads(result_text(result) or "")
                if cut.kind == "diff":
                    (result,) = [
                        r for i, r, _ in results(out, api) if i == cut.index and r.call_id == cut.call_id
                    ]
                    original = session.original(cut.key or "")
                    whole = set(hunks(original))
                    for hunk in hunks(result_text(result) or ""):
                        assert hunk in whole, (name, hunk[:200])
            # Managing the managed body changes nothing; the same body gives the same bytes.
            again = session.manage(out, api)
            assert orjson.dumps(again.body) == orjson.dumps(out), name
            assert orjson.dumps(session.manage(body, api).body) == orjson.dumps(out), name
    assert cuts > 0
    if policy_name == "tight":
        assert {"json", "diff"} & cut_kinds, cut_kinds


def test_turn_budget_is_enforced_largest_first_and_unreachable_is_reported(tmp_path: Path) -> None:
    calls = [ToolCall(f"c{i}", "Bash", {"n": i}) for i in range(4)]
    sizes = [50_000, 30_000, 9_000, 8_000]
    messages = [Message("user", (Text("go"),)), Message("assistant", tuple(calls))]
    messages += [
        Message("tool", (ToolResult(c.id, (Text(f"line of output {j}\n" * (s // 20)),)),))
        for j, (c, s) in enumerate(zip(calls, sizes, strict=True))
    ]
    body = to_request(Conversation("t", "test", tuple(messages)), "anthropic", model="m")
    policy = Policy(result_max_chars=100_000, turn_budget_chars=30_000)
    seen: list[Any] = []
    with Session("budget", store="memory:", policy=policy, on_cut=seen.append) as session:
        managed = session.manage(body, "anthropic")
    sizes_after = [len(result_text(r) or "") for _, r, _ in results(managed.body, "anthropic")]
    assert sum(sizes_after) <= 30_000
    assert sizes_after[0] < sizes[0]  # the largest went first
    assert sizes_after[3] == len(
        result_text(next(r for i, r, _ in results(body, "anthropic") if r.call_id == "c3")) or ""
    )
    assert [c.reason for c in managed.report.cuts] and seen == list(managed.report.cuts)

    unreachable: list[Any] = []
    tiny = Policy(result_max_chars=100_000, turn_budget_chars=1_000)
    with Session("tiny", store="memory:", policy=tiny, on_budget_unreachable=unreachable.append) as session:
        managed = session.manage(body, "anthropic")
    assert len(unreachable) == 1 and unreachable[0].budget == 1_000
    assert managed.report.budget_unreachable == tuple(unreachable)
    for _, result, _ in results(managed.body, "anthropic"):
        assert len(result_text(result) or "") <= MIN_PREVIEW_CHARS


def _one_result_body(text: str, *, tool: str = "Bash", is_error: bool = False) -> dict[str, Any]:
    call = ToolCall("toolu_1", tool, {"command": "x"})
    messages = (
        Message("user", (Text("go"),)),
        Message("assistant", (call,)),
        Message("tool", (ToolResult("toolu_1", (Text(text),), is_error),)),
    )
    return to_request(Conversation("t", "test", messages), "anthropic", model="m")


def test_store_failure_still_cuts_and_says_the_rest_is_lost(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    body = _one_result_body("y\n" * 50_000)
    with Session("broken", store=f"dir:{blocker}", policy=Policy()) as session:
        managed = session.manage(body, "anthropic")
    (_, result, _) = next(results(managed.body, "anthropic"))
    text = result_text(result) or ""
    assert len(text) <= 20_000
    (marker,) = find_markers(text)
    assert marker.key is None and "cannot be recalled" in text
    assert managed.report.store_fallbacks == 1 and managed.report.keys_written == ()


def test_errors_are_kept_whole_up_to_the_error_cap() -> None:
    trace = (
        "Traceback (most recent call last):\n"
        + '  File "x.py", line 1, in f\n    g()\n' * 900
        + "ValueError: no\n"
    )
    assert 20_000 < len(trace) < 50_000
    body = _one_result_body(trace, is_error=True)
    with Session("err", store="memory:") as session:
        managed = session.manage(body, "anthropic")
    assert managed.body is body
    assert managed.report.results_cut == 0


def test_the_archive_outlives_the_session_that_wrote_it(tmp_path: Path) -> None:
    body = _one_result_body("z\n" * 20_000)
    with Session("stays", store=f"dir:{tmp_path}") as session:
        key = session.manage(body, "anthropic").report.cuts[0].key
        path = session.store.path("stays", key or "")
        assert path is not None and Path(path).read_text() == "z\n" * 20_000
        assert str(tmp_path) in (result_text(next(results(session.manage(body).body, "anthropic"))[1]) or "")
    # Its markers live on in the agent's transcript: the original stays until the TTL.
    assert Path(path).read_text() == "z\n" * 20_000
    with Session("stays", store=f"dir:{tmp_path}") as later:
        assert later.original(key or "") == "z\n" * 20_000


def test_recall_answers_are_not_cut_while_newest() -> None:
    from toolbudget.marker import RECALL_TOOL

    body = _one_result_body("r\n" * 30_000, tool=RECALL_TOOL)
    with Session("recall", store="memory:", policy=Policy(result_max_chars=1000)) as session:
        assert session.manage(body, "anthropic").body is body


def test_other_sessions_and_path_like_keys_are_not_found(tmp_path: Path) -> None:
    from toolbudget.errors import NotFoundError

    body = _one_result_body("w\n" * 20_000)
    with Session("a", store=f"dir:{tmp_path}") as a:
        key = a.manage(body, "anthropic").report.cuts[0].key or ""
        assert a.original(key) == "w\n" * 20_000
    with Session("b", store=f"dir:{tmp_path}") as b:
        for bad in (key, "../../etc/passwd", "/etc/passwd", "A" * 32, key[:8]):
            with pytest.raises(NotFoundError):
                b.original(bad)
            assert "not found" in b.handle_recall({"key": bad})


_SCRIPT = """
import sys, orjson
from toolbudget.session import Session
from toolbudget.policy import Policy
bodies = orjson.loads(sys.stdin.buffer.read())
policy = Policy(result_max_chars=3000, turn_budget_chars=9000, tool_caps={})
out = []
for n, (api, body) in enumerate(bodies):
    with Session(f"proc-{n}", store=sys.argv[1], policy=policy) as s:
        out.append(s.manage(body, api).body)
sys.stdout.buffer.write(orjson.dumps(out))
"""


def test_two_processes_give_the_same_bytes(real: list[tuple[str, Conversation]], tmp_path: Path) -> None:
    bodies = [(api, to_request(c, api, model="m")) for api in APIS for _, c in real]
    payload = orjson.dumps(bodies)
    outs = []
    for n in range(2):
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT, f"dir:{tmp_path}"],
            input=payload,
            capture_output=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(n + 1)},
        )
        outs.append(done.stdout)
    assert outs[0] == outs[1] != b""
    assert outs[0].count(b"[toolbudget: omitted") > 100


_contents = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=0, max_size=4000),
    st.builds(lambda s, n: (s + "\r\n") * n, st.text(max_size=30), st.integers(0, 400)),
    st.builds(lambda s: s * 2000, st.sampled_from(["😀", "\U0001d518", "é", "\x00", "a\x00b", "中文"])),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_contents, cap=st.integers(200, 5000))
def test_any_content_is_cut_within_its_cap_and_recalled_exactly(text: str, cap: int) -> None:
    policy = Policy(
        result_max_chars=cap, tool_caps={}, preview_head_chars=cap // 2, preview_tail_chars=cap // 4
    )
    body = _one_result_body(text)
    with Session("prop", store="memory:", policy=policy) as session:
        managed = session.manage(body, "anthropic")
        (_, result, _) = next(results(managed.body, "anthropic"))
        shown = result_text(result) or ""
        assert (
            len(shown) <= max(cap, len(text) if len(text) <= cap else 0) or shown.count("[toolbudget:") == 1
        )
        for marker in find_markers(shown):
            assert session.original(marker.key or "") == text
        assert orjson.dumps(session.manage(managed.body, "anthropic").body) == orjson.dumps(managed.body)


def test_a_five_megabyte_line() -> None:
    text = "0123456789" * 500_000
    with Session("big", store="memory:") as session:
        managed = session.manage(_one_result_body(text), "anthropic")
        (_, result, _) = next(results(managed.body, "anthropic"))
        shown = result_text(result) or ""
        assert len(shown) <= 20_000
        (marker,) = find_markers(shown)
        assert session.original(marker.key or "") == text
        assert re.search(r"omitted \d+ of 5000000 chars", shown)


def test_a_result_that_quotes_a_marker_is_its_own_text() -> None:
    """Only cuts this session made are read back as cuts; a quoted marker is just text."""
    log = "".join(f"log line {i}\n" for i in range(5_000))
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": log}]},
    ]
    with Session("quoted", store="memory:") as session:
        first = session.manage({"model": "m", "max_tokens": 10, "messages": messages}, "anthropic").body
        marker = MARKER_RE.search(first["messages"][2]["content"][0]["content"])
        assert marker is not None
        note = f"notes.md:\nlook at the build output later {marker.group(0)}\n"
        messages += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t2", "name": "Read", "input": {"path": "n"}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": note}]},
        ]
        managed = session.manage({"model": "m", "max_tokens": 10, "messages": messages}, "anthropic")
        assert managed.body["messages"][4]["content"][0]["content"] == note
        assert managed.body["messages"][2] == first["messages"][2]
        # A managed body is still managed as its original: the cut is recognised and kept.
        again = session.manage(managed.body, "anthropic").body
        assert again == managed.body


def _two_cuts_one_unreachable() -> dict[str, Any]:
    calls = [{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": "x"}} for n in range(2)]
    results = [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "y\n" * 20_000} for n in range(2)]
    return {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": calls},
            {"role": "user", "content": results},
        ],
    }


def test_callbacks_agree_with_the_report_on_a_resent_body() -> None:
    cuts: list[object] = []
    unreachable: list[object] = []
    policy = Policy(turn_budget_chars=100)
    with Session("notify", store="memory:", policy=policy) as session:
        session.on_cut = cuts.append
        session.on_budget_unreachable = unreachable.append
        body = _two_cuts_one_unreachable()
        for n in (1, 2):
            report = session.manage(body, "anthropic").report
            assert (len(cuts), len(unreachable)) == (n * len(report.cuts), n * len(report.budget_unreachable))
        assert report.cuts and report.budget_unreachable


def test_a_recall_page_too_small_to_hold_its_pointer_is_refused() -> None:
    with Session("page", store="memory:") as session:
        body = session.manage(_two_cuts_one_unreachable(), "anthropic").body
        marker = MARKER_RE.search(body["messages"][2]["content"][0]["content"])
        assert marker is not None
        for size in (-5, 0, 10):
            with pytest.raises(InputError, match="at least"):
                session.recall(marker.group("key"), lines=(1, None), max_chars=size)
        assert len(session.recall(marker.group("key"), lines=(1, None), max_chars=200)) <= 200


def test_a_path_the_marker_cannot_carry_is_left_out(tmp_path: Path) -> None:
    root = tmp_path / "run;1[x]"
    with Session("odd", store=f"dir:{root}") as session:
        body = session.manage(_two_cuts_one_unreachable(), "anthropic").body
        text = body["messages"][2]["content"][0]["content"]
        marker = MARKER_RE.search(text)
        assert marker is not None and marker.group("key")
        assert marker.group("path") is None and "full output" not in text
        assert session.original(marker.group("key")) == "y\n" * 20_000


def test_a_changed_body_keeps_the_callers_field_order() -> None:
    body = _two_cuts_one_unreachable()
    reordered = {"messages": body["messages"], "max_tokens": 5, "model": "m"}
    with Session("order", store="memory:") as session:
        out = session.manage(reordered, "anthropic").body
    assert out["messages"] != reordered["messages"]
    assert list(out)[:3] == ["messages", "max_tokens", "model"]


def test_a_cut_text_keeps_its_place_and_its_own_fields() -> None:
    big = "".join(f"line {i:05d} of output\n" for i in range(5_000))
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    text = {"type": "text", "text": big, "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    body = {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [image, text]}],
            },
        ],
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
    }
    with Session("blocks", store="memory:") as session:
        out = session.manage(body, "anthropic").body
        content = out["messages"][2]["content"][0]["content"]
        assert content[0] == image
        assert content[1]["cache_control"] == text["cache_control"] and len(content[1]["text"]) < len(big)
        marker = MARKER_RE.search(content[1]["text"])
        assert marker is not None and session.original(marker.group("key")) == big


def test_a_gemini_response_under_its_own_key_is_cut_under_it() -> None:
    big = "".join(f"line {i:05d}\n" for i in range(5_000))
    contents: list[dict[str, Any]] = [
        {"role": "user", "parts": [{"text": "task"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"result": big}}}]},
    ]
    assert wire.render(wire.parse({"contents": contents}, "gemini"), "gemini") == {"contents": contents}
    with Session("gemini-key", store="memory:") as session:
        out = session.manage({"contents": contents}, "gemini").body
        response = out["contents"][2]["parts"][0]["functionResponse"]["response"]
        assert list(response) == ["result"]
        marker = MARKER_RE.search(response["result"])
        assert marker is not None and session.original(marker.group("key")) == big


def test_a_managed_body_given_as_bytes_keeps_its_numbers_and_field_order() -> None:
    body = _one_result_body("n\n" * 20_000)
    raw = dumps(body).decode()
    raw = raw.replace(
        '"max_tokens":4096', '"max_tokens":4096,"temperature":1E-1,"top_p":1.0000000000000000000001'
    )
    raw = '{"z_first":1.50,' + raw[1:]
    with Session("numbers", store="memory:") as session:
        managed = session.manage(raw.encode(), "anthropic")
    out = managed.body
    assert isinstance(out, bytes) and managed.report.results_cut == 1
    assert out.startswith(b'{"z_first":1.50,')
    assert b'"temperature":1E-1,"top_p":1.0000000000000000000001' in out


def _tools_and_history(results: int, result_chars: int, tool_chars: int) -> dict[str, Any]:
    """An Anthropic body: ``results`` read results of ``result_chars``, and tools of about ``tool_chars``."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "task"}]
    for turn in range(results):
        call = {"type": "tool_use", "id": f"c{turn}", "name": "Read", "input": {"file_path": f"/f{turn}"}}
        messages.append({"role": "assistant", "content": [call]})
        text = "".join(f"{turn}: line {n} of the file\n" for n in range(result_chars // 24))
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"c{turn}", "content": text}]}
        )
    tools = [
        {
            "name": f"tool_{n}",
            "description": "does one thing " * 20,
            "input_schema": {
                "type": "object",
                "properties": {
                    f"field_{k}": {"type": "string", "description": "a field " * 10} for k in range(20)
                },
            },
        }
        for n in range(tool_chars // 2_400 + 1)
    ]
    return {"model": "m", "max_tokens": 5, "tools": tools, "messages": messages}


def test_tool_definitions_count_against_the_window() -> None:
    body = _tools_and_history(6, 8_000, 100_000)
    plain = {k: v for k, v in body.items() if k != "tools"}
    policy = Policy(context_window_tokens=30_000)
    with Session("tools", store="memory:", policy=policy) as session:
        without = session.manage(plain, "anthropic").report
    with Session("tools", store="memory:", policy=policy) as session:
        report = session.manage(body, "anthropic").report
    tool_tokens = len(orjson.dumps(body["tools"])) // 4
    assert report.tokens_before >= without.tokens_before + tool_tokens * 0.8
    # The history alone fits; with the tools it passes the high watermark, and compaction fires.
    assert without.tokens_before < 0.8 * 30_000 and not without.cuts
    assert report.compaction_event and report.cuts
    assert report.tokens_after < report.tokens_before


def test_a_request_still_over_the_window_says_so(tmp_path: Path) -> None:
    # Tools alone over the window: nothing the budget can cut brings it under.
    body = _tools_and_history(2, 500, 60_000)
    policy = Policy(context_window_tokens=10_000)
    with Session("over", store="memory:", policy=policy) as session:
        report = session.manage(body, "anthropic").report
        small = session.manage({k: v for k, v in body.items() if k != "tools"}, "anthropic").report
    assert report.over_window and report.window_tokens == 10_000
    assert report.as_dict()["over_window"] is True and report.as_dict()["window_tokens"] == 10_000
    assert not small.over_window and small.as_dict()["over_window"] is False
    source = tmp_path / "a.json"
    source.write_bytes(orjson.dumps(body))
    (tmp_path / "toolbudget.toml").write_text("context_window_tokens = 10000\n")
    done = subprocess.run(
        [sys.executable, "-m", "toolbudget.cli", "compact", str(source), "-o", str(tmp_path / "b.json")],
        capture_output=True,
        cwd=tmp_path,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.decode().splitlines() if "context window" in line]
    assert len(warnings) == 1 and "10,000" in warnings[0], done.stderr


ALL_APIS = ("anthropic", "openai-chat", "openai-responses", "gemini", "bedrock-converse")


@pytest.mark.shared
def test_managing_a_managed_body_changes_nothing_in_any_session(
    real: list[tuple[str, Conversation]], tmp_path: Path
) -> None:
    """Every shared conversation on every API: the same session, or one started again with
    the same id and store (``toolbudget compact`` twice), sends a managed body back unchanged."""
    policy = Policy()
    store = f"dir:{tmp_path}"
    changed = []
    for n, (name, conversation) in enumerate(real):
        for api in ALL_APIS:
            body = to_request(conversation, api, model="claude-sonnet-4-5")
            with Session(f"m{n}-{api}", store=store, policy=policy) as session:
                once = orjson.dumps(session.manage(body, api).body)
                warm = orjson.dumps(session.manage(orjson.loads(once), api).body)
            with Session(f"m{n}-{api}", store=store, policy=policy) as session:
                fresh = session.manage(once, api).body
            if warm != once or fresh != once:
                changed.append((name, api))
    assert changed == []


def test_a_restarted_session_reads_its_cuts_back_and_compacts_no_further(tmp_path: Path) -> None:
    # Old results cut to previews under the minimum: read as their own text, the history looks
    # smaller and the schedule decides differently.
    messages: list[dict[str, Any]] = [{"role": "user", "content": "task"}]
    for turn in range(12):
        call = {"type": "tool_use", "id": f"c{turn}", "name": "Bash", "input": {"command": f"cat f{turn}"}}
        messages.append({"role": "assistant", "content": [call]})
        text = "".join(f"{n}: def f{turn}_{n}(): pass\n" for n in range(300 + 40 * turn))
        result = {"type": "tool_result", "tool_use_id": f"c{turn}", "content": text}
        messages.append({"role": "user", "content": [result]})
    body = {"model": "m", "max_tokens": 5, "messages": messages}
    policy = Policy(result_max_chars=5_000)
    with Session("again", store=f"dir:{tmp_path}", policy=policy) as session:
        first = session.manage(body, "anthropic")
    assert first.report.cuts and first.report.keys_written
    # Only originals are listed as written, one per cut.
    assert set(first.report.keys_written) == {c.key for c in first.report.cuts}
    with Session("again", store=f"dir:{tmp_path}", policy=policy) as session:
        second = session.manage(first.body, "anthropic")
    assert second.body == first.body
    assert [(c.index, c.kind, c.before) for c in second.report.cuts] == [
        (c.index, c.kind, c.before) for c in first.report.cuts
    ]
    # A text that only quotes a cut's marker is still its own text in a restarted session.
    marker = MARKER_RE.search(str(first.body["messages"][2]["content"][0]["content"]))
    assert marker is not None
    quoted = [*messages, {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}]
    quoted.append({"role": "user", "content": f"see {marker.group(0)}"})
    with Session("again", store=f"dir:{tmp_path}", policy=policy) as session:
        third = session.manage({**body, "messages": quoted}, "anthropic").body
    assert third["messages"][-1]["content"] == f"see {marker.group(0)}"


@pytest.mark.parametrize("api", ALL_APIS)
def test_tool_definitions_count_on_every_api(api: str) -> None:
    from toolbudget.model import ToolDef

    messages = [Message("user", (Text("task"),))]
    for turn in range(6):
        call = ToolCall(f"c{turn}", "Bash", {"command": f"make {turn}"})
        messages.append(Message("assistant", (call,)))
        text = "".join(f"{turn}: line {n} of the build\n" for n in range(330))
        messages.append(Message("tool", (ToolResult(call.id, (Text(text),), False, "Bash"),)))
    schema = {
        "type": "object",
        "properties": {f"f{k}": {"type": "string", "description": "x" * 80} for k in range(40)},
    }
    tools = tuple(ToolDef(f"tool_{n}", "does one thing " * 20, schema) for n in range(28))
    body = to_request(Conversation("c", "test", tuple(messages), (Text("rules"),), tools), api, model="m")
    request = wire.parse(body, api)
    assert request.tools
    bare = wire.render(replace(request, tools=()))
    policy = Policy(context_window_tokens=30_000)
    with Session("t", store="memory:", policy=policy) as session:
        without = session.manage(bare, api).report
    with Session("t", store="memory:", policy=policy) as session:
        report = session.manage(body, api).report
    tool_chars = sum(len(t.name) + len(t.description or "") + len(orjson.dumps(t.parameters)) for t in tools)
    assert report.chars_before == count_chars(replace(request, tools=())) + tool_chars
    assert report.chars_before == without.chars_before + tool_chars
    # The history alone is well inside the window; with the tools it is past the watermark.
    assert not without.compaction_event and report.compaction_event


def _one_big_result(text: str) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "look"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": text}]},
        ],
    }


@pytest.mark.parametrize("damage", ["empty", "short", "other"])
def test_an_entry_that_does_not_match_its_key_reads_as_missing(tmp_path: Path, damage: str) -> None:
    # The dir store does not flush each write: after a power loss an entry may be empty or short.
    text = "".join(f"line {n} of the output\n" for n in range(2000))
    with Session("torn", store=f"dir:{tmp_path}", policy=TIGHT) as session:
        managed = session.manage(_one_big_result(text), "anthropic")
        [key] = [m.key for m in find_markers(orjson.dumps(managed.body).decode()) if m.key]
        assert key is not None and session.original(key) == text
        location = session.store.location(session.id, key)
        assert location is not None
        os.chmod(location, 0o600)
        torn = {"empty": "", "short": text[: len(text) // 2], "other": text.replace("line 7 ", "line 8 ")}
        Path(location).write_text(torn[damage])
        with pytest.raises(NotFoundError):
            session.original(key)
        assert "not found" in session.handle_recall({"key": key})


@pytest.mark.parametrize("again", ["warm", "fresh"])
def test_a_cut_whose_original_is_gone_says_so_when_its_body_is_managed_again(
    tmp_path: Path, again: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A managed body managed again (``compact b.json``) reads its cuts back from their originals.

    When one original was lost since (its file deleted by hand), the request carries only the
    preview, so nothing can keep it again: the marker must say the rest could not be kept,
    never name the key the store no longer holds.
    """
    output = "".join(f"line {n} of a long command's output\n" for n in range(3000))
    body = bash_body(output)
    store = f"dir:{tmp_path}"
    first = Session("s1", store=store)
    managed = first.manage(body, api="anthropic")
    (key,) = [m.key for m in find_markers(orjson.dumps(managed.body).decode()) if m.key]
    os.unlink(tmp_path / "toolbudget-s1" / "tool-results" / f"{key}.txt")
    session = first if again == "warm" else Session("s1", store=store)
    with caplog.at_level(logging.WARNING, logger="toolbudget"):
        second = session.manage(managed.body, api="anthropic")
    assert any(key in r.getMessage() and "cannot be recalled" in r.getMessage() for r in caplog.records)
    result = wire.parse(second.body, "anthropic").messages[2].parts[0]
    assert isinstance(result, ToolResult)
    text = result_text(result)
    assert text is not None
    assert [m.key for m in find_markers(text)] == [None]
    assert "the rest could not be kept and cannot be recalled" in text
    assert session.manage(second.body, api="anthropic").body == second.body
    first.close()
    session.close()
