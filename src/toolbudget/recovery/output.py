"""Answers cut off by their output limit: tell them, lengthen them, and glue them, API by API.

Everything here is a pure function over plain dicts (a request body, a response
as its JSON), so the client wrappers (sync and async) and an HTTP proxy share
one behaviour. :class:`Stretch` holds the state of one call and says what to
send next; the functions under it never mutate their arguments.

The order, after ChatCLI and the providers' own advice (``reference/providers.md``
sections 1.5 and 4.2):

1. :func:`is_cut_off` reads the stop signal: Anthropic ``stop_reason:
   "max_tokens"``, OpenAI Chat ``finish_reason: "length"``, Responses
   ``status: "incomplete"`` for ``max_output_tokens``, Gemini ``finishReason:
   "MAX_TOKENS"``. An answer stopped by the *context window* instead
   (Anthropic ``model_context_window_exceeded``, Mistral ``model_length``, or a
   Chat ``"length"`` with no output at all) cannot be helped by a larger
   ``max_tokens``: it is a context overflow, and the recovery ladder shrinks the
   history instead.
2. :func:`escalated` retries the same request with ``max_tokens`` doubled, up to
   the model's output cap (:func:`output_cap`), at most
   ``policy.max_token_escalations`` times. The cut answer is discarded: the
   retry answers the whole request again.
3. :func:`continuation` then sends the partial answer back as an assistant
   message with a user message asking to resume exactly where it stopped, and
   :func:`merge` glues the text of the pieces into one answer of the same shape
   (usage summed, the stop reason of the last piece).

A tool call is never glued from halves (ChatCLI did, and dropped native calls
besides): the partial call is dropped and the model is asked for its calls
again, whole. A truncated call is never returned as runnable either: when
nothing is left to try, :func:`finalize` removes it from the answer, which
keeps its cut-off stop reason (``max_tokens``, ``length``...), so an agent loop
keyed on ``tool_use`` / ``tool_calls`` does not run it (Strands and pydantic-ai
refuse to execute a cut call for the same reason). A call counts as truncated
when its JSON arguments do not parse to an object, or, on the APIs that send
arguments already parsed (Anthropic, Gemini), when it is the last thing in a
cut answer: the wire cannot show whether it was finished.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from .. import wire
from ..errors import ContextWindowFull
from ..model import Message, Text
from ..models import DEFAULT_OUTPUT_CAP, output_cap
from ..policy import Policy
from .classify import Classified, ErrorKind, classify

__all__ = [
    "DEFAULT_OUTPUT_CAP",
    "MAX_CONTINUATIONS",
    "MIN_REPEAT",
    "ContextWindowFull",
    "Cutoff",
    "Stretch",
    "answer_text",
    "continuation",
    "continuation_prompt",
    "escalated",
    "finalize",
    "is_cut_off",
    "max_tokens_of",
    "merge",
    "output_cap",
    "repeated",
    "with_max_tokens",
]

MAX_CONTINUATIONS = 2
"""How many continuation requests one call may make after the escalations."""


@dataclass(frozen=True, slots=True)
class Cutoff:
    """An answer that stopped before it was done."""

    api: str
    reason: str
    """The provider's own stop value: ``max_tokens``, ``length``, ``max_output_tokens``, ``MAX_TOKENS``..."""
    tool_call: bool = False
    """A tool call in the answer is truncated: never run it."""
    context_window: bool = False
    """The context window stopped it, not ``max_tokens``: treated as a context overflow."""
    output_tokens: int | None = None
    """The output tokens the answer's usage states."""


# --------------------------------------------------------------------------- shapes


