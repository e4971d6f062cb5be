"""The canonical conversation: frozen value objects every transform works on.

Each wire API is parsed into these types and rendered back from them, so the
transforms (repair, budgets, compaction) are written once. Three slots keep the
round trip exact without modelling every provider field:

``extra``
    The wire fields we do not model (``cache_control``, citations, item ids,
    provider extensions), in their original order. Rendering to the same API
    writes them back; converting to another API drops them, since they mean
    nothing there.
``form``
    Small spelling hints for fields we do model, such as "this content was a
    plain string" or "this role was spelt ``developer``". A renderer uses a
    hint only while it still describes the value.
``origin``
    The exact wire value an object was parsed from. It is not an init field, so
    ``dataclasses.replace`` and every constructor leave it empty: an object
    that a transform changed can never carry a stale origin. A renderer writes
    an object whose origin is for its own API back as that very value, which
    makes untouched messages byte-identical to the caller's and keeps a
    provider's prompt cache warm.

Objects are immutable, so a transform cannot mutate its input: it builds new
objects for what it changes and shares the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeAlias, TypeVar

from ._fastinit import fast_init

__all__ = [
    "EMPTY",
    "Conversation",
    "Data",
    "Media",
    "Message",
    "Opaque",
    "Part",
    "Request",
    "Role",
    "Text",
    "Thinking",
    "ToolCall",
    "ToolDef",
    "ToolResult",
    "Usage",
    "frozen_mapping",
    "set_origin",
    "text_of",
]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
"""Canonical roles. ``tool`` is the carrier of results for APIs that give each
result a message (or item) of its own; APIs that put results inside a user
message use ``user``."""

EMPTY: Mapping[str, Any] = MappingProxyType({})


def frozen_mapping(fields: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only view of ``fields`` (the shared empty mapping when there are none)."""
    if not fields:
        return EMPTY
    if isinstance(fields, MappingProxyType):
        return fields
    return MappingProxyType(dict(fields))


def _empty() -> Mapping[str, Any]:
    # MappingProxyType is unhashable, so dataclasses refuse it as a plain default.
    return EMPTY


_T = TypeVar("_T")


def set_origin(obj: _T, api: str, wire: Any) -> _T:
    """Record the wire value ``obj`` was parsed from; returns ``obj``.

    Only parsers call this. See the module docstring for why origins exist.
    """
    object.__setattr__(obj, "origin", (api, wire))
    return obj


