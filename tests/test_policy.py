"""The policy: defaults from the seeds, files, code, and the environment winning."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolbudget.errors import InputError
from toolbudget.marker import RECALL_TOOL
from toolbudget.policy import Policy


def test_defaults_follow_the_seeds() -> None:
    policy = Policy()
    assert policy.result_max_chars == 20_000
    assert policy.turn_budget_chars == 200_000
    assert policy.preview_head_chars == 4_000 and policy.preview_tail_chars == 1_000
    assert policy.cap_for("Read") == 80_000 and policy.cap_for("read_file") == 80_000
    assert policy.cap_for("Grep") == 60_000 and policy.cap_for("search_dir") == 60_000
    assert policy.cap_for("Glob") == 50_000 and policy.cap_for("find_file") == 50_000
    assert policy.cap_for("Bash") == 20_000 and policy.cap_for(None) == 20_000
    assert policy.exempt(RECALL_TOOL)


def test_a_tool_cap_replaces_the_result_cap_and_errors_get_the_error_cap() -> None:
    policy = Policy(result_max_chars=5_000)
    assert policy.cap_for("Read") == 80_000  # not a 5k preview
    assert policy.cap_for("Bash", is_error=True) == 50_000
    assert policy.cap_for("Read", is_error=True) == 80_000


def test_files_then_code_then_environment(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.toolbudget]\nresult_max_chars = 1000\nturn_budget_chars = 9000\n"
        'tool_caps = { my_reader = 123 }\nexempt_tools = ["pager"]\n'
    )
    (tmp_path / "toolbudget.toml").write_text("turn_budget_chars = 8000\npreview-head-chars = 300\n")
    policy = Policy.load(tmp_path, env={}, preview_tail_chars=77)
    assert policy.result_max_chars == 1000
    assert policy.turn_budget_chars == 8000
    assert policy.preview_head_chars == 300
    assert policy.preview_tail_chars == 77
    assert policy.cap_for("my_reader") == 123 and policy.cap_for("Read") == 80_000
    assert policy.exempt("pager") and policy.exempt(RECALL_TOOL)

    env = {
        "TOOLBUDGET_RESULT_MAX_CHARS": "2_000",
        "TOOLBUDGET_TOOL_CAPS": "Read=10, Bash=500",
        "TOOLBUDGET_EXEMPT_TOOLS": "a,b",
        "TOOLBUDGET_PREVIEW_TAIL_CHARS": "5",
        "TOOLBUDGET_STORE_TIMEOUT": "2.5",
        "TOOLBUDGET_STORE": "memory:",
    }
    policy = Policy.load(tmp_path, env=env, preview_tail_chars=77)
    assert policy.result_max_chars == 2000
    assert (
        policy.cap_for("Read") == 10 and policy.cap_for("Bash") == 500 and policy.cap_for("my_reader") == 123
    )
    assert policy.exempt("a") and policy.exempt("b") and policy.exempt(RECALL_TOOL)
    assert policy.preview_tail_chars == 5  # the environment wins over code
    assert policy.store_timeout == 2.5
    assert policy.store == "memory:"


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"TOOLBUDGET_RESULT_MAX_CHARS": "lots"}, "TOOLBUDGET_RESULT_MAX_CHARS"),
        ({"TOOLBUDGET_TURN_BUDGET_CHARS": "0"}, "turn_budget_chars"),
        ({"TOOLBUDGET_TOOL_CAPS": "Read"}, "TOOLBUDGET_TOOL_CAPS"),
        ({"TOOLBUDGET_STORE_TIMEOUT": "soon"}, "TOOLBUDGET_STORE_TIMEOUT"),
        ({"TOOLBUDGET_STORE_TIMEOUT": "0"}, "store_timeout"),
    ],
)
def test_bad_settings_are_clear_errors(tmp_path: Path, env: dict[str, str], needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        Policy.load(tmp_path, env=env)


def test_bad_files_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "toolbudget.toml").write_text("result_max_chars = 'big'\n")
    with pytest.raises(InputError, match="whole number"):
        Policy.load(tmp_path, env={})
    (tmp_path / "toolbudget.toml").write_text("colour = 3\n")
    with pytest.raises(InputError, match="unknown toolbudget setting 'colour'"):
        Policy.load(tmp_path, env={})
    (tmp_path / "toolbudget.toml").write_text("= broken")
    with pytest.raises(InputError, match="not valid TOML"):
        Policy.load(tmp_path, env={})


def test_scaled_halves_every_budget() -> None:
    half = Policy().scaled(0.5)
    assert half.result_max_chars == 10_000 and half.turn_budget_chars == 100_000
    assert half.cap_for("Read") == 40_000
    assert Policy().fingerprint() != half.fingerprint()
    assert Policy().fingerprint() == Policy().fingerprint()


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        ("pyproject.toml", b"[tool]\ntoolbudget = 5\n", "must be a table"),
        ("pyproject.toml", b"tool = 5\n", "must be a table"),
        ("toolbudget.toml", b"toolbudget = [1]\n", "must be a table"),
        ("pyproject.toml", b"\xff\xfe", "not UTF-8"),
    ],
)
def test_a_settings_file_of_the_wrong_shape_is_a_clear_error(
    tmp_path: Path, name: str, content: bytes, needle: str
) -> None:
    (tmp_path / name).write_bytes(content)
    with pytest.raises(InputError, match=needle):
        Policy.load(tmp_path, env={})


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("TOOLBUDGET_CONTEXT_WINDOW_TOKENS", "-5"),
        ("TOOLBUDGET_CONTEXT_WINDOW_TOKENS", "0"),
        ("TOOLBUDGET_MAX_OUTPUT_TOKENS", "-1"),
        ("TOOLBUDGET_MICROCOMPACT_TRUNCATE_TURNS", "-1"),
        ("TOOLBUDGET_MICROCOMPACT_MIN_CHARS", "-100"),
        ("TOOLBUDGET_COMPACT_CLEAR_AT_LEAST", "-1"),
        ("TOOLBUDGET_RECALL_MAX_CHARS", "10"),
    ],
)
def test_settings_out_of_range_are_refused_from_the_environment_too(
    tmp_path: Path, variable: str, value: str
) -> None:
    with pytest.raises(InputError):
        Policy.load(tmp_path, env={variable: value})
