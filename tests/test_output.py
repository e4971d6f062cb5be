"""Output cut-offs, API by API: detection, escalation, continuation and merging (pure functions)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolbudget import Policy
from toolbudget.recovery import ErrorKind, classify
from toolbudget.recovery.output import (
    DEFAULT_OUTPUT_CAP,
    MIN_REPEAT,
    ContextWindowFull,
    Cutoff,
    Stretch,
    answer_text,
    continuation,
    continuation_prompt,
    escalated,
    finalize,
    is_cut_off,
    max_tokens_of,
    merge,
    output_cap,
    repeated,
)

APIS = ("anthropic", "openai-chat", "openai-responses", "gemini")
CUT = {
    "anthropic": "max_tokens",
    "openai-chat": "length",
    "openai-responses": "max_output_tokens",
    "gemini": "MAX_TOKENS",
}
DONE = {"anthropic": "end_turn", "openai-chat": "stop", "openai-responses": "completed", "gemini": "STOP"}
CALLED = {
    "anthropic": "tool_use",
    "openai-chat": "tool_calls",
    "openai-responses": "completed",
    "gemini": "STOP",
}


# --------------------------------------------------------------------------- answers, as each API sends them


def answer(api: str, text: str | None, stop: str, *, call: str | None = None, out: int = 5) -> dict[str, Any]:
    """An answer of ``api`` with ``text``, and one tool call when ``call`` (its JSON arguments) is given."""
    if api == "anthropic":
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        if call is not None:
            try:
                arguments: Any = json.loads(call)
            except ValueError:
                arguments = call
            content.append({"type": "tool_use", "id": "toolu_1", "name": "Read", "input": arguments})
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": out, "cache_read_input_tokens": 0},
        }
    if api == "openai-chat":
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if call is not None:
            message["tool_calls"] = [
                {"id": "call_1", "type": "function", "function": {"name": "Read", "arguments": call}}
            ]
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4o",
            "choices": [{"index": 0, "message": message, "finish_reason": stop}],
            "usage": {
                "prompt_tokens": 100,
                "completion_tokens": out,
                "total_tokens": 100 + out,
                "completion_tokens_details": {"reasoning_tokens": 0},
            },
        }
    if api == "openai-responses":
        output: list[dict[str, Any]] = []
        if text:
            output.append(
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "incomplete" if stop != "completed" else "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            )
        if call is not None:
            output.append(
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "name": "Read",
                    "arguments": call,
                }
            )
        body: dict[str, Any] = {
            "id": "resp_1",
            "object": "response",
            "model": "gpt-5",
            "output": output,
            "status": "completed" if stop == "completed" else "incomplete",
            "usage": {"input_tokens": 100, "output_tokens": out, "total_tokens": 100 + out},
        }
        if stop != "completed":
            body["incomplete_details"] = {"reason": stop}
        return body
    parts: list[dict[str, Any]] = [{"text": text}] if text else []
    if call is not None:
        parts.append({"functionCall": {"name": "Read", "args": json.loads(call)}})
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": stop, "index": 0}],
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": out, "totalTokenCount": 100 + out},
        "modelVersion": "gemini-2.5-pro",
    }


def request(api: str, max_tokens: int | None = 100) -> dict[str, Any]:
    if api == "anthropic":
        return {
            "model": "claude-sonnet-4-5",
            "max_tokens": max_tokens,
            "system": "be brief",
            "messages": [{"role": "user", "content": "Write a story."}],
        }
    if api == "openai-chat":
        body: dict[str, Any] = {
            "model": "gpt-4o",
            "messages": [{"role": "user", "content": "Write a story."}],
        }
        if max_tokens is not None:
            body["max_completion_tokens"] = max_tokens
        return body
    if api == "openai-responses":
        body = {"model": "gpt-5", "input": "Write a story."}
        if max_tokens is not None:
            body["max_output_tokens"] = max_tokens
        return body
    body = {"contents": [{"role": "user", "parts": [{"text": "Write a story."}]}]}
    if max_tokens is not None:
        body["generationConfig"] = {"maxOutputTokens": max_tokens, "temperature": 0}
    return body


def text_of(api: str, response: dict[str, Any]) -> str:
    return answer_text([response], api)


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize("api", APIS)
def test_a_finished_answer_is_not_cut(api: str) -> None:
    assert is_cut_off(answer(api, "The end.", DONE[api]), api) is None


@pytest.mark.parametrize("api", APIS)
def test_the_output_limit_is_a_cut_off(api: str) -> None:
    cut = is_cut_off(answer(api, "Once upon a", CUT[api], out=5), api)
    assert cut == Cutoff(api, CUT[api], tool_call=False, context_window=False, output_tokens=5)


@pytest.mark.parametrize("api", APIS)
def test_a_complete_tool_call_is_not_cut(api: str) -> None:
    assert is_cut_off(answer(api, "Reading.", CALLED[api], call='{"path": "a.py"}'), api) is None


@pytest.mark.parametrize("api", ["anthropic", "openai-chat", "openai-responses"])
def test_truncated_tool_call_json_is_a_cut_tool_call(api: str) -> None:
    cut = is_cut_off(answer(api, "Reading.", CUT[api], call='{"path": "src/ma'), api)
    assert cut is not None
    assert cut.tool_call
    assert not cut.context_window


@pytest.mark.parametrize("api", ["anthropic", "gemini"])
def test_a_call_ending_a_cut_answer_counts_as_truncated_where_arguments_come_parsed(api: str) -> None:
    """Anthropic and Gemini send arguments already parsed: a cut answer's last call may be unfinished."""
    cut = is_cut_off(answer(api, "Reading.", CUT[api], call='{"path": "a"}'), api)
    assert cut is not None
    assert cut.tool_call