@dataclass(frozen=True, slots=True)
class Text:
    """Plain text."""

    text: str
    extra: Mapping[str, Any] = field(default_factory=_empty)
    form: tuple[str, ...] = ()
    origin: Any = field(default=None, init=False, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Media:
    """An image, document, audio clip or file, carried as given.

    ``data`` is base64 text when the wire inlines the bytes, ``url`` a link or
    data URL when it refers to them; whatever else the wire said stays in
    ``extra``.
    """

    kind: str
    media_type: str | None = None
    data: str | None = None
    url: str | None = None
    extra: Mapping[str, Any] = field(default_factory=_empty)
    form: tuple[str, ...] = ()
    origin: Any = field(default=None, init=False, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Data:
    """Structured JSON content of a tool result (Bedrock ``json``, a Gemini response object)."""

    value: Any
    extra: Mapping[str, Any] = field(default_factory=_empty)
    form: tuple[str, ...] = ()
    origin: Any = field(default=None, init=False, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Thinking:
    """Model reasoning. Signatures are opaque and must go back unchanged.

    ``redacted`` blocks carry no readable text; their payload is in
    ``signature`` (Anthropic's ``data``, a Responses item's encrypted content).
    ``source`` names the provider family that signed the block (``anthropic``,
    ``openai``, ``gemini``, ``bedrock``); ``None`` means the request's own API.
    Converting to another API keeps only the blocks its provider signed.
    """

    text: str | None = None
    signature: str | None = None
    redacted: bool = False
    source: str | None = None
    extra: Mapping[str, Any] = field(default_factory=_empty)
    form: tuple[str, ...] = ()
    origin: Any = field(default=None, init=False, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A request by the model to run a tool.

    ``arguments`` is the parsed value. ``arguments_json`` is the exact text for
    APIs that send arguments as a JSON string; when that text does not parse
    (a call cut off by ``max_tokens``), ``arguments`` is ``None`` and
    ``arguments_ok`` is false, so nothing executes a truncated call by mistake.
    """

    id: str | None
    name: str
    arguments: Any = None
    arguments_json: str | None = None
    arguments_ok: bool = True
    extra: Mapping[str, Any] = field(default_factory=_empty)
    form: tuple[str, ...] = ()
    origin: Any = field(default=None, init=False, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returned, answering the call whose id is ``call_id``.

    ``name`` is known on some wires (Gemini, OpenAI's legacy ``name``) and is
    how calls are matched where there are no ids.
    """

    call_id: str | None
    content: tuple[Part, ...] = ()
    is_error: bool = False
    name: str | None = None
    extra: Mapping[str, Any] = field(default_factory=_empty)
    form: tuple[str, ...] = ()
    origin: Any = field(default=None, init=False, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Opaque:
    """A wire block we do not model (server tool blocks, compaction blocks...), kept verbatim."""

    type: str
    value: Any
    extra: Mapping[str, Any] = field(default_factory=_empty)
    form: tuple[str, ...] = ()
    origin: Any = field(default=None, init=False, compare=False, repr=False)


Part: TypeAlias = Text | Media | Data | Thinking | ToolCall | ToolResult | Opaque


@dataclass(frozen=True, slots=True)
class Message:
    """One entry of the wire's history list: a message, or a Responses item."""

    role: Role
    parts: tuple[Part, ...]
    extra: Mapping[str, Any] = field(default_factory=_empty)
    form: tuple[str, ...] = ()
    origin: Any = field(default=None, init=False, compare=False, repr=False)

    def tool_calls(self) -> Iterator[ToolCall]:
        return (p for p in self.parts if isinstance(p, ToolCall))

    def tool_results(self) -> Iterator[ToolResult]:
        return (p for p in self.parts if isinstance(p, ToolResult))


@dataclass(frozen=True, slots=True)
class ToolDef:
    """A tool the model may call. ``kind`` is ``function`` for client tools;
    anything else (a provider's server tool) is carried as given."""

    name: str
    description: str | None = None
    parameters: Any = None
    kind: str = "function"
    extra: Mapping[str, Any] = field(default_factory=_empty)
    form: tuple[str, ...] = ()
    origin: Any = field(default=None, init=False, compare=False, repr=False)


@fast_init
@dataclass(frozen=True, slots=True)
class Request:
    """A whole request body.

    ``messages`` maps one to one onto the wire's history list, so an index here
    is the index a provider names in its errors. ``system`` holds a top-level
    system prompt where the API has one (Anthropic, Gemini, Bedrock); OpenAI's
    APIs keep theirs as messages. ``extra`` carries every other field
    (``model``, ``max_tokens``, ``stream``...) untouched.
    """

    api: str | None
    messages: tuple[Message, ...]
    system: tuple[Part, ...] = ()
    tools: tuple[ToolDef, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=_empty)
    form: tuple[str, ...] = ()
    origin: Any = field(default=None, init=False, compare=False, repr=False)

    @property
    def model(self) -> str | None:
        value = self.extra.get("model")
        return value if isinstance(value, str) else None

    def with_messages(self, messages: tuple[Message, ...]) -> Request:
        """This request with ``messages`` instead, and no origin: ``dataclasses.replace`` at a
        third of its cost, which every request of a long session pays a few times."""
        return Request(self.api, messages, self.system, self.tools, self.extra, self.form)


@dataclass(frozen=True, slots=True, repr=False)
class Conversation:
    """A conversation read from a session file on disk.

    Its layout is neutral: assistant messages carry ``ToolCall`` parts and each
    result follows in a ``tool`` message, in the order the agent saw them.
    ``to_request`` lays it out for a wire API.
    """

    id: str
    source: str
    messages: tuple[Message, ...]
    system: tuple[Part, ...] = ()
    tools: tuple[ToolDef, ...] = ()
    sidechain: bool = False
    meta: Mapping[str, Any] = field(default_factory=_empty)

    def __repr__(self) -> str:
        # A session's messages run to megabytes: a REPL or a log line needs what it is, not all of it.
        results = sum(1 for m in self.messages for _ in m.tool_results())
        side = ", sidechain" if self.sidechain else ""
        return (
            f"Conversation(id={self.id!r}, source={self.source!r}, {len(self.messages)} messages, "
            f"{results} results, {len(self.tools)} tools{side})"
        )


@dataclass(frozen=True, slots=True)
class Usage:
    """The tokens one reply cost, read the same way from every API's usage object.

    The APIs disagree on what their input count holds (Anthropic and Bedrock
    leave cached tokens out of it, OpenAI and Gemini put them in), so ``input``
    here is always the uncached part: ``input + cache_read + cache_write`` is
    the whole prompt on every API. ``output`` is every generated token,
    reasoning included. ``None`` is a count the reply does not state.
    """

    input: int | None = None
    output: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None

    @property
    def prompt(self) -> int | None:
        """The whole prompt: uncached, read from the cache and written to it."""
        counts = [n for n in (self.input, self.cache_read, self.cache_write) if n is not None]
        return sum(counts) if counts else None


def text_of(parts: Iterable[Part]) -> str:
    """The readable text of some parts, joined by newlines (results' text included)."""
    chunks: list[str] = []
    for part in parts:
        if isinstance(part, Text):
            chunks.append(part.text)
        elif isinstance(part, ToolResult):
            chunks.append(text_of(part.content))
    return "\n".join(chunks)
