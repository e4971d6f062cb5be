"""One source for each fact: the measures, the model table, the tool taxonomy, the policy's fields."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from toolbudget import compaction, measure, models, replay, tools, wire
from toolbudget.budget import enforce
from toolbudget.convert import to_request
from toolbudget.errors import InputError
from toolbudget.model import Conversation, Data, Message, Request, Text, Thinking, ToolCall, ToolResult
from toolbudget.policy import ENV, Policy, setting
from toolbudget.previews import make_preview
from toolbudget.recovery import ladder, output
from toolbudget.replay import requests_of
from toolbudget.session import Session

SRC = Path(__file__).resolve().parents[1] / "src" / "toolbudget"


# --- measure ---------------------------------------------------------------------------


def _with_thinking_and_data() -> Request:
    return Request(
        "anthropic",
        messages=(
            Message("user", (Text("list the files"),)),
            Message(
                "assistant",
                (Thinking("I should call ls first", signature="sig"), ToolCall("c1", "ls", {"path": "."})),
            ),
            Message("user", (ToolResult("c1", (Data({"files": ["a.py", "b.py"]}),)),)),
        ),
        system=(Text("be brief"),),
    )


def test_a_token_counter_is_given_every_text_the_character_count_counts() -> None:
    """Thinking and structured results fill the window too: a caller's counter sees them."""
    request = _with_thinking_and_data()
    texts = measure.request_texts(request)
    assert "I should call ls first" in texts
    assert '{"files":["a.py","b.py"]}' in texts
    assert sum(map(len, texts)) == measure.request_chars(request)
    body = wire.render(request, "anthropic")
    with Session("facts", store="memory:", token_counter=len) as session:
        report = session.manage(body, "anthropic").report
    assert report.tokens_before == report.chars_before


@pytest.mark.shared
def test_a_token_counter_sees_what_the_characters_count_on_real_sessions(
    real: list[tuple[str, Conversation]],
) -> None:
    """On every shared session, a counter of characters agrees with the character count.

    Structured values are counted in UTF-8 bytes (see ``measure._json_size``), so the two are
    equal on ASCII requests and the counter can only be below otherwise.
    """
    equal = 0
    for name, conversation in real:
        last = list(requests_of(conversation))[-1:]
        for prefix in last:
            request = wire.parse(to_request(prefix, "anthropic", model="m"), "anthropic")
            counted = sum(map(len, measure.request_texts(request)))
            chars = measure.request_chars(request)
            if all(t.isascii() for t in measure.request_texts(request)):
                assert counted == chars, name
                equal += 1
            else:
                assert counted <= chars, name
    assert equal > 100


def test_tokens_round_up_and_the_estimate_adds_each_message_wrapping() -> None:
    assert [measure.tokens_of(n) for n in (0, 1, 4, 5)] == [0, 1, 1, 2]
    assert measure.chars_for(1_000) == 1_000 * measure.CHARS_PER_TOKEN
    request = _with_thinking_and_data()
    chars = measure.request_chars(request)
    expected = chars / measure.CHARS_PER_TOKEN + measure.MESSAGE_TOKENS * len(request.messages)
    assert measure.estimate_tokens(request) == int(expected)
    assert measure.estimate_tokens(request, 2.0) == int(expected * 2.0)
    assert ladder.estimate_tokens is measure.estimate_tokens


def test_every_cut_keeps_the_same_room_for_its_marker() -> None:
    """A result over its cap becomes a preview of the policy's shape plus the marker's room."""
    from toolbudget.previews._make import MARKER_ESTIMATE

    assert MARKER_ESTIMATE == measure.MARKER_ROOM
    policy = Policy(result_max_chars=1_000, preview_head_chars=100, preview_tail_chars=50)
    text = "".join(f"line {n} of the output\n" for n in range(2_000))
    request = Request(
        "anthropic",
        messages=(
            Message("user", (Text("go"),)),
            Message("assistant", (ToolCall("c1", "run", {"command": "make"}),)),
            Message("user", (ToolResult("c1", (Text(text),)),)),
        ),
    )
    cut = enforce(request, policy, None).cuts[0]
    assert cut.after <= policy.preview_chars + measure.MARKER_ROOM
    preview = make_preview(
        text, policy.preview_chars + measure.MARKER_ROOM, marker=lambda n, d: f"[{n} omitted] {d}"
    )
    assert len(preview.text) <= policy.preview_chars + measure.MARKER_ROOM


