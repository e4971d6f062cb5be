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
from histories import bash_body, bash_turns
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


def reader_gone(command: tuple[str, ...]) -> tuple[int, bytes]:
    """A command whose reader closes the pipe at once (``| head -0``): its status and stderr."""
    process = subprocess.Popen(
        [sys.executable, "-m", "toolbudget.cli", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    err = process.stderr.read()
    process.stderr.close()
    return process.wait(), err


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
    # A line cut off before the last one is damage (a cut-off last line is only left out).
    cut.write_bytes(
        orjson.dumps(lines[0]) + b"\n" + orjson.dumps(lines[1])[:40] + b"\n" + orjson.dumps(lines[1])
    )
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
    # The original, the record that its preview was sent as a cut, the record of its tool, the
    # record of the preview by its inputs and the schedule's record of its decisions (what a
    # session started again reads back).
    assert cleaned.returncode == 0 and b"removed 5" in cleaned.stderr
    assert cli("recall", key, "--session", "cli1", "--store", store).returncode == 1


def test_an_output_that_cannot_be_written_is_refused_before_any_work(tmp_path: Path) -> None:
    body = copy.deepcopy(BROKEN)
    body["messages"][2] = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "a", "content": "line\n" * 20_000}],
    }
    source = tmp_path / "body.json"
    source.write_bytes(orjson.dumps(body))
    store = tmp_path / "store"
    compact = ("compact", str(source), "--session", "s", "--store", f"dir:{store}")
    assert "--output" in one_line_error(cli(*compact, "-o", str(tmp_path)))  # a directory
    assert "does not exist" in one_line_error(cli(*compact, "-o", str(tmp_path / "no" / "out.json")))
    assert "--report" in one_line_error(cli(*compact, "--report", str(tmp_path)))
    assert not store.exists() or not any(store.rglob("*.*"))  # nothing was cut into the store
    repair = ("repair", "--api", "anthropic", str(source))
    assert "--output" in one_line_error(cli(*repair, "-o", str(tmp_path / "no" / "fixed.json")))
    assert "--png" in one_line_error(cli("inspect", str(source), "--png", str(tmp_path)))
    # A file that can be written still is.
    done = cli(*compact, "-o", str(tmp_path / "out.json"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.json").stat().st_size < len(orjson.dumps(body))


def test_compact_bad_store_url_is_one_line(tmp_path: Path) -> None:
    source = tmp_path / "body.json"
    source.write_bytes(orjson.dumps(BROKEN))
    assert "store" in one_line_error(cli("compact", str(source), "--store", "carrier-pigeon://x")).lower()


# --------------------------------------------------------------------------- convert


def tau_bench_file(tmp_path: Path, *, agent_first: bool = False, tasks: int = 2) -> Path:
    """A tau-bench results file of ``tasks`` small conversations (the agent speaking first, if asked)."""
    doc = []
    for task in range(tasks):
        traj: list[dict[str, Any]] = [{"role": "system", "content": "You are an airline agent."}]
        if agent_first:
            traj.append({"role": "assistant", "content": "Hello, how can I help?"})
        traj += [
            {"role": "user", "content": f"Where is flight {task}?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{task}",
                        "type": "function",
                        "function": {"name": "get_flight_status", "arguments": json.dumps({"flight": task})},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": f"call_{task}",
                "name": "get_flight_status",
                "content": "on time",
            },
            {"role": "assistant", "content": "It is on time."},
        ]
        doc.append({"task_id": task, "trial": 0, "reward": 1.0, "traj": traj})
    path = tmp_path / ("agent-first.json" if agent_first else "tau.json")
    path.write_bytes(orjson.dumps(doc))
    return path


MAX_TOKEN_FIELDS = {
    "anthropic": ("max_tokens",),
    "openai-chat": ("max_completion_tokens",),
    "openai-responses": ("max_output_tokens",),
    "gemini": ("generationConfig", "maxOutputTokens"),
    "bedrock-converse": ("inferenceConfig", "maxTokens"),
}


def dig(body: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = body
    for key in path:
        value = value[key]
    return value


def test_convert_sets_max_tokens_in_each_apis_own_field(tmp_path: Path) -> None:
    path = tau_bench_file(tmp_path, tasks=1)
    for api, field in MAX_TOKEN_FIELDS.items():
        done = cli("convert", str(path), "--to", api, "--max-tokens", "777")
        assert done.returncode == 0, done.stderr
        body = orjson.loads(done.stdout)
        assert dig(body, field) == 777, api
        assert validate(body, api) == []


@pytest.mark.parametrize("value", ["0", "-5"])
def test_convert_refuses_max_tokens_that_are_not_positive(tmp_path: Path, value: str) -> None:
    from toolbudget.convert import to_request

    path = tau_bench_file(tmp_path, tasks=1)
    line = one_line_error(cli("convert", str(path), "--to", "anthropic", "--max-tokens", value))
    assert "--max-tokens must be a positive" in line
    conversation = load_transcript(path).conversations[0]
    with pytest.raises(toolbudget.InputError, match="positive"):
        to_request(conversation, "anthropic", max_tokens=int(value))


def test_convert_all_writes_json_lines_that_the_other_commands_read(tmp_path: Path) -> None:
    path = tau_bench_file(tmp_path, tasks=3)
    done = cli("convert", str(path), "--to", "anthropic", "--all")
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(b"\n")
    lines = done.stdout.splitlines()
    assert len(lines) == 3
    assert all(validate(orjson.loads(line), "anthropic") == [] for line in lines)
    bodies = tmp_path / "all.jsonl"
    written = cli("convert", str(path), "--to", "openai-chat", "--all", "-o", str(bodies))
    assert written.returncode == 0
    assert bodies.read_bytes().endswith(b"\n")
    assert len(bodies.read_bytes().splitlines()) == 3

    valid = cli("validate", str(bodies))
    assert valid.returncode == 0, valid.stderr
    assert b"3 bodies" in valid.stderr
    repaired = cli("repair", str(bodies))
    assert repaired.returncode == 0, repaired.stderr
    assert repaired.stdout == bodies.read_bytes()  # valid lines come back as they were
    store = f"dir:{tmp_path / 'store'}"
    compacted = cli("compact", str(bodies), "--store", store)
    assert compacted.returncode == 0, compacted.stderr
    assert len(compacted.stdout.splitlines()) == 3
    assert compacted.stderr.count(b"results cut") == 3

    # a broken line is reported by its line number, and repaired in its place
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(orjson.dumps(BROKEN) + b"\n" + lines[0] + b"\n")
    found = cli("validate", "--api", "anthropic", str(broken))
    assert found.returncode == 1
    assert found.stdout.decode().startswith("line 1: messages.1: `tool_use` ids were found without")
    fixed = cli("repair", "--api", "anthropic", str(broken))
    out = fixed.stdout.splitlines()
    assert len(out) == 2 and out[1] == lines[0]
    assert validate(orjson.loads(out[0]), "anthropic") == []
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(lines[0] + b"\n{oops\n")
    assert "line 2" in one_line_error(cli("validate", str(bad)))


def test_convert_gives_bedrock_a_user_turn_first(tmp_path: Path) -> None:
    from toolbudget.convert import OPENING_USER_TEXT

    path = tau_bench_file(tmp_path, agent_first=True, tasks=1)
    done = cli("convert", str(path), "--to", "bedrock-converse")
    assert done.returncode == 0, done.stderr
    body = orjson.loads(done.stdout)
    assert validate(body, "bedrock-converse") == []
    assert body["messages"][0] == {"role": "user", "content": [{"text": OPENING_USER_TEXT}]}
    assert body["messages"][1]["role"] == "assistant"
    for api in ("anthropic", "openai-chat", "openai-responses", "gemini"):  # they take the agent first
        other = orjson.loads(cli("convert", str(path), "--to", api).stdout)
        assert OPENING_USER_TEXT not in json.dumps(other)
        assert validate(other, api) == []


@pytest.mark.shared
def test_no_shared_conversation_converts_to_a_body_starting_with_the_agent(trajectories: Path) -> None:
    from toolbudget.convert import to_request

    manifest = orjson.loads((trajectories / "manifest.json").read_bytes())
    checked = 0
    for entry in manifest:
        for conversation in load_transcript(trajectories / entry["file"]).conversations:
            body = to_request(conversation, "bedrock-converse")
            rules = {v.rule for v in validate(body, "bedrock-converse")}
            assert "first_user" not in rules, entry["file"]
            checked += 1
    assert checked >= 260


# --------------------------------------------------------------------------- replay


def test_replay_says_which_conversation_and_takes_conversation_or_all(tmp_path: Path) -> None:
    path = tau_bench_file(tmp_path, tasks=2)
    first = cli("replay", str(path))
    assert first.returncode == 0, first.stderr
    assert b"holds 2 conversations; replaying 'task-0-trial-0'" in first.stderr
    second = cli("replay", str(path), "--conversation", "1")
    assert second.returncode == 0 and b"holds 2" not in second.stderr
    report = tmp_path / "r.json"
    every = cli("replay", str(path), "--all", "--report", str(report), "--emit", str(tmp_path / "emit"))
    assert every.returncode == 0, every.stderr
    text = every.stdout.decode()
    assert "conversation 0: task-0-trial-0" in text and "conversation 1: task-1-trial-0" in text
    data = json.loads(report.read_text())
    assert [d["conversation"] for d in data] == ["task-0-trial-0", "task-1-trial-0"]
    assert sorted(p.name for p in (tmp_path / "emit").iterdir()) == ["000", "001"]
    assert "choose differently" in one_line_error(cli("replay", str(path), "--all", "--conversation", "1"))


def test_replay_emit_keeps_every_mode_apart_and_never_mixes_two_runs(tmp_path: Path) -> None:
    """Under ``--compaction off`` the schedule's bodies (results still cut over their caps) and the
    unmanaged history's went to one ``off`` directory, the second replacing the first; and a
    second replay into a directory left the first one's later bodies among its own."""
    traj = bash_turns(4)
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps([{"task_id": 0, "trial": 0, "reward": 1.0, "traj": traj}]))
    emitted = tmp_path / "emit"
    done = cli(
        "replay", str(path), "--compaction", "off", "--result-max-chars", "2000", "--emit", str(emitted)
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in emitted.iterdir()) == ["eager", "off", "unmanaged"]
    last = max(p.name for p in (emitted / "off").iterdir())
    managed = (emitted / "off" / last).read_bytes()
    unmanaged = (emitted / "unmanaged" / last).read_bytes()
    assert b"[toolbudget: omitted" in managed and b"[toolbudget: omitted" not in unmanaged
    line = one_line_error(cli("replay", str(path), "--emit", str(emitted)))
    assert "already holds bodies" in line
    assert (emitted / "off" / last).read_bytes() == managed


def test_replay_eager_prints_the_eager_row_once(tmp_path: Path) -> None:
    path = tau_bench_file(tmp_path, tasks=1)
    for mode, rows in (
        ("eager", ["unmanaged", "eager"]),
        ("cache-aware", ["unmanaged", "eager", "cache-aware"]),
    ):
        done = cli("replay", str(path), "--compaction", mode)
        assert done.returncode == 0, done.stderr
        names = [line.split()[0] for line in done.stdout.decode().splitlines() if line[:1].isalpha()]
        assert names[1:] == rows, mode  # after the header of the turns


# --------------------------------------------------------------------------- JSON the CLI must take


def test_numbers_past_a_double_are_accepted_and_kept(tmp_path: Path) -> None:
    body = copy.deepcopy(BROKEN)
    body["messages"][1]["content"][0]["input"] = {"limit": "BIG"}
    raw = orjson.dumps(body).replace(b'"BIG"', b"1e400")
    path = tmp_path / "big.json"
    path.write_bytes(raw)
    assert cli("validate", "--api", "anthropic", str(path)).returncode == 1  # read: the violation is found
    fixed = cli("repair", "--api", "anthropic", str(path))
    assert fixed.returncode == 0, fixed.stderr
    assert b'"limit":1e400' in fixed.stdout  # the literal, not Infinity or null
    assert cli("validate", "--api", "anthropic", stdin=fixed.stdout).returncode == 0
    valid = raw.replace(
        b'"content":"what happened?"', b'"content":[{"type":"tool_result","tool_use_id":"a"}]'
    )
    assert cli("validate", "--api", "anthropic", stdin=valid).returncode == 0
    same = cli("repair", "--api", "anthropic", stdin=valid)
    assert same.stdout == valid + b"\n"
    compacted = cli("compact", "--api", "anthropic", "--store", f"dir:{tmp_path / 's'}", stdin=valid)
    assert compacted.returncode == 0, compacted.stderr
    assert b'"limit":1e400' in compacted.stdout
    huge = cli("repair", "--api", "anthropic", stdin=raw.replace(b"1e400", b"-2.5E99999"))
    assert huge.returncode == 0, huge.stderr
    assert b'"limit":-2.5E99999' in huge.stdout


def test_a_byte_order_mark_is_skipped(tmp_path: Path) -> None:
    raw = b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}'
    done = cli("validate", "--api", "anthropic", stdin=b"\xef\xbb\xbf" + raw)
    assert done.returncode == 0, done.stderr
    repaired = cli("repair", "--api", "anthropic", stdin=b"\xef\xbb\xbf" + raw)
    assert repaired.returncode == 0
    assert repaired.stdout == raw + b"\n"


def test_a_json_string_is_no_body_whatever_it_holds(tmp_path: Path) -> None:
    """A file holding one JSON string was read as the JSON text inside it: a body encoded twice
    was accepted as a body, and any other string was called invalid JSON."""
    for value in (orjson.dumps(BROKEN).decode(), "str", "/etc/passwd"):
        for command in ("validate", "repair"):
            line = one_line_error(cli(command, "--api", "anthropic", stdin=orjson.dumps(value)))
            assert line.endswith("must be a JSON object, not a string"), line
    lines = orjson.dumps(BROKEN) + b"\n" + orjson.dumps(orjson.dumps(BROKEN).decode()) + b"\n"
    line = one_line_error(cli("validate", "--api", "anthropic", stdin=lines))
    assert "line 2 must be a JSON object, not a string" in line, line


def test_a_byte_that_is_not_utf8_is_named_with_its_offset() -> None:
    raw = '{"messages": [{"role": "user", "content": "café"}]}'.encode("latin-1")
    line = one_line_error(cli("validate", "--api", "anthropic", stdin=raw))
    offset = raw.index(b"\xe9")
    assert f"byte 0xe9 at offset {offset}" in line
    assert "surrogates" not in line


# --------------------------------------------------------------------------- pipes, stores


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """The reader is gone before the command writes (as `| head` is once it has its lines)."""
    path = tmp_path / "broken.json"
    path.write_bytes(orjson.dumps(BROKEN))
    many = str(tau_bench_file(tmp_path, tasks=50))
    for command in (
        ("repair", str(path)),
        ("convert", many, "--to", "anthropic", "--all"),
        ("validate", str(path)),
    ):
        status, err = reader_gone(command)
        assert status == 141, err
        assert b"Broken pipe" not in err and b"Traceback" not in err and b"error" not in err, err


def test_a_rich_view_whose_reader_goes_away_ends_with_141(tmp_path: Path) -> None:
    """``inspect`` and ``config`` print through rich, which exits 1 on a broken pipe by itself."""
    many = str(tau_bench_file(tmp_path, tasks=3))
    for command in (("inspect", many, "--conversation", "0"), ("config",)):
        status, err = reader_gone(command)
        assert status == 141, (command, err)
        assert b"Traceback" not in err and b"error" not in err, err


def test_no_output_replaces_the_input_or_another_output(tmp_path: Path) -> None:
    """``-o``, ``--report``, ``--html`` or ``--png`` naming the file read (or each other's file)
    is refused in one line, before any work, and every file given is left as it was."""
    body = tmp_path / "body.json"
    body.write_bytes(orjson.dumps(BROKEN))
    transcript = tau_bench_file(tmp_path, tasks=2)
    link = tmp_path / "link.json"
    link.symlink_to(body)
    given = {body: body.read_bytes(), transcript: transcript.read_bytes()}
    store = f"dir:{tmp_path / 'store'}"
    refused = [
        (("repair", str(body), "-o", str(body)), "is the input"),
        (("repair", str(body), "--report", str(body)), "is the input"),
        (("repair", str(body), "-o", str(link)), "is the input"),
        (("compact", str(body), "--store", store, "-o", str(body)), "is the input"),
        (("compact", str(body), "--store", store, "--report", str(body)), "is the input"),
        (("convert", str(transcript), "--to", "gemini", "-o", str(transcript)), "is the transcript"),
        (("replay", str(transcript), "--report", str(transcript)), "is the transcript"),
        (("inspect", str(transcript), "--conversation", "0", "--html", str(transcript)), "is the input"),
    ]
    same = str(tmp_path / "same.json")
    refused += [
        (("repair", str(body), "-o", same, "--report", same), "both name"),
        (("compact", str(body), "--store", store, "-o", same, "--report", same), "both name"),
    ]
    for command, words in refused:
        line = one_line_error(cli(*command))
        assert words in line, (command, line)
        assert {path: path.read_bytes() for path in given} == given, command
    assert not Path(same).exists()
    # Outputs that are not regular files may take more than one stream.
    done = cli("repair", str(body), "-o", os.devnull, "--report", os.devnull)
    assert done.returncode == 0, done.stderr


def test_option_combinations_that_mean_nothing_are_refused(tmp_path: Path) -> None:
    path = str(tau_bench_file(tmp_path, tasks=2))
    line = one_line_error(cli("convert", path, "--to", "gemini", "--all", "--conversation", "1"))
    assert "choose differently" in line
    assert "--idle" in one_line_error(cli("replay", path, "--idle-every", "3"))
    for idle in ("nan", "inf", "1e400"):
        line = one_line_error(cli("replay", path, "--idle", idle))
        assert line.startswith("toolbudget: error: --idle") and "now=" not in line, line
    # Gaps each a double's range apart: the third request would arrive past what a clock holds.
    steps: list[dict[str, Any]] = [{"role": "user", "content": "Where are flights 0, 1 and 2?"}]
    for n in range(3):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "status", "arguments": "{}"}}
        steps += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "name": "status", "content": "on time"},
        ]
    longer = tmp_path / "longer.json"
    longer.write_text(json.dumps([{"task_id": 0, "reward": 1.0, "info": {}, "traj": steps, "trial": 0}]))
    assert cli("replay", str(longer), "--idle", "1e300", "--idle-every", "1").returncode == 0
    line = one_line_error(cli("replay", str(longer), "--idle", "1e308", "--idle-every", "1"))
    assert line.startswith("toolbudget: error: --idle") and "now=" not in line, line


