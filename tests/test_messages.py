"""Messages for the mistakes a newcomer makes first: each names the real problem, and where it is."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from toolbudget import (
    EncodingError,
    InputError,
    InvalidJSON,
    Policy,
    Session,
    ShapeError,
    UnknownAPIError,
    detect_api,
    validate,
)
from toolbudget.cli_input import read_bodies


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "toolbudget", *args],
        capture_output=True,
        cwd=cwd,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


def one_line_error(done: subprocess.CompletedProcess[bytes]) -> str:
    err = done.stderr.decode()
    assert done.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("toolbudget: error: "), err
    return lines[0]


def smallest_per_format(trajectories: Path) -> dict[str, Path]:
    manifest = orjson.loads((trajectories / "manifest.json").read_bytes())
    chosen: dict[str, Any] = {}
    for entry in manifest:
        best = chosen.get(entry["format"])
        if best is None or entry["size"] < best["size"]:
            chosen[entry["format"]] = entry
    return {fmt: trajectories / entry["file"] for fmt, entry in chosen.items()}


# --- a transcript where a body is expected ------------------------------------------


@pytest.mark.shared
def test_every_shared_transcript_format_is_refused_as_a_body(trajectories: Path) -> None:
    files = smallest_per_format(trajectories)
    assert {"mini-swe-agent-traj-v1", "gemini-cli-session-json", "claude-code-jsonl"} <= set(files)
    for fmt, path in files.items():
        with pytest.raises(ShapeError) as info:
            read_bodies(path.read_bytes(), str(path))
        message = str(info.value)
        assert f"{path} is an agent transcript ({fmt}), not a request body" in message
        assert "toolbudget convert" in message


@pytest.mark.shared
def test_validate_repair_and_compact_say_a_transcript_is_one(trajectories: Path, tmp_path: Path) -> None:
    files = smallest_per_format(trajectories)
    for fmt in ("mini-swe-agent-traj-v1", "gemini-cli-session-json", "claude-code-jsonl"):
        for command in ("validate", "repair", "compact"):
            line = one_line_error(cli(command, str(files[fmt]), cwd=tmp_path))
            assert "agent transcript" in line and "toolbudget convert" in line, (command, fmt, line)


def test_request_bodies_are_not_taken_for_transcripts() -> None:
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    assert len(read_bodies(body, "x")) == 1
    assert len(read_bodies(body + b"\n" + body + b"\n", "x")) == 2


# --- a body of the wrong shape ----------------------------------------------------------


def test_messages_of_the_wrong_type_is_named() -> None:
    with pytest.raises(UnknownAPIError) as info:
        detect_api({"messages": "hi"})
    assert "`messages` must be an array of messages, not a string" in str(info.value)
    assert "has no `messages`" not in str(info.value)


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        ([{"role": "wizard", "content": "x"}], "messages.0.role 'wizard' is not a role of any API"),
        ([{"role": "user", "content": "x"}, 7], "messages.1 must be an object, not a number"),
        ([{"content": "x"}], "messages.0.role must be a string, not null"),
    ],
)
def test_a_message_no_api_has_is_named_where_it_is(messages: list[Any], needle: str) -> None:
    with pytest.raises(UnknownAPIError) as info:
        detect_api({"messages": messages})
    assert needle in str(info.value)
    assert "fit both" not in str(info.value)


def test_a_plain_user_message_still_fits_both() -> None:
    with pytest.raises(UnknownAPIError, match="fit both"):
        detect_api({"messages": [{"role": "user", "content": "hello"}]})


def test_bytes_that_are_not_utf8_are_named_by_offset_in_the_library() -> None:
    with pytest.raises(EncodingError) as info:
        validate(b'{"messages": [], "x": "ab\xe9"}')
    message = str(info.value)
    assert "byte 0xe9 at offset 25 (line 1, column 26)" in message
    assert "surrogates" not in message


def test_random_bytes_on_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "noise.bin"
    path.write_bytes(bytes(range(256)) * 2)
    line = one_line_error(cli("validate", str(path), cwd=tmp_path))
    assert "byte 0x80 at offset 128" in line and "surrogates" not in line


def test_the_command_line_names_the_file_of_a_bad_body(tmp_path: Path) -> None:
    path = tmp_path / "wizard.json"
    path.write_bytes(b'{"messages": [{"role": "wizard", "content": "x"}]}')
    for command in ("validate", "repair", "compact"):
        line = one_line_error(cli(command, str(path), cwd=tmp_path))
        assert line.startswith(f"toolbudget: error: {path}: "), (command, line)
        assert "'wizard' is not a role" in line


def test_jsonl_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bodies.jsonl"
    good = b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}'
    path.write_bytes(good + b'\n{"messages": "hi"}\n')
    for command in ("validate", "compact"):
        done = cli(command, "--api", "anthropic", str(path), cwd=tmp_path)
        assert done.returncode == 2
        last = done.stderr.decode().strip().splitlines()[-1]  # compact has said how line 1 went
        assert last.startswith(f"toolbudget: error: {path} line 2: messages"), (command, last)


# --- a path where a body is expected -------------------------------------------------------


@pytest.mark.parametrize("given", ["path.json", "logs/run.jsonl", "README.md"])
def test_a_path_given_as_the_body_is_said_to_be_one(
    given: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "README.md").write_text("# hi\n")
    monkeypatch.chdir(tmp_path)  # README.md names a file here; the others end in .json or .jsonl
    with pytest.raises(InvalidJSON) as info:
        validate(given)
    assert f"{given!r} looks like a file path; read the file first" in str(info.value)
    assert "load_transcript" in str(info.value)


def test_a_path_object_is_said_to_be_one() -> None:
    with pytest.raises(ShapeError, match="looks like a file path"):
        validate(Path("session.json"))


def test_text_that_is_not_a_path_gets_no_path_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for text in ("hello", '{"messages": [', "no such file here"):
        with pytest.raises(InvalidJSON) as info:
            validate(text)
        assert "file path" not in str(info.value)


# --- directories, session ids, recall keys --------------------------------------------------


@pytest.mark.parametrize("command", [("convert", "--to", "anthropic"), ("replay",), ("inspect",)])
def test_a_directory_is_one_line_naming_it(command: tuple[str, ...], tmp_path: Path) -> None:
    line = one_line_error(cli(command[0], str(tmp_path), *command[1:], cwd=tmp_path))
    assert line == f"toolbudget: error: {tmp_path} is a directory, not a transcript file"


@pytest.mark.parametrize("blank", ["", "   ", "\t"])
def test_a_blank_session_id_is_refused(blank: str) -> None:
    with pytest.raises(InputError, match="session id must be a non-blank string"):
        Session(blank, store="memory:")


def test_a_blank_session_id_is_refused_on_the_command_line(tmp_path: Path) -> None:
    body = tmp_path / "b.json"
    body.write_bytes(b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}')
    for args in (
        ("compact", "--api", "anthropic", "--session", "", str(body)),
        ("recall", "--session", " ", "0" * 16),
        ("clean", "--session", ""),
    ):
        line = one_line_error(cli(*args, cwd=tmp_path))
        assert line.startswith("toolbudget: error: --session must name a session, not "), (args, line)


def test_recall_takes_any_spelling_of_a_key() -> None:
    policy = Policy(result_max_chars=2000)
    text = "\n".join(f"line {n} " + "x" * 60 for n in range(400))
    with Session("spellings", store="memory:", policy=policy) as session:
        shown = session.cut_result("bash", text)
        found = re.search(r"<<tb:([a-z0-9]+)>>", shown)
        assert found is not None, shown
        key = found.group(1)
        wanted = session.handle_recall({"key": key, "lines": "3:3"})
        assert "line 2 " in wanted
        for spelling in (
            f"tb:{key}",
            f"<<tb:{key}>>",
            key.upper(),
            f"  <<TB:{key.upper()}>>\n",
            f" tb:{key} ",
        ):
            assert session.handle_recall({"key": spelling, "lines": "3:3"}) == wanted, spelling
