"""``Managed.origins``: which message of the request given each managed message came from.

On every API's shapes: results cut, calls interrupted (a synthesized result),
orphans dropped, results moved next to their calls, Bedrock's joined and
inserted messages, folded turns, a folded body managed again, and requests
worked incrementally, which must say what the whole pipeline says.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from toolbudget import to_request, wire
from toolbudget.model import Conversation, Message, Part, Text, ToolCall, ToolResult
from toolbudget.pairing import SYNTHETIC_TEXT
from toolbudget.policy import Policy
from toolbudget.session import Managed, Session

ALL_APIS = ("anthropic", "openai-chat", "openai-responses", "gemini", "bedrock-converse")


def output(n: int, size: int = 30_000) -> str:
    return "".join(f"line {i} of output {n}\n" for i in range(size // 20))


def made_by_toolbudget(part: Part) -> bool:
    if isinstance(part, ToolResult):
        return any(isinstance(p, Text) and p.text == SYNTHETIC_TEXT for p in part.content)
    return isinstance(part, Text) and part.text.startswith(("[toolbudget: ", "[toolbudget] "))


def side(message: Message) -> str:
    return "assistant" if message.role == "assistant" else "user"


def check(managed: Managed, *, restored: bool = False) -> tuple[int | None, ...]:
    """What holds of any request's origins; returns them. ``restored``: turns may come back
    from the archive (a folded body unfolded), which are no message given either."""
    given, sent, origins = managed.original.messages, managed.request.messages, managed.origins
    assert len(origins) == len(sent)
    where = {id(m): k for k, m in enumerate(given)}
    for message, origin in zip(sent, origins, strict=True):
        if id(message) in where:
            assert origin == where[id(message)]  # an untouched message is the caller's own
        if origin is None:
            assert restored or all(made_by_toolbudget(p) for p in message.parts), message
            continue
        source = given[origin]
        assert side(message) == side(source)
        calls = {p.id for p in source.parts if isinstance(p, ToolCall)}
        results = {p.call_id for p in source.parts if isinstance(p, ToolResult)}
        for part in message.parts:
            if isinstance(part, ToolCall):
                assert part.id in calls
            elif isinstance(part, ToolResult) and not made_by_toolbudget(part):
                assert part.call_id in results or part.name in {
                    p.name for p in source.parts if isinstance(p, ToolResult)
                }
    for cut in managed.report.cuts:
        if cut.call_id is not None:
            source = given[origins[cut.index] or 0]
            assert cut.call_id in {p.call_id for p in source.parts if isinstance(p, ToolResult)}
    return origins


def broken_history() -> Conversation:
    """A task, a large result, a call interrupted before its result, the user going on, an orphan."""
    messages = [
        Message("user", (Text("fix the bug"),)),
        Message("assistant", (Text("looking"), ToolCall("c0", "Bash", {"command": "pytest"}))),
        Message("tool", (ToolResult("c0", (Text(output(0)),), False, "Bash"),)),
        Message("assistant", (ToolCall("c1", "Bash", {"command": "make"}),)),
        Message("user", (Text("go on"),)),
        Message("assistant", (ToolCall("c2", "Read", {"path": "a.py"}),)),
        Message("tool", (ToolResult("c2", (Text("short"),), False, "Read"),)),
        Message("tool", (ToolResult("ghost", (Text("nobody called me"),), False, "Bash"),)),
    ]
    return Conversation("c", "test", tuple(messages))


@pytest.mark.parametrize("api", ALL_APIS)
def test_repairs_and_cuts_keep_where_each_message_came_from(api: str) -> None:
    body = to_request(broken_history(), api, model="m")
    with Session("origins", store="memory:") as session:
        managed = session.manage(body, api)
    assert managed.report.repairs and managed.report.cuts
    origins = check(managed)
    given, sent = managed.original.messages, managed.request.messages
    # The history list of the body is the request's messages, one for one, both ways.
    key = {"openai-responses": "input", "gemini": "contents"}.get(api, "messages")
    assert len(body[key]) == len(given) and len(wire.render(managed.request)[key]) == len(sent)
    # The interrupted call's result: a message of its own (made here) or carried by the next
    # user message (which stays that message).
    synthesized = [i for i, m in enumerate(sent) if any(made_by_toolbudget(p) for p in m.parts)]
    assert len(synthesized) == 1
    (at,) = synthesized
    if api in ("openai-chat", "openai-responses"):
        assert origins[at] is None
    else:
        carrier = origins[at]
        assert carrier is not None and Text("go on") in given[carrier].parts
    # Nothing else is new, and the order of the history is kept.
    known = [j for j in origins if j is not None]
    assert known == sorted(known) and len(set(known)) == len(known)
    assert len(known) == len(sent) - (origins[at] is None)
    # The orphan's message is the origin of nothing when it held nothing else.
    ghost = [k for k, m in enumerate(given) if any(getattr(p, "call_id", 0) == "ghost" for p in m.parts)]
    if api in ("openai-chat", "openai-responses"):
        assert ghost[0] not in origins


def test_a_result_moved_next_to_its_call_is_still_its_own_message() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "tool", "tool_call_id": "c1", "content": "early"},
            {"role": "assistant", "content": None, "tool_calls": [_call("c1")]},
        ],
    }
    with Session("moved", store="memory:") as session:
        managed = session.manage(body, "openai-chat")
    assert [r.kind for r in managed.report.repairs] == ["moved_result"]
    assert check(managed) == (0, 2, 1)


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "Bash", "arguments": "{}"}}


def test_bedrock_joined_and_inserted_messages() -> None:
    def user(text: str) -> dict[str, Any]:
        return {"role": "user", "content": [{"text": text}]}

    body = {
        "modelId": "m",
        "messages": [
            {"role": "assistant", "content": [{"text": "hello"}]},
            user("one"),
            user("two"),
            {"role": "assistant", "content": [{"text": "ok"}]},
            user("three"),
        ],
    }
    with Session("bedrock", store="memory:") as session:
        managed = session.manage(body, "bedrock-converse")
    kinds = {r.kind for r in managed.report.repairs}
    assert {"inserted_first_user_message", "merged_messages"} <= kinds
    # The first user message is made here; "one" and "two" are one message now, the first's.
    assert check(managed) == (None, 0, 1, 3, 4)


def long_session(turns: int, size: int = 12_000) -> Conversation:
    messages = [Message("user", (Text("fix the bug"),))]
    for t in range(turns):
        call = ToolCall(f"call_{t}", "Bash", {"command": f"pytest tests/test_{t}.py"})
        messages.append(Message("assistant", (Text(f"step {t}"), call)))
        messages.append(Message("tool", (ToolResult(call.id, (Text(output(t, size)),), False, "Bash"),)))
    return Conversation("c", "test", tuple(messages))


@pytest.mark.parametrize("api", ALL_APIS)
def test_folded_turns_and_a_folded_body_managed_again(api: str, tmp_path: Any) -> None:
    policy = Policy(context_window_tokens=8_000)
    body = to_request(long_session(40), api, model="m")
    store = f"dir:{tmp_path}"
    items = api == "openai-responses"
    with Session("fold", store=store, policy=policy) as session:
        managed = session.manage(body, api)
        fold = next(c for c in managed.report.cuts if c.reason == "compaction_fold")
        assert fold.key is not None
        span = len(wire.parse(orjson.loads(session.original(fold.key)), api).messages)
    given = managed.original.messages
    start = next(i for i, m in enumerate(given) if m.role == "assistant")
    assert fold.index == start
    # Before the fold, the messages themselves; then (Responses) the marker's own item; then the
    # first kept turn, which carries the marker elsewhere, and the rest.
    kept = range(start + span, len(given))
    assert check(managed) == (*range(start), *((None,) if items else ()), *kept)
    # The managed body managed again (a fresh session): the fold is read back and made again,
    # at the same place: each message is the one given, the marker's item made again.
    with Session("fold", store=store, policy=policy) as session:
        again = session.manage(orjson.loads(orjson.dumps(managed.body)), api)
    assert again.body == managed.body
    n = len(again.original.messages)
    assert check(again) == ((*range(start), None, *range(start + 1, n)) if items else tuple(range(n)))
    # Managed again without compaction, the folded turns come back from the archive: they are
    # no message given, and the rest still is.
    with Session("fold", store=store, policy=Policy(compaction="off")) as session:
        unfolded = session.manage(orjson.loads(orjson.dumps(managed.body)), api)
    assert len(unfolded.request.messages) == len(given)
    after = (start + 1) if items else start
    assert check(unfolded, restored=True) == (*range(start), *([None] * span), *range(after, n))


@pytest.mark.parametrize("api", ["anthropic", "openai-chat", "openai-responses"])
def test_requests_worked_incrementally_say_what_the_whole_pipeline_says(api: str) -> None:
    policy = Policy(context_window_tokens=8_000)
    history = long_session(30, 3_000).messages
    with Session("inc", store="memory:", policy=policy) as session:
        for turns in range(1, 31):
            conversation = Conversation("c", "test", history[: 1 + 2 * turns])
            body = to_request(conversation, api, model="m")
            managed = session.manage(body, api)
            if turns % 5 and turns != 30:
                continue
            origins = check(managed)
            with Session("inc", store="memory:", policy=policy) as fresh:
                whole = fresh.manage(to_request(conversation, api, model="m"), api)
            assert whole.body == managed.body
            assert origins == whole.origins, turns
        assert any(c.reason == "compaction_fold" for c in managed.report.cuts)
        # The same body again (a retry) is answered from the last answer, origins and all.
        assert session.manage(body, api).origins == origins


def test_an_unchanged_request_is_its_own_message_for_message() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with Session("same", store="memory:") as session:
        managed = session.manage(body, "openai-chat")
    assert managed.body is body and managed.origins == (0,)


def test_a_request_with_other_messages_keeps_every_other_field_and_no_origin() -> None:
    from dataclasses import fields, replace

    from toolbudget.model import Message, Request, Text, ToolDef, set_origin

    request = set_origin(
        Request(
            "anthropic",
            (Message("user", (Text("a"),)),),
            (Text("system"),),
            (ToolDef("t", "d", {"type": "object"}),),
            {"model": "m"},
            ("system",),
        ),
        "anthropic",
        {},
    )
    # Every field a new version adds must be given here, and copied by ``with_messages``.
    given = {"api", "messages", "system", "tools", "extra", "form"}
    assert {f.name for f in fields(Request) if f.init} == given
    messages = (Message("user", (Text("b"),)),)
    made = request.with_messages(messages)
    assert made == replace(request, messages=messages)
    assert made.origin is None and request.origin is not None