def test_chat_tool_calls_finish_with_invalid_json_is_a_cut_tool_call() -> None:
    """Some OpenAI-compatible servers say "tool_calls" for a call that was cut off."""
    cut = is_cut_off(answer("openai-chat", None, "tool_calls", call='{"path": "a'), "openai-chat")
    assert cut == Cutoff("openai-chat", "tool_calls", tool_call=True, context_window=False, output_tokens=5)


def test_chat_length_with_no_output_at_all_is_the_context_window() -> None:
    response = answer("openai-chat", None, "length", out=0)
    cut = is_cut_off(response, "openai-chat")
    assert cut is not None
    assert cut.context_window
    del response["usage"]  # no usage either: still nothing was written
    cut = is_cut_off(response, "openai-chat")
    assert cut is not None
    assert cut.context_window


def test_chat_length_with_no_text_but_reasoning_tokens_escalates() -> None:
    """A reasoning model can spend the whole budget thinking: that is max_tokens, not the window."""
    cut = is_cut_off(answer("openai-chat", None, "length", out=100), "openai-chat")
    assert cut is not None
    assert not cut.context_window


def test_anthropic_model_context_window_exceeded_is_the_context_window() -> None:
    cut = is_cut_off(answer("anthropic", "Once", "model_context_window_exceeded"), "anthropic")
    assert cut is not None
    assert cut.context_window


def test_mistral_model_length_is_the_context_window() -> None:
    cut = is_cut_off(answer("openai-chat", "Once", "model_length"), "openai-chat")
    assert cut is not None
    assert cut.context_window


def test_responses_incomplete_for_another_reason_is_not_an_output_cut() -> None:
    response = answer("openai-responses", "Once", "content_filter")
    assert is_cut_off(response, "openai-responses") is None


def test_responses_with_no_output_items_escalates() -> None:
    """Reasoning models can spend the budget on reasoning and return no items."""
    cut = is_cut_off(answer("openai-responses", None, "max_output_tokens", out=100), "openai-responses")
    assert cut is not None
    assert not cut.context_window