def test_compact_refuses_a_store_that_dies_with_it(tmp_path: Path) -> None:
    source = tmp_path / "body.json"
    source.write_bytes(orjson.dumps(BROKEN))
    for url in ("memory:", "MEMORY:"):
        line = one_line_error(cli("compact", str(source), "--store", url))
        assert "memory:" in line and "dir:PATH" in line and "sqlite:PATH" in line


def test_compact_refuses_a_store_that_does_not_answer_and_writes_nothing(tmp_path: Path) -> None:
    source = tmp_path / "body.json"
    source.write_bytes(orjson.dumps(BROKEN))
    out = tmp_path / "out.json"
    # Nothing listens on port 1: every cut's marker would promise an original no one kept.
    line = one_line_error(cli("compact", str(source), "--store", "redis://127.0.0.1:1/0", "-o", str(out)))
    assert "does not answer" in line and "redis://127.0.0.1:1" in line
    assert not out.exists()
    # A store that answers is used as before.
    done = cli("compact", str(source), "--store", f"sqlite:{tmp_path / 'a.db'}", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 0


def test_compact_refuses_a_store_that_keeps_no_cut_and_leaves_its_input_alone(tmp_path: Path) -> None:
    # The store answers the probe but can keep nothing for this session (here its directory's
    # name is taken by a file, as a read-only directory or a full disk would refuse): a body
    # whose every cut cannot be recalled is not written. (``-o`` naming the input itself is
    # refused before any work: see test_no_output_replaces_the_input_or_another_output.)
    body = bash_body("line of output\n" * 5000)
    source = tmp_path / "body.json"
    source.write_bytes(orjson.dumps(body))
    given = source.read_bytes()
    root = tmp_path / "store"
    root.mkdir()
    (root / "toolbudget-s1").write_bytes(b"")
    store = f"dir:{root}"
    unwritten = tmp_path / "unwritten.json"
    line = one_line_error(
        cli("compact", str(source), "--session", "s1", "--store", store, "-o", str(unwritten))
    )
    assert "could not keep any cut" in line and "toolbudget-s1" in line
    assert source.read_bytes() == given and not unwritten.exists()
    # The same store keeps another session's cuts, and the body is written.
    out = tmp_path / "out.json"
    done = cli("compact", str(source), "--session", "s2", "--store", store, "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert b"could not be kept" not in out.read_bytes() and b"<<tb:" in out.read_bytes()


# --------------------------------------------------------------------------- the same count on every API


def test_an_empty_result_counts_on_every_api() -> None:
    from toolbudget.convert import to_request
    from toolbudget.model import Conversation, Message, Text, ToolCall, ToolResult

    conversation = Conversation(
        "c",
        "test",
        (
            Message("user", (Text("go"),)),
            Message("assistant", (ToolCall("t1", "Bash", {"command": "true"}),)),
            Message("tool", (ToolResult("t1", (Text(""),), name="Bash"),)),
            Message("assistant", (ToolCall("t2", "Bash", {"command": "ls"}),)),
            Message("tool", (ToolResult("t2", (Text("a\nb"),), name="Bash"),)),
        ),
    )
    seen = {}
    for api in toolbudget.APIS:
        with toolbudget.Session(store="memory:") as session:
            seen[api] = session.manage(to_request(conversation, api), api).report.results_seen
    assert set(seen.values()) == {2}, seen


@pytest.mark.shared
def test_results_seen_agrees_across_the_five_apis_on_every_shared_conversation(
    real: list[tuple[str, Any]],
) -> None:
    from toolbudget.convert import to_request
    from toolbudget.model import ToolResult

    policy = toolbudget.Policy.load(compaction="off")
    for name, conversation in real:
        results = sum(isinstance(p, ToolResult) for m in conversation.messages for p in m.parts)
        seen = {}
        for api in toolbudget.APIS:
            with toolbudget.Session(store="memory:", policy=policy) as session:
                seen[api] = session.manage(to_request(conversation, api), api).report.results_seen
        assert len(set(seen.values())) == 1, (name, seen)
        assert abs(seen["anthropic"] - results) <= 3, (name, seen, results)  # repairs may add a few


def test_clean_without_a_session_sweeps_only_what_expired(tmp_path: Path) -> None:
    from toolbudget.store import DirStore

    key = "0123456789abcdef0123456789abcdef"
    store = DirStore(tmp_path, sweep=False)
    for name in ("old", "recent"):
        store.put(name, key, b"x")
    old = tmp_path / "toolbudget-old"
    for path in [old, *old.rglob("*")]:
        os.utime(path, (1_000_000, 1_000_000))  # unused for far longer than the TTL
    done = cli("clean", "--store", f"dir:{tmp_path}")
    assert done.returncode == 0, done.stderr
    assert b"removed 1 expired archive" in done.stderr
    assert not old.exists() and store.get("recent", key) == b"x"


def test_a_store_whose_driver_is_missing_exits_2(tmp_path: Path) -> None:
    body = tmp_path / "b.json"
    body.write_bytes(
        orjson.dumps({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    )
    script = (
        "import sys; sys.modules['redis'] = None; from toolbudget.cli import main; "
        f"main(['compact', '--store', 'redis://127.0.0.1:1/0', {str(body)!r}])"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, check=False)
    assert "pip install 'toolbudget[redis]'" in one_line_error(done)


@pytest.mark.shared
def test_a_transcript_cut_mid_line_is_converted_with_one_warning_line(
    trajectories: Path, tmp_path: Path
) -> None:
    source = sorted((trajectories / "claude-code").rglob("*.jsonl"))[0]
    data = source.read_bytes().rstrip(b"\n")
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: len(data) - 40])  # the writer was killed in the middle of its last line
    done = cli("convert", str(cut), "--to", "anthropic")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.decode().strip().splitlines()
    assert lines and all(line.startswith("toolbudget: warning: ") for line in lines), lines
    assert "Traceback" not in done.stderr.decode() and "TranscriptWarning" not in done.stderr.decode()


@pytest.mark.parametrize("scheme", ["dir", "sqlite"])
def test_reading_commands_never_make_a_store_a_typo_names(tmp_path: Path, scheme: str) -> None:
    where = tmp_path / "no-such-store"
    store = f"{scheme}:{where}"
    for args in (
        ("recall", "0123456789abcdef0123456789abcdef", "--session", "s1", "--store", store),
        ("clean", "--session", "s1", "--store", store),
    ):
        result = cli(*args)
        assert result.returncode == 2, args
        err = result.stderr.decode()
        assert err.count("\n") == 1 and f"no archive store at {where}" in err, err
        assert not where.exists()