class _Shape(Protocol):
    """How one API lays out an answer: its stop value, its content units, its usage."""

    cut_reasons: frozenset[str]
    window_reasons: frozenset[str]
    suspect_last_call: bool
    """Whether a call ending a cut answer may be unfinished although its arguments parse."""
    usage_key: str
    output_key: str

    def stop(self, response: Mapping[str, Any]) -> str | None: ...
    def units(self, response: Mapping[str, Any]) -> list[Any]: ...
    def with_units(self, response: dict[str, Any], units: list[Any], stop: str | None) -> dict[str, Any]: ...
    def is_text(self, unit: Any) -> bool: ...
    def text(self, unit: Any) -> str: ...
    def append_text(self, unit: Any, text: str) -> Any: ...
    def is_call(self, unit: Any) -> bool: ...
    def call_ok(self, unit: Any) -> bool: ...


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _parses_to_object(arguments: Any) -> bool:
    if isinstance(arguments, Mapping):
        return True
    if not isinstance(arguments, str):
        return False
    if not arguments.strip():
        return True  # a call without arguments: some servers send "" for {}
    try:
        return isinstance(json.loads(arguments), dict)
    except ValueError:
        return False


class _TextBlocks:
    """Text units of the ``{"type": "text", "text": ...}`` shape (Anthropic, and Chat's own)."""

    def is_text(self, unit: Any) -> bool:
        return isinstance(unit, Mapping) and unit.get("type") == "text"

    def text(self, unit: Any) -> str:
        value = _dict(unit).get("text")
        return value if isinstance(value, str) else ""

    def append_text(self, unit: Any, text: str) -> Any:
        return {**unit, "text": self.text(unit) + text}


class _Anthropic(_TextBlocks):
    cut_reasons = frozenset({"max_tokens", "model_context_window_exceeded"})
    window_reasons = frozenset({"model_context_window_exceeded"})
    suspect_last_call = True
    usage_key = "usage"
    output_key = "output_tokens"

    def stop(self, response: Mapping[str, Any]) -> str | None:
        value = response.get("stop_reason")
        return value if isinstance(value, str) else None

    def units(self, response: Mapping[str, Any]) -> list[Any]:
        return _list(response.get("content"))

    def with_units(self, response: dict[str, Any], units: list[Any], stop: str | None) -> dict[str, Any]:
        response["content"] = units
        if stop is not None:
            response["stop_reason"] = stop
        return response

    def is_call(self, unit: Any) -> bool:
        return isinstance(unit, Mapping) and unit.get("type") == "tool_use"

    def call_ok(self, unit: Any) -> bool:
        return isinstance(_dict(unit).get("input"), Mapping)


class _Chat(_TextBlocks):
    """OpenAI Chat: the first choice's message. Its text is one unit; each tool call is one."""

    cut_reasons = frozenset({"length", "model_length"})
    window_reasons = frozenset({"model_length"})
    suspect_last_call = False
    usage_key = "usage"
    output_key = "completion_tokens"

    def _message(self, response: Mapping[str, Any]) -> Mapping[str, Any]:
        choices = _list(response.get("choices"))
        return _dict(_dict(choices[0]).get("message")) if choices else {}

    def stop(self, response: Mapping[str, Any]) -> str | None:
        choices = _list(response.get("choices"))
        value = _dict(choices[0]).get("finish_reason") if choices else None
        return value if isinstance(value, str) else None

    def units(self, response: Mapping[str, Any]) -> list[Any]:
        message = self._message(response)
        content = message.get("content")
        units: list[Any] = []
        if isinstance(content, str) and content:
            units.append({"type": "text", "text": content})
        elif isinstance(content, list):
            units.extend(p for p in content if isinstance(p, Mapping))
        units.extend(_list(message.get("tool_calls")))
        if isinstance(message.get("function_call"), Mapping):
            units.append({"type": "function_call", "function": message["function_call"]})
        return units

    def with_units(self, response: dict[str, Any], units: list[Any], stop: str | None) -> dict[str, Any]:
        choices = _list(response.get("choices"))
        if not choices:
            return response
        choice = dict(_dict(choices[0]))
        message = dict(_dict(choice.get("message")))
        texts = [self.text(u) for u in units if self.is_text(u)]
        calls = [u for u in units if self.is_call(u) and u.get("type") != "function_call"]
        legacy = [u["function"] for u in units if self.is_call(u) and u.get("type") == "function_call"]
        message["content"] = "".join(texts) if texts else None
        if calls or "tool_calls" in message:
            message["tool_calls"] = calls or None
        if legacy or "function_call" in message:
            message["function_call"] = legacy[0] if legacy else None
        choice["message"] = message
        if stop is not None:
            choice["finish_reason"] = stop
        response["choices"] = [choice, *choices[1:]]
        return response

    def is_call(self, unit: Any) -> bool:
        return isinstance(unit, Mapping) and isinstance(unit.get("function"), Mapping)

    def call_ok(self, unit: Any) -> bool:
        return _parses_to_object(_dict(_dict(unit).get("function")).get("arguments"))


