"""Scenarios built outside the code's own tests: what a new user meets first.

Each test here failed on the code as it was, and names the behaviour the
README promises that it checks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import orjson

# A body whose assistant turn has a call with no result, so `repair` must change it, and
# whose numbers are spelled in ways a JSON round trip would not keep, with `tools` first.
ODD_NUMBERS = (
    b'{"model":"m","max_tokens":10,"tools":[{"name":"x","input_schema":{"type":"object"}}],'
    b'"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use",'
    b'"id":"t1","name":"x","input":{"b":1.50,"c":-0.0,"z":1E5,"n":-0,'
    b'"big":123456789012345678901234567890}}]},{"role":"user","content":"next"}]}'
)


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "toolbudget.cli", *args],
        input=stdin,
        capture_output=True,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


def call_input(body: bytes) -> bytes:
    """The bytes of the tool call's ``input`` object, as written in ``body``."""
    start = body.index(b'"input":{"b"') + len(b'"input":')
    return body[start : body.index(b"}", start) + 1]


def test_cli_repair_keeps_number_literals_and_field_order() -> None:
    done = cli("repair", "--api", "anthropic", "-", stdin=ODD_NUMBERS)
    assert done.returncode == 0, done.stderr
    assert b"synthesized_result" in done.stderr
    out = done.stdout
    assert call_input(out) == call_input(ODD_NUMBERS)
    assert list(orjson.loads(out)) == ["model", "max_tokens", "tools", "messages"]


def test_cli_repair_and_compact_take_a_huge_number_beside_a_long_integer(tmp_path: Any) -> None:
    # 1e400 sends the body through the standard library's reader; an integer past 64 bits
    # then sends the output through the standard library's writer too.
    raw = ODD_NUMBERS.replace(b'"z":1E5', b'"z":1e400')
    for args in (
        ("repair", "--api", "anthropic", "-"),
        ("compact", "--api", "anthropic", "--store", f"dir:{tmp_path}", "-"),
    ):
        done = cli(*args, stdin=raw)
        assert done.returncode == 0, (args, done.stderr)
        assert call_input(done.stdout) == call_input(raw), args


def test_a_history_given_in_extra_body_is_managed_too() -> None:
    # The SDK lays extra_body over the named arguments, so this history is what would be sent.
    import json

    import anthropic
    import httpx2

    from toolbudget import Session, wrap

    sent: list[dict[str, Any]] = []

    def upstream(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.content))
        answer = {"type": "text", "text": "ok"}
        usage = {"input_tokens": 1, "output_tokens": 1}
        return httpx2.Response(
            200,
            json={
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": "x",
                "content": [answer],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": usage,
            },
        )

    broken = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "Bash", "input": {}}]},
        {"role": "user", "content": "what happened?"},
    ]
    http = httpx2.Client(transport=httpx2.MockTransport(upstream))
    raw = anthropic.Anthropic(api_key="k", base_url="http://upstream", http_client=http, max_retries=0)
    with Session("extra-body", store="memory:") as session:
        client = wrap(raw, session=session)
        client.messages.create(
            model="x",
            max_tokens=10,
            messages=[{"role": "user", "content": "placeholder"}],
            tools=[{"name": "Bash", "input_schema": {"type": "object"}}],
            extra_body={"messages": broken, "metadata": {"user_id": "u"}},
        )
    body = sent[-1]
    assert body["metadata"] == {"user_id": "u"}
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    content = body["messages"][2]["content"]
    assert isinstance(content, list), content  # the call's result was synthesized first
    first = content[0]
    assert first["type"] == "tool_result" and first["tool_use_id"] == "a" and first["is_error"] is True
    assert broken[2] == {"role": "user", "content": "what happened?"}  # the caller's history is untouched


def test_usage_errors_are_one_line_with_status_2() -> None:
    for args in (
        ("validate", "--bogus"),
        ("repair", "--api", "nope", "-"),
        ("convert",),
        ("convert", "x.json", "--to", "anthropic", "--max-tokens", "many"),
        ("no-such-command",),
    ):
        done = cli(*args, stdin=b"{}")
        assert done.returncode == 2, args
        lines = done.stderr.decode().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("toolbudget: error: "), (args, lines)
    assert cli("--version").returncode == 0
    helped = cli("validate", "--help")
    assert helped.returncode == 0 and b"Usage:" in helped.stdout


