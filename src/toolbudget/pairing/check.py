"""Finding pairing violations, located and worded the way the provider would.

One pass over the canonical messages. A trailing assistant turn whose calls
have nothing after them is not a violation: those calls are still waiting to
run, which is a normal state of a history between a response and its results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model import Message, Opaque, Part, Request, Thinking, ToolCall, ToolResult
from .rules import Rules

__all__ = ["Violation", "check", "matches", "needs_tools", "pending_from", "thinking_enabled"]

USER_SIDE = ("user", "tool")


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule: where it is (as the provider writes it) and what it says.

    ``index`` is the message the rule is about, or -1 for the request as a whole.
    """

    rule: str
    location: str
    message: str
    index: int
    call_id: str | None = None

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


def matches(rules: Rules, call: ToolCall, result: ToolResult) -> bool:
    """Whether ``result`` answers ``call``."""
    if rules.match_by_name and (call.id is None or result.call_id is None):
        return call.name == result.name
    return call.id == result.call_id


def needs_tools(request: Request) -> bool:
    """Whether the history holds tool blocks but the request defines no tools."""
    if request.tools:
        return False
    return any(isinstance(p, (ToolCall, ToolResult)) for m in request.messages for p in m.parts)


def thinking_enabled(request: Request) -> bool:
    config = request.extra.get("thinking")
    return isinstance(config, dict) and config.get("type") in ("enabled", "adaptive")


def pending_from(rules: Rules, messages: Sequence[Message]) -> int:
    """Index from which calls count as still waiting to run (``len(messages)`` if none)."""
    n = len(messages)
    if rules.carrier == "items":
        i = n
        while i > 0 and messages[i - 1].role == "assistant" and _only_calls_or_thinking(messages[i - 1]):
            i -= 1
        return i
    if n and messages[-1].role == "assistant" and any(isinstance(p, ToolCall) for p in messages[-1].parts):
        return n - 1
    return n


def _only_calls_or_thinking(message: Message) -> bool:
    return all(isinstance(p, (ToolCall, Thinking)) for p in message.parts)


