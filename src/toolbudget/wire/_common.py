"""Helpers shared by the wire modules: shape checks, origin reuse, neutral layout."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any, TypeVar

import orjson

from ..errors import ShapeError
from ..jsonio import dumps, type_name
from ..model import (
    EMPTY,
    Data,
    Media,
    Message,
    Opaque,
    Part,
    Request,
    Role,
    Text,
    Thinking,
    ToolCall,
    ToolDef,
    ToolResult,
    frozen_mapping,
    text_of,
)

T = TypeVar("T")


def expect_dict(value: Any, location: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ShapeError(f"expected an object, found {type_name(value)}", location=location)
    return value


def expect_list(value: Any, location: str) -> list[Any]:
    if not isinstance(value, list):
        raise ShapeError(f"expected an array, found {type_name(value)}", location=location)
    return value


def expect_str(value: Any, location: str) -> str:
    if not isinstance(value, str):
        raise ShapeError(f"expected a string, found {type_name(value)}", location=location)
    return value


def opt_str(value: Any, location: str) -> str | None:
    return None if value is None else expect_str(value, location)


def rest(wire: Mapping[str, Any], modelled: frozenset[str]) -> Mapping[str, Any]:
    """The fields of ``wire`` we do not model, in their original order."""
    if wire.keys() <= modelled:  # the usual case, checked in C
        return EMPTY
    return MappingProxyType(_without(wire, modelled))


def _without(wire: Mapping[str, Any], modelled: frozenset[str]) -> dict[str, Any]:
    """A copy of ``wire`` less the ``modelled`` fields, in order (a copy and a few pops, all in C)."""
    extra = dict(wire)
    for key in modelled:
        extra.pop(key, None)
    return extra


def reused(obj: Any, api: str) -> Any:
    """The wire value ``obj`` was parsed from, if it came from ``api`` unchanged."""
    origin = obj.origin
    if origin is not None and origin[0] == api:
        return origin[1]
    return None


def render_body(
    request: Request,
    api: str,
    adapt: Callable[[Request], Request],
    fill: Callable[[Request, dict[str, Any]], None],
    url_fields: Iterable[str] = (),
) -> dict[str, Any]:
    """The body of ``request`` for ``api``, the frame every wire module's ``render`` shares.

    A request from elsewhere is converted first (``adapt``); one parsed from
    ``api`` and never changed is written back as the very body it came from;
    otherwise ``fill`` writes the modelled fields over the unmodelled ones,
    less ``url_fields`` when the body came with the fields an API takes in its
    URL (the caller keeps them there).
    """
    if request.api != api:
        request = adapt(request)
    wire = reused(request, api)
    if wire is not None:
        return wire  # type: ignore[no-any-return]
    body = dict(request.extra)
    if "url_fields" in request.form:
        for key in url_fields:
            body.pop(key, None)
    fill(request, body)
    return body


def with_extra(out: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    if extra:
        for key, value in extra.items():
            out.setdefault(key, value)
    return out


def unknown(kind: str, value: Any, location: str, known: Iterable[str]) -> ShapeError:
    shown = repr(value) if isinstance(value, str) else type_name(value)
    names = ", ".join(sorted(known))
    return ShapeError(f"unknown {kind} {shown} (expected one of: {names})", location=location)


def read_role(value: Any, roles: Mapping[str, Role], location: str, known: Iterable[str]) -> Role:
    """The canonical role of a wire ``value``; anything ``roles`` does not map is refused naming ``known``."""
    role = roles.get(value) if isinstance(value, str) else None
    if role is None:
        raise unknown("role", value, location, known)
    return role


def plain_text(part: Part) -> bool:
    """Whether ``part`` is bare text, no field or spelling of its own: a wire may write it as a string."""
    return isinstance(part, Text) and not part.extra and not part.form


def dumps_text(value: Any) -> str:
    """JSON text for a value that must travel as text (structured content on a text-only wire)."""
    if isinstance(value, str):
        return value
    return dumps(value).decode()


def render_leftover(
    part: Part, render_media: Callable[[Media], Any], text_block: Callable[[str], Any]
) -> Any:
    """A part every wire writes alike: media by ``render_media``, opaque as it came, the rest as text.

    A wire with no block of its own for structured data, a result, thinking
    or a call (each module writes the ones it has before calling this) gets
    them as a text block (``text_block``) holding their text or JSON.
    """
    if isinstance(part, Media):
        return render_media(part)
    if isinstance(part, Opaque):
        return part.value
    if isinstance(part, Data):
        return text_block(dumps_text(part.value))
    if isinstance(part, ToolResult):
        return text_block(text_of(part.content))
    if isinstance(part, Thinking):
        return text_block(part.text or "")
    if isinstance(part, ToolCall):
        return text_block(arguments_text(part))
    raise AssertionError(part)


# --- neutral form, used when converting between APIs -------------------------------


def neutral_part(part: Part) -> Part | None:
    """The same part with every API-specific field dropped (``None`` for opaque parts)."""
    if isinstance(part, Text):
        return part if not (part.extra or part.form or part.origin) else Text(part.text)
    if isinstance(part, Media):
        return Media(part.kind, part.media_type, part.data, part.url)
    if isinstance(part, Data):
        return Data(part.value)
    if isinstance(part, Thinking):
        return Thinking(part.text, part.signature, part.redacted, part.source)
    if isinstance(part, ToolCall):
        return ToolCall(part.id, part.name, part.arguments, part.arguments_json, part.arguments_ok)
    if isinstance(part, ToolResult):
        content = tuple(p for p in map(neutral_part, part.content) if p is not None)
        return ToolResult(part.call_id, content, part.is_error, part.name)
    if isinstance(part, Opaque):
        return None
    raise AssertionError(part)


def kept_in(part: Part, family: str) -> bool:
    """Whether a converted part is kept by an API of ``family`` that refuses empty text blocks.

    Such an API (Anthropic, Bedrock) accepts only the thinking its own
    provider signed; other thinking, and empty text, is dropped.
    """
    if isinstance(part, Thinking):
        return part.source == family
    if isinstance(part, Text):
        return bool(part.text)
    return True


FAMILY = {
    "anthropic": "anthropic",
    "openai-chat": "openai",
    "openai-responses": "openai",
    "gemini": "gemini",
    "bedrock-converse": "bedrock",
}


def neutral(request: Request) -> Request:
    """A copy of ``request`` with nothing that belongs to its wire API.

    Thinking blocks keep a note of which provider signed them, so the target
    API can keep the ones it will accept.
    """
    family = FAMILY.get(request.api or "")

    def part(p: Part) -> Part | None:
        if isinstance(p, Thinking):
            return Thinking(p.text, p.signature, p.redacted, p.source or family)
        return neutral_part(p)

    def parts(ps: Iterable[Part]) -> tuple[Part, ...]:
        return tuple(q for q in map(part, ps) if q is not None)

    messages = tuple(Message(m.role, parts(m.parts)) for m in request.messages)
    tools = tuple(ToolDef(t.name, t.description, t.parameters) for t in request.tools if t.kind == "function")
    # A request of no API (built from a transcript) holds only fields meant for its target.
    extra = (
        dict(request.extra)
        if request.api is None
        else {k: v for k, v in request.extra.items() if k in PORTABLE_FIELDS}
    )
    return Request(None, messages, parts(request.system), tools, frozen_mapping(extra))


# Request fields that mean the same on every API we convert between.
PORTABLE_FIELDS = frozenset({"model", "temperature", "top_p", "stream"})


def merge_runs(messages: Iterable[Message], key: Callable[[Message], str | None]) -> list[Message]:
    """Merge neighbouring messages whose ``key`` is equal and not ``None``."""
    out: list[Message] = []
    last_key: str | None = None
    for message in messages:
        k = key(message)
        if out and k is not None and k == last_key:
            out[-1] = Message(out[-1].role, out[-1].parts + message.parts)
        else:
            out.append(message)
        last_key = k
    return out


def results_first(message: Message) -> Message:
    """The message with its tool results moved in front of everything else."""
    results = tuple(p for p in message.parts if isinstance(p, ToolResult))
    if not results or message.parts[: len(results)] == results:
        return message
    others = tuple(p for p in message.parts if not isinstance(p, ToolResult))
    return replace(message, parts=results + others)


_SAFE_ID = re.compile(r"[^A-Za-z0-9_-]")


def safe_ids(messages: Sequence[Message]) -> list[Message]:
    """Rewrite call ids that Anthropic-style APIs refuse (pattern ``^[a-zA-Z0-9_-]+$``).

    Ids are rewritten the same way in calls and results, deterministically, and
    a rewritten id never collides with an id already present.
    """
    ids = {p.id for m in messages for p in m.parts if isinstance(p, ToolCall) and p.id}
    ids |= {p.call_id for m in messages for p in m.parts if isinstance(p, ToolResult) and p.call_id}
    bad = sorted(i for i in ids if not i or _SAFE_ID.search(i))
    if not bad:
        return list(messages)
    taken = set(ids)
    mapping: dict[str, str] = {}
    for old in bad:
        base = _SAFE_ID.sub("_", old) or "call"
        new, n = base, 1
        while new in taken:
            n += 1
            new = f"{base}_{n}"
        taken.add(new)
        mapping[old] = new

    def fix(p: Part) -> Part:
        if isinstance(p, ToolCall) and p.id in mapping:
            return replace(p, id=mapping[p.id])
        if isinstance(p, ToolResult) and p.call_id in mapping:
            return replace(p, call_id=mapping[p.call_id])
        return p

    return [replace(m, parts=tuple(fix(p) for p in m.parts)) for m in messages]


# --- helpers for the OpenAI, Gemini and Bedrock modules ----------------------------------


def rest_with(
    wire: Mapping[str, Any],
    modelled: frozenset[str],
    key: str,
    inner: Mapping[str, Any],
    inner_modelled: frozenset[str],
) -> Mapping[str, Any]:
    """``rest(wire, modelled)`` plus the unmodelled fields of the nested object ``wire[key]``.

    Those are kept under ``key`` itself: ``key`` is a modelled field, so it can
    never clash with a top-level extra, and :func:`unnest` finds them there.
    """
    if wire.keys() <= modelled and inner.keys() <= inner_modelled:  # the usual case, checked in C
        return EMPTY
    extra = _without(wire, modelled)
    inner_extra = _without(inner, inner_modelled)
    if inner_extra:
        extra[key] = inner_extra
    return MappingProxyType(extra) if extra else EMPTY


def unnest(extra: Mapping[str, Any], key: str, inner: dict[str, Any]) -> dict[str, Any]:
    """``inner`` with the fields :func:`rest_with` kept under ``key`` added back."""
    kept = extra.get(key)
    if isinstance(kept, Mapping):
        for k, v in kept.items():
            inner.setdefault(k, v)
    return inner


def parse_arguments(text: str) -> tuple[Any, bool]:
    """The value of a call's JSON argument text, and whether it parsed at all."""
    try:
        return orjson.loads(text), True
    except orjson.JSONDecodeError:
        return None, False


