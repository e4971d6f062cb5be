"""How big text is: the one place that measures requests and estimates tokens.

Every budget, schedule, report and recovery attempt compares sizes, so they
must all count the same thing, and at the same ratio. What is counted is the
text the model reads: the system prompt, the tool definitions (name,
description, parameter schema), and each message's text, thinking, tool-call
arguments and tool results (a structured result as its JSON text). Media and
opaque parts have no text and count nothing.

Two measures differ on purpose:

- :func:`request_chars` (and :func:`message_chars`, :func:`fixed_chars`) is a
  *size*: how much of the context window a request fills. It is what caps,
  budgets, watermarks and reports compare.
- :func:`prompt_text` is a *text*, for comparing consecutive requests as a
  prefix cache does. It has a separator before every message, call and
  result, so that text moving from one message to the next is a change and
  not a cached prefix, and a placeholder for a part without text (so a
  changed image is a change too, and a thinking block without text by its
  signature). It leaves the tool definitions out, since
  they sit before the history on every request and never change in a replay.

Tokens are estimated at :data:`CHARS_PER_TOKEN` characters a token: a
provider's own count is only known after the fact (recovery calibrates with
it), and a fixed ratio keeps every decision a pure function of the history.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .jsonio import dumps
from .model import Data, Media, Message, Opaque, Part, Request, Text, Thinking, ToolCall, ToolDef, ToolResult

__all__ = [
    "CHARS_PER_TOKEN",
    "MARKER_ROOM",
    "MESSAGE_TOKENS",
    "chars_for",
    "estimate_tokens",
    "fixed_chars",
    "message_chars",
    "part_chars",
    "prompt_text",
    "request_chars",
    "request_texts",
    "tokens_of",
    "tool_chars",
]

CHARS_PER_TOKEN = 4
"""Characters per token, about, across English, code and JSON."""

MESSAGE_TOKENS = 4
"""What a chat template wraps each message in, about, in tokens: counted by
:func:`estimate_tokens` so a provider's count over the estimate stays about the
same when a history loses most of its messages."""

MARKER_ROOM = 320
"""The characters a marker line takes, with its key and a path of up to 150
characters: the room every cut keeps for it on top of the text it shows."""


def tokens_of(chars: int) -> int:
    """Tokens of ``chars`` characters, rounded up: what reports and replays show."""
    return -(-chars // CHARS_PER_TOKEN)


def chars_for(tokens: int) -> int:
    """The characters ``tokens`` tokens hold, about: a context window in characters."""
    return tokens * CHARS_PER_TOKEN


def _json_text(value: Any) -> str:
    return dumps(value).decode()


def _json_size(value: Any) -> int:
    """The size of a structured value: the UTF-8 bytes of its JSON, not its characters.

    The two agree on ASCII. They differ on other text, and the compaction
    schedule has always placed results by this count, so counting characters
    instead would move its decisions on real sessions (one shared Claude Code
    session, with a 30,000-token window, compacts at another request): the bodies
    sent would change. It is a slight overcount, never an undercount.
    """
    return len(dumps(value))


def _arguments(call: ToolCall) -> str:
    return call.arguments_json if call.arguments_json is not None else _json_text(call.arguments)


def _part_texts(part: Part) -> Iterator[str]:
    """The texts of one part the model reads, in order."""
    if isinstance(part, Text):
        yield part.text
    elif isinstance(part, ToolResult):
        for inner in part.content:
            if isinstance(inner, Text):
                yield inner.text
            elif isinstance(inner, Data):
                yield _json_text(inner.value)
    elif isinstance(part, ToolCall):
        yield _arguments(part)
    elif isinstance(part, Thinking) and part.text:
        yield part.text


def _parts_chars(parts: Iterable[Part]) -> int:
    """The characters of ``parts`` the model reads: the lengths of what :func:`_part_texts`
    gives, summed in one loop (this runs on every message of every request), except that a
    structured value (a call's arguments without their own text, a JSON result) counts
    the UTF-8 bytes of its JSON: see :func:`_json_size`."""
    total = 0
    for part in parts:
        if isinstance(part, Text):
            total += len(part.text)
        elif isinstance(part, ToolResult):
            for inner in part.content:
                if isinstance(inner, Text):
                    total += len(inner.text)
                elif isinstance(inner, Data):
                    total += _json_size(inner.value)
        elif isinstance(part, ToolCall):
            total += (
                len(part.arguments_json) if part.arguments_json is not None else _json_size(part.arguments)
            )
        elif isinstance(part, Thinking) and part.text:
            total += len(part.text)
    return total


def part_chars(part: Part) -> int:
    """The characters of one part the model reads."""
    return _parts_chars((part,))


def message_chars(message: Message) -> int:
    """The characters of a message the model reads: what sizes and places it in a prompt."""
    return _parts_chars(message.parts)


_TOOLS_MEASURED: dict[int, tuple[tuple[ToolDef, ...], int]] = {}


def _tool_texts(tools: tuple[ToolDef, ...]) -> Iterator[str]:
    for tool in tools:
        yield tool.name
        yield tool.description or ""
        yield _json_text(tool.parameters)


def tool_chars(tools: tuple[ToolDef, ...]) -> int:
    """The characters of the tool definitions: names, descriptions and parameter schemas.

    A resent tool list is the same tuple (the parse caches keep it), so its
    count is remembered by identity, with the tuple itself kept so the
    identity cannot be reused.
    """
    if not tools:
        return 0
    known = _TOOLS_MEASURED.get(id(tools))
    if known is not None and known[0] is tools:
        return known[1]
    total = sum(map(len, _tool_texts(tools)))
    if len(_TOOLS_MEASURED) >= 256:
        _TOOLS_MEASURED.clear()
    _TOOLS_MEASURED[id(tools)] = (tools, total)
    return total


def fixed_chars(request: Request) -> int:
    """The characters a request sends besides its messages: the system prompt and the tool definitions.

    Both fill the context window on every request, so the estimate, the
    report and the watermarks all count them.
    """
    system = sum(len(p.text) for p in request.system if isinstance(p, Text))
    return system + tool_chars(request.tools)


def request_chars(request: Request, sizes: Mapping[int, int] | None = None) -> int:
    """The characters the model reads: the system prompt, the tool definitions, and every
    message's text, thinking, tool arguments and results.

    ``sizes`` holds known counts of messages by ``id`` (cached messages), so a
    resent history is not counted again.
    """
    total = fixed_chars(request)
    for message in request.messages:
        known = sizes.get(id(message)) if sizes is not None else None
        total += message_chars(message) if known is None else known
    return total


def request_texts(request: Request) -> list[str]:
    """The texts :func:`request_chars` counts, one by one, for a caller's own token counter."""
    out = [p.text for p in request.system if isinstance(p, Text)]
    out.extend(_tool_texts(request.tools))
    for message in request.messages:
        for part in message.parts:
            out.extend(_part_texts(part))
    return out


def estimate_tokens(request: Request, factor: float = 1.0) -> int:
    """Tokens of a request at :data:`CHARS_PER_TOKEN`, times a calibration ``factor``.

    The tool definitions count (they are sent with every attempt), and so does a
    template's few tokens around each message (:data:`MESSAGE_TOKENS`): a
    provider's count over this estimate then stays about the same when a history
    loses most of its messages, so a calibration on a big refused request still
    holds for the small one. Unlike :func:`tokens_of` it is not rounded up: it
    is compared with a provider's limit, never shown.
    """
    chars = request_chars(request)
    return int((chars / CHARS_PER_TOKEN + MESSAGE_TOKENS * len(request.messages)) * factor)


def prompt_text(request: Request) -> str:
    """The request as the model reads it, in order, for measuring cached prefixes (see above)."""
    out: list[str] = []
    for part in request.system:
        _prompt_part(part, out)
    for message in request.messages:
        out.append(f"\x1e{message.role}\x1f")
        for part in message.parts:
            _prompt_part(part, out)
    return "".join(out)


def _prompt_part(part: Any, out: list[str]) -> None:
    if isinstance(part, Text):
        out.append(part.text)
    elif isinstance(part, ToolResult):
        out.append(f"\x1dresult {part.call_id}\x1f")
        for inner in part.content:
            _prompt_part(inner, out)
    elif isinstance(part, ToolCall):
        out.append(f"\x1dcall {part.id} {part.name}\x1f")
        out.append(_arguments(part))
    elif isinstance(part, Thinking):
        out.append(part.text or part.signature or "")
    elif isinstance(part, Data):
        out.append(_json_text(part.value))
    elif isinstance(part, (Media, Opaque)):
        out.append(f"\x1d{type(part).__name__}\x1f")