def test_a_reader_gone_mid_write_of_a_large_output_gives_status_141(tmp_path: Any) -> None:
    # Far more than a pipe holds, written at once: the reader leaves while the write waits.
    doc = [
        {
            "task_id": task,
            "trial": 0,
            "reward": 1.0,
            "traj": [
                {"role": "system", "content": "You are an airline agent."},
                {"role": "user", "content": "x" * 400_000},
                {"role": "assistant", "content": "Done."},
            ],
        }
        for task in range(3)
    ]
    path = tmp_path / "tau.json"
    path.write_bytes(orjson.dumps(doc))
    with subprocess.Popen(
        [sys.executable, "-m", "toolbudget.cli", "convert", str(path), "--to", "openai-chat", "--all"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    ) as writer:
        assert writer.stdout is not None and writer.stderr is not None
        assert writer.stdout.read(10) == b'{"messages'
        writer.stdout.close()  # the reader goes away, as `| head -c 10` does
        err = writer.stderr.read()
        status = writer.wait(timeout=120)
    assert status == 141, err
    assert err == b""


def test_a_long_command_keeps_the_file_name_it_reads() -> None:
    from toolbudget.compaction import key_argument
    from toolbudget.model import ToolCall

    path = "/home/user/projects/some-very-long-project-name/src/pkg/sub/module/a_rather_long_module_name.py"
    for command in (f"cat {path}", f"sed -n 1,200p {path} | head -50"):
        shown = key_argument(ToolCall("b", "Bash", {"command": command}))
        assert len(shown) <= 80 and "…" in shown, shown
        assert "/a_rather_long_module_name.py" in shown, shown
        assert shown.startswith(command.split("/", 1)[0]), shown


def test_the_sdks_lowest_level_request_to_a_conversation_endpoint_is_refused() -> None:
    import anthropic
    import httpx2
    import pytest
    from anthropic._models import FinalRequestOptions

    from toolbudget import Session, UnsupportedClient, wrap

    sent: list[bytes] = []

    def upstream(request: httpx2.Request) -> httpx2.Response:
        sent.append(request.content)
        return httpx2.Response(200, json={"data": [], "has_more": False})

    http = httpx2.Client(transport=httpx2.MockTransport(upstream))
    raw = anthropic.Anthropic(api_key="k", base_url="http://upstream", http_client=http, max_retries=0)
    history = [{"role": "user", "content": "go"}]
    with Session("low-level", store="memory:") as session:
        client = wrap(raw, session=session)
        for url, body in (
            ("/v1/messages", {"model": "x", "max_tokens": 5, "messages": history}),
            ("/v1/messages/batches", {"requests": [{"custom_id": "1", "params": {"messages": history}}]}),
        ):
            options = FinalRequestOptions.construct(method="post", url=url, json_data=body)
            with pytest.raises(UnsupportedClient):
                client.request(object, options)
            with pytest.raises(UnsupportedClient):
                client.post(url, body=body, cast_to=object)
        assert sent == []
        listing = FinalRequestOptions.construct(method="get", url="/v1/models")
        client.request(object, listing)  # anything else is the SDK's own
        assert sent == [b""]


def test_an_editor_tools_summary_names_the_file_not_only_its_verb() -> None:
    from toolbudget.compaction import summarize
    from toolbudget.model import ToolCall

    path = "/workspace/ponylang__ponyc__0.1/src/libponyc/expr/match.c"
    text = "".join(f"{n:6}\tline {n} of the file\n" for n in range(1, 400))
    for tool in ("str_replace_editor", "str_replace_based_edit_tool"):
        call = ToolCall("e", tool, {"command": "view", "path": path, "view_range": [1, 400]})
        detail = summarize(tool, call, text).detail
        assert detail.startswith(f"{tool} `view /workspace/") and "/match.c`" in detail, detail


PYTEST_RUN = (
    "============================= test session starts ==============================\n"
    "collected 42 items\n\n"
    "tests/test_api.py " + "." * 40 + "FF\n\n"
    "=================================== FAILURES ===================================\n"
    "___ test_login ___\n\n    def test_login():\n>       assert resp.status == 200\n"
    "E       AssertionError: expected 200\n\ntests/test_api.py:12: AssertionError\n"
    + "".join(f"captured log line {n}\n" for n in range(150))
    + "=========================== short test summary info ============================\n"
    "FAILED tests/test_api.py::test_login - AssertionError: expected 200\n"
    "========================= 2 failed, 40 passed in 3.21s =========================\n"
)


def test_a_test_run_in_codex_json_output_keeps_its_error_lines() -> None:
    from toolbudget.compaction import summarize
    from toolbudget.model import ToolCall

    call = ToolCall("c", "shell", {"command": ["bash", "-lc", "pytest -q"]})
    plain = summarize("shell", call, "Exit code: 1\nWall time: 3.3 seconds\nOutput:\n" + PYTEST_RUN)
    enveloped = orjson.dumps({"output": PYTEST_RUN, "metadata": {"exit_code": 1, "duration_seconds": 3.3}})
    wrapped = summarize("shell", call, enveloped.decode())
    assert "exit 1" in wrapped.detail
    assert "FAILED tests/test_api.py::test_login - AssertionError: expected 200" in wrapped.errors
    assert wrapped.errors == plain.errors


def test_python_dash_m_toolbudget_runs_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolbudget", "validate", "--api", "anthropic", "-"],
        input=b'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}',
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == b"valid for anthropic"
