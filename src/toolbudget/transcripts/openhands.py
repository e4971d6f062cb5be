"""OpenHands event streams: evaluation ``output.jsonl``, bare event lists, and legacy resolver output.

An event is an *action* or an *observation*. A tool call is an action event
with ``tool_call_metadata``; its result is the observation event with the same
``tool_call_id``. Observations without that metadata (recall, agent state
changes) are environment bookkeeping, not results. An ``error`` observation
without it reports a call OpenHands could not even parse: the model read it as
a user message, and so it appears here.

Actions from one model response share ``model_response.id``; they become one
assistant message whose text is the response's own content and whose calls
take their exact JSON arguments from the response where it is recorded.

The legacy resolver output has no ids at all: each observation answers the
action just before it, and ids are synthesised.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..model import (
    Conversation,
    Media,
    Message,
    Part,
    Text,
    ToolCall,
    ToolDef,
    ToolResult,
    frozen_mapping,
)
from ._base import (
    CallNames,
    Source,
    Thread,
    arr,
    compact_meta,
    dict_or_empty,
    first_str,
    mapping_get,
    obj,
    parse_arguments,
    str_or_none,
    synthetic_id,
    text_parts,
    tool_defs,
)

EVAL_OUTPUT = "openhands-eval-output-jsonl"
EVENT_LIST = "openhands-event-list"
RESOLVER_OUTPUT = "openhands-resolver-output-jsonl"

_SNIFF_LIMIT = 5
# Action args that are OpenHands' own bookkeeping, not arguments the model gave.
_INTERNAL_ARGS = frozenset({"thought", "blocking", "is_static", "cwd", "hidden", "confirmation_state"})


def _is_event(value: Any) -> bool:
    return isinstance(value, dict) and "source" in value and ("action" in value or "observation" in value)


def sniff_eval_output(source: Source) -> bool:
    records = source.records[:_SNIFF_LIMIT]
    return bool(records) and all(
        isinstance(r, dict) and "instance_id" in r and isinstance(r.get("history"), list) for r in records
    )


def sniff_event_list(source: Source) -> bool:
    doc = source.doc
    return isinstance(doc, list) and bool(doc) and all(_is_event(e) for e in doc[:_SNIFF_LIMIT])


def sniff_resolver_output(source: Source) -> bool:
    records = source.records[:_SNIFF_LIMIT]
    return bool(records) and all(
        isinstance(r, dict) and "issue" in r and isinstance(r.get("history"), list) for r in records
    )


def load_eval_output(source: Source) -> tuple[Conversation, ...]:
    conversations = []
    for index, raw in enumerate(source.records):
        where = source.where(index)
        record = obj(raw, where)
        events = arr(record.get("history"), f"{where}: history")
        model = str_or_none(mapping_get(record, "metadata", "llm_config", "model"))
        meta = compact_meta(agent_class=str_or_none(mapping_get(record, "metadata", "agent_class")))
        instance = str_or_none(record.get("instance_id")) or f"{source.stem}-{index}"
        conversations.append(
            _from_events(
                conversation_id=instance, fmt=EVAL_OUTPUT, events=events, where=where, model=model, meta=meta
            )
        )
    return tuple(conversations)


def load_event_list(source: Source) -> tuple[Conversation, ...]:
    events = arr(source.doc, source.path)
    conversation = _from_events(
        conversation_id=source.stem, fmt=EVENT_LIST, events=events, where=source.path, model=None, meta={}
    )
    return (conversation,)


# --- event streams ------------------------------------------------------------------


class _Events:
    """Turns events into the neutral layout, one event at a time in stream order."""

    def __init__(self) -> None:
        self.thread = Thread()
        self.names = CallNames()
        self.system: tuple[Part, ...] = ()
        self.tools: tuple[ToolDef, ...] = ()
        self.models: list[Any] = []

    def event(self, event: dict[str, Any]) -> None:
        metadata = event.get("tool_call_metadata")
        if "action" in event:
            if isinstance(metadata, dict):
                self._call(event, metadata)
            else:
                self._action(event)
        elif "observation" in event:
            if isinstance(metadata, dict):
                self._result(event, metadata)
            elif event.get("observation") == "error":
                self.thread.user(text_parts(event.get("content")))

    def _action(self, event: dict[str, Any]) -> None:
        args = dict_or_empty(event.get("args"))
        kind = event.get("action")
        if kind == "system":
            self.system = text_parts(args.get("content"))
            self.tools = tool_defs(args.get("tools"))
        elif kind == "message":
            parts = (*text_parts(args.get("content")), *_images(args.get("image_urls")))
            if event.get("source") == "agent":
                self.thread.close()
                self.thread.assistant(parts)
            else:
                self.thread.user(parts)
        # Other actions without a tool call (recall, state changes) are the runtime's own steps.

    def _call(self, event: dict[str, Any], metadata: dict[str, Any]) -> None:
        response = dict_or_empty(metadata.get("model_response"))
        self.models.append(response.get("model"))
        reply = dict_or_empty(mapping_get(_first(response.get("choices")), "message"))
        call_id = str_or_none(metadata.get("tool_call_id"))
        key = str_or_none(response.get("id")) or f"event-{event.get('id')}"
        parts: list[Part] = []
        if not self.thread.is_open(key):
            # The response's own text, or (without a recorded response) the thought
            # OpenHands copied from it onto the first action.
            content = reply.get("content") if reply else dict_or_empty(event.get("args")).get("thought")
            parts.extend(text_parts(content))
        parts.append(self.names.add(_tool_call(event, metadata, reply, call_id)))
        self.thread.assistant(parts, key=key)

    def _result(self, event: dict[str, Any], metadata: dict[str, Any]) -> None:
        call_id = str_or_none(metadata.get("tool_call_id"))
        content = event.get("content")
        self.thread.result(
            ToolResult(
                call_id=call_id,
                content=(Text(content if isinstance(content, str) else ""),),
                is_error=event.get("observation") == "error",
                name=str_or_none(metadata.get("function_name")) or self.names.name(call_id),
            )
        )


def _from_events(
    *,
    conversation_id: str,
    fmt: str,
    events: list[Any],
    where: str,
    model: str | None,
    meta: dict[str, Any],
) -> Conversation:
    reader = _Events()
    for index, event in enumerate(events):
        reader.event(obj(event, f"{where}: history.{index}"))
    stated = first_str(reader.models) or model
    return Conversation(
        id=conversation_id,
        source=fmt,
        messages=reader.thread.messages(),
        system=reader.system,
        tools=reader.tools,
        meta=frozen_mapping(compact_meta(model=stated, **meta)),
    )


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, list) and value else None


def _tool_call(
    event: dict[str, Any], metadata: dict[str, Any], reply: dict[str, Any], call_id: str | None
) -> ToolCall:
    name = str(metadata.get("function_name", ""))
    for call in reply.get("tool_calls") or []:
        if isinstance(call, dict) and call.get("id") == call_id:
            function = dict_or_empty(call.get("function"))
            arguments, arguments_json, ok = parse_arguments(function.get("arguments"))
            return ToolCall(call_id, str(function.get("name") or name), arguments, arguments_json, ok)
    args = {k: v for k, v in dict_or_empty(event.get("args")).items() if k not in _INTERNAL_ARGS}
    return ToolCall(call_id, name, args)


def _images(urls: Any) -> tuple[Part, ...]:
    return tuple(
        Media(kind="image", url=u) for u in (urls if isinstance(urls, list) else []) if isinstance(u, str)
    )


# --- legacy resolver output ---------------------------------------------------------

# Actions that are conversation, not tool use: they never get an observation that is a result.
_NOT_TOOLS = frozenset({"message", "finish", "null", "system", "recall", "change_agent_state", "reject"})


def load_resolver_output(source: Source) -> tuple[Conversation, ...]:
    conversations = []
    for index, raw in enumerate(source.records):
        where = source.where(index)
        record = obj(raw, where)
        events = list(_flatten(arr(record.get("history"), f"{where}: history")))
        issue = dict_or_empty(record.get("issue"))
        meta = compact_meta(
            issue_type=str_or_none(record.get("issue_type")),
            success=record.get("success") if isinstance(record.get("success"), bool) else None,
        )
        conversations.append(
            Conversation(
                id=_issue_id(issue) or f"{source.stem}-{index}",
                source=RESOLVER_OUTPUT,
                messages=_pair_by_position(events, record.get("instruction")),
                meta=frozen_mapping(meta),
            )
        )
    return tuple(conversations)


def _flatten(history: list[Any]) -> Iterable[dict[str, Any]]:
    """Older output stores ``[action, observation]`` pairs; newer output a flat list."""
    for item in history:
        if isinstance(item, list):
            yield from (e for e in item if isinstance(e, dict))
        elif isinstance(item, dict):
            yield item


def _issue_id(issue: dict[str, Any]) -> str | None:
    number = issue.get("number")
    if number is None:
        return None
    owner, repo = issue.get("owner"), issue.get("repo")
    return f"{owner}/{repo}#{number}" if owner and repo else f"issue-{number}"


def _pair_by_position(events: list[dict[str, Any]], instruction: Any) -> tuple[Message, ...]:
    thread = Thread()
    if not any(e.get("action") == "message" and e.get("source") == "user" for e in events):
        thread.user(text_parts(instruction))
    pending: ToolCall | None = None
    calls = 0
    for event in events:
        fields = {**event, **dict_or_empty(event.get("args"))}
        if "action" in event:
            pending = _legacy_action(thread, event, fields, calls)
            calls += pending is not None
        elif "observation" in event and pending is not None:
            content = fields.get("content")
            result = ToolResult(
                pending.id, (Text(content if isinstance(content, str) else ""),), name=pending.name
            )
            thread.result(result)
            pending = None
    return thread.messages()


def _legacy_action(
    thread: Thread, event: dict[str, Any], fields: dict[str, Any], index: int
) -> ToolCall | None:
    kind = str(event.get("action"))
    thought = text_parts(fields.get("thought"))
    thread.close()
    if kind in _NOT_TOOLS:
        content = text_parts(fields.get("content") or fields.get("final_thought"))
        if event.get("source") == "user":
            thread.user(content)
        else:
            thread.assistant((*thought, *content))
        return None
    arguments = {k: fields[k] for k in ("command", "code", "path", "url") if k in fields}
    call = ToolCall(synthetic_id(index), kind, arguments)
    thread.assistant((*thought, call))
    return call
