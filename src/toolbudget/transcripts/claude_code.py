"""Claude Code session files (``~/.claude/projects/<project>/<session>.jsonl``).

Lines form a tree through ``uuid``/``parentUuid``; the file is chronological
and a rewind leaves the abandoned branch in place. The conversation is the
chain that ends at the last user or assistant line, with two repairs the chain
alone gets wrong:

* Parallel tool calls. One API response is written as one line per content
  block, and each tool result line hangs off the line of *its* call, so the
  chain to the leaf passes through only one of them. Lines that share a
  ``message.id`` with an assistant line on the chain, and result lines that
  answer a call on the chain, belong to the conversation too.
* Compaction. A ``compact_boundary`` line starts a new root whose
  ``logicalParentUuid`` points at the pre-compaction chain; following it keeps
  the whole session (the summary the model saw afterwards is the user message
  that follows the boundary).

Sub-agent lines (``isSidechain: true``) become conversations of their own, one
per agent, with ``sidechain=True``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..model import (
    Conversation,
    Media,
    Message,
    Opaque,
    Part,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    frozen_mapping,
)
from ._base import (
    CallNames,
    Source,
    Thread,
    compact_meta,
    dict_or_empty,
    first_str,
    obj,
    str_or_none,
)

FORMAT = "claude-code-jsonl"

_MESSAGE_TYPES = frozenset({"user", "assistant"})
_LINE_TYPES = frozenset(
    {"user", "assistant", "system", "summary", "file-history-snapshot", "queue-operation", "progress"}
)
_LINE_KEYS = frozenset({"uuid", "parentUuid", "leafUuid", "sessionId", "messageId"})
_SNIFF_LIMIT = 20


def sniff(source: Source) -> bool:
    """Claude Code lines carry a known ``type`` next to tree or session keys."""
    return any(_looks_like_line(r) for r in source.records[:_SNIFF_LIMIT])


def _looks_like_line(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and record.get("type") in _LINE_TYPES
        and "payload" not in record
        and not _LINE_KEYS.isdisjoint(record)
    )


@dataclass(frozen=True, slots=True)
class _Line:
    """A conversation line with its position in the file (which is its time order)."""

    index: int
    record: dict[str, Any]

    @property
    def uuid(self) -> str:
        return str(self.record["uuid"])

    @property
    def type(self) -> str:
        return str(self.record.get("type"))

    @property
    def message(self) -> dict[str, Any]:
        return dict_or_empty(self.record.get("message"))

    @property
    def message_id(self) -> str | None:
        return str_or_none(self.message.get("id"))

    @property
    def blocks(self) -> list[Any]:
        content = self.message.get("content")
        return content if isinstance(content, list) else []

    def parent(self) -> str | None:
        parent = str_or_none(self.record.get("parentUuid"))
        if parent is None and self.record.get("subtype") == "compact_boundary":
            return str_or_none(self.record.get("logicalParentUuid"))
        return parent


def load(source: Source) -> tuple[Conversation, ...]:
    threads = _threads(source)
    return tuple(_conversation(source, key, lines) for key, lines in threads.items() if _has_messages(lines))


def _threads(source: Source) -> dict[tuple[str, str], list[_Line]]:
    """Lines grouped into the main thread and one thread per sub-agent, in first-seen order."""
    threads: dict[tuple[str, str], list[_Line]] = {}
    agents: dict[str, str] = {}  # sidechain line uuid -> its agent
    for index, record in enumerate(source.records):
        record = obj(record, source.where(index))
        if not isinstance(record.get("uuid"), str) or record.get("type") not in _LINE_TYPES:
            continue
        line = _Line(index, record)
        key = ("main", "")
        if record.get("isSidechain"):
            # Older CLIs wrote sub-agent lines without an agentId: such a line belongs
            # to its parent's agent, and a root without one starts an agent of its own.
            agent = str_or_none(record.get("agentId")) or agents.get(line.parent() or "") or line.uuid
            agents[line.uuid] = agent
            key = ("agent", agent)
        threads.setdefault(key, []).append(line)
    return threads


def _has_messages(lines: list[_Line]) -> bool:
    return any(line.type in _MESSAGE_TYPES for line in lines)


def _conversation(source: Source, key: tuple[str, str], lines: list[_Line]) -> Conversation:
    selected = _select(lines)
    messages = _build(source, selected)
    sidechain = key[0] == "agent"
    first = lines[0].record
    session = str_or_none(first.get("sessionId"))
    agent_id = str_or_none(first.get("agentId")) if sidechain else None
    if sidechain:
        conversation_id = f"agent-{agent_id}" if agent_id else f"sidechain-{key[1]}"
    else:
        conversation_id = session or source.stem
    models = (line.message.get("model") for line in selected if line.type == "assistant")
    meta = compact_meta(
        model=first_str(m for m in models if m != "<synthetic>"),
        cwd=str_or_none(first.get("cwd")),
        version=str_or_none(first.get("version")),
        git_branch=str_or_none(first.get("gitBranch")),
        session_id=session if sidechain else None,
        agent_id=agent_id,
        compactions=sum(1 for line in selected if line.record.get("subtype") == "compact_boundary") or None,
    )
    return Conversation(
        id=conversation_id,
        source=FORMAT,
        messages=messages,
        sidechain=sidechain,
        meta=frozen_mapping(meta),
    )


# --- which lines make the conversation ---------------------------------------------


def _select(lines: list[_Line]) -> list[_Line]:
    """The lines of the latest branch, in file order (see the module docstring)."""
    by_uuid = {line.uuid: line for line in lines}
    leaf = next(line for line in reversed(lines) if line.type in _MESSAGE_TYPES)
    chain = list(_ancestors(leaf, by_uuid))
    on_chain = {line.uuid for line in chain}
    response_ids = {line.message_id for line in chain if line.type == "assistant"} - {None}
    siblings = [
        line
        for line in lines
        if line.uuid not in on_chain and line.type == "assistant" and line.message_id in response_ids
    ]
    call_ids = {cid for line in chain + siblings for cid in _call_ids(line)}
    answered = {rid for line in chain for rid in _result_ids(line)}
    for line in lines:
        if line.uuid in on_chain or line.type != "user":
            continue
        ids = set(_result_ids(line))
        if ids and ids <= call_ids and not ids & answered:
            siblings.append(line)
            answered |= ids
    return sorted(chain + siblings, key=lambda line: line.index)


def _ancestors(leaf: _Line, by_uuid: dict[str, _Line]) -> Iterator[_Line]:
    seen: set[str] = set()
    line: _Line | None = leaf
    while line is not None and line.uuid not in seen:
        seen.add(line.uuid)
        yield line
        parent = line.parent()
        line = by_uuid.get(parent) if parent else None


def _call_ids(line: _Line) -> Iterator[str]:
    if line.type == "assistant":
        for block in line.blocks:
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_use"
                and isinstance(block.get("id"), str)
            ):
                yield block["id"]


def _result_ids(line: _Line) -> Iterator[str]:
    for block in line.blocks:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            call_id = str_or_none(block.get("tool_use_id"))
            if call_id is not None:
                yield call_id


# --- lines to messages --------------------------------------------------------------


def _build(source: Source, lines: Iterable[_Line]) -> tuple[Message, ...]:
    thread = Thread()
    names = CallNames()
    for line in lines:
        where = source.where(line.index)
        if line.type == "assistant":
            parts = [_assistant_part(obj(b, f"{where}: content")) for b in _content(line)]
            for part in parts:
                if isinstance(part, ToolCall):
                    names.add(part)
            thread.assistant(parts, key=line.message_id or line.uuid)
        elif line.type == "user":
            _user_line(thread, names, line, where)
        # system, progress and bookkeeping lines are UI and telemetry: nothing the model saw.
    return thread.messages()


def _content(line: _Line) -> list[Any]:
    content = line.message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _assistant_part(block: dict[str, Any]) -> Part:
    kind = block.get("type")
    if kind == "text":
        return Text(str(block.get("text", "")))
    if kind == "tool_use":
        return ToolCall(
            id=str_or_none(block.get("id")), name=str(block.get("name", "")), arguments=block.get("input")
        )
    if kind == "thinking":
        return Thinking(
            text=str_or_none(block.get("thinking")),
            signature=str_or_none(block.get("signature")),
            source="anthropic",
        )
    if kind == "redacted_thinking":
        return Thinking(signature=str_or_none(block.get("data")), redacted=True, source="anthropic")
    return Opaque(str(kind), block)


def _user_line(thread: Thread, names: CallNames, line: _Line, where: str) -> None:
    """Results become tool messages; whatever else the line says follows as a user message."""
    others: list[Part] = []
    for raw in _content(line):
        block = obj(raw, f"{where}: content")
        if block.get("type") == "tool_result":
            call_id = str_or_none(block.get("tool_use_id"))
            thread.result(
                ToolResult(
                    call_id=call_id,
                    content=_result_content(block.get("content")),
                    is_error=bool(block.get("is_error")),
                    name=names.name(call_id),
                )
            )
        else:
            others.append(_user_part(block))
    if others:
        thread.user(others)


def _result_content(content: Any) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (Text(content),)
    if isinstance(content, list):
        return tuple(_user_part(b) for b in content if isinstance(b, dict))
    return ()


def _user_part(block: dict[str, Any]) -> Part:
    kind = block.get("type")
    if kind == "text":
        return Text(str(block.get("text", "")))
    if kind in ("image", "document"):
        src = dict_or_empty(block.get("source"))
        spelling = src.get("type")
        return Media(
            kind=str(kind),
            media_type=str_or_none(src.get("media_type")),
            data=str_or_none(src.get("data")),
            url=str_or_none(src.get("url")),
            form=(spelling,) if spelling in ("base64", "url") else (),
        )
    return Opaque(str(kind), block)