class _Responses:
    """OpenAI Responses: the output items. A ``message`` item is text; a ``function_call`` a call."""

    cut_reasons = frozenset({"max_output_tokens"})
    window_reasons: frozenset[str] = frozenset()
    suspect_last_call = False
    usage_key = "usage"
    output_key = "output_tokens"

    def stop(self, response: Mapping[str, Any]) -> str | None:
        status = response.get("status")
        if status == "incomplete":
            reason = _dict(response.get("incomplete_details")).get("reason")
            return reason if isinstance(reason, str) else "incomplete"
        return status if isinstance(status, str) else None

    def units(self, response: Mapping[str, Any]) -> list[Any]:
        return _list(response.get("output"))

    def with_units(self, response: dict[str, Any], units: list[Any], stop: str | None) -> dict[str, Any]:
        response["output"] = units
        if stop is not None:
            response["status"] = "incomplete"
            response["incomplete_details"] = {"reason": stop}
        return response

    def is_text(self, unit: Any) -> bool:
        return isinstance(unit, Mapping) and unit.get("type") == "message"

    def text(self, unit: Any) -> str:
        return "".join(
            p["text"]
            for p in _list(_dict(unit).get("content"))
            if isinstance(p, Mapping) and p.get("type") == "output_text" and isinstance(p.get("text"), str)
        )

    def append_text(self, unit: Any, text: str) -> Any:
        content = [dict(p) if isinstance(p, Mapping) else p for p in _list(unit.get("content"))]
        for part in reversed(content):
            if isinstance(part, dict) and part.get("type") == "output_text":
                part["text"] = str(part.get("text", "")) + text
                break
        else:
            content.append({"type": "output_text", "text": text, "annotations": []})
        return {**unit, "content": content}

    def is_call(self, unit: Any) -> bool:
        return isinstance(unit, Mapping) and unit.get("type") == "function_call"

    def call_ok(self, unit: Any) -> bool:
        return _dict(unit).get("status") != "incomplete" and _parses_to_object(_dict(unit).get("arguments"))


