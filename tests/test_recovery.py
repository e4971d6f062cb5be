"""The recovery ladder and loop: smaller valid histories that keep the task, and errors passed through."""

from __future__ import annotations

import copy
from itertools import pairwise
from pathlib import Path
from typing import Any

import orjson
import pytest

from toolbudget import load_transcript, to_request, validate, wire
from toolbudget.marker import find_markers
from toolbudget.model import Conversation, Message, Text, ToolCall, ToolResult
from toolbudget.policy import Policy
from toolbudget.recovery import RecoveryExhausted, call_with_recovery, shrink
from toolbudget.recovery.ladder import estimate_tokens
from toolbudget.session import Session


class ProviderError(Exception):
    """A provider's refusal, as (status, body): what classify() reads."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(str(body))
        self.status_code = status
        self.body = body


def overflow(sent: int | None = None, limit: int | None = None) -> ProviderError:
    if sent is None:
        return ProviderError(
            400,
            {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long"}},
        )
    message = f"prompt is too long: {sent} tokens > {limit} maximum"
    return ProviderError(
        400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    )


def long_session(turns: int = 30, size: int = 6_000) -> Conversation:
    messages = [Message("user", (Text("TASK: make the tests pass in repo X"),))]
    for t in range(turns):
        call = ToolCall(f"call_{t}", "Bash", {"command": f"pytest -k case{t}"})
        messages.append(Message("assistant", (Text(f"trying case {t} " + "thoughts " * 800), call)))
        messages.append(Message("tool", (ToolResult(call.id, (Text(f"case {t} output\n" * (size // 15)),)),)))
    return Conversation("long", "test", tuple(messages), (Text("You are a coding agent."),))


@pytest.mark.parametrize("api", wire.APIS)
@pytest.mark.parametrize("level", [1, 2, 3])
def test_every_level_is_valid_keeps_the_task_and_archives_what_it_drops(api: str, level: int) -> None:
    body = to_request(long_session(), api, model="m")
    before = copy.deepcopy(body)
    request = wire.parse(body, api)
    with Session("ladder", store="memory:") as session:
        shrunk, attempt = shrink(session, request, level)
        out = wire.render(shrunk)
        assert body == before
        assert validate(out, api) == []
        non_system = [m for m in shrunk.messages if m.role != "system"]
        assert non_system[0].role == "user"
        assert "TASK: make the tests pass" in orjson.dumps(out).decode()
        assert attempt.estimated_tokens < estimate_tokens(request)
        if level >= 2:
            assert attempt.dropped_messages > 0
            notice = [
                p.text
                for m in shrunk.messages
                for p in m.parts
                if isinstance(p, Text) and "dropped to fit" in p.text
            ]
            (marker,) = find_markers(notice[0])
            assert marker.key == attempt.archive_key
            dropped = session.original(marker.key or "")
            assert "trying case 0" in dropped and "case 0 output" in dropped
        kept = sum(1 for m in shrunk.messages if m.role != "system")
        if level == 3:
            assert kept <= 2 + 4 + 1


def test_level_three_cuts_further_until_it_fits_and_gives_up_only_on_the_system_prompt() -> None:
    request = wire.parse(to_request(long_session(size=40_000), "anthropic", model="m"), "anthropic")
    with Session("squeeze", store="memory:") as session:
        shrunk, attempt = shrink(session, request, 3, target_tokens=1_500)
        assert attempt.estimated_tokens <= 1_500
        assert validate(wire.render(shrunk), "anthropic") == []
        from toolbudget.recovery.ladder import RecoveryFailed

        huge_task = Conversation(
            "t", "test", (Message("user", (Text("x" * 100000),)), *long_session().messages[1:])
        )
        request = wire.parse(to_request(huge_task, "anthropic", model="m"), "anthropic")
        shrunk, attempt = shrink(session, request, 3, target_tokens=1_500)
        assert attempt.estimated_tokens <= 1_500 and len(attempt.task_keys) == 1
        assert session.original(attempt.task_keys[0]) == "x" * 100000
        huge_system = Conversation("t", "test", long_session().messages, (Text("s" * 8_000),))
        request = wire.parse(to_request(huge_system, "anthropic", model="m"), "anthropic")
        with pytest.raises(RecoveryFailed, match="system prompt"):
            shrink(session, request, 3, target_tokens=1_500)


def test_the_loop_recovers_and_passes_other_errors_through() -> None:
    body = to_request(long_session(), "anthropic", model="m")
    before = copy.deepcopy(body)
    sent: list[dict[str, Any]] = []

    def send(b: dict[str, Any]) -> str:
        sent.append(b)
        if estimate_tokens(wire.parse(b, "anthropic")) > 6_000:
            raise overflow()
        return "ok"

    with Session("loop", store="memory:") as session:
        result, climb = call_with_recovery(session, body, send, "anthropic")
    assert result == "ok" and body == before
    report = climb.report(True)
    assert report.recovered and report.level >= 1 and len(sent) == 1 + len(report.attempts)

    calls: list[int] = []

    def limited(b: dict[str, Any]) -> str:
        calls.append(1)
        raise ProviderError(
            429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
        )

    with Session("rate", store="memory:") as session, pytest.raises(ProviderError) as info:
        call_with_recovery(session, body, limited, "anthropic")
    assert info.value.status_code == 429 and calls == [1]


def test_numbers_in_the_error_jump_straight_to_a_level_that_fits() -> None:
    body = to_request(long_session(), "anthropic", model="m")
    levels: list[int] = []

    def send(b: dict[str, Any]) -> str:
        tokens = estimate_tokens(wire.parse(b, "anthropic"))
        if tokens > 3_000:
            raise overflow(tokens, 3_000)
        return "ok"

    with Session("jump", store="memory:") as session:
        _, climb = call_with_recovery(session, body, send, "anthropic")
        levels = [a.level for a in climb.attempts]
    assert levels and levels[0] >= 2 and len(levels) == 1


def test_exhausted_attempts_raise_the_original_error_with_the_report() -> None:
    body = to_request(long_session(), "anthropic", model="m")
    first = overflow()

    def send(b: dict[str, Any]) -> str:
        raise first if not sent else overflow()

    sent: list[int] = []

    def counting(b: dict[str, Any]) -> str:
        try:
            return send(b)
        finally:
            sent.append(1)

    policy = Policy(max_recovery_attempts=2)
    with (
        Session("exhausted", store="memory:", policy=policy) as session,
        pytest.raises(ProviderError) as info,
    ):
        call_with_recovery(session, body, counting, "anthropic")
    # The give-up is toolbudget's own error and the provider's class at once, carrying both.
    assert isinstance(info.value, RecoveryExhausted) and info.value.error is first
    assert info.value.status_code == first.status_code and info.value.reason
    report = info.value.report
    assert info.value.toolbudget_report is report  # the name the report had before
    assert not report.recovered and len(report.attempts) == 2 and len(sent) == 3


def test_real_histories_shrink_to_valid_histories_that_keep_their_task(trajectories: Path) -> None:
    manifest = orjson.loads((trajectories / "manifest.json").read_bytes())
    checked = 0
    for entry in manifest:
        for conversation in load_transcript(trajectories / entry["file"]).conversations[:2]:
            first_user = next((m for m in conversation.messages if m.role == "user"), None)
            for api in ("anthropic", "openai-chat"):
                request = wire.parse(to_request(conversation, api, model="m"), api)
                with Session("real", store="memory:") as session:
                    for level in (2, 3):
                        shrunk, _ = shrink(session, request, level)
                        out = wire.render(shrunk)
                        assert validate(out, api) == [], entry["file"]
                        if first_user is not None:
                            text = next((p.text for p in first_user.parts if isinstance(p, Text)), "")
                            kept = [p.text for m in shrunk.messages for p in m.parts if isinstance(p, Text)]
                            assert not text or any(text[:200] in k for k in kept), entry["file"]
                        checked += 1
    assert checked > 100


# --------------------------------------------------------------------------- a provider that counts


def filler(words: int, seed: str) -> str:
    """Text that tokenizes badly (numbered words), as in the real-server reproducers."""
    vocabulary = ["lorem", "ipsum", "dolor", "sit", "amet", seed, "consectetur", "adipiscing", "elit", "sed"]
    return " ".join(f"{vocabulary[i % 10]}{i}" for i in range(words))


def llama_error(tokens: int, limit: int) -> ProviderError:
    message = f"request ({tokens} tokens) exceeds the available context size ({limit} tokens)"
    error = {"code": 400, "message": message, "type": "exceed_context_size_error"}
    return ProviderError(400, {"error": {**error, "n_prompt_tokens": tokens, "n_ctx": limit}})


class Counting:
    """A llama.cpp-like provider: its own token count (not the ladder's estimate), stated when it refuses."""

    def __init__(self, limit: int = 1024, fixed: int = 20) -> None:
        self.limit = limit
        self.fixed = fixed  # a default system prompt, say: what no estimate of the body sees
        self.bodies: list[bytes] = []

    def tokens(self, body: dict[str, Any]) -> int:
        """A template's overhead per message and per call, and text at 0.55 tokens a character."""
        total = self.fixed
        for message in body["messages"]:
            content = message.get("content") or ""
            text = content if isinstance(content, str) else orjson.dumps(content).decode()
            total += 6 + 15 * len(message.get("tool_calls") or ()) + int(0.55 * len(text))
        return total

    def __call__(self, body: dict[str, Any]) -> str:
        self.bodies.append(orjson.dumps(body))
        tokens = self.tokens(body)
        if tokens > self.limit:
            raise llama_error(tokens, self.limit)
        return "ok"

    def assert_each_retry_smaller(self) -> None:
        sizes = [len(b) for b in self.bodies]
        assert all(later < earlier for earlier, later in pairwise(sizes)), sizes


def chat_call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}


