"""A marker names only a route to the original that the request really offers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolbudget import recall_tool
from toolbudget.marker import MARKER_RE, find_markers, is_recall_tool, marker_line
from toolbudget.policy import Policy
from toolbudget.session import Session

POLICY = Policy(result_max_chars=2000, tool_caps={})
BIG = "\n".join(f"row {i}: " + "x" * 40 for i in range(400))


def body(tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": "claude-x",
        "max_tokens": 100,
        "tools": tools,
        "messages": [
            {"role": "user", "content": "Look at the rows."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "cat", "input": {"f": "rows"}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": BIG}]},
        ],
    }


CAT = {"name": "cat", "description": "print a file", "input_schema": {"type": "object"}}


def cut_text(out: dict[str, Any]) -> str:
    text = out["messages"][2]["content"][0]["content"]
    assert isinstance(text, str)
    return text


def test_the_recall_tool_is_named_only_when_the_request_defines_it(tmp_path: Path) -> None:
    with Session("routes", store=f"dir:{tmp_path}", policy=POLICY) as session:
        plain = cut_text(session.manage(body([CAT]), api="anthropic").body)
        with_tool = cut_text(session.manage(body([CAT, recall_tool("anthropic")]), api="anthropic").body)
        # No recall tool: the path the agent's own read tool can open, and the key; no tool promised.
        (marker,) = find_markers(plain)
        assert marker.tool is None and marker.path is not None and "recall it with" not in plain
        assert Path(marker.path).read_text() == BIG
    # With the tool: the tool by the name the request gives it, and the same key.
    (named,) = find_markers(with_tool)
    assert named.tool == "toolbudget_recall" and named.path is None and named.key == marker.key


def test_a_store_without_files_gives_the_key_alone() -> None:
    with Session("routes-mem", store="memory:", policy=POLICY) as session:
        text = cut_text(session.manage(body([CAT]), api="anthropic").body)
        (marker,) = find_markers(text)
        assert marker.key is not None and marker.path is None and marker.tool is None
        assert session.original(marker.key) == BIG


def test_an_mcp_recall_tool_is_named_as_the_request_names_it() -> None:
    mcp = {"name": "mcp__toolbudget__recall", "description": "recall", "input_schema": {"type": "object"}}
    with Session("routes-mcp", store="memory:", policy=POLICY) as session:
        text = cut_text(session.manage(body([CAT, mcp]), api="anthropic").body)
    (marker,) = find_markers(text)
    assert marker.tool == "mcp__toolbudget__recall"


def test_an_mcp_recall_answer_in_the_newest_turn_is_not_cut() -> None:
    mcp = {"name": "mcp__toolbudget__recall", "description": "recall", "input_schema": {"type": "object"}}
    request = body([CAT, mcp])
    request["messages"][1]["content"][0]["name"] = "mcp__toolbudget__recall"
    with Session("routes-mcp2", store="memory:", policy=POLICY) as session:
        out = session.manage(request, api="anthropic")
    assert out.report.results_cut == 0 and cut_text(out.body) == BIG


@pytest.mark.parametrize(
    ("name", "ours"),
    [
        ("toolbudget_recall", True),
        ("mcp__toolbudget__recall", True),
        ("mcp_toolbudget_recall", True),
        ("mcp__toolbudget-dev__recall", True),
        ("recall", False),
        ("mcp__other__recall", False),
        ("Read", False),
        (None, False),
    ],
)
def test_which_names_are_our_recall_tool(name: str | None, ours: bool) -> None:
    assert is_recall_tool(name) is ours


def test_one_grammar_matches_every_form() -> None:
    key = "0123456789abcdef0123456789abcdef"
    forms = [
        marker_line(5, 9, key=key, tool="toolbudget_recall", detail="lines 1-2"),
        marker_line(5, 9, key=key, path="/tmp/x/y.txt"),
        marker_line(5, 9, key=key),
        marker_line(5, 9, key=None),
        # A tool name the grammar cannot carry is not offered; the key still is.
        marker_line(5, 9, key=key, tool="bad name; [x]"),
    ]
    for line in forms:
        match = MARKER_RE.fullmatch(line)
        assert match is not None, line
    assert [MARKER_RE.fullmatch(f)["key"] for f in forms] == [key, key, key, None, key]  # type: ignore[index]
    assert "recall it with" not in forms[4]