class _Gemini:
    """Gemini: the first candidate's parts. ``thought`` parts are not answer text."""

    cut_reasons = frozenset({"MAX_TOKENS"})
    window_reasons: frozenset[str] = frozenset()
    suspect_last_call = True
    usage_key = "usageMetadata"
    output_key = "candidatesTokenCount"

    def _candidate(self, response: Mapping[str, Any]) -> Mapping[str, Any]:
        candidates = _list(response.get("candidates"))
        return _dict(candidates[0]) if candidates else {}

    def stop(self, response: Mapping[str, Any]) -> str | None:
        candidate = self._candidate(response)
        value = candidate.get("finishReason", candidate.get("finish_reason"))
        return value if isinstance(value, str) else None

    def units(self, response: Mapping[str, Any]) -> list[Any]:
        return _list(_dict(self._candidate(response).get("content")).get("parts"))

    def with_units(self, response: dict[str, Any], units: list[Any], stop: str | None) -> dict[str, Any]:
        candidates = _list(response.get("candidates"))
        if not candidates:
            return response
        candidate = dict(_dict(candidates[0]))
        candidate["content"] = {**_dict(candidate.get("content")), "parts": units}
        if stop is not None:
            candidate["finishReason"] = stop
        response["candidates"] = [candidate, *candidates[1:]]
        return response

    def is_text(self, unit: Any) -> bool:
        return isinstance(unit, Mapping) and isinstance(unit.get("text"), str) and not unit.get("thought")

    def text(self, unit: Any) -> str:
        value = _dict(unit).get("text")
        return value if isinstance(value, str) else ""

    def append_text(self, unit: Any, text: str) -> Any:
        return {**unit, "text": self.text(unit) + text}

    def is_call(self, unit: Any) -> bool:
        return isinstance(unit, Mapping) and isinstance(unit.get("functionCall"), Mapping)

    def call_ok(self, unit: Any) -> bool:
        args = _dict(unit.get("functionCall")).get("args", {})
        return isinstance(args, Mapping)


_SHAPES: dict[str, _Shape] = {
    "anthropic": _Anthropic(),
    "openai-chat": _Chat(),
    "openai-responses": _Responses(),
    "gemini": _Gemini(),
}


def _shape(api: str) -> _Shape:
    name = wire.resolve_api(api)
    shape = _SHAPES.get(name)
    if shape is None:
        raise ValueError(f"output cut-offs are not handled for {name}")
    return shape