# --- models ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "window"),
    [
        ("claude-sonnet-4-5-20250929", 200_000),
        ("anthropic.claude-3-5-haiku-20241022-v1:0", 200_000),
        ("gpt-4.1-mini", 1_047_576),
        ("gpt-4o-2024-08-06", 128_000),
        ("gpt-4-turbo", 128_000),
        ("gpt-5", 400_000),
        ("o3-mini", 200_000),
        ("gemini-2.5-pro", 1_048_576),
        ("gemini-1.5-flash", 1_048_576),
        ("deepseek-chat", 128_000),
        ("mistral-large-2411", 131_072),
        ("meta-llama/Llama-3.3-70B", 128_000),
        ("Qwen2.5-Coder-32B", 131_072),
        ("some-local-model", models.DEFAULT_WINDOW),
        (None, models.DEFAULT_WINDOW),
    ],
)
def test_windows_of_known_models(name: str | None, window: int) -> None:
    assert models.window_of(name) == window
    assert models.context_window(Policy(), name) == window
    assert models.context_window(Policy(context_window_tokens=9_000), name) == 9_000


def test_one_table_answers_for_the_window_and_the_output_cap() -> None:
    """Every row states a fact; a row without one is passed over for it, never read as 0."""
    assert all(row.window is not None or row.output_cap is not None for row in models.MODELS)
    # gpt-4-turbo states a window but no output cap: the cap is the default, not its row's.
    assert models.output_cap("gpt-4-turbo") == models.DEFAULT_OUTPUT_CAP
    # o-series caps come from the row with no window; its window from the rows before it.
    assert models.output_cap("o3-mini") == 100_000 and models.window_of("o3-mini") == 200_000
    assert compaction.context_window is models.context_window
    assert output.output_cap is models.output_cap
    assert output.DEFAULT_OUTPUT_CAP == models.DEFAULT_OUTPUT_CAP


def test_the_schedule_and_the_replays_price_the_cache_alike() -> None:
    assert (compaction.READ_COST, compaction.WRITE_COST) == (models.CACHE_READ, models.CACHE_WRITE)
    assert (replay.PRICE_READ, replay.PRICE_WRITE) == (models.CACHE_READ, models.CACHE_WRITE)
    totals = replay.tally([("abcd" * 10, 0), ("abcd" * 20, 0)])
    assert totals.billed == models.CACHE_READ * 10 + models.CACHE_WRITE * (10 + 10)


def test_a_session_reports_the_window_of_its_model() -> None:
    body = {"model": "gpt-4.1", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    with Session("facts", store="memory:") as session:
        assert session.manage(body, "anthropic").report.window_tokens == models.window_of("gpt-4.1")


# --- tools -----------------------------------------------------------------------------


def _taxonomy() -> set[str]:
    """The taxonomy's names that can only be tool names (``Read``, ``read_file``), not programs
    or words (``cat``, ``edit``) that other tables list for their own reasons."""
    names: set[str] = set()
    for value in vars(tools).values():
        if isinstance(value, (tuple, frozenset)) and value and all(isinstance(v, str) for v in value):
            names.update(v for v in value if "_" in v or not v.islower())
    return names


def test_tool_names_are_listed_only_in_the_taxonomy() -> None:
    """No other module keeps its own list of tool names: a literal collection holding two or
    more of the taxonomy's names anywhere else is a second copy of a fact."""
    known = _taxonomy()
    copies = []
    for path in SRC.rglob("*.py"):
        if path.name == "tools.py" and path.parent == SRC:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
                strings = {
                    e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                }
                if len(strings & known) >= 2:
                    copies.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert copies == []


def test_the_caps_follow_the_taxonomy() -> None:
    policy = Policy()
    for name in tools.FILE_READ_TOOLS:
        assert policy.cap_for(name) == 80_000, name
    for name in tools.SEARCH_TOOLS:
        assert policy.cap_for(name) == 60_000, name
    for name in tools.LISTING_TOOLS:
        assert policy.cap_for(name) == 50_000, name
    for name in tools.EXEC_TOOLS | tools.WRITE_TOOLS:
        assert policy.cap_for(name) == policy.result_max_chars, name


@pytest.mark.parametrize("tool", sorted(tools.EXEC_TOOLS))
def test_every_shell_keeps_its_error_lines_in_a_summary(tool: str) -> None:
    call = ToolCall("c1", tool, {"command": "pytest -q"})
    text = "collected 3 items\n" + "x" * 4_000 + "\nFAILED tests/test_a.py::test_b - AssertionError\n"
    assert compaction.summarize(tool, call, text).errors


@pytest.mark.parametrize("tool", sorted(tools.FILE_VIEW_TOOLS))
def test_every_file_view_is_summarised_by_its_path(tool: str) -> None:
    call = ToolCall("c1", tool, {"path": "src/app/config.py"})
    summary = compaction.summarize(tool, call, "import os\n" * 500)
    assert "src/app/config.py" in summary.detail and "python" in summary.detail


# --- policy ----------------------------------------------------------------------------


def _other_value(policy: Policy, name: str) -> Any:
    """A valid value for ``name`` other than the one ``policy`` has."""
    value = getattr(policy, name)
    special: dict[str, Any] = {
        "tool_caps": {"Read": 5},
        "exempt_tools": frozenset({"pager"}),
        "store": "memory:",
        "compaction": "eager",
        "compact_high_watermark": 0.9,
        "compact_low_watermark": 0.5,
        "context_window_tokens": 12_345,
        "max_output_tokens": 777,
        "microcompact_truncate_turns": 3,
        "microcompact_summarize_turns": 5,
        "store_timeout": 2.5,
        "cache_price": "openai",
    }
    return special.get(name, value + 1 if isinstance(value, int) else value)


def _env_text(value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, frozenset):
        return ",".join(sorted(value))
    return str(value)


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(Policy)])
def test_every_setting_has_its_environment_variable(name: str) -> None:
    variable = "TOOLBUDGET_" + name.upper()
    assert ENV[variable] == name
    value = _other_value(Policy(), name)
    loaded = Policy.load(Path("/nonexistent"), env={variable: _env_text(value)})
    got = getattr(loaded, name)
    if name == "tool_caps":
        assert got["Read"] == 5
    elif name == "exempt_tools":
        assert "pager" in got
    else:
        assert got == value


