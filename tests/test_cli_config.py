"""The command line's settings and feedback: ``toolbudget config``, the common caps as flags,
misspelt variables warned about in one line, progress bars only where a person watches,
and a managed request still over its window reported."""

from __future__ import annotations

import json
import os
import re
from itertools import chain, repeat
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

from test_cli import tau_bench_file
from toolbudget.cli import main
from toolbudget.policy import setting_docs

FLAGS = ("--result-max-chars", "--turn-budget-chars", "--compaction", "--context-window-tokens")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No TOOLBUDGET_ setting from the outside, and a working directory of our own."""
    for name in list(os.environ):
        if name.startswith("TOOLBUDGET_") and name != "TOOLBUDGET_SHARED":
            monkeypatch.delenv(name)
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    monkeypatch.chdir(work)


def run(*args: str, stdin: bytes | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=stdin)


def _json(result: Result) -> dict[str, Any]:
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _sources(result: Result) -> dict[str, tuple[str, str | None]]:
    return {row["setting"]: (row["source"], row["where"]) for row in _json(result)["settings"]}


# --------------------------------------------------------------------------- toolbudget config


def test_config_names_each_source(monkeypatch: pytest.MonkeyPatch) -> None:
    work = Path.cwd()
    (work / "pyproject.toml").write_text(
        "[tool.toolbudget]\nerror-max-chars = 60000\nrecall_max_chars = 9000\n"
    )
    (work / "toolbudget.toml").write_text("recall_max_chars = 9500\ncompaction = 'eager'\n")
    sub = work / "src" / "pkg"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    monkeypatch.setenv("TOOLBUDGET_COMPACTION", "off")
    monkeypatch.setenv("TOOLBUDGET_TURN_BUDGET_CHARS", "90000")
    result = run("config", "--json", "--turn-budget-chars", "80000")
    data = _json(result)
    values = {row["setting"]: row["value"] for row in data["settings"]}
    sources = _sources(result)
    assert sources["result_max_chars"] == ("default", None)
    assert sources["error_max_chars"] == ("pyproject", str(work / "pyproject.toml"))
    assert sources["recall_max_chars"] == ("toolbudget.toml", str(work / "toolbudget.toml"))
    assert sources["compaction"] == ("environment", "TOOLBUDGET_COMPACTION")
    assert sources["turn_budget_chars"] == ("flag", "--turn-budget-chars")
    assert values["error_max_chars"] == 60000 and values["recall_max_chars"] == 9500
    assert values["compaction"] == "off" and values["turn_budget_chars"] == 80000
    assert data["files"] == [str(work / "pyproject.toml"), str(work / "toolbudget.toml")]
    assert [row["setting"] for row in data["settings"]] == [d.name for d in setting_docs()]


def test_config_prints_a_table_of_every_setting() -> None:
    (Path.cwd() / "toolbudget.toml").write_text("result_max_chars = 1234\n")
    result = run("config", "--compaction", "off")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    for doc in setting_docs():
        assert any(doc.name in line for line in lines), doc.name
    row = next(line for line in lines if "result_max_chars" in line)
    assert "1234" in row and "toolbudget.toml" in row
    row = next(line for line in lines if " compaction " in line)
    assert "off" in row and "flag" in row and "--compaction" in row
    assert "settings files: " in result.stdout


def test_config_refuses_a_bad_file_in_one_line() -> None:
    (Path.cwd() / "toolbudget.toml").write_text("result_max_char = 1\n")
    result = run("config")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"toolbudget: error: {Path.cwd() / 'toolbudget.toml'}: unknown toolbudget setting 'result_max_char'"
    ]


# --------------------------------------------------------------------------- misspelt variables


def test_a_misspelt_variable_is_one_warning_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLBUDGET_RESULT_MAX_CHAR", "10")
    result = run("config", "--json")
    assert _sources(result)["result_max_chars"] == ("default", None)
    assert result.stderr.splitlines() == [
        "toolbudget: warning: TOOLBUDGET_RESULT_MAX_CHAR is not a toolbudget setting and is ignored; "
        "did you mean TOOLBUDGET_RESULT_MAX_CHARS?"
    ]


def test_a_misspelt_variable_warns_in_compact_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLBUDGET_TURN_BUDGET_CHAR", "10")
    result = run("compact", "--api", "anthropic", "--store", f"dir:{Path.cwd() / 's'}", stdin=_body(10))
    assert result.exit_code == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if "TOOLBUDGET_TURN_BUDGET_CHAR " in line]
    assert warned == [
        "toolbudget: warning: TOOLBUDGET_TURN_BUDGET_CHAR is not a toolbudget setting and is ignored; "
        "did you mean TOOLBUDGET_TURN_BUDGET_CHARS?"
    ]


def test_known_variables_that_are_not_settings_do_not_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLBUDGET_SHARED", "/nowhere")
    monkeypatch.setenv("TOOLBUDGET_STORE_TIMEOUT", "2")
    result = run("config", "--json")
    assert _sources(result)["store_timeout"] == ("environment", "TOOLBUDGET_STORE_TIMEOUT")
    assert result.stderr == ""


# --------------------------------------------------------------------------- help and flags


def test_help_says_where_settings_come_from() -> None:
    text = run("--help").stdout
    for words in ("pyproject.toml", "toolbudget.toml", "TOOLBUDGET_", "flags", "toolbudget config"):
        assert words in text, words


@pytest.mark.parametrize("command", ["compact", "replay", "config"])
def test_the_common_caps_are_flags(command: str) -> None:
    text = run(command, "--help").stdout
    for flag in FLAGS:
        assert flag in text, (command, flag)
    assert "--progress" not in text  # hidden: for tests and odd terminals


def _body(results: int, chars: int = 30_000) -> bytes:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for n in range(results):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {}}],
            }
        )
        text = "".join(f"{i:06d} line of output\n" for i in range(chars // 19))
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": text}]}
        )
    return orjson.dumps({"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": messages})


def test_a_flag_wins_over_the_environment_in_compact(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TOOLBUDGET_RESULT_MAX_CHARS", "40000")
    store = f"dir:{tmp_path / 'store'}"
    report = tmp_path / "r.json"
    loose = run("compact", "--api", "anthropic", "--store", store, "--report", str(report), stdin=_body(1))
    assert loose.exit_code == 0, loose.stderr
    assert json.loads(report.read_text())["results_cut"] == 0  # 30,000 chars fit 40,000
    tight = run(
        "compact", "--api", "anthropic", "--store", store, "--report", str(report),
        "--result-max-chars", "2000", stdin=_body(1),
    )  # fmt: skip
    assert tight.exit_code == 0, tight.stderr
    cut = json.loads(report.read_text())["cuts"][0]
    assert cut["before"] > 29_000 and cut["after"] < 3_000
    assert len(tight.stdout) < len(loose.stdout) - 25_000


def test_replay_takes_the_caps_as_flags(tmp_path: Path) -> None:
    path = tau_bench_file(tmp_path, tasks=1)
    report = tmp_path / "r.json"
    done = run("replay", str(path), "--compaction", "off", "--result-max-chars", "3", "--report", str(report))
    assert done.exit_code == 0, done.stderr
    data = json.loads(report.read_text())
    assert data["mode"] == "off"
    assert "cache-aware" not in done.stdout


# --------------------------------------------------------------------------- progress


def _commands(tmp_path: Path) -> dict[str, tuple[list[str], bytes | None]]:
    tau = tau_bench_file(tmp_path, tasks=3)
    store = f"dir:{tmp_path / 'store'}"
    bodies = b"".join(_body(1, 4_000) + b"\n" for _ in range(3))
    return {
        "replay": (["replay", str(tau), "--all"], None),
        "inspect": (["inspect", str(tau), "--conversation", "1"], None),
        "compact": (["compact", "--api", "anthropic", "--store", store, "--session", "p"], bodies),
        "convert": (["convert", str(tau), "--to", "openai-chat", "--all"], None),
    }


@pytest.mark.parametrize("command", ["replay", "inspect", "compact", "convert"])
def test_progress_is_drawn_only_on_a_terminal_and_leaves_stdout_alone(command: str, tmp_path: Path) -> None:
    args, stdin = _commands(tmp_path)[command]
    quiet = run(*args, stdin=stdin)  # CliRunner's stderr is no terminal
    assert quiet.exit_code == 0, quiet.stderr
    assert "\x1b[" not in quiet.stderr and "ETA" not in quiet.stderr
    never = run(*args, "--progress", "never", stdin=stdin)
    assert never.stderr == quiet.stderr
    drawn = run(*args, "--progress", "always", stdin=stdin)
    assert drawn.exit_code == 0, drawn.stderr
    assert "ETA" in drawn.stderr and "\x1b[" in drawn.stderr and command in drawn.stderr
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn.stderr)
    assert re.search(r"\b([1-9]\d*)/\1\b", plain), "the bar never reached its total"
    assert drawn.stdout_bytes == quiet.stdout_bytes


def test_the_bar_waits_a_second_before_it_appears(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolbudget import cli_progress

    monkeypatch.setattr(cli_progress, "_stderr_is_terminal", lambda: True)
    clock = chain([0.0, 0.5], repeat(2.0))
    monkeypatch.setattr("toolbudget.cli_progress.time.monotonic", lambda: next(clock))
    with cli_progress.Bar("work") as bar:
        bar.update(1, 3)
        assert bar._progress is None  # half a second in: nothing drawn yet
        bar.update(2, 3)
        assert bar._progress is not None


def test_the_bar_stays_away_from_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolbudget import cli_progress

    monkeypatch.setattr(cli_progress, "_stderr_is_terminal", lambda: False)
    clock = chain([0.0], repeat(60.0))
    monkeypatch.setattr("toolbudget.cli_progress.time.monotonic", lambda: next(clock))
    with cli_progress.Bar("work") as bar:
        bar.update(1, 3)
        bar.update(2, 3)  # long past the delay, and still nothing drawn
        assert bar._progress is None


# --------------------------------------------------------------------------- over the window


def _prompt(chars: int) -> bytes:
    return orjson.dumps(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "w" * chars}],
        }
    )


def test_a_body_over_its_window_is_reported(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    args = [
        "compact",
        "--api",
        "anthropic",
        "--store",
        f"dir:{tmp_path / 's'}",
        "--context-window-tokens",
        "5000",
    ]
    done = run(*args, "--report", str(report), stdin=_prompt(520_000))  # 26x the window
    assert done.exit_code == 0, done.stderr
    data = json.loads(report.read_text())
    assert data["over_window"] is True
    assert data["window_tokens"] == 5000 and data["tokens_after"] >= 26 * 5000
    assert "26.0x the 5,000-token context window" in done.stderr
    assert done.stdout_bytes.rstrip(b"\n") == _prompt(520_000)  # still written: the caller decides
    strict = run(*args, "--strict", stdin=_prompt(520_000))
    assert strict.exit_code == 1
    assert strict.stdout_bytes == done.stdout_bytes
    fits = run(*args, "--strict", stdin=_prompt(1_000))
    assert fits.exit_code == 0, fits.stderr
    assert "context window" not in fits.stderr


def test_each_body_over_its_window_is_named_by_its_line(tmp_path: Path) -> None:
    lines = _prompt(100) + b"\n" + _prompt(200_000) + b"\n"
    args = [
        "compact",
        "--api",
        "anthropic",
        "--store",
        f"dir:{tmp_path / 's'}",
        "--context-window-tokens",
        "5000",
    ]
    done = run(*args, stdin=lines)
    assert done.exit_code == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "context window" in line]
    assert len(warned) == 1 and warned[0].startswith("line 2: warning: the request is still ~50,0")