def test_a_retry_after_a_refusal_is_smaller_and_level_3_cuts_down_to_the_task() -> None:
    task = "TASK-MARKER-7731: Summarise the repository status in one word. Context: " + filler(160, "ctx")
    history: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for i in range(12):
        history += [
            {"role": "assistant", "content": None, "tool_calls": [chat_call(f"call_{i}")]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": filler(150, f"r{i}")},
        ]
    history += [{"role": "assistant", "content": "Done looking."}, {"role": "user", "content": "Now answer."}]
    body = {"model": "m", "max_tokens": 16, "messages": history}
    # With an overhead the estimate cannot see, the first level-3 body is refused too: the
    # retry is recalibrated on it, and smaller.
    for provider, tries in ((Counting(), 1), (Counting(fixed=150), 2)):
        assert provider.tokens({"messages": history[:1]}) < provider.limit  # the task alone fits
        with Session("core-fits", store="memory:") as session:
            result, climb = call_with_recovery(session, body, provider, "openai-chat")
        assert result == "ok"
        provider.assert_each_retry_smaller()
        last = orjson.loads(provider.bodies[-1])
        assert last["messages"][0] == {"role": "user", "content": task}
        assert validate(last, "openai-chat") == []
        assert [a.level for a in climb.attempts] == [3] * tries

    # Directly: level 3 goes down to the task, the notice and the latest message when only they
    # fit, to the task alone when only it does, and gives up below.
    request = wire.parse(body, "openai-chat")
    core = estimate_tokens(wire.parse({"model": "m", "messages": history[:1]}, "openai-chat"))
    with Session("floor", store="memory:") as session:
        shrunk, attempt = shrink(session, request, 3, target_tokens=core + 50)
        assert [m.role for m in shrunk.messages] == ["user", "user", "user"]
        assert attempt.estimated_tokens <= core + 50 and attempt.dropped_messages == 25
        text = orjson.dumps(wire.render(shrunk)).decode()
        assert "dropped to fit" in text and "Now answer." in text
        shrunk, _ = shrink(session, request, 3, target_tokens=core)
        assert [m.role for m in shrunk.messages] == ["user"]
        assert orjson.dumps(wire.render(shrunk)).decode().count("[toolbudget: ") == 0
        # Below that, the task itself is cut (its head kept), and only a floor under it gives up.
        shrunk, attempt = shrink(session, request, 3, target_tokens=core - 1)
        assert attempt.estimated_tokens <= core - 1 and attempt.task_keys
        assert task_of_chat(wire.render(shrunk)).startswith("TASK-MARKER-7731")
        from toolbudget.recovery.ladder import RecoveryFailed

        with pytest.raises(RecoveryFailed, match="system prompt"):
            shrink(session, request, 3, target_tokens=100)


@pytest.mark.parametrize("api", ["openai-chat", "anthropic"])
def test_a_long_user_turn_in_the_kept_tail_is_cut_recallably(api: str) -> None:
    log = "Here is the log:\n" + filler(220, "log")
    history = [
        {"role": "user", "content": "TASK-MARKER-7731: Summarise the repository status in one word."},
        {"role": "assistant", "content": "Sure, paste the log."},
        {"role": "user", "content": log},
        {"role": "assistant", "content": "Got it."},
        {"role": "user", "content": "Now answer the task."},
    ]
    body = {"model": "m", "max_tokens": 16, "messages": history}
    provider = Counting()
    with Session("user-turn", store="memory:") as session:
        result, _ = call_with_recovery(session, body, provider, api)
        provider.assert_each_retry_smaller()
        last = orjson.loads(provider.bodies[-1])
        assert result == "ok" and validate(last, api) == []
        text = orjson.dumps(last).decode()
        assert "TASK-MARKER-7731" in text and "Now answer the task." in text
        (marker,) = find_markers(text)
        assert session.original(marker.key or "") == log


def test_a_parallel_batch_at_the_tail_is_kept_with_its_calls_and_squeezed() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "TASK-MARKER-7731: Summarise the repository status in one word."},
        {"role": "assistant", "content": None, "tool_calls": [chat_call(f"call_{i}") for i in range(5)]},
    ]
    history += [
        {"role": "tool", "tool_call_id": f"call_{i}", "content": filler(300, f"p{i}")} for i in range(5)
    ]
    body = {"model": "m", "max_tokens": 16, "messages": history}
    request = wire.parse(body, "openai-chat")
    with Session("batch", store="memory:") as session:
        shrunk, attempt = shrink(session, request, 3)
        assert [m.role for m in shrunk.messages] == ["user", "assistant", *["tool"] * 5]
        assert attempt.dropped_messages == 0

        provider = Counting()
        result, _ = call_with_recovery(session, body, provider, "openai-chat")
    last = orjson.loads(provider.bodies[-1])
    assert result == "ok" and validate(last, "openai-chat") == []
    assert [m["role"] for m in last["messages"]] == ["user", "assistant", *["tool"] * 5]
    assert len(find_markers(orjson.dumps(last).decode())) == 5

    # Responses gives each call an item of its own: the tail starts at the batch's first call.
    calls = [ToolCall(f"call_{i}", "bash", {"cmd": "ls"}) for i in range(5)]
    messages = [
        Message("user", (Text("TASK-MARKER-7731"),)),
        Message("assistant", tuple(calls)),
        *(Message("tool", (ToolResult(c.id, (Text(filler(300, c.id or "")),)),)) for c in calls),
    ]
    body = to_request(Conversation("batch", "test", tuple(messages)), "openai-responses", model="m")
    request = wire.parse(body, "openai-responses")
    with Session("items", store="memory:") as session:
        shrunk, attempt = shrink(session, request, 3)
    assert [m.role for m in shrunk.messages] == ["user", *["assistant"] * 5, *["tool"] * 5]
    assert attempt.dropped_messages == 0 and validate(wire.render(shrunk), "openai-responses") == []