def _output_tokens(shape: _Shape, response: Mapping[str, Any]) -> int | None:
    value = _dict(response.get(shape.usage_key)).get(shape.output_key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _truncated(shape: _Shape, units: Sequence[Any], cut: bool) -> list[int]:
    """Indexes of the calls in ``units`` that must not run."""
    out = [i for i, u in enumerate(units) if shape.is_call(u) and not shape.call_ok(u)]
    last = len(units) - 1
    if cut and shape.suspect_last_call and units and shape.is_call(units[last]) and last not in out:
        out.append(last)
    return out


# --------------------------------------------------------------------------- detection


def is_cut_off(response: Mapping[str, Any], api: str) -> Cutoff | None:
    """Whether ``response`` (an answer of ``api`` as JSON) stopped before it was done.

    Also an answer that says it finished but holds a tool call whose arguments
    do not parse (OpenAI-compatible servers that report ``"tool_calls"`` for a
    cut call).
    """
    shape = _shape(api)
    reason = shape.stop(response)
    units = shape.units(response)
    cut = reason in shape.cut_reasons
    broken = _truncated(shape, units, cut)
    if not cut and not broken:
        return None
    output_tokens = _output_tokens(shape, response)
    window = reason in shape.window_reasons
    if cut and not window and isinstance(shape, _Chat) and not units and not output_tokens:
        # "length" and not one token written: the prompt filled the window. (Reasoning
        # models that spend the budget thinking report their tokens, so they escalate.)
        window = True
    return Cutoff(wire.resolve_api(api), reason or "", bool(broken), window, output_tokens)


# --------------------------------------------------------------------------- requests


def _max_key(body: Mapping[str, Any], api: str) -> tuple[str | None, str]:
    """Where ``max_tokens`` lives in a body of ``api``: (the object holding it, its key)."""
    name = wire.resolve_api(api)
    if name == "anthropic":
        return None, "max_tokens"
    if name == "openai-chat":
        return None, "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    if name == "openai-responses":
        return None, "max_output_tokens"
    if name == "gemini":
        holder = "generation_config" if "generation_config" in body else "generationConfig"
        config = _dict(body.get(holder))
        return holder, "max_output_tokens" if "max_output_tokens" in config else "maxOutputTokens"
    raise ValueError(f"output cut-offs are not handled for {name}")


def max_tokens_of(body: Mapping[str, Any], api: str) -> int | None:
    """The output limit a request body sets, or ``None`` when it sets none."""
    holder, key = _max_key(body, api)
    value = (_dict(body.get(holder)) if holder else body).get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def with_max_tokens(body: Mapping[str, Any], api: str, value: int) -> dict[str, Any]:
    """A copy of ``body`` with its output limit set to ``value`` (in the field the body uses)."""
    holder, key = _max_key(body, api)
    out = dict(body)
    if holder is None:
        out[key] = value
    else:
        out[holder] = {**_dict(body.get(holder)), key: value}
    return out


def escalated(body: Mapping[str, Any], api: str, cap: int) -> dict[str, Any] | None:
    """``body`` with twice its ``max_tokens``, at most ``cap``; ``None`` when it cannot grow.

    A body that sets no limit cannot be doubled: the model's own cap cut it.
    """
    current = max_tokens_of(body, api)
    if current is None:
        return None
    bigger = min(current * 2, cap)
    return with_max_tokens(body, api, bigger) if bigger > current else None


def continuation_prompt(tool_call: bool) -> str:
    """The user message that asks for the rest of a cut answer."""
    if tool_call:
        return (
            "Your previous answer was cut off by the output limit while it was writing a tool call. "
            "That partial tool call was discarded and will not run. Continue exactly where the text "
            "stopped, without repeating anything already written, then make your tool calls again, "
            "each one complete from its beginning."
        )
    return (
        "Your previous answer was cut off by the output limit. Continue exactly where it stopped, "
        "without repeating anything already written and without any preamble."
    )


def continuation(body: Mapping[str, Any], api: str, text: str, *, tool_call: bool = False) -> dict[str, Any]:
    """``body`` followed by the partial answer ``text`` and a request to resume it.

    Only text goes back: a tool call without its result would be refused by
    every API, and a partial call must not be glued to its rest. An Anthropic
    body that ends in an assistant prefill gets the text appended to it.
    """
    name = wire.resolve_api(api)
    request = wire.parse(dict(body), name)
    messages = list(request.messages)
    if text:
        last = messages[-1] if messages else None
        if name == "anthropic" and last is not None and last.role == "assistant":
            prefill = "".join(p.text for p in last.parts if isinstance(p, Text))
            messages[-1] = Message("assistant", (Text(prefill + text),))
        else:
            messages.append(Message("assistant", (Text(text),)))
    messages.append(Message("user", (Text(continuation_prompt(tool_call)),)))
    return wire.render(replace(request, messages=tuple(messages)))


# --------------------------------------------------------------------------- answers


def answer_text(responses: Iterable[Mapping[str, Any]], api: str) -> str:
    """The answer text of ``responses``, joined in order (no thinking, no calls)."""
    shape = _shape(api)
    return "".join(shape.text(u) for r in responses for u in shape.units(r) if shape.is_text(u))


def _sum_usage(usages: Sequence[Any]) -> Any:
    """Numbers added up, key by key and level by level; anything else from the last."""
    present = [u for u in usages if u is not None]
    if not present:
        return None
    if all(isinstance(u, (int, float)) and not isinstance(u, bool) for u in present):
        return sum(present)
    if all(isinstance(u, Mapping) for u in present):
        keys: dict[str, None] = {}
        for usage in present:
            keys.update(dict.fromkeys(usage))
        return {k: _sum_usage([u.get(k) for u in present]) for k in keys}
    return copy.deepcopy(present[-1])


MIN_REPEAT = 16
"""The shortest repeat of the text so far that :func:`merge` removes from a continuation."""


def repeated(so_far: str, more: str) -> int:
    """How many leading characters of ``more`` repeat the end of ``so_far`` (0 when under :data:`MIN_REPEAT`).

    Told to resume without repeating, small models often restart, or restate
    the last sentence. The longest prefix of ``more`` that is a suffix of
    ``so_far`` is found in linear time (the prefix function of ``more``, a
    separator, and the end of ``so_far``). Shorter overlaps are left alone: a newline or a
    word at the seam is usually meant.
    """
    if len(more) < MIN_REPEAT or len(so_far) < MIN_REPEAT:
        return 0
    tail = so_far[-len(more) :]
    text = more + "\x00" + tail
    border = [0] * len(text)
    for i in range(1, len(text)):
        k = border[i - 1]
        while k and text[i] != text[k]:
            k = border[k - 1]
        if text[i] == text[k]:
            k += 1
        border[i] = k
    overlap = min(border[-1], len(more))
    return overlap if overlap >= MIN_REPEAT else 0


def merge(responses: Sequence[Mapping[str, Any]], api: str) -> dict[str, Any]:
    """One answer from the pieces of a continued one.

    The envelope (ids, stop reason) is the last piece's; text joins across the
    pieces, without a repeat of the text so far at the start of a piece
    (:func:`repeated`); other content (thinking...) is kept in order; tool
    calls are the last piece's only, since every earlier piece's calls were
    discarded and asked for again. Usage is summed.
    """
    if not responses:
        raise ValueError("nothing to merge")
    shape = _shape(api)
    units: list[Any] = []
    for response in responses:
        seam = bool(units)  # the first unit of a later piece may continue the last one
        for unit in shape.units(response):
            if shape.is_call(unit):
                continue
            if seam and shape.is_text(unit) and shape.is_text(units[-1]):
                so_far, more = shape.text(units[-1]), shape.text(unit)
                units[-1] = shape.append_text(units[-1], more[repeated(so_far, more) :])
            else:
                units.append(copy.deepcopy(unit))
            seam = False
    units.extend(copy.deepcopy(u) for u in shape.units(responses[-1]) if shape.is_call(u))
    merged = shape.with_units(copy.deepcopy(dict(responses[-1])), units, None)
    if any(shape.usage_key in r for r in responses):
        merged[shape.usage_key] = _sum_usage([r.get(shape.usage_key) for r in responses])
    return merged


def finalize(response: Mapping[str, Any], api: str) -> tuple[dict[str, Any], int]:
    """``response`` without its truncated tool calls, and how many were removed.

    The answer keeps its cut-off stop reason. One that claimed to be finished
    with calls (``tool_calls``, ``tool_use``) but held only broken ones now says
    it was cut (``length``, ``max_tokens``...), so nothing runs what is left.
    """
    shape = _shape(api)
    cut = shape.stop(response) in shape.cut_reasons
    units = shape.units(response)
    bad = set(_truncated(shape, units, cut))
    if not bad:
        return dict(response), 0
    kept = [copy.deepcopy(u) for i, u in enumerate(units) if i not in bad]
    stop = None if cut else sorted(shape.cut_reasons - shape.window_reasons)[0]
    return shape.with_units(copy.deepcopy(dict(response)), kept, stop), len(bad)


# --------------------------------------------------------------------------- the plan


class Stretch:
    """One call's answer, lengthened until it is whole; it says what to send next.

    Feed it each answer with :meth:`next_body` (and each failed follow-up with
    :meth:`failed`); when either returns ``None``, :meth:`result` is the answer
    to give the caller. It never sends anything itself, so sync, async and proxy
    callers drive it the same way.

    A follow-up that fails ends the plan with the best answer so far: the call
    itself succeeded, and the caller gets what the provider answered (cut off,
    and saying so) rather than an error for a request that worked. Only a
    refused escalation is retried once, at the size the error allows
    (``max_tokens`` over the model's cap, or prompt + ``max_tokens`` over the
    window).
    """

    def __init__(
        self,
        body: Mapping[str, Any],
        api: str,
        policy: Policy,
        *,
        cap: int | None = None,
        max_continuations: int = MAX_CONTINUATIONS,
    ) -> None:
        self.api = wire.resolve_api(api)
        _shape(self.api)
        model = body.get("model")
        known = output_cap(model if isinstance(model, str) else None, policy)
        self.cap = known if cap is None else min(cap, known)
        """The most ``max_tokens`` may grow to: the model's cap, or the caller's ``cap`` when lower."""
        self.policy = policy
        config = _dict(body.get("generationConfig", body.get("generation_config")))
        choices = body.get("n", config.get("candidateCount", config.get("candidate_count", 1)))
        # Several choices cannot be continued as one: each would need its own continuation.
        self.max_continuations = max_continuations if choices in (1, None) else 0
        self.base: dict[str, Any] = dict(body)
        """The request being answered: the caller's, with ``max_tokens`` as escalated."""
        self.sent: dict[str, Any] = self.base
        self.escalations = 0
        self.continuations = 0
        self.cutoffs: list[Cutoff] = []
        self.error: Classified | None = None
        """Why the plan ended early: the classified failure of a follow-up."""
        self._pieces: list[dict[str, Any]] = []
        self._last: dict[str, Any] | None = None
        self._before_escalation: dict[str, Any] | None = None
        self._resized = False
        self._result: tuple[dict[str, Any], int] | None = None

    def next_body(self, response: Mapping[str, Any]) -> dict[str, Any] | None:
        """What to send after ``response``, or ``None`` when the answer is done."""
        self._last = dict(response)
        self._before_escalation = None
        cut = is_cut_off(response, self.api)
        if cut is None:
            return None
        self.cutoffs.append(cut)
        if cut.context_window:
            return None  # no room left: a bigger max_tokens or more text cannot fit
        if not self._pieces and self.escalations < self.policy.max_token_escalations:
            bigger = escalated(self.base, self.api, self.cap)
            if bigger is not None:
                self.escalations += 1
                self._before_escalation = self.base
                self._resized = False
                self.base = self.sent = bigger
                return bigger
        if self.continuations < self.max_continuations:
            self.continuations += 1
            self._pieces.append(self._last)
            text = answer_text([merge(self._pieces, self.api)], self.api)
            calls = cut.tool_call or any(
                _shape(self.api).is_call(u) for u in _shape(self.api).units(response)
            )
            self.sent = continuation(self.base, self.api, text, tool_call=calls)
            return self.sent
        return None

    def failed(self, error: BaseException) -> dict[str, Any] | None:
        """What to send after a follow-up raised ``error``, or ``None`` to stop with the answer so far."""
        classified = classify(error)
        before = self._before_escalation
        if before is not None and not self._resized:
            room = _room(classified)
            previous = max_tokens_of(before, self.api) or 0
            if room is not None and room > previous:
                self._resized = True
                self.cap = min(self.cap, room)
                self.base = self.sent = with_max_tokens(before, self.api, room)
                return self.sent
        self.error = classified
        return None

    @property
    def followed_up(self) -> bool:
        """Whether anything was sent after the first answer."""
        return bool(self.escalations or self.continuations)

    def result(self) -> tuple[dict[str, Any], int]:
        """The answer for the caller, and how many truncated tool calls were removed from it."""
        if self._result is None:
            if self._last is None:
                raise ValueError("no answer yet")
            pieces = list(self._pieces)
            if not pieces or pieces[-1] is not self._last:
                pieces.append(self._last)
            merged = merge(pieces, self.api) if len(pieces) > 1 else pieces[0]
            self._result = finalize(merged, self.api)
        return self._result


def _room(error: Classified) -> int | None:
    """The ``max_tokens`` a refused escalation says would have fitted."""
    if error.kind is ErrorKind.OUTPUT_LIMIT:
        return error.limit
    if error.kind is ErrorKind.CONTEXT_OVERFLOW and error.prompt_tokens and error.limit:
        room = error.limit - error.prompt_tokens
        return room if room > 0 else None
    return None
