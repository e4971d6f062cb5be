"""Replaying a real session turn by turn, and what prefix caching makes of it.

An agent sends its whole history before every assistant turn. Replaying a
transcript rebuilds each of those requests, manages it, and measures what a
provider with prefix caching would bill: the part of a request equal to the
start of the previous one is read from the cache, the rest is written to it
(at the prices of a :class:`~toolbudget.prices.PriceModel`, Anthropic's
5-minute cache unless another is chosen). That arithmetic is why compaction
must be scheduled: every change to an old message rewrites everything after
it. With arrival times, a request after a gap longer than the cache's TTL
reads nothing from it.

Prefixes are measured on the prompt as the model reads it
(:func:`toolbudget.measure.prompt_text`), not on JSON bytes, so key order or
escaping never counts as a cache miss. Tokens are estimated as in
:mod:`toolbudget.measure`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import wire
from .convert import to_request
from .jsonio import dumps
from .measure import prompt_text, tokens_of
from .model import Conversation
from .policy import Policy
from .prices import ANTHROPIC_5M, PriceModel
from .wire import tools_for_calls

__all__ = [
    "PRICE_BASE",
    "PRICE_READ",
    "PRICE_WRITE",
    "ReplayTotals",
    "TurnStats",
    "common_prefix",
    "prompt_text",
    "replay_managed",
    "replay_requests",
    "requests_of",
    "tally",
]

PRICE_BASE = 1.0
PRICE_WRITE = ANTHROPIC_5M.write
PRICE_READ = ANTHROPIC_5M.read
tokens = tokens_of
"""Tokens of a number of characters, as replays count them."""


def requests_of(conversation: Conversation) -> Iterator[Conversation]:
    """The conversation as its agent sent it: the history before each assistant turn.

    A history that ends with results or a user message is a request too (the
    next one the agent would send).
    """
    messages = conversation.messages
    # The agent had all its tools from the start: a transcript that does not list them gets
    # the ones the whole session calls, so they do not change from one request to the next.
    tools = conversation.tools or tools_for_calls(messages)
    for i in range(1, len(messages)):
        if messages[i].role == "assistant" and messages[i - 1].role != "assistant":
            yield Conversation(conversation.id, conversation.source, messages[:i], conversation.system, tools)
    if messages and messages[-1].role != "assistant":
        yield Conversation(conversation.id, conversation.source, messages, conversation.system, tools)


def request_count(conversation: Conversation) -> int:
    """How many requests :func:`requests_of` yields, counted without building them."""
    messages = conversation.messages
    turns = sum(
        1
        for i in range(1, len(messages))
        if messages[i].role == "assistant" and messages[i - 1].role != "assistant"
    )
    return turns + bool(messages and messages[-1].role != "assistant")


Progress = Callable[[int, int], None]
"""Told ``(done, total)`` after each request a replay builds, for a progress bar."""


def counter(total: int, progress: Progress | None) -> Callable[[int, dict[str, Any]], None]:
    """An ``emit`` callback that counts requests up to ``total`` and tells ``progress``."""
    done = 0

    def tick(_n: int, _body: dict[str, Any]) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    return tick


def common_prefix(a: str, b: str) -> int:
    """Length of the common prefix of two strings, by halving (comparisons run in C)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # a[:low] == b[:low] and a[:high] != b[:high]
    while high - low > 1:
        mid = (low + high) // 2
        if a[low:mid] == b[low:mid]:
            low = mid
        else:
            high = mid
    return low


@dataclass(frozen=True, slots=True)
class TurnStats:
    """One request of a replay."""

    turn: int
    chars: int
    tokens: int
    prefix_chars: int
    prefix_tokens: int
    cuts: int
    stable: bool
    """Whether this request extends the previous one: all of it is a cached prefix."""


@dataclass(frozen=True, slots=True)
class ReplayTotals:
    """A whole session under prefix caching."""

    requests: int
    tokens_sent: int
    cache_read: int
    cache_write: int
    stable_requests: int
    final_tokens: int
    turns: tuple[TurnStats, ...] = field(repr=False, default=())
    price: PriceModel = ANTHROPIC_5M
    """The prices the totals are billed at."""

    @property
    def billed(self) -> float:
        """Billed-equivalent input tokens: reads and writes at the price model's prices.

        The base price is 1.0: no cache at all."""
        if not self.price.cached:
            return self.price.write * self.tokens_sent
        return self.price.read * self.cache_read + self.price.write * self.cache_write

    @property
    def stability(self) -> float:
        """The share of requests (after the first) whose cached prefix was the whole previous request."""
        later = self.requests - 1
        return self.stable_requests / later if later > 0 else 1.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "tokens_sent": self.tokens_sent,
            "cache_read_tokens": self.cache_read,
            "cache_write_tokens": self.cache_write,
            "price": self.price.name,
            "billed_equivalent": round(self.billed, 1),
            "prefix_stable_requests": self.stable_requests,
            "prefix_stability": round(self.stability, 4),
            "final_tokens": self.final_tokens,
        }