def arguments_text(call: ToolCall) -> str:
    """A call's arguments as JSON text: the exact wire text when there is one.

    A value that is not an object (a custom tool's free text, say) is wrapped
    as ``{"input": ...}``, since function-calling APIs want an object.
    """
    if call.arguments_json is not None:
        return call.arguments_json
    arguments = call.arguments
    if arguments is None:
        arguments = {}
    elif not isinstance(arguments, dict):
        arguments = {"input": arguments}
    return dumps(arguments).decode()


def data_url_type(url: str) -> str | None:
    """The media type of a ``data:`` URL, read from its header only (the payload is never copied)."""
    if not url.startswith("data:"):
        return None
    end = url.find(",", 5, 300)
    if end < 0:
        return None
    media_type = url[5:end].split(";", 1)[0]
    return media_type or None


def split_data_url(url: str) -> tuple[str, str] | None:
    """``(media_type, base64 data)`` of a base64 ``data:`` URL, for wires that want the two apart."""
    if not url.startswith("data:"):
        return None
    end = url.find(",", 5, 300)
    if end < 0 or not url[5:end].endswith(";base64"):
        return None
    media_type = url[5:end].split(";", 1)[0] or "application/octet-stream"
    return media_type, url[end + 1 :]


def fill_call_ids(messages: Sequence[Message]) -> list[Message]:
    """Give every call an id, and every result the id of the call it answers.

    Gemini may leave ids out (its results match their calls by name and
    order); the other APIs pair by id alone. A result without an id answers
    the earliest open call of the same name before it (any open call when the
    result has no name either). New ids come from the call's position, so a
    history always gets the same ones, and never collide with ids present.
    """
    if all(
        (p.id if isinstance(p, ToolCall) else p.call_id)
        for m in messages
        for p in m.parts
        if isinstance(p, (ToolCall, ToolResult))
    ):
        return list(messages)
    taken = {p.id for m in messages for p in m.parts if isinstance(p, ToolCall) and p.id}
    taken |= {p.call_id for m in messages for p in m.parts if isinstance(p, ToolResult) and p.call_id}
    open_calls: list[ToolCall] = []
    out: list[Message] = []
    for i, message in enumerate(messages):
        parts: list[Part] = []
        changed = False
        for j, part in enumerate(message.parts):
            if isinstance(part, ToolCall):
                if not part.id:
                    new, n = f"call_{i}_{j}", 1
                    while new in taken:
                        n += 1
                        new = f"call_{i}_{j}_{n}"
                    taken.add(new)
                    part, changed = replace(part, id=new), True
                open_calls.append(part)
            elif isinstance(part, ToolResult):
                if part.call_id:
                    open_calls = [c for c in open_calls if c.id != part.call_id]
                else:
                    match = next(
                        (c for c in open_calls if part.name is None or c.name == part.name),
                        None,
                    )
                    if match is not None:
                        open_calls.remove(match)
                        part, changed = replace(part, call_id=match.id), True
            parts.append(part)
        out.append(replace(message, parts=tuple(parts)) if changed else message)
    return out