def test_unknown_api_is_refused() -> None:
    with pytest.raises(ValueError, match="cohere"):
        is_cut_off({}, "cohere")


def test_context_window_full_classifies_as_an_overflow() -> None:
    cut = Cutoff("openai-chat", "length", context_window=True, output_tokens=0)
    classified = classify(ContextWindowFull({}, cut))
    assert classified.kind is ErrorKind.CONTEXT_OVERFLOW


# --------------------------------------------------------------------------- escalation


def test_output_caps_of_known_models() -> None:
    assert output_cap("claude-sonnet-4-5-20250929") == 64_000
    assert output_cap("claude-opus-4-1-20250805") == 32_000
    assert output_cap("claude-opus-4-20250514") == 32_000
    assert output_cap("claude-opus-4-6") == 128_000
    assert output_cap("claude-haiku-4-5") == 64_000
    assert output_cap("claude-3-5-haiku-latest") == 8_192
    assert output_cap("gpt-4o-2024-08-06") == 16_384
    assert output_cap("gpt-4.1-mini") == 32_768
    assert output_cap("gpt-5") == 128_000
    assert output_cap("o3-mini") == 100_000
    assert output_cap("gemini-2.5-pro") == 65_536
    assert output_cap("some-local-model") == DEFAULT_OUTPUT_CAP
    assert output_cap(None) == DEFAULT_OUTPUT_CAP
    assert output_cap("gpt-4o", Policy(max_output_tokens=1234)) == 1234


@pytest.mark.parametrize("api", APIS)
def test_escalation_doubles_the_field_the_request_uses(api: str) -> None:
    body = request(api, 100)
    before = copy.deepcopy(body)
    bigger = escalated(body, api, cap=1000)
    assert bigger is not None
    assert max_tokens_of(bigger, api) == 200
    assert body == before  # never mutated
    assert escalated(request(api, 700), api, cap=1000) is not None
    top = escalated(request(api, 700), api, cap=1000)
    assert top is not None
    assert max_tokens_of(top, api) == 1000
    assert escalated(request(api, 1000), api, cap=1000) is None


def test_chat_escalation_keeps_the_legacy_field_when_that_is_what_was_used() -> None:
    body = {"model": "gpt-4o", "messages": [], "max_tokens": 50}
    bigger = escalated(body, "openai-chat", cap=1000)
    assert bigger == {"model": "gpt-4o", "messages": [], "max_tokens": 100}


def test_gemini_escalation_keeps_the_rest_of_the_generation_config() -> None:
    bigger = escalated(request("gemini", 100), "gemini", cap=1000)
    assert bigger is not None
    assert bigger["generationConfig"] == {"maxOutputTokens": 200, "temperature": 0}


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses", "gemini"])
def test_a_request_without_a_limit_cannot_escalate(api: str) -> None:
    assert escalated(request(api, None), api, cap=1000) is None


# --------------------------------------------------------------------------- continuation


@pytest.mark.parametrize("api", APIS)
def test_continuation_sends_the_partial_text_back_and_asks_to_resume(api: str) -> None:
    body = request(api)
    before = copy.deepcopy(body)
    follow = continuation(body, api, "Once upon a")
    assert body == before
    history = follow["contents" if api == "gemini" else "input" if api == "openai-responses" else "messages"]
    assert len(history) == 3
    dumped = json.dumps(history[1:])
    assert "Once upon a" in dumped
    assert "Continue exactly where it stopped" in dumped
    assert max_tokens_of(follow, api) == max_tokens_of(body, api)


def test_continuation_after_a_cut_tool_call_asks_for_the_call_again_whole() -> None:
    follow = continuation(request("anthropic"), "anthropic", "Reading the file.", tool_call=True)
    prompt = follow["messages"][-1]["content"][0]["text"]
    assert prompt == continuation_prompt(True)
    assert "discarded" in prompt
    assert "complete" in prompt
    assert all(
        block.get("type") != "tool_use"
        for m in follow["messages"]
        for block in m["content"]
        if isinstance(block, dict)
    )