# --------------------------------------------------------------------------- a task too big for the window


def task_of_chat(body: dict[str, Any]) -> str:
    """The text of the first user message of a Chat or Messages body."""
    first = next(m for m in body["messages"] if m["role"] == "user")
    content = first["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def pasted_log(lines: int) -> str:
    """A task that is mostly a pasted log: the ask at its head, the question at its tail."""
    log = "".join(f"2026-01-01 12:00:{i % 60:02d} worker-{i % 7} step {i} ok\n" for i in range(lines))
    return f"TASK-HEAD: one step of this log failed.\n{log}TASK-TAIL: which step failed, and why?"


@pytest.mark.parametrize("api", wire.APIS)
def test_a_task_over_the_window_is_cut_to_its_head_and_tail_and_recalled(api: str) -> None:
    task = pasted_log(600)  # about 9,000 tokens for a 1,500-token target
    conversation = Conversation(
        "huge",
        "test",
        (
            Message("user", (Text(task),)),
            Message("assistant", (Text("Reading it."),)),
            Message("user", (Text("LATEST: answer in one line."),)),
        ),
        (Text("You are a coding agent."),),
    )
    body = to_request(conversation, api, model="m")
    before = copy.deepcopy(body)
    request = wire.parse(body, api)
    assert estimate_tokens(request) > 3 * 1_500
    outs = []
    for _ in range(2):
        with Session("huge-task", store="memory:") as session:
            shrunk, attempt = shrink(session, request, 3, target_tokens=1_500)
            out = wire.render(shrunk)
            outs.append(orjson.dumps(out))
            assert body == before and validate(out, api) == []
            assert attempt.estimated_tokens <= 1_500
            text = orjson.dumps(out).decode()
            # The head and the tail of the task, and the latest turn (which has the other half).
            assert "TASK-HEAD" in text and "TASK-TAIL: which step failed" in text
            assert "LATEST: answer in one line." in text
            (marker,) = find_markers(text)
            assert marker.key is not None and (marker.key,) == attempt.task_keys
            assert marker.total == len(task) and "of the task" in marker.detail
            assert session.original(marker.key) == task  # byte for byte
            page = session.handle_recall({"key": marker.key, "grep": "step 300 ok"})
            assert "step 300 ok" in page
    assert outs[0] == outs[1]  # deterministic


def test_recovery_gives_up_only_when_the_system_prompt_leaves_no_room() -> None:
    from toolbudget.recovery.ladder import RecoveryFailed

    for system, fits in (("s" * 4_000, True), ("s" * 6_000, False)):
        conversation = Conversation(
            "sys", "test", (Message("user", (Text(pasted_log(600)),)),), (Text(system),)
        )
        request = wire.parse(to_request(conversation, "anthropic", model="m"), "anthropic")
        with Session("sys", store="memory:") as session:
            if fits:
                shrunk, attempt = shrink(session, request, 3, target_tokens=1_500)
                assert attempt.estimated_tokens <= 1_500 and attempt.task_keys
                assert "TASK-HEAD" in task_of_chat(wire.render(shrunk))
            else:
                with pytest.raises(RecoveryFailed, match="system prompt"):
                    shrink(session, request, 3, target_tokens=1_500)


@pytest.mark.parametrize("api", ["openai-chat", "anthropic"])
def test_the_loop_cuts_a_task_of_three_windows_and_it_is_recallable(api: str) -> None:
    task = pasted_log(180)
    body = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": task}]}
    provider = Counting()
    assert provider.tokens(body) > 3 * provider.limit
    with Session("loop-task", store="memory:") as session:
        result, climb = call_with_recovery(session, body, provider, api)
        assert result == "ok"
        provider.assert_each_retry_smaller()
        last = orjson.loads(provider.bodies[-1])
        assert provider.tokens(last) <= provider.limit and validate(last, api) == []
        sent = task_of_chat(last)
        assert sent.startswith("TASK-HEAD") and sent.endswith("which step failed, and why?")
        (marker,) = find_markers(sent)
        assert session.original(marker.key or "") == task
        assert climb.attempts[-1].task_keys == (marker.key,)


# --------------------------------------------------------------------------- remembering what fit


def grown(history: list[dict[str, Any]], turn: int) -> list[dict[str, Any]]:
    """The history one tool turn later, as an agent sends it next."""
    return [
        *history,
        {"role": "assistant", "content": None, "tool_calls": [chat_call(f"next_{turn}")]},
        {"role": "tool", "tool_call_id": f"next_{turn}", "content": filler(150, f"n{turn}")},
        {"role": "user", "content": f"Now answer, turn {turn}."},
    ]


def over_the_window() -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "user", "content": "TASK-MARKER-7731: what failed?"}]
    for i in range(12):
        history += [
            {"role": "assistant", "content": None, "tool_calls": [chat_call(f"call_{i}")]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": filler(150, f"r{i}")},
        ]
    return history


@pytest.mark.parametrize("stated", [True, False])
def test_the_next_call_starts_at_the_level_that_fit(stated: bool) -> None:
    from toolbudget.recovery import remembered_fit

    class Silent(Counting):
        """A provider whose overflow error states no numbers (some proxies, older servers)."""

        def __call__(self, body: dict[str, Any]) -> str:
            try:
                return super().__call__(body)
            except ProviderError:
                raise overflow() from None

    provider = Counting() if stated else Silent()
    history = over_the_window()
    with Session("memory", store="memory:", policy=Policy(compaction="off")) as session:
        _, first = call_with_recovery(session, {"model": "m", "messages": history}, provider, "openai-chat")
        assert len(provider.bodies) >= 2 and first.errors
        fit = remembered_fit(session, "openai-chat", "m")
        assert fit is not None and fit.level == first.level and fit.refused > fit.fitted
        for turn in range(3):  # each request bigger than the last, as a session goes on
            history = grown(history, turn)
            calls = len(provider.bodies)
            result, climb = call_with_recovery(
                session, {"model": "m", "messages": history}, provider, "openai-chat"
            )
            assert result == "ok" and len(provider.bodies) == calls + 1  # no refusal first
            report = climb.report(True)
            assert report.remembered and not report.errors and report.level >= 1
            last = orjson.loads(provider.bodies[-1])
            assert validate(last, "openai-chat") == [] and f"Now answer, turn {turn}." in str(last)
        # Another model has another window: what fit here says nothing about it.
        calls = len(provider.bodies)
        call_with_recovery(session, {"model": "other", "messages": history}, provider, "openai-chat")
        assert len(provider.bodies) > calls + 1
        # A history that fits as managed is sent as managed, and the memory is cleared.
        small = {"model": "m", "messages": history[:3]}
        calls = len(provider.bodies)
        _, climb = call_with_recovery(session, small, provider, "openai-chat")
        assert len(provider.bodies) == calls + 1 and not climb.attempts
        assert remembered_fit(session, "openai-chat", "m") is None
        calls = len(provider.bodies)
        call_with_recovery(session, {"model": "m", "messages": history}, provider, "openai-chat")
        assert len(provider.bodies) > calls + 1  # forgotten: it is refused first again


class Window:
    """A provider behind the SDKs' HTTP: its own token count, and its real overflow error over a limit."""

    def __init__(self, api: str, limit: int) -> None:
        self.api = api
        self.limit = limit
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        import httpx2

        body = orjson.loads(request.content)
        self.bodies.append(body)
        tokens = len(orjson.dumps(body["messages"])) // 3 + 7 * len(body["messages"])
        if tokens > self.limit and self.api == "openai-chat":
            message = (
                f"This model's maximum context length is {self.limit} tokens. However, your messages "
                f"resulted in {tokens} tokens. Please reduce the length of the messages."
            )
            error = {"message": message, "type": "invalid_request_error", "param": "messages"}
            return httpx2.Response(400, json={"error": {**error, "code": "context_length_exceeded"}})
        if tokens > self.limit:
            message = f"prompt is too long: {tokens} tokens > {self.limit} maximum"
            error = {"type": "invalid_request_error", "message": message}
            return httpx2.Response(400, json={"type": "error", "error": error})
        if self.api == "openai-chat":
            answer = {"role": "assistant", "content": "ok"}
            choice = {"index": 0, "message": answer, "finish_reason": "stop", "logprobs": None}
            usage = {"prompt_tokens": tokens, "completion_tokens": 1, "total_tokens": tokens + 1}
            return httpx2.Response(
                200,
                json={
                    "id": "c1",
                    "object": "chat.completion",
                    "created": 1,
                    "model": "m",
                    "choices": [choice],
                }
                | {"usage": usage},
            )
        return httpx2.Response(
            200,
            json={
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "m",
                "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": tokens, "output_tokens": 1},
            },
        )