RECONSTRUCTED_TOOL = "Definition not supplied with this history; reconstructed from the calls it holds."


def tools_for_calls(messages: Iterable[Message]) -> tuple[ToolDef, ...]:
    """Placeholder definitions for the tools a history calls, in order of first use.

    Anthropic and Bedrock refuse a history with tool blocks but no tools. The
    schema accepts any object: nothing is known of the real one.
    """
    names: dict[str, None] = {}
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolCall) and part.name:
                names.setdefault(part.name)
    return tuple(ToolDef(name, RECONSTRUCTED_TOOL, {"type": "object"}) for name in names)


class EntryCache:
    """Parsed history entries, by their exact JSON text.

    An agent resends its whole history with every request, so all but the
    newest entries were parsed before. Keying on the entry's own JSON text
    (orjson writes it in C, far faster than parsing it again in Python) makes
    a hit exact: equal text, equal entry. A hit returns the message parsed the
    first time; its origin is the equal entry of that earlier request.

    A body met cold (a new process, a new session) hits nothing, and still
    pays for its keys: writing and hashing every entry's text is about half
    of a round trip of the body, and ``measure`` another fifth. Neither is
    put off. A key written later, when a request that could hit comes, would
    be the text of the entry as it is then: a caller that changed its dicts
    in between (an agent moving ``cache_control`` from one message to the
    next) would get back the message parsed from the text before, for the
    text after. And the sizes are what the budget of that very request reads
    next, so measuring later would only move the cost.
    """

    def __init__(self, limit: int = 50_000, measure: Callable[[Message], int] | None = None) -> None:
        self.limit = limit
        self.measure = measure
        self.entries: dict[bytes, Message] = {}
        self.values: dict[bytes, Any] = {}
        """Other parsed parts of a body (tool lists), by a tag and their JSON text."""
        self.sizes: dict[int, int] = {}
        """``measure`` of each cached message, by ``id``: valid while the message is cached."""
        self.history: tuple[list[Any], tuple[Message, ...], list[bytes]] | None = None
        """The last history :meth:`parse_all` read, its messages and its entries' JSON texts
        (see :meth:`text_of`)."""

    def parse(self, raw: Any, location: str, parse_one: Callable[[Any, str], Message]) -> Message:
        try:
            text = orjson.dumps(raw)
        except TypeError:
            return parse_one(raw, location)
        hit = self.entries.get(text)
        if hit is not None:
            return hit
        return self._add(text, parse_one(raw, location))

    def parse_all(
        self, entries: list[Any], key: str, parse_one: Callable[[Any, str], Message]
    ) -> tuple[Message, ...]:
        """:meth:`parse` of each of ``entries`` (the history at ``key``), in one loop."""
        known = self.entries
        measure = self.measure
        out = []
        texts: list[bytes] | None = []
        for raw, location in zip(entries, locations(key, len(entries)), strict=False):
            try:
                text = orjson.dumps(raw)
            except TypeError:
                texts = None
                out.append(parse_one(raw, location))
                continue
            if texts is not None:
                texts.append(text)
            message = known.get(text)
            if message is None:
                message = parse_one(raw, location)
                if len(known) >= self.limit:
                    self._evict()
                known[text] = message
                if measure is not None:
                    self.sizes[id(message)] = measure(message)
            out.append(message)
        messages = tuple(out)
        self.history = (entries, messages, texts) if texts else None
        return messages

    def text_of(self, entries: Any, messages: tuple[Message, ...]) -> bytes | None:
        """The JSON text of ``entries`` when :meth:`parse_all` read them last, into ``messages``
        (the very tuple it made, alive since, so made from this list as it was then), else ``None``.

        It is taken once: the cache does not keep a caller's body alive after it. It is the
        text ``orjson.dumps(entries)`` writes, but for a list whose entries are nested up to
        orjson's depth limit, which it writes one by one and refuses as a list: that history
        can never be recognised as the start of another (whose text cannot be written), so
        the text stands for nothing a later request could match.
        """
        history = self.history  # one read: another thread's parse may replace it meanwhile
        if history is None or history[0] is not entries or history[1] is not messages:
            return None
        if self.history is history:
            self.history = None
        # Joined as orjson joins a list's items: the history's text, not written a second time,
        # and copied once: brackets added around the joined text copied all of it twice more
        # (0.3-1.5 ms in all on a 1.7 MB history, against 0.15 ms for the join alone).
        parts = list(history[2])
        parts[0] = b"[" + parts[0]
        parts[-1] += b"]"
        return b",".join(parts)

    def _add(self, text: bytes, message: Message) -> Message:
        """Remember ``message``, parsed from ``text``; returns it."""
        if len(self.entries) >= self.limit:
            self._evict()
        self.entries[text] = message
        if self.measure is not None:
            self.sizes[id(message)] = self.measure(message)
        return message

    def _evict(self) -> None:
        """Drop the older half; an agent's history only grows at the end.

        Threads sharing the cache (a pool's sessions) may drop the same entry
        at once: each pop tolerates it.
        """
        for old in list(self.entries)[: self.limit // 2]:
            dropped = self.entries.pop(old, None)
            if dropped is not None:
                self.sizes.pop(id(dropped), None)


def parse_history(
    cache: EntryCache | None,
    wire: Mapping[str, Any],
    key: str,
    parse_one: Callable[[Any, str], Message],
    what: str,
) -> tuple[Message, ...]:
    """The history entries of a body, ``wire[key]``, each parsed once (see :class:`EntryCache`).

    A body without them is refused with a :class:`ShapeError` naming ``what`` it should be.
    """
    if key not in wire:
        raise ShapeError(f"{what} needs a `{key}` array")
    return parse_entries(cache, expect_list(wire[key], key), key, parse_one)


def parse_entries(
    cache: EntryCache | None, entries: list[Any], key: str, parse_one: Callable[[Any, str], Message]
) -> tuple[Message, ...]:
    """History ``entries`` (the list at ``key``), each parsed once (see :class:`EntryCache`)."""
    if cache is not None:
        return cache.parse_all(entries, key, parse_one)
    names = locations(key, len(entries))  # at least as many as the entries
    return tuple([parse_one(entry, name) for entry, name in zip(entries, names, strict=False)])


_LOCATIONS: dict[str, list[str]] = {}


def locations(key: str, count: int) -> list[str]:
    """At least ``count`` entry locations of the list at ``key``: ``key.0``, ``key.1``...

    Each entry's parser is handed its location, for the errors it may
    raise; writing one for every entry of every request was a noticeable part
    of a long history's parse, so they are written once. A longer list
    replaces a shorter one whole, so a thread never sees a list being grown.
    """
    known = _LOCATIONS.get(key)
    if known is None or len(known) < count:
        size = max(count, 2 * len(known or ()), 64)
        known = _LOCATIONS[key] = [f"{key}.{i}" for i in range(size)]
    return known


def cached(cache: EntryCache | None, tag: bytes, raw: Any, build: Callable[[], T]) -> T:
    """``build()``, remembered in ``cache`` under ``tag`` and the JSON text of ``raw``."""
    if cache is None:
        return build()
    try:
        key = tag + b"\x00" + orjson.dumps(raw)
    except TypeError:
        return build()
    hit = cache.values.get(key)
    if hit is None:
        if len(cache.values) >= 1024:
            cache.values.clear()
        hit = cache.values[key] = build()
    return hit


def parse_tools(
    cache: EntryCache | None, raw: Any, parse_one: Callable[[Any, str], ToolDef]
) -> tuple[ToolDef, ...]:
    """A body's ``tools`` list, each entry read by ``parse_one``; a resent list is read once."""

    def build() -> tuple[ToolDef, ...]:
        tools = []
        for i, tool in enumerate(expect_list(raw, "tools")):
            tools.append(parse_one(tool, f"tools.{i}"))
        return tuple(tools)

    return build() if cache is None else cached(cache, b"tools", raw, build)