def test_continuation_without_text_only_asks() -> None:
    follow = continuation(request("openai-chat"), "openai-chat", "", tool_call=True)
    assert [m["role"] for m in follow["messages"]] == ["user", "user"]


def test_continuation_extends_an_anthropic_prefill() -> None:
    body = request("anthropic")
    body["messages"].append({"role": "assistant", "content": "Once"})
    follow = continuation(body, "anthropic", " upon a")
    roles = [m["role"] for m in follow["messages"]]
    assert roles == ["user", "assistant", "user"]
    assert follow["messages"][1]["content"][0]["text"] == "Once upon a"


# --------------------------------------------------------------------------- merging


@pytest.mark.parametrize("api", APIS)
def test_merge_joins_text_sums_usage_and_keeps_the_last_stop(api: str) -> None:
    first = answer(api, "Once upon a ", CUT[api], out=5)
    second = answer(api, "time, the end.", DONE[api], out=4)
    before = copy.deepcopy([first, second])
    merged = merge([first, second], api)
    assert [first, second] == before
    assert text_of(api, merged) == "Once upon a time, the end."
    assert is_cut_off(merged, api) is None
    usage_key = "usageMetadata" if api == "gemini" else "usage"
    out_key = {"anthropic": "output_tokens", "openai-chat": "completion_tokens"}.get(
        api, "candidatesTokenCount" if api == "gemini" else "output_tokens"
    )
    assert merged[usage_key][out_key] == 9


@pytest.mark.parametrize("api", APIS)
def test_merge_keeps_only_the_calls_of_the_last_piece(api: str) -> None:
    first = answer(api, "Let me read ", CUT[api], call='{"path": "a.py"}' if api == "gemini" else '{"pa')
    second = answer(api, "the file.", CALLED[api], call='{"path": "a.py"}')
    merged = merge([first, second], api)
    assert text_of(api, merged) == "Let me read the file."
    assert is_cut_off(merged, api) is None
    assert json.dumps(merged).count("a.py") == 1


@given(st.lists(st.text(min_size=1, max_size=MIN_REPEAT - 1), min_size=1, max_size=5), st.sampled_from(APIS))
def test_merged_text_is_the_pieces_in_order(pieces: list[str], api: str) -> None:
    """Pieces shorter than a removable repeat are joined as they are."""
    answers = [answer(api, p, CUT[api]) for p in pieces[:-1]] + [answer(api, pieces[-1], DONE[api])]
    assert text_of(api, merge(answers, api)) == "".join(pieces)


def test_a_continuation_that_restarts_or_restates_is_not_glued_twice() -> None:
    api = "openai-chat"
    start = "Once upon a time, there was a dragon"
    restarted = merge([answer(api, start, "length"), answer(api, start + " who cooked.", "stop")], api)
    assert text_of(api, restarted) == start + " who cooked."
    restated = merge(
        [answer(api, start, "length"), answer(api, "there was a dragon who cooked.", "stop")], api
    )
    assert text_of(api, restated) == start + " who cooked."
    same = merge([answer(api, start, "length"), answer(api, start, "length")], api)
    assert text_of(api, same) == start


@given(st.text(max_size=60), st.text(max_size=60))
def test_repeated_is_the_longest_long_overlap(so_far: str, more: str) -> None:
    k = repeated(so_far, more)
    assert k == 0 or k >= MIN_REPEAT
    assert so_far.endswith(more[:k])
    longest = max((i for i in range(len(more) + 1) if so_far.endswith(more[:i])), default=0)
    assert k == (longest if longest >= MIN_REPEAT else 0)


def test_short_overlaps_at_the_seam_are_kept() -> None:
    assert repeated("line one\n", "\nline two") == 0
    assert repeated("the cat sat on the", " the mat") == 0