def tally(
    texts: list[tuple[str, int]],
    price: PriceModel = ANTHROPIC_5M,
    arrivals: Sequence[float] | None = None,
) -> ReplayTotals:
    """Totals for a sequence of (prompt text, cuts) requests, in order.

    A request is stable when the previous request's whole prompt is its prefix:
    then everything sent before is read from the cache. With ``arrivals``
    (seconds, one per request), a request after a gap longer than the price
    model's TTL reads nothing from the cache; stability is about the bytes
    and does not change.
    """
    stats: list[TurnStats] = []
    previous = ""
    read = write = sent = stable = 0
    for turn, (text, cuts) in enumerate(texts):
        prefix = common_prefix(previous, text) if previous else 0
        whole = bool(previous) and prefix == len(previous)
        gap = arrivals[turn] - arrivals[turn - 1] if arrivals is not None and turn else None
        cached = 0 if price.cold_after(gap) or not price.cached else prefix
        stats.append(TurnStats(turn, len(text), tokens(len(text)), cached, tokens(cached), cuts, whole))
        read += tokens(cached)
        write += tokens(len(text)) - tokens(cached)
        sent += tokens(len(text))
        stable += whole
        previous = text
    final = stats[-1].tokens if stats else 0
    return ReplayTotals(len(stats), sent, read, write, stable, final, tuple(stats), price)


Manager = Callable[[dict[str, Any]], tuple[dict[str, Any], int]]
"""Manages one request body; returns the body to send and how many results it cut."""

TURN_SECONDS = 10.0
"""How long apart a replay's requests arrive when ``idle`` gaps are asked for: a model's answer."""


def arrivals_for(count: int, idle: float | None, every: int) -> list[float] | None:
    """Arrival times for ``count`` requests: ``TURN_SECONDS`` apart, with a gap of ``idle``
    seconds before every ``every``-th request. ``None`` (no timing at all) without ``idle``."""
    if idle is None:
        return None
    out: list[float] = []
    now = 0.0
    for n in range(count):
        if n:
            now += idle if every > 0 and n % every == 0 else TURN_SECONDS
        out.append(now)
    return out


UNMANAGED = "unmanaged"
"""The ``--emit`` subdirectory of the unmanaged history's bodies, named as its row of the table."""


def replay_requests(
    conversation: Conversation,
    api: str,
    manage: Manager | None,
    *,
    emit: Callable[[int, dict[str, Any]], None] | None = None,
    model: str | None = None,
    price: PriceModel = ANTHROPIC_5M,
    arrivals: Sequence[float] | None = None,
) -> ReplayTotals:
    """Send every request of ``conversation`` through ``manage`` (``None``: unmanaged) and tally."""
    texts: list[tuple[str, int]] = []
    for n, prefix in enumerate(requests_of(conversation)):
        body = to_request(prefix, api, model=model or "replay")
        cuts = 0
        if manage is not None:
            body, cuts = manage(body)
        if emit is not None:
            emit(n, body)
        texts.append((prompt_text(wire.parse(body, api)), cuts))
    return tally(texts, price, arrivals)


@dataclass(frozen=True, slots=True)
class ReplayOutcome:
    """A replay in one mode, with the same session unmanaged and eager for comparison."""

    conversation: str
    mode: str
    managed: ReplayTotals
    unmanaged: ReplayTotals
    eager: ReplayTotals
    events: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "conversation": self.conversation,
            "mode": self.mode,
            "turns": [
                {
                    "turn": t.turn,
                    "chars": t.chars,
                    "tokens": t.tokens,
                    "prefix_chars": t.prefix_chars,
                    "prefix_tokens": t.prefix_tokens,
                    "cuts": t.cuts,
                    "prefix_stable": t.stable,
                    "event": t.turn in self.events,
                }
                for t in self.managed.turns
            ],
            "totals": {
                self.mode: self.managed.as_dict(),
                "unmanaged": self.unmanaged.as_dict(),
                "eager": self.eager.as_dict(),
            },
        }

    def table(self) -> str:
        lines = [f"{'turn':>4} {'tokens':>8} {'cached prefix':>14} {'cuts':>5}  event"]
        for t in self.managed.turns:
            mark = "*" if t.turn in self.events else ""
            lines.append(f"{t.turn:>4} {t.tokens:>8,} {t.prefix_tokens:>14,} {t.cuts:>5}  {mark}")
        lines.append("")
        lines.append(
            f"{'':<12} {'tokens sent':>12} {'cache read':>12} {'cache write':>12} "
            f"{'billed':>12} {'stable':>7}  (billed as {self.managed.price.name})"
        )
        rows = [("unmanaged", self.unmanaged), ("eager", self.eager)]
        if self.mode != "eager":  # replayed as eager, the managed row is the eager row
            rows.append((self.mode, self.managed))
        for name, totals in rows:
            lines.append(
                f"{name:<12} {totals.tokens_sent:>12,} {totals.cache_read:>12,} {totals.cache_write:>12,} "
                f"{totals.billed:>12,.0f} {totals.stability:>7.0%}"
            )
        return "\n".join(lines) + "\n"


