"""Answers cut off by their output limit: tell them, lengthen them, and glue them, API by API.

Everything here is a pure function over plain dicts (a request body, a response
as its JSON), so the client wrappers (sync and async) and an HTTP proxy share
one behaviour. :class:`Stretch` holds the state of one call and says what to
send next; the functions under it never mutate their arguments.

The order, after ChatCLI and the providers' own advice (``reference/providers.md``
sections 1.5 and 4.2):

1. :func:`is_cut_off` reads the stop signal as the API's dialect
   (:func:`toolbudget.wire.dialect`) tells it: each wire package's ``reply``
   module says which stop values mean the output limit. An answer
   stopped by the *context window* instead (a stop value of its own on
   Anthropic, Bedrock and Mistral, or a Chat cut-off with no output at all)
   cannot be helped by a larger ``max_tokens``: it is a context overflow, and
   the recovery ladder shrinks the history instead.
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
arguments already parsed (Anthropic, Gemini, Bedrock), when it is the last
thing in a cut answer: the wire cannot show whether it was finished.

Nothing here knows a provider's field names: each API's dialect reads and
rebuilds its replies, and reads and sets its requests' output limit.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .. import wire
from ..errors import ContextWindowFull
from ..model import Message, Text
from ..models import DEFAULT_OUTPUT_CAP, output_cap
from ..policy import Policy
from ..wire import Dialect
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


# --------------------------------------------------------------------------- dialects


def _dialect(api: str) -> Dialect:
    """The reply layout of ``api``; an unknown API raises :class:`~toolbudget.errors.UnknownAPIError`."""
    return wire.dialect(wire.resolve_api(api))


def _truncated(dialect: Dialect, units: Sequence[Any], cut: bool) -> list[int]:
    """Indexes of the calls in ``units`` that must not run."""
    out = [i for i, u in enumerate(units) if dialect.is_call(u) and not dialect.call_whole(u)]
    last = len(units) - 1
    if cut and dialect.suspect_last_call and units and dialect.is_call(units[last]) and last not in out:
        out.append(last)
    return out


# --------------------------------------------------------------------------- detection


def is_cut_off(response: Mapping[str, Any], api: str) -> Cutoff | None:
    """Whether ``response`` (an answer of ``api`` as JSON) stopped before it was done.

    Also an answer that says it finished but holds a tool call whose arguments
    do not parse (OpenAI-compatible servers that report ``"tool_calls"`` for a
    cut call).
    """
    dialect = _dialect(api)
    reason = dialect.stop(response)
    units = dialect.units(response)
    cut = reason in dialect.cut_stops
    broken = _truncated(dialect, units, cut)
    if not cut and not broken:
        return None
    usage = dialect.usage(response)
    window = cut and dialect.window_full(response, reason)
    return Cutoff(dialect.api, reason or "", bool(broken), window, usage.output if usage else None)


# --------------------------------------------------------------------------- requests


def max_tokens_of(body: Mapping[str, Any], api: str) -> int | None:
    """The output limit a request body sets, or ``None`` when it sets none."""
    return _dialect(api).max_tokens(body)


def with_max_tokens(body: Mapping[str, Any], api: str, value: int) -> dict[str, Any]:
    """A copy of ``body`` with its output limit set to ``value`` (in the field the body uses)."""
    return _dialect(api).with_max_tokens(body, value)


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
    every API, and a partial call must not be glued to its rest. A body that
    ends in an assistant prefill, on an API whose replies continue one
    (Anthropic), gets the text appended to it.
    """
    name = wire.resolve_api(api)
    request = wire.parse(dict(body), name)
    messages = list(request.messages)
    if text:
        last = messages[-1] if messages else None
        if _dialect(name).continues_prefill and last is not None and last.role == "assistant":
            prefill = "".join(p.text for p in last.parts if isinstance(p, Text))
            messages[-1] = Message("assistant", (Text(prefill + text),))
        else:
            messages.append(Message("assistant", (Text(text),)))
    messages.append(Message("user", (Text(continuation_prompt(tool_call)),)))
    return wire.render(replace(request, messages=tuple(messages)))


# --------------------------------------------------------------------------- answers


def answer_text(responses: Iterable[Mapping[str, Any]], api: str) -> str:
    """The answer text of ``responses``, joined in order (no thinking, no calls)."""
    dialect = _dialect(api)
    return "".join(dialect.text(u) for r in responses for u in dialect.units(r) if dialect.is_text(u))


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
    dialect = _dialect(api)
    units: list[Any] = []
    for response in responses:
        seam = bool(units)  # the first unit of a later piece may continue the last one
        for unit in dialect.units(response):
            if dialect.is_call(unit):
                continue
            if seam and dialect.is_text(unit) and dialect.is_text(units[-1]):
                so_far, more = dialect.text(units[-1]), dialect.text(unit)
                units[-1] = dialect.append_text(units[-1], more[repeated(so_far, more) :])
            else:
                units.append(copy.deepcopy(unit))
            seam = False
    units.extend(copy.deepcopy(u) for u in dialect.units(responses[-1]) if dialect.is_call(u))
    merged = dialect.with_units(copy.deepcopy(dict(responses[-1])), units, None)
    return dialect.with_summed_usage(merged, responses)


def finalize(response: Mapping[str, Any], api: str) -> tuple[dict[str, Any], int]:
    """``response`` without its truncated tool calls, and how many were removed.

    The answer keeps its cut-off stop reason. One that claimed to be finished
    with calls (``tool_calls``, ``tool_use``) but held only broken ones now says
    it was cut (``length``, ``max_tokens``...), so nothing runs what is left.
    """
    dialect = _dialect(api)
    cut = dialect.stop(response) in dialect.cut_stops
    units = dialect.units(response)
    bad = set(_truncated(dialect, units, cut))
    if not bad:
        return dict(response), 0
    kept = [copy.deepcopy(u) for i, u in enumerate(units) if i not in bad]
    stop = None if cut else dialect.cut_stop
    return dialect.with_units(copy.deepcopy(dict(response)), kept, stop), len(bad)


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
        self._dialect = _dialect(self.api)
        known = output_cap(self._dialect.model(body), policy)
        self.cap = known if cap is None else min(cap, known)
        """The most ``max_tokens`` may grow to: the model's cap, or the caller's ``cap`` when lower."""
        self.policy = policy
        # Several choices cannot be continued as one: each would need its own continuation.
        several = self._dialect.several_choices(body)
        self.max_continuations = 0 if several else max_continuations
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
            calls = cut.tool_call or any(self._dialect.is_call(u) for u in self._dialect.units(response))
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