def test_merge_joins_text_only_at_the_seams() -> None:
    api = "anthropic"
    first = answer(api, "One. ", "max_tokens")
    first["content"].append({"type": "text", "text": "Two. "})
    merged = merge([first, answer(api, "Three.", "end_turn")], api)
    assert [b["text"] for b in merged["content"]] == ["One. ", "Two. Three."]


def test_merge_of_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="nothing"):
        merge([], "anthropic")


# --------------------------------------------------------------------------- finalize


@pytest.mark.parametrize("api", APIS)
def test_finalize_drops_a_truncated_call_and_keeps_the_cut_stop_reason(api: str) -> None:
    cut = answer(api, "Reading.", CUT[api], call='{"path": "a"}' if api == "gemini" else '{"path": "sr')
    final, dropped = finalize(cut, api)
    assert dropped == 1
    assert "sr" not in json.dumps(final)
    assert '"name": "Read"' not in json.dumps(final)
    assert text_of(api, final) == "Reading."
    still = is_cut_off(final, api)
    assert still is not None
    assert still.reason == CUT[api]
    assert not still.tool_call


def test_finalize_turns_a_false_tool_calls_finish_into_length() -> None:
    final, dropped = finalize(answer("openai-chat", None, "tool_calls", call='{"a'), "openai-chat")
    assert dropped == 1
    choice = final["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["tool_calls"] is None


@pytest.mark.parametrize("api", APIS)
def test_finalize_leaves_a_whole_answer_alone(api: str) -> None:
    whole = answer(api, "Reading.", CALLED[api], call='{"path": "a"}')
    assert finalize(whole, api) == (whole, 0)


# --------------------------------------------------------------------------- the plan


def run(stretch: Stretch, answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drive ``stretch`` with ``answers`` in order; the bodies it asked to send."""
    sent: list[dict[str, Any]] = []
    for response in answers:
        body = stretch.next_body(response)
        if body is None:
            break
        sent.append(body)
    return sent


@pytest.mark.parametrize("api", APIS)
def test_escalate_twice_then_continue_then_merge(api: str) -> None:
    stretch = Stretch(request(api, 100), api, Policy())
    sent = run(
        stretch,
        [
            answer(api, "Once", CUT[api], out=100),
            answer(api, "Once upon", CUT[api], out=200),
            answer(api, "Once upon a ", CUT[api], out=400),
            answer(api, "time.", DONE[api], out=2),
        ],
    )
    assert [max_tokens_of(b, api) for b in sent] == [200, 400, 400]
    assert "Once upon a " in json.dumps(sent[2])
    assert (stretch.escalations, stretch.continuations) == (2, 1)
    result, dropped = stretch.result()
    assert dropped == 0
    assert text_of(api, result) == "Once upon a time."
    assert is_cut_off(result, api) is None
    assert len(stretch.cutoffs) == 3


def test_continuations_are_bounded_and_the_answer_stays_cut() -> None:
    api = "openai-chat"
    stretch = Stretch(request(api, 100), api, Policy(max_token_escalations=0), max_continuations=2)
    sent = run(stretch, [answer(api, f"part{i} ", "length", out=100) for i in range(5)])
    assert len(sent) == 2
    result, _ = stretch.result()
    assert text_of(api, result) == "part0 part1 part2 "
    cut = is_cut_off(result, api)
    assert cut is not None
    assert cut.reason == "length"


def test_a_call_still_truncated_at_the_end_is_never_returned() -> None:
    api = "anthropic"
    stretch = Stretch(request(api, 100), api, Policy(max_token_escalations=1), max_continuations=1)
    truncated = answer(api, "Reading.", "max_tokens", call='{"path": "sr')
    sent = run(stretch, [truncated, truncated, truncated])
    assert len(sent) == 2
    assert "discarded" in json.dumps(sent[-1])
    result, dropped = stretch.result()
    assert dropped == 1
    assert all(block["type"] != "tool_use" for block in result["content"])
    assert result["stop_reason"] == "max_tokens"


def test_a_cut_tool_call_is_asked_for_again_and_the_whole_one_returned() -> None:
    api = "openai-chat"
    stretch = Stretch(request(api, 100), api, Policy(max_token_escalations=0))
    sent = run(
        stretch,
        [
            answer(api, "Reading.", "length", call='{"path": "sr'),
            answer(api, None, "tool_calls", call='{"path": "src/main.py"}'),
        ],
    )
    assert len(sent) == 1
    assert "tool call" in json.dumps(sent[0])
    assert "src/ma" not in json.dumps(sent[0])  # the partial call is not sent back
    result, dropped = stretch.result()
    assert dropped == 0
    assert result["choices"][0]["finish_reason"] == "tool_calls"
    assert (
        result["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"path": "src/main.py"}'
    )
    assert result["choices"][0]["message"]["content"] == "Reading."


def test_a_window_cut_stops_the_plan() -> None:
    api = "anthropic"
    stretch = Stretch(request(api, 100), api, Policy())
    assert stretch.next_body(answer(api, "Once", "model_context_window_exceeded")) is None
    assert not stretch.followed_up


def test_several_choices_are_escalated_but_not_continued() -> None:
    api = "openai-chat"
    body = {**request(api, 100), "n": 2}
    stretch = Stretch(body, api, Policy(max_token_escalations=1))
    sent = run(stretch, [answer(api, "a", "length"), answer(api, "ab", "length")])
    assert len(sent) == 1
    assert sent[0]["n"] == 2


def test_the_callers_cap_only_lowers_the_models() -> None:
    assert Stretch(request("anthropic"), "anthropic", Policy(), cap=21_333).cap == 21_333
    assert (
        Stretch(request("anthropic"), "anthropic", Policy(max_output_tokens=8_000), cap=21_333).cap == 8_000
    )


def test_escalation_stops_at_the_cap() -> None:
    api = "anthropic"
    stretch = Stretch(request(api, 100), api, Policy(), cap=150, max_continuations=0)
    sent = run(stretch, [answer(api, "a", "max_tokens"), answer(api, "ab", "max_tokens")])
    assert [max_tokens_of(b, api) for b in sent] == [150]


class FakeError(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(json.dumps(body))
        self.status_code = status
        self.body = body


def test_a_refused_escalation_is_retried_at_the_size_the_error_allows() -> None:
    api = "anthropic"
    stretch = Stretch(request(api, 100), api, Policy())
    first = stretch.next_body(answer(api, "Once", "max_tokens"))
    assert first is not None
    too_big = FakeError(
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "max_tokens: 200 > 150, which is the maximum allowed number of output tokens"
                " for x",
            },
        },
    )
    resized = stretch.failed(too_big)
    assert resized is not None
    assert max_tokens_of(resized, api) == 150
    assert stretch.failed(too_big) is None  # only once
    assert stretch.error is not None
    assert stretch.error.kind is ErrorKind.OUTPUT_LIMIT


def test_a_failed_follow_up_ends_with_the_answer_so_far() -> None:
    api = "openai-chat"
    stretch = Stretch(request(api, 100), api, Policy())
    assert stretch.next_body(answer(api, "Once", "length")) is not None
    rate = FakeError(429, {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}})
    assert stretch.failed(rate) is None
    assert stretch.error is not None
    assert stretch.error.kind is ErrorKind.RATE_LIMITED
    result, _ = stretch.result()
    assert text_of(api, result) == "Once"
    cut = is_cut_off(result, api)
    assert cut is not None


def test_no_result_before_an_answer() -> None:
    with pytest.raises(ValueError, match="no answer"):
        Stretch(request("anthropic"), "anthropic", Policy()).result()