def replay_managed(
    conversation: Conversation,
    api: str,
    policy: Policy,
    *,
    session: str | None = None,
    store: str = "memory:",
    emit: Path | None = None,
    tick: Callable[[int, dict[str, Any]], None] | None = None,
    price: PriceModel = ANTHROPIC_5M,
    arrivals: Sequence[float] | None = None,
) -> tuple[ReplayTotals, tuple[int, ...]]:
    """Replay ``conversation`` managed by one session under ``policy``: the totals, and the compaction events.

    The events are the requests (by index) at which the schedule rewrote old results.
    ``tick`` is called after each request, as ``emit`` of :func:`replay_requests` is.
    ``arrivals`` are the requests' arrival times, told to the session (idle gaps).
    """
    from .session import Session

    events: list[int] = []
    count = [0]
    with Session(session, store=store, policy=policy) as live:

        def manage(body: dict[str, Any]) -> tuple[dict[str, Any], int]:
            now = arrivals[count[0]] if arrivals is not None else None
            count[0] += 1
            managed = live.manage(body, api, now=now)
            return managed.body, managed.report.results_cut

        def emit_one(n: int, body: dict[str, Any]) -> None:
            # Called after each request is managed: the session's report says whether an event fired.
            if live.last_report is not None and live.last_report.compaction_event:
                events.append(n)
            if emit is not None:
                emit.mkdir(parents=True, exist_ok=True)
                (emit / f"{n:04d}.json").write_bytes(dumps(body))
            if tick is not None:
                tick(n, body)

        totals = replay_requests(conversation, api, manage, emit=emit_one, price=price, arrivals=arrivals)
    return totals, tuple(events)


def replay_session(
    conversation: Conversation,
    api: str,
    policy: Policy,
    *,
    session: str | None = None,
    store: str = "memory:",
    emit: Path | None = None,
    progress: Progress | None = None,
    price: PriceModel | None = None,
    arrivals: Sequence[float] | None = None,
) -> ReplayOutcome:
    """Replay ``conversation`` under ``policy``, and the same unmanaged and eager, and tally all three.

    ``progress`` is told how many of the requests of all the runs are done. ``price`` bills
    all three (by default the one the schedule weighs its rewrites with: the policy's
    ``cache_price``, else the API's own); ``arrivals`` are the requests' arrival times.
    With ``emit``, each mode's bodies go to its own subdirectory, so they can be billed again.
    """
    from .prices import price_for

    if price is None:
        price = price_for(policy, api, "replay")
    runs = 2 if policy.compaction == "eager" else 3
    tick = counter(runs * request_count(conversation), progress)
    # The unmanaged history is not the schedule "off" (which still cuts results over their caps):
    # under --compaction off the two would share one directory and the unmanaged bodies replace
    # the managed ones.
    sinks = (emit / policy.compaction, emit / "eager", emit / UNMANAGED) if emit is not None else (None,) * 3
    managed, events = replay_managed(
        conversation,
        api,
        policy,
        session=session,
        store=store,
        emit=sinks[0],
        tick=tick,
        price=price,
        arrivals=arrivals,
    )
    if policy.compaction == "eager":
        eager = managed
    else:
        eager = replay_managed(
            conversation,
            api,
            replace(policy, compaction="eager"),
            session=session,
            store=store,
            emit=sinks[1],
            tick=tick,
            price=price,
            arrivals=arrivals,
        )[0]
    off_sink = sinks[2]

    def emit_off(n: int, body: dict[str, Any]) -> None:
        if off_sink is not None:
            off_sink.mkdir(parents=True, exist_ok=True)
            (off_sink / f"{n:04d}.json").write_bytes(dumps(body))
        tick(n, body)

    unmanaged = replay_requests(conversation, api, None, emit=emit_off, price=price, arrivals=arrivals)
    return ReplayOutcome(conversation.id, policy.compaction, managed, unmanaged, eager, events)