def test_every_setting_that_shapes_what_the_model_sees_is_in_the_fingerprint() -> None:
    base = Policy()
    outside = {"store", "store_timeout", "max_recovery_attempts", "emergency_keep_messages"}
    outside |= {"max_token_escalations", "max_output_tokens"}
    for f in dataclasses.fields(Policy):
        changed = dataclasses.replace(base, **{f.name: _other_value(base, f.name)})
        assert (changed.fingerprint() != base.fingerprint()) == (f.name not in outside), f.name


@dataclasses.dataclass(frozen=True, slots=True)
class _Wider(Policy):
    """A policy with one more setting, declared once."""

    extra_chars: int = setting(100, least=1)
    extra_mode: str = setting("eager", "mode", fingerprint=False)
    extra_budget_chars: int = setting(1_000, least=1, scales=True)


def test_a_new_setting_gets_its_variable_checks_and_fingerprint_from_its_field(tmp_path: Path) -> None:
    loaded = _Wider.load(tmp_path, env={"TOOLBUDGET_EXTRA_CHARS": "7", "TOOLBUDGET_EXTRA_MODE": "off"})
    assert (loaded.extra_chars, loaded.extra_mode) == (7, "off")
    (tmp_path / "toolbudget.toml").write_text("extra-chars = 9\n")
    assert _Wider.load(tmp_path, env={}).extra_chars == 9
    with pytest.raises(InputError, match="TOOLBUDGET_EXTRA_CHARS must be a whole number"):
        _Wider.load(tmp_path, env={"TOOLBUDGET_EXTRA_CHARS": "many"})
    with pytest.raises(InputError, match="extra_chars must be a whole number of characters"):
        _Wider.load(tmp_path, env={}, extra_chars="many")
    with pytest.raises(InputError, match="extra_chars must be a positive number of characters"):
        _Wider(extra_chars=0)
    with pytest.raises(InputError, match="extra_mode must be one of"):
        _Wider(extra_mode="sometimes")
    assert _Wider(extra_chars=5).fingerprint() != _Wider(extra_chars=6).fingerprint()
    assert _Wider(extra_mode="off").fingerprint() == _Wider().fingerprint()
    assert _Wider().fingerprint().startswith(Policy().fingerprint() + "|")
    half = _Wider().scaled(0.5)
    assert (half.extra_budget_chars, half.extra_chars) == (500, 100)
    assert half.result_max_chars == Policy().scaled(0.5).result_max_chars
    # The base policy does not know the new setting.
    with pytest.raises(InputError, match="unknown toolbudget setting"):
        Policy.load(tmp_path, env={})


def test_a_field_declared_without_its_facts_is_refused() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Bare(Policy):
        extra: int = 3

    with pytest.raises(TypeError, match=r"Bare\.extra must be declared with setting\(\)"):
        Bare()
