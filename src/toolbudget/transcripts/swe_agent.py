"""SWE-agent trajectories (``*.traj``, one JSON object per run).

``trajectory`` is the record of what ran: one ``(action, observation)`` pair
per step. It is used for the turns because ``history`` is not reliable for
them: it misses the last step (the run ends before it is appended), and in the
hand-edited demonstrations its messages drift out of step with the actions.
``history`` still supplies what only it has: the system prompt, the task and
pasted demonstrations, and, in function-calling configs, the real call ids and
JSON arguments (used when the history message's action is the step's action).

Text configs have no call ids: the tool is the first word of the action, its
arguments the rest, and ids are synthesised from the step number. A file with
no ``trajectory`` (``function_calling_simple.traj``) is read from ``history``
alone.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from ..jsonio import loads
from ..model import Conversation, Message, Part, Text, ToolCall, ToolResult, frozen_mapping
from ._base import (
    CallNames,
    Source,
    Thread,
    compact_meta,
    dict_or_empty,
    mapping_get,
    obj,
    parse_arguments,
    str_or_none,
    synthetic_id,
    text_parts,
)

FORMAT = "swe-agent-traj"


def sniff(source: Source) -> bool:
    doc = source.doc
    if not isinstance(doc, dict) or "messages" in doc:
        return False
    if isinstance(doc.get("trajectory"), list):
        return True
    history = doc.get("history")
    return isinstance(history, list) and all(isinstance(h, dict) and "role" in h for h in history[:5])


def load(source: Source) -> tuple[Conversation, ...]:
    doc = obj(source.doc, source.path)
    history = [dict_or_empty(h) for h in doc.get("history") or []]
    system = tuple(p for h in history if h.get("role") == "system" for p in _content(h.get("content")))
    steps = doc.get("trajectory")
    # Without a trajectory (function_calling_simple.traj) the history is all there is.
    messages = _from_trajectory(source, steps, history) if isinstance(steps, list) else _from_history(history)
    info = dict_or_empty(doc.get("info"))
    meta = compact_meta(
        model=_model(doc),
        exit_status=str_or_none(info.get("exit_status")),
        environment=str_or_none(doc.get("environment")),
    )
    conversation = Conversation(
        id=source.stem,
        source=FORMAT,
        messages=messages,
        system=system,
        meta=frozen_mapping(meta),
    )
    return (conversation,)


def _content(content: Any) -> tuple[Part, ...]:
    """History content is a string, or a list of text parts in multimodal configs."""
    if isinstance(content, list):
        return tuple(Text(str(p.get("text", ""))) for p in content if isinstance(p, dict) and "text" in p)
    return text_parts(content)


def _from_trajectory(source: Source, steps: list[Any], history: list[dict[str, Any]]) -> tuple[Message, ...]:
    thread = Thread()
    prefix, actions = _split_history(history)
    for message in prefix:
        _prefix_message(thread, message)
    for index, raw in enumerate(steps):
        step = obj(raw, f"{source.path}: trajectory.{index}")
        action = str(step.get("action", ""))
        call = _step_call(index, action, actions[index] if index < len(actions) else None)
        thread.close()
        thread.assistant((*text_parts(_thought(step)), call))
        observation = step.get("observation")
        content = _content(observation) if isinstance(observation, list) else (Text(str(observation or "")),)
        thread.result(ToolResult(call.id, content, name=call.name))
    return thread.messages()


def _split_history(history: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The messages before the agent's first own turn (demonstrations, the task), and its own turns."""
    own = [i for i, h in enumerate(history) if h.get("role") == "assistant" and not h.get("is_demo")]
    if own:
        end = own[0]
    else:
        task = (i for i, h in enumerate(history) if h.get("role") == "user" and not h.get("is_demo"))
        end = next(task, len(history) - 1) + 1
    prefix = [h for h in history[:end] if h.get("role") != "system"]
    return prefix, [history[i] for i in own]


def _prefix_message(thread: Thread, message: dict[str, Any]) -> None:
    parts = _content(message.get("content"))
    if message.get("role") == "assistant":
        thread.close()
        thread.assistant(parts)
    else:
        thread.user(parts)


def _thought(step: dict[str, Any]) -> str:
    thought = step.get("thought")
    return thought.strip() if isinstance(thought, str) else ""


def _step_call(index: int, action: str, message: dict[str, Any] | None) -> ToolCall:
    """The step's call: the model's own function call when history has it for this action."""
    if message is not None and _same_action(message.get("action"), action):
        calls = _tool_calls(message)
        if len(calls) == 1:
            return _function_call(calls[0])
    words = action.strip().split(maxsplit=1)
    name = words[0] if words else ""
    return ToolCall(synthetic_id(index), name, words[1] if len(words) > 1 else "")


def _same_action(recorded: Any, action: str) -> bool:
    return isinstance(recorded, str) and recorded.strip() == action.strip()


def _tool_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    calls = message.get("tool_calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def _function_call(call: dict[str, Any]) -> ToolCall:
    function = dict_or_empty(call.get("function"))
    arguments, arguments_json, ok = parse_arguments(function.get("arguments"))
    return ToolCall(str_or_none(call.get("id")), str(function.get("name", "")), arguments, arguments_json, ok)


def _from_history(history: list[dict[str, Any]]) -> tuple[Message, ...]:
    """Function-calling history without a trajectory: calls and results carry real ids."""
    thread = Thread()
    names = CallNames()
    for message in history:
        role = message.get("role")
        parts = _content(message.get("content"))
        if role == "assistant":
            calls = [names.add(_function_call(c)) for c in _tool_calls(message)]
            thread.close()
            thread.assistant((*parts, *calls))
        elif role == "tool":
            ids = message.get("tool_call_ids")
            for call_id in ids if isinstance(ids, list) else [None]:
                call_id = str_or_none(call_id)
                thread.result(ToolResult(call_id, parts, name=names.name(call_id)))
        elif role == "user":
            thread.user(parts)
    return thread.messages()


def _model(doc: dict[str, Any]) -> str | None:
    """The model named in ``replay_config`` (a JSON string or object), if any."""
    config = doc.get("replay_config")
    if isinstance(config, str):
        try:
            config = loads(config, what="replay_config")
        except InputError:
            return None
    name = mapping_get(config, "agent", "model", "name")
    return name if isinstance(name, str) and name != "replay" else None