# A transcript's own clock: Claude Code and Codex stamp every line, Gemini CLI every message.
# Which side of the conversation a line is on decides where one request ends and the model's
# answer begins.
_CODEX_MODEL_SIDE = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "reasoning", "web_search_call"}
)


def _side(record: Any) -> str | None:
    """``"model"`` or ``"agent"`` for a transcript line that holds a message, else ``None``."""
    if not isinstance(record, dict):
        return None
    kind = record.get("type")
    if kind in ("user", "assistant") and isinstance(record.get("message"), dict):  # Claude Code
        return "model" if record["message"].get("role") == "assistant" else "agent"
    payload = record.get("payload")
    if kind == "response_item" and isinstance(payload, dict):  # a Codex rollout
        item = payload.get("type")
        if item == "message":
            return "model" if payload.get("role") == "assistant" else "agent"
        return "model" if item in _CODEX_MODEL_SIDE else "agent"
    return None


def _seconds(stamp: Any) -> float | None:
    from datetime import datetime

    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def transcript_arrivals(path: Path, conversation: Conversation) -> list[float] | None:
    """When each request of ``conversation`` was sent, from the transcript's own timestamps.

    A request leaves when the agent's side (a user message, a tool's output)
    is followed by the model's: its time is that of the agent's last line
    before the model answers. ``None`` when the file has no such timestamps
    (formats other than Claude Code's and Codex's JSONL and Gemini CLI's
    session JSON) or its turns do not line up with the conversation's requests.
    """
    try:
        data = path.read_bytes()
    except OSError:
        return None
    events = _gemini_cli_events(data)
    if events is None:
        events = _jsonl_events(data.splitlines(), conversation)
    if events is None:
        return None
    times: list[float] = []
    last_agent: float | None = None
    previous: str | None = None
    for side, stamp in events:
        if side == "model" and previous == "agent" and last_agent is not None:
            times.append(last_agent)
        if side == "agent":
            last_agent = stamp
        previous = side
    if previous == "agent" and last_agent is not None:
        times.append(last_agent)
    return times if times and len(times) == request_count(conversation) else None


def _jsonl_events(lines: list[bytes], conversation: Conversation) -> list[tuple[str, float]] | None:
    """Each message line of a Claude Code or Codex JSONL file: its side and its time.

    A Claude Code sub-agent's conversation is its own lines (``isSidechain``,
    its ``agentId``); the main conversation is the lines of no sub-agent.
    """
    import orjson

    agent = conversation.meta.get("agent_id") if conversation.sidechain else None

    events = []
    for line in lines:
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None
        side = _side(record)
        if side is None:
            continue
        if isinstance(record, dict) and bool(record.get("isSidechain")) != conversation.sidechain:
            continue
        if agent is not None and isinstance(record, dict) and record.get("agentId") != agent:
            continue
        stamp = _seconds(record.get("timestamp"))
        if stamp is None:
            return None
        events.append((side, stamp))
    return events


def _gemini_cli_events(data: bytes) -> list[tuple[str, float]] | None:
    """The sides and times of a Gemini CLI session file (one JSON object), or ``None`` for another file.

    A ``user`` message is the agent's side at its ``timestamp``. A ``gemini``
    message is the model's answer at its ``timestamp``; the results of its
    calls, which Gemini CLI keeps in the same message, are the agent's side,
    ready when the last of them was (each call's own ``timestamp``: a call
    waiting for the user's approval runs later than the answer that asked
    for it). ``info`` and ``error`` messages are the CLI's notices.
    """
    import orjson

    if not data.lstrip().startswith(b"{"):
        return None
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    messages = doc.get("messages") if isinstance(doc, dict) and "sessionId" in doc else None
    if not isinstance(messages, list):
        return None
    events: list[tuple[str, float]] = []
    for message in messages:
        if not isinstance(message, dict) or message.get("type") not in ("user", "gemini"):
            continue
        stamp = _seconds(message.get("timestamp"))
        if stamp is None:
            return None
        if message["type"] == "user":
            events.append(("agent", stamp))
            continue
        events.append(("model", stamp))
        calls = [c for c in message.get("toolCalls") or [] if isinstance(c, dict) and c.get("result")]
        if calls:
            done = [_seconds(c.get("timestamp")) for c in calls]
            events.append(("agent", max([stamp, *(t for t in done if t is not None)])))
    return events
