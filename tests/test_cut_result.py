"""``Session.cut_result``: one fresh result cut at its source, as ``manage`` cuts it in a request."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

import toolbudget
from toolbudget import APIS, InputError, Session
from toolbudget.budget import recall_route, result_text
from toolbudget.convert import to_request
from toolbudget.marker import RECALL_TOOL
from toolbudget.model import Conversation, Request, ToolCall, ToolDef, ToolResult
from toolbudget.policy import Policy
from toolbudget.recall import RECALL_PARAMETERS
from toolbudget.replay import requests_of
from toolbudget.wire._common import tools_for_calls

_KEY = re.compile(r"<<tb:([a-z0-9]+)>>")


def _fresh(request: Request) -> list[tuple[ToolResult, str | None]]:
    """The results after the last assistant message (the newest turn's), each with its tool."""
    last = max((i for i, m in enumerate(request.messages) if m.role == "assistant"), default=None)
    if last is None:
        return []
    calls = {p.id: p.name for m in request.messages for p in m.parts if isinstance(p, ToolCall) and p.id}
    out = []
    for message in request.messages[last + 1 :]:
        for part in message.parts:
            if isinstance(part, ToolResult):
                tool = calls.get(part.call_id) if part.call_id is not None else None
                out.append((part, tool if tool is not None else part.name))
    return out


def _with_recall(conversation: Conversation) -> Conversation:
    tools = conversation.tools or tools_for_calls(conversation.messages)
    recall = ToolDef(RECALL_TOOL, "recall", RECALL_PARAMETERS)
    return replace(conversation, tools=(*tools, recall))


@pytest.mark.shared
def test_cut_result_is_what_manage_puts_in_the_fresh_result_s_place(
    real: list[tuple[str, Conversation]],
) -> None:
    """Every fresh result of every shared conversation (each on one API; every other one
    with the recall tool defined; a third under the default policy, the rest under a tight
    one): ``cut_result`` gives the very text ``manage`` sends in its place, with the same
    key, except where the turn budget binds, where ``manage`` sends a shorter preview of the
    same original under the same key."""
    # The defaults cut few fresh results of these sessions; a tenth of every budget cuts
    # many, and makes the turn budget bind on some turns.
    policies = (Policy(), replace(Policy().scaled(0.1), turn_budget_chars=4000))
    compared = cut = recalled = squeezed = 0
    for n, (name, conversation) in enumerate(real):
        api = APIS[n % len(APIS)]
        policy = policies[n % 3 != 0]
        if n % 2:
            conversation = _with_recall(conversation)
        sid = f"cut-{n}"
        with (
            Session(sid, store="memory:", policy=policy) as managing,
            Session(sid, store="memory:", policy=policy) as cutting,
        ):
            for request in requests_of(conversation):
                managed = managing.manage(to_request(request, api), api)
                route = recall_route(managed.original)
                # Paired in order: a repair may give a result a fresh id, never another place.
                before, after = _fresh(managed.original), _fresh(managed.request)
                assert len(before) == len(after), name
                budget_cut = {c.call_id for c in managed.report.cuts if c.reason == "turn_budget"}
                for (given, tool), (sent, _) in zip(before, after, strict=True):
                    text = result_text(given)
                    if text is None:
                        continue  # nothing a budget could cut
                    mine = cutting.cut_result(
                        tool, text, call_id=given.call_id, is_error=given.is_error, recall_tool=route
                    )
                    theirs = result_text(sent)
                    compared += 1
                    if sent.call_id in budget_cut and sent.call_id is not None:
                        squeezed += 1
                        # Shrunk further, from the same original: the same key, when it was cut here.
                        assert theirs is not None and len(theirs) <= len(mine), name
                        (key,) = _KEY.findall(theirs)
                        assert managing.original(key) == text
                        assert _KEY.findall(mine) in ([], [key]), name
                        continue
                    assert mine == theirs, (name, given.call_id)
                    if mine != text:
                        cut += 1
                        recalled += route is not None
                        (key,) = _KEY.findall(mine)
                        assert cutting.original(key) == text
    # The comparison covered real cuts, with and without the recall route.
    assert compared > 3000 and cut > 200 and 0 < recalled < cut and squeezed > 0, (
        compared,
        cut,
        recalled,
        squeezed,
    )


def test_cut_result_matches_manage_for_one_result() -> None:
    big = "\n".join(f"{i}: " + "word " * 30 for i in range(3000))
    body = {
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": big}]},
        ],
        "tools": [toolbudget.recall_tool("anthropic")],
    }
    with Session("one", store="memory:") as a, Session("one", store="memory:") as b:
        managed = a.manage(body, "anthropic")
        sent = managed.body["messages"][2]["content"][0]["content"]
        assert isinstance(sent, str) and sent != big
        assert b.cut_result("Bash", big, call_id="t1", recall_tool=RECALL_TOOL) == sent
        # Without the route, the marker is the one of a request that does not define the tool.
        plain = b.cut_result("Bash", big)
        assert RECALL_TOOL not in plain and _KEY.findall(plain) == _KEY.findall(sent)
        # A cut text given again is read back as its original: the same cut, not a cut of a cut.
        assert b.cut_result("Bash", sent, recall_tool=RECALL_TOOL) == sent
        # Under its cap, and a recall answer, stay whole.
        assert b.cut_result("Bash", "short") == "short"
        assert b.cut_result(RECALL_TOOL, big) == big
        (key,) = _KEY.findall(sent)
        assert b.original(key) == big


def test_cut_result_keeps_errors_up_to_the_error_cap() -> None:
    text = "Traceback\n" + "x" * 30_000
    with Session("err", store="memory:") as s:
        assert s.cut_result("Bash", text, is_error=True) == text
        assert s.cut_result("Bash", text) != text


def test_cut_result_refuses_bad_arguments() -> None:
    with Session("bad", store="memory:") as s:
        with pytest.raises(InputError):
            s.cut_result("Bash", b"bytes")  # type: ignore[arg-type]
        with pytest.raises(InputError):
            s.cut_result("Bash", "x", recall_tool="Read")
    with Session(store="memory:") as s, pytest.raises(InputError):
        s.cut_result("Bash", "x")  # no id yet: the keys could not be computed