@pytest.mark.parametrize("api", ["openai-chat", "anthropic"])
def test_a_wrapped_client_pays_the_refusal_once_per_session(api: str) -> None:
    import httpx2

    from toolbudget import wrap

    upstream = Window(api, limit=2_000)
    http = httpx2.Client(transport=httpx2.MockTransport(upstream))
    session = Session("wrapped", store="memory:")
    if api == "openai-chat":
        import openai

        client: Any = openai.OpenAI(api_key="k", base_url="http://up/v1", http_client=http, max_retries=0)
        create = wrap(client, session=session).chat.completions.create
    else:
        import anthropic

        client = anthropic.Anthropic(api_key="k", base_url="http://up", http_client=http, max_retries=0)
        create = wrap(client, session=session).messages.create
    history = [{"role": "user", "content": "TASK-MARKER-7731: what failed?"}]
    for i in range(12):
        history += [
            {"role": "assistant", "content": f"Step {i}: " + filler(300, f"a{i}")},
            {"role": "user", "content": f"Output {i}: " + filler(300, f"u{i}")},
        ]
    calls: list[int] = []
    for turn in range(4):
        history = [
            *history,
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": f"Go {turn}"},
        ]
        before = len(upstream.bodies)
        answer = create(model="m", max_tokens=16, messages=history)
        calls.append(len(upstream.bodies) - before)
        assert calls[0] >= 2 and calls[1:] == [1] * turn, calls  # one refusal, in the first call only
        report = answer.toolbudget_report
        assert report.level >= 1 and report.recovery.remembered == (turn > 0)
        assert f"Go {turn}" in str(upstream.bodies[-1]) and validate(upstream.bodies[-1], api) == []
    session.close()
    http.close()


