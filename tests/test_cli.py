"""The command line: exit codes, one-line errors, and the library's documented exceptions on bad input."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

import toolbudget
from toolbudget import (
    EncodingError,
    InvalidJSON,
    ShapeError,
    TranscriptError,
    UnknownAPIError,
    detect_api,
    load_transcript,
    repair,
    validate,
)

BROKEN: dict[str, Any] = {
    "model": "m",
    "max_tokens": 10,
    "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "Bash", "input": {}}]},
        {"role": "user", "content": "what happened?"},
    ],
}


def cli(
    *args: str, stdin: bytes | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "toolbudget.cli", *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


def one_line_error(done: subprocess.CompletedProcess[bytes]) -> str:
    assert done.returncode == 2, done.stderr
    err = done.stderr.decode()
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("toolbudget: error: ")
    return lines[0]


def test_validate_exit_codes(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_bytes(orjson.dumps(BROKEN))
    done = cli("validate", "--api", "anthropic", str(broken))
    assert done.returncode == 1
    assert done.stdout.decode().startswith("messages.1: `tool_use` ids were found without")

    fixed = tmp_path / "fixed.json"
    report = tmp_path / "report.json"
    done = cli("repair", "--api", "anthropic", str(broken), "-o", str(fixed), "--report", str(report))
    assert done.returncode == 0, done.stderr
    assert cli("validate", "--api", "anthropic", str(fixed)).returncode == 0
    data = json.loads(report.read_text())
    assert [r["kind"] for r in data["repairs"]] == ["synthesized_result"]
    assert data["violations"][0]["location"] == "messages.1"
    assert data["remaining"] == []


def test_repair_writes_a_valid_body_back_byte_for_byte() -> None:
    raw = b'{ "model": "m",\n  "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}] }'
    done = cli("repair", "--api", "anthropic", "-", stdin=raw)
    assert done.returncode == 0
    assert done.stdout == raw + b"\n"


def test_api_is_detected_from_stdin() -> None:
    done = cli("validate", stdin=orjson.dumps(BROKEN))
    assert done.returncode == 1
    assert b"for anthropic" in done.stderr


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        (b"{not json", "not valid JSON"),
        (b"", "is empty"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"model": "m"}', "needs a `messages` array"),
        (b'{"messages": [{"role": "robot", "content": "x"}]}', "unknown role 'robot'"),
        (
            b'{"messages": [{"role": "user", "content": [{"type": "hologram"}]}]}',
            "unknown content block type",
        ),
        (b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}', "not valid UTF-8"),
        (b'{"messages": [{"role": "user", "content": "\\ud800"}]}', "not valid"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, payload: bytes, needle: str) -> None:
    path = tmp_path / "body.json"
    path.write_bytes(payload)
    for command in ("validate", "repair"):
        line = one_line_error(cli(command, "--api", "anthropic", str(path)))
        assert needle in line


def test_shape_errors_name_the_location() -> None:
    with pytest.raises(ShapeError) as info:
        validate(
            {"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": [{"type": 3}]}]},
            "anthropic",
        )
    assert info.value.location == "messages.1.content.0.type"


def test_missing_file_and_directory(tmp_path: Path) -> None:
    assert "No such file" in one_line_error(cli("validate", str(tmp_path / "nope.json")))
    assert "is a directory" in one_line_error(cli("validate", str(tmp_path)))


def test_library_raises_documented_exceptions() -> None:
    with pytest.raises(InvalidJSON):
        validate(b"{", "anthropic")
    with pytest.raises(InvalidJSON):
        validate(b"", "anthropic")
    with pytest.raises(EncodingError):
        validate(b'{"messages": "\xff"}', "anthropic")
    with pytest.raises(EncodingError):
        validate('{"messages": [{"role": "user", "content": "\ud800"}]}', "anthropic")
    with pytest.raises(UnknownAPIError):
        validate(BROKEN, "telepathy")
    with pytest.raises(UnknownAPIError):
        detect_api({"messages": [{"role": "user", "content": "hello"}]})
    for error in (InvalidJSON, EncodingError, ShapeError, TranscriptError, UnknownAPIError):
        assert issubclass(error, toolbudget.InputError)
        assert issubclass(error, toolbudget.ToolbudgetError)
        assert issubclass(error, ValueError)


def test_truncated_and_empty_transcripts(tmp_path: Path) -> None:
    lines = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "message": {"role": "user", "content": "hi"}},
        {
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "hello"}]},
        },
    ]
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(orjson.dumps(lines[0]) + b"\n" + orjson.dumps(lines[1])[:40])
    with pytest.raises(TranscriptError, match="line 2"):
        load_transcript(cut)
    assert "line 2" in one_line_error(cli("convert", str(cut), "--to", "anthropic"))
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert "empty" in one_line_error(cli("convert", str(empty), "--to", "openai-chat"))


def test_a_100_mb_body_works(tmp_path: Path) -> None:
    huge = "x" * 99 + "\n"
    result = huge * (100 * 1024 * 1024 // len(huge))
    body: dict[str, Any] = copy.deepcopy(BROKEN)
    body["messages"][2] = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "a", "content": result}],
    }
    raw = orjson.dumps(body)
    assert len(raw) > 100 * 1024 * 1024
    assert validate(raw, "anthropic") == []
    assert repair(raw, "anthropic").body is raw
    path = tmp_path / "huge.json"
    path.write_bytes(raw)
    done = cli("validate", "--api", "anthropic", str(path))
    assert done.returncode == 0, done.stderr[-500:]


def test_convert_writes_a_body_for_each_api(tmp_path: Path) -> None:
    from toolbudget.demo import _Writer

    writer = _Writer("s1", str(tmp_path))
    writer.user("list files")
    writer.tool_use("toolu_1", "Bash", {"command": "ls"})
    writer.tool_result("toolu_1", "a\nb", False)
    writer.assistant_text("two files")
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(line) for line in writer.lines))
    for api in toolbudget.APIS:
        done = cli("convert", str(path), "--to", api)
        assert done.returncode == 0, done.stderr
        body = orjson.loads(done.stdout)
        assert validate(body, api) == []
        assert detect_api(body) == api or api in ("anthropic", "openai-chat")


def test_compact_recall_and_clean(tmp_path: Path) -> None:
    original = "".join(f"{n:05d} some output line\n" for n in range(3000))
    body = copy.deepcopy(BROKEN)
    body["messages"][2] = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "a", "content": original}],
    }
    source = tmp_path / "body.json"
    source.write_bytes(orjson.dumps(body))
    out = tmp_path / "out.json"
    report = tmp_path / "report.json"
    store = f"dir:{tmp_path / 'store'}"
    done = cli(
        "compact", str(source), "--session", "cli1", "--store", store, "-o", str(out), "--report", str(report)
    )
    assert done.returncode == 0, done.stderr
    assert b"1 of 1 results cut" in done.stderr
    data = json.loads(report.read_text())
    key = data["cuts"][0]["key"]
    assert data["keys_written"] == [key]
    shown = orjson.loads(out.read_bytes())["messages"][2]["content"][0]["content"]
    assert f"<<tb:{key}>>" in shown and len(shown) < len(original)

    whole = cli("recall", key, "--session", "cli1", "--store", store)
    assert whole.returncode == 0 and whole.stdout == original.encode()
    page = cli("recall", key, "--session", "cli1", "--store", store, "--lines", "10:12")
    assert page.stdout.decode().splitlines()[1:4] == [original.splitlines()[i] for i in (9, 10, 11)]
    found = cli("recall", key, "--session", "cli1", "--store", store, "--grep", "^0299[0-9] ")
    assert "2991: 02990 some output line" in found.stdout.decode()

    other = cli("recall", key, "--session", "someone-else", "--store", store)
    assert other.returncode == 1 and b"not found" in other.stderr
    bad = cli("recall", "../../etc/passwd", "--session", "cli1", "--store", store)
    assert bad.returncode == 1 and b"not found" in bad.stderr

    cleaned = cli("clean", "--session", "cli1", "--store", store)
    # The original, and the record that its preview was sent as a cut.
    assert cleaned.returncode == 0 and b"removed 2" in cleaned.stderr
    assert cli("recall", key, "--session", "cli1", "--store", store).returncode == 1


def test_compact_bad_store_url_is_one_line(tmp_path: Path) -> None:
    source = tmp_path / "body.json"
    source.write_bytes(orjson.dumps(BROKEN))
    assert "store" in one_line_error(cli("compact", str(source), "--store", "carrier-pigeon://x")).lower()
