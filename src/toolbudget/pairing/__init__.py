"""Tool-call pairing: validation and repair, to each provider's rules.

:func:`validate` lists what a provider would reject; :func:`repair` returns a
body that it would accept, changing as little as it can and reporting every
change. Both work on the canonical model, with the provider differences held
as data in :mod:`toolbudget.pairing.rules`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .. import wire
from ..errors import UnknownAPIError
from ..jsonio import dumps, in_order_of, keep_literals, to_body
from ..model import Message, Part, Request, Text, ToolCall, ToolResult
from ..wire import tools_for_calls
from .check import Violation, check, needs_tools, thinking_enabled
from .fix import SYNTHETIC_TEXT, Repair, fix
from .rules import Rules, rules_for

__all__ = [
    "SYNTHETIC_TEXT",
    "Repair",
    "Repaired",
    "Violation",
    "appends_validly",
    "call_ids",
    "check_request",
    "plainly_paired",
    "repair",
    "repair_checked",
    "repair_request",
    "repair_traced",
    "validate",
]


@dataclass(frozen=True, slots=True)
class Repaired:
    """The outcome of :func:`repair`.

    ``body`` is the caller's own object when nothing needed repair (the same
    bytes, if bytes were given). ``remaining`` lists every violation
    :func:`validate` still finds in ``body``: those no repair can fix without
    losing or inventing something the provider signed (a thinking block that is
    missing cannot be made up), so the caller can decide. It is filled whether
    or not anything was repaired.
    """

    body: Any
    repairs: tuple[Repair, ...]
    remaining: tuple[Violation, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.repairs)


def check_request(request: Request) -> list[Violation]:
    """Violations in an already parsed request."""
    return _violations(request, rules_for(_api(request)))


def _violations(request: Request, rules: Rules) -> list[Violation]:
    """:func:`check`, answered at once for a history of plain answered turns (:func:`plainly_paired`)."""
    if not (rules.thinking_first and thinking_enabled(request)) and plainly_paired(
        request.messages, rules, bool(request.tools)
    ):
        return []
    return check(request, rules)


def repair_request(request: Request, *, close_pending: bool = False) -> tuple[Request, tuple[Repair, ...]]:
    """A repaired copy of a parsed request (the same object when it is valid)."""
    fixed, repairs, _ = _repair(request, close_pending)
    return fixed, repairs


def repair_checked(request: Request) -> tuple[Request, tuple[Repair, ...], bool]:
    """:func:`repair_request`, also saying whether the request came with no violation at all."""
    fixed, repairs, violations, _ = _repair_traced(request, False)
    return fixed, repairs, not violations


def repair_traced(
    request: Request,
) -> tuple[Request, tuple[Repair, ...], bool, tuple[int | None, ...] | None]:
    """:func:`repair_checked`, also saying which message of ``request`` each repaired one is.

    The last item has, for each message of the repaired request, the index of
    the message of ``request`` it came from, or ``None`` for one the repair
    made (see :func:`toolbudget.pairing.fix.fix`); it is ``None`` itself when
    the messages are ``request``'s own, one for one.
    """
    fixed, repairs, violations, origins = _repair_traced(request, False)
    return fixed, repairs, not violations, origins


def call_ids(messages: tuple[Message, ...]) -> frozenset[str]:
    """The ids of every call in ``messages``."""
    return frozenset(p.id for m in messages for p in m.parts if isinstance(p, ToolCall) and p.id is not None)


def appends_validly(request: Request, start: int, earlier: frozenset[str]) -> bool:
    """Whether ``request`` is valid, knowing its first ``start`` messages were valid on their own.

    Then only the new messages need checking, which is what makes a long
    session's next request cheap: the history before them was closed (no call
    still waiting, the last message not the assistant's), so every rule but
    two looks no further back than the message before a new one, and a plain
    user message stands in for it. The two are answered here: a new call may
    not reuse an id of ``earlier`` (the calls of the first messages), and a
    history whose thinking rule walks back through its tool loop is not
    judged from its end. ``False`` says only that the whole check must decide.
    """
    messages = request.messages
    if not 0 < start < len(messages) or messages[start - 1].role == "assistant":
        return False
    rules = rules_for(_api(request))
    if rules.thinking_first and thinking_enabled(request):
        return False
    tail = messages[start:]
    if not earlier.isdisjoint(call_ids(tail)):
        return False
    if plainly_paired(tail, rules, bool(request.tools)):
        return True
    alone = request.with_messages((_STAND_IN, *tail))
    return not check(alone, rules)


def plainly_paired(messages: Sequence[Message], rules: Rules, has_tools: bool) -> bool:
    """Whether ``messages``, after a closed history or from the start, hold nothing the check flags.

    Almost every history an agent sends is made of turns of one plain
    shape: an assistant message whose calls, each with an id of its own, are
    all answered right after it, each once, results first (or a call still
    waiting at the very end), between plain messages. Telling that shape
    apart walks the parts once, where the check (which every other history
    takes) cost an appended turn about a sixth of its time and a cold
    request a tenth. ``True`` only when the check finds nothing (a property
    test holds the two together); ``False`` says only that the check must
    decide. Not for APIs that answer by name, count results against calls,
    carry them as items or want turns to alternate, nor for a thinking rule:
    their rules the check alone knows.
    """
    if (
        rules.match_by_name
        or rules.equal_counts
        or rules.no_mixed_results
        or rules.alternation
        or rules.call_after_user
        or rules.carrier == "items"
    ):
        return False
    pattern = rules.id_pattern
    in_user = rules.carrier == "user-message"
    seen: set[str] = set()
    n = len(messages)
    i = 0
    while i < n:
        message = messages[i]
        i += 1
        role = message.role
        if role != "assistant":
            if role == "tool" or (role == "system" and not rules.system_role):
                return False  # a result message outside a turn's answers, or a system message
            for part in message.parts:
                if isinstance(part, (ToolCall, ToolResult)):
                    return False  # a result not right after its call (or a call where none goes)
            continue
        ids: list[str] = []
        for part in message.parts:
            if isinstance(part, ToolCall):
                if part.id is None or (pattern is not None and not pattern.match(part.id)):
                    return False
                ids.append(part.id)
            elif isinstance(part, ToolResult):
                return False
        if not ids:
            continue
        wanted = set(ids)
        if len(wanted) != len(ids):
            return False
        if rules.unique_ids:
            if not seen.isdisjoint(wanted):
                return False
            seen |= wanted
        if not has_tools and rules.tools_required:
            return False
        if i == n:
            break  # calls still waiting to run: the history's normal state between two requests
        if in_user:
            answer = messages[i]
            i += 1
            if answer.role != "user":
                return False
            answers = []
            other = False  # a block other than a result seen
            for part in answer.parts:
                if isinstance(part, ToolResult):
                    if other and rules.results_first:
                        return False  # a result after another block
                    answers.append(part.call_id)
                elif isinstance(part, ToolCall):
                    return False
                else:
                    other = True
        else:
            answers = []
            while i < n and messages[i].role == "tool" and len(answers) < len(ids):
                parts = messages[i].parts
                if len(parts) != 1 or not isinstance(parts[0], ToolResult):
                    return False
                answers.append(parts[0].call_id)
                i += 1
        if len(answers) != len(ids) or set(answers) != wanted:
            return False  # a call left open, answered twice or not at all, or a result of no call here
    return True


_STAND_IN = Message("user", (Text("."),))
"""The closed history before an appended turn, as :func:`appends_validly` checks the turn."""


def _repair(request: Request, close_pending: bool) -> tuple[Request, tuple[Repair, ...], list[Violation]]:
    """:func:`repair_request`, also giving the violations of the request as it came."""
    fixed, repairs, violations, _ = _repair_traced(request, close_pending)
    return fixed, repairs, violations


def _repair_traced(
    request: Request, close_pending: bool
) -> tuple[Request, tuple[Repair, ...], list[Violation], tuple[int | None, ...] | None]:
    rules = rules_for(_api(request))
    violations = _violations(request, rules)
    if not violations and not (close_pending and _has_pending(request, rules)):
        return request, (), violations, None
    made = fix(request, rules, close_pending=close_pending)
    repairs = made.repairs
    fixed = replace(request, messages=made.messages) if repairs else request
    if made.system is not None:
        fixed = replace(fixed, system=made.system, form=_system_form(request, made.system))
    if rules.tools_required and needs_tools(fixed):
        tools = tools_for_calls(fixed.messages)
        if tools:
            fixed = replace(fixed, tools=tools)
            repairs.append(Repair("added_tool_definitions", -1, detail=", ".join(t.name for t in tools)))
    if not repairs:
        return request, (), violations, None
    same = fixed.messages is request.messages
    return fixed, tuple(repairs), violations, None if same else made.origins


def validate(body: Any, api: str | None = None) -> list[Violation]:
    """Every pairing violation in a request body of ``api`` (told from its shape when ``None``)."""
    return check_request(wire.parse(body, api))


def repair(body: Any, api: str | None = None, *, close_pending: bool = False) -> Repaired:
    """Repair the pairing of a request body; never mutates it.

    A body given as JSON bytes or text comes back in the same form, with its
    fields in the caller's order and every number in its own literal text.
    A dict body's values are carried as the very objects given.
    """
    parsed = to_body(body)
    request = wire.parse(parsed, api)
    fixed, repairs, violations = _repair(request, close_pending)
    if fixed is request:
        # Nothing could be changed, so what is left is all there was (unfixable or none).
        return Repaired(body, (), tuple(violations))
    remaining = tuple(check_request(fixed))
    out = in_order_of(parsed, wire.render(fixed))
    text = isinstance(body, (bytes, bytearray, memoryview, str))
    if text:
        out = keep_literals(out, parsed, body)
    if isinstance(body, str):
        return Repaired(dumps(out).decode(), repairs, remaining)
    if text:
        return Repaired(dumps(out), repairs, remaining)
    return Repaired(out, repairs, remaining)


def _system_form(request: Request, system: tuple[Part, ...]) -> tuple[str, ...]:
    """The request's form hints once text moved into its top-level system prompt.

    A request that had no system prompt gets one in the plainest spelling its
    wire has (a string where it takes one and the text was a plain string).
    """
    if request.system:
        return request.form
    form = tuple(f for f in request.form if f not in ("system", "system:str"))
    if len(system) == 1 and isinstance(system[0], Text) and not system[0].extra:
        return (*form, "system", "system:str") if request.api == "anthropic" else (*form, "system")
    return (*form, "system")


def _api(request: Request) -> str:
    if request.api is None:
        raise UnknownAPIError("this request has no wire API; convert it to one first")
    return request.api


def _has_pending(request: Request, rules: Rules) -> bool:
    from .check import pending_from

    return pending_from(rules, request.messages) < len(request.messages)