class _Checker:
    def __init__(self, request: Request, rules: Rules) -> None:
        self.request = request
        self.rules = rules
        self.messages = request.messages
        self.out: list[Violation] = []

    def add(self, rule: str, where: str, index: int, call_id: str | None = None, **fields: object) -> None:
        text = self.rules.texts.get(rule, rule.replace("_", " "))
        message = text.format_map(_Fields(where=where, **fields))
        self.out.append(Violation(rule, where, message, index, call_id))

    def loc(self, i: int, *rest: object) -> str:
        return ".".join((self.rules.list_name, str(i), *map(str, rest)))

    def run(self) -> list[Violation]:
        if self.rules.carrier == "items":
            self.items()
        else:
            self.turns()
        self.call_ids()
        if not self.rules.system_role:
            self.system_messages()
        if self.rules.alternation:
            self.alternation()
        if self.rules.thinking_first and thinking_enabled(self.request):
            self.thinking()
        if self.rules.tools_required and needs_tools(self.request):
            where = "toolConfig" if self.rules.api == "bedrock-converse" else "tools"
            self.add("tools_required", where, -1)
        return self.out

    # --- turn carriers: user-message and tool-messages ---------------------------------

    def turns(self) -> None:
        rules, msgs = self.rules, self.messages
        n = len(msgs)
        pending = pending_from(rules, msgs)
        in_slot: set[tuple[int, int]] = set()
        for i, message in enumerate(msgs):
            if message.role != "assistant":
                continue
            calls = [p for p in message.parts if isinstance(p, ToolCall)]
            if not calls:
                continue
            if rules.call_after_user and i > 0 and msgs[i - 1].role == "assistant":
                self.add("call_after_user", self.loc(i), i)
            if i >= pending:
                continue
            slot = self.slot(i)
            answered = [False] * len(calls)
            for j, k, result in slot:
                in_slot.add((j, k))
                # The first call it answers that is still open: without ids, two calls of one
                # name are answered in order.
                hits = [c for c, call in enumerate(calls) if matches(rules, call, result)]
                hit = next((c for c in hits if not answered[c]), None)
                if not hits:
                    self.orphan(j, k, result, after_calls=True)
                elif hit is None:
                    self.add(
                        "duplicate_result", self.loc(j, "content", k), j, result.call_id, ids=result.call_id
                    )
                else:
                    answered[hit] = True
            missing = [call for call, done in zip(calls, answered, strict=True) if not done]
            if missing:
                j = i + 1 if rules.carrier == "user-message" and i + 1 < n else i
                ids = ", ".join(c.id or c.name for c in missing)
                where = self.loc(j) if rules.api == "bedrock-converse" else self.loc(i)
                self.add("missing_result", where, i, missing[0].id, ids=ids)
            if rules.carrier == "user-message" and slot:
                self.slot_layout(i + 1, len(calls))
        for j, message in enumerate(msgs):
            if message.role not in USER_SIDE:
                continue
            for k, part in enumerate(message.parts):
                if isinstance(part, ToolResult) and (j, k) not in in_slot:
                    self.orphan(j, k, part, after_calls=False)
            if rules.api == "bedrock-converse":
                self.bedrock_results(j, message)

    def slot(self, i: int) -> list[tuple[int, int, ToolResult]]:
        """The results in the place where the calls of message ``i`` must be answered."""
        msgs = self.messages
        out: list[tuple[int, int, ToolResult]] = []
        if self.rules.carrier == "user-message":
            j = i + 1
            if j < len(msgs) and msgs[j].role in USER_SIDE:
                out.extend((j, k, p) for k, p in enumerate(msgs[j].parts) if isinstance(p, ToolResult))
            return out
        j = i + 1
        while j < len(msgs) and msgs[j].role == "tool":
            out.extend((j, k, p) for k, p in enumerate(msgs[j].parts) if isinstance(p, ToolResult))
            j += 1
        return out

    def orphan(self, j: int, k: int, result: ToolResult, *, after_calls: bool) -> None:
        rules = self.rules
        ident = result.call_id or result.name or "?"
        if rules.carrier == "tool-messages":
            if after_calls:
                self.add("unmatched_result", self.loc(j, "tool_call_id"), j, result.call_id, ids=ident)
            else:
                self.add("orphan_result", self.loc(j, "role"), j, result.call_id)
            return
        where = self.loc(j) if rules.api in ("bedrock-converse", "gemini") else self.loc(j, "content", k)
        self.add("orphan_result", where, j, result.call_id, ids=ident)

    def slot_layout(self, j: int, calls: int) -> None:
        parts = self.messages[j].parts
        results = sum(isinstance(p, ToolResult) for p in parts)
        if self.rules.results_first and any(not isinstance(p, ToolResult) for p in parts[:results]):
            if self.rules.api == "anthropic":
                self.add("results_not_first", self.loc(j), j, n=calls)

    def bedrock_results(self, j: int, message: Message) -> None:
        results = [k for k, p in enumerate(message.parts) if isinstance(p, ToolResult)]
        beside = sum(1 for p in message.parts if rides_with_results(p))
        if results and len(results) + beside < len(message.parts):
            self.add("mixed_results", self.loc(j, "content"), j)
        for k in results:
            part = message.parts[k]
            assert isinstance(part, ToolResult)
            if part.is_error and not part.content:
                self.add("empty_error_result", self.loc(j, "content", k), j, part.call_id)

    # --- items: OpenAI Responses -----------------------------------------------------

    def items(self) -> None:
        msgs = self.messages
        server_state = held_on_server(self.request)
        pending = pending_from(self.rules, msgs)
        calls: dict[str, int] = {}
        answered: set[str] = set()
        for i, message in enumerate(msgs):
            for part in message.parts:
                if isinstance(part, ToolCall):
                    key = part.id or ""
                    if key in calls:
                        self.add("duplicate_call_id", self.loc(i), i, part.id, ids=key)
                    else:
                        calls[key] = i
                elif isinstance(part, ToolResult):
                    key = part.call_id or ""
                    if key not in calls:
                        if not server_state:
                            self.add("orphan_result", self.loc(i), i, part.call_id, ids=key)
                    elif key in answered:
                        self.add("duplicate_result", self.loc(i), i, part.call_id, ids=key)
                    else:
                        answered.add(key)
                elif isinstance(part, Thinking) and not self.followed(i):
                    ident = part.extra.get("id") if part.extra else None
                    self.add("reasoning_alone", self.loc(i), i, ids=ident or "reasoning")
        for key, i in calls.items():
            if key not in answered and i < pending:
                self.add("missing_result", self.loc(i), i, key, ids=key)

    def followed(self, i: int) -> bool:
        """Whether the reasoning item at ``i`` is followed by an item it produced."""
        if i + 1 >= len(self.messages):
            return False
        nxt = self.messages[i + 1]
        return nxt.role == "assistant" and not all(isinstance(p, Thinking) for p in nxt.parts)

    # --- rules over the whole history ------------------------------------------------

    def call_ids(self) -> None:
        rules = self.rules
        if rules.carrier == "items":
            return
        seen: set[str] = set()
        for i, message in enumerate(self.messages):
            if message.role != "assistant":
                continue
            here: set[str] = set()
            for k, part in enumerate(message.parts):
                if not isinstance(part, ToolCall) or part.id is None:
                    continue
                if rules.id_pattern is not None and not rules.id_pattern.match(part.id):
                    self.add("invalid_call_id", self.loc(i, "content", k, "tool_use", "id"), i, part.id)
                if part.id in here or (rules.unique_ids and part.id in seen):
                    self.add("duplicate_call_id", self.loc(i, "content", k), i, part.id, ids=part.id)
                here.add(part.id)
                seen.add(part.id)

    def system_messages(self) -> None:
        """A ``system`` message in a history whose API takes the system prompt only at the top level."""
        for i, message in enumerate(self.messages):
            if message.role != "system":
                continue
            # Anthropic names the list, not the message.
            where = self.rules.list_name if self.rules.api == "anthropic" else self.loc(i, "role")
            self.add("system_role", where, i, member=f"{self.rules.list_name}.{i}.member")

    def alternation(self) -> None:
        msgs = self.messages
        if msgs and msgs[0].role != "user":
            self.add("first_user", self.loc(0), 0)
        for i in range(1, len(msgs)):
            if _side(msgs[i]) == _side(msgs[i - 1]):
                self.add("alternation", self.loc(i), i)

    def thinking(self) -> None:
        msgs = self.messages
        last = len(msgs) - 1
        if (
            last < 1
            or msgs[last].role not in USER_SIDE
            or not any(isinstance(p, ToolResult) for p in msgs[last].parts)
        ):
            return
        start = last - 1
        while (
            start >= 2
            and msgs[start - 1].role in USER_SIDE
            and all(isinstance(p, ToolResult) for p in msgs[start - 1].parts)
            and msgs[start - 2].role == "assistant"
            and any(isinstance(p, ToolCall) for p in msgs[start - 2].parts)
        ):
            start -= 2
        opener = msgs[start]
        if opener.role != "assistant" or not opener.parts:
            return
        first = opener.parts[0]
        if not isinstance(first, Thinking):
            found = "tool_use" if isinstance(first, ToolCall) else "text"
            self.add("thinking_first", self.loc(start, "content", 0, "type"), start, found=found)


class _Fields(dict[str, object]):
    def __missing__(self, key: str) -> str:
        return ""


def _side(message: Message) -> str:
    return "assistant" if message.role == "assistant" else "user"


def check(request: Request, rules: Rules) -> list[Violation]:
    """Every pairing violation in ``request`` under ``rules``, in history order."""
    return _Checker(request, rules).run()


def rides_with_results(part: Part) -> bool:
    """A block Bedrock accepts beside tool results: a ``cachePoint`` caching the tool loop."""
    return isinstance(part, Opaque) and part.type == "cachePoint"


def held_on_server(request: Request) -> bool:
    """Whether earlier items live on the server (Responses), so an output may answer a call not sent."""
    return bool(request.extra.get("previous_response_id") or request.extra.get("conversation"))