def test_async_calls_remember_what_fit_too() -> None:
    import asyncio

    from toolbudget.recovery import acall_with_recovery

    provider = Counting()

    async def send(body: dict[str, Any]) -> str:
        return provider(body)

    async def two_turns() -> list[int]:
        history = over_the_window()
        counts = []
        with Session("async-memory", store="memory:") as session:
            for turn in range(2):
                history = grown(history, turn)
                before = len(provider.bodies)
                await acall_with_recovery(session, {"model": "m", "messages": history}, send, "openai-chat")
                counts.append(len(provider.bodies) - before)
        return counts

    first, second = asyncio.run(two_turns())
    assert first >= 2 and second == 1


@pytest.mark.shared
def test_real_tasks_are_cut_to_fit_and_only_system_prompts_give_up(trajectories: Path) -> None:
    """Each shared conversation at 800 tokens: it fits, or its system prompt and tools nearly fill them."""
    from dataclasses import replace

    from toolbudget.recovery.ladder import RecoveryFailed

    manifest = orjson.loads((trajectories / "manifest.json").read_bytes())
    fitted = cut = 0
    for entry in manifest:
        for conversation in load_transcript(trajectories / entry["file"]).conversations[:2]:
            for api in ("anthropic", "openai-chat"):
                request = wire.parse(to_request(conversation, api, model="m"), api)
                with Session("real-task", store="memory:") as session:
                    try:
                        shrunk, attempt = shrink(session, request, 3, target_tokens=800)
                    except RecoveryFailed:
                        system = [m for m in request.messages if m.role == "system"]
                        alone = estimate_tokens(replace(request, messages=tuple(system)))
                        assert alone > 800 / 2, entry["file"]  # the floor of the task is small
                        continue
                    assert attempt.estimated_tokens <= 800, entry["file"]
                    assert validate(wire.render(shrunk), api) == [], entry["file"]
                    fitted += 1
                    for key in attempt.task_keys:
                        assert find_markers(orjson.dumps(wire.render(shrunk)).decode()), entry["file"]
                        assert session.original(key), entry["file"]
                    cut += bool(attempt.task_keys)
    assert fitted > 80 and cut > 50
