"""tau-bench and tau2-bench results: many simulated customer-service conversations per file.

tau-bench stores OpenAI Chat Completions messages (arguments as JSON strings);
tau2 its own messages (arguments as objects, results keyed by the call's id,
and an ``error`` flag). Both reuse call ids across turns of one conversation,
so a result is matched to the latest call with its id.

In tau2's telecom domain the simulated *user* has tools of their own (toggling
airplane mode, reading the status bar), marked ``requestor: "user"`` on the
call and on its result. The conversation is the agent's, and the agent never
saw those calls: laid out as assistant calls they would put words in the
agent's mouth (and a model replaying them would learn to call the user's
tools). So they stay on the user's side, as user text that says which tool the
user called, with what, and what came back, in order within the user's turn
(all the user side does between two agent messages is one user message).
Every message stays valid on every wire API, and ``meta["user_tool_calls"]``
counts them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..jsonio import dumps
from ..model import Conversation, Message, Part, Text, ToolCall, ToolResult, frozen_mapping
from ._base import (
    CallNames,
    Source,
    arr,
    compact_meta,
    dict_or_empty,
    mapping_get,
    obj,
    parse_arguments,
    str_or_none,
    text_parts,
    tool_defs,
)

TAU_BENCH = "tau-bench-results-json"
TAU2 = "tau2-results-json"


def sniff_tau_bench(source: Source) -> bool:
    doc = source.doc
    return (
        isinstance(doc, list)
        and bool(doc)
        and all(isinstance(t, dict) and "task_id" in t and isinstance(t.get("traj"), list) for t in doc[:5])
    )


def sniff_tau2(source: Source) -> bool:
    doc = source.doc
    return isinstance(doc, dict) and isinstance(doc.get("simulations"), list)


def _conversation_id(task_id: Any, trial: Any) -> str:
    return f"task-{task_id}-trial-{trial}"


# --- tau-bench ----------------------------------------------------------------------


def load_tau_bench(source: Source) -> tuple[Conversation, ...]:
    conversations = []
    for index, raw in enumerate(arr(source.doc, source.path)):
        where = f"{source.path}: [{index}]"
        task = obj(raw, where)
        system, messages = _chat_messages(arr(task.get("traj"), f"{where}.traj"), where)
        reward = task.get("reward")
        meta = compact_meta(task_id=task.get("task_id"), trial=task.get("trial"), reward=reward)
        conversations.append(
            Conversation(
                id=_conversation_id(task.get("task_id"), task.get("trial")),
                source=TAU_BENCH,
                messages=messages,
                system=system,
                meta=frozen_mapping(meta),
            )
        )
    return tuple(conversations)


def _chat_messages(traj: list[Any], where: str) -> tuple[tuple[Part, ...], tuple[Message, ...]]:
    system: list[Part] = []
    out: list[Message] = []
    names = CallNames()
    for index, raw in enumerate(traj):
        message = obj(raw, f"{where}.traj.{index}")
        role = message.get("role")
        content = text_parts(message.get("content"))
        if role == "system" and not out:
            system.extend(content)
        elif role == "assistant":
            calls = [names.add(_chat_call(dict_or_empty(c))) for c in message.get("tool_calls") or []]
            if content or calls:
                out.append(Message("assistant", (*content, *calls)))
        elif role == "tool":
            call_id = str_or_none(message.get("tool_call_id"))
            name = str_or_none(message.get("name")) or names.name(call_id)
            out.append(Message("tool", (ToolResult(call_id, _result_text(message), name=name),)))
        elif role in ("user", "system") and content:
            out.append(Message(role, content))
    return tuple(system), tuple(out)


def _chat_call(call: dict[str, Any]) -> ToolCall:
    function = dict_or_empty(call.get("function"))
    arguments, arguments_json, ok = parse_arguments(function.get("arguments"))
    return ToolCall(str_or_none(call.get("id")), str(function.get("name", "")), arguments, arguments_json, ok)


def _result_text(message: dict[str, Any]) -> tuple[Part, ...]:
    content = message.get("content")
    return (Text(content if isinstance(content, str) else ""),)


# --- tau2 ---------------------------------------------------------------------------


def load_tau2(source: Source) -> tuple[Conversation, ...]:
    doc = obj(source.doc, source.path)
    info = dict_or_empty(doc.get("info"))
    policy = str_or_none(mapping_get(info, "environment_info", "policy"))
    tools = tool_defs(mapping_get(info, "environment_info", "tool_defs"))
    run_meta = compact_meta(
        model=str_or_none(mapping_get(info, "agent_info", "llm")),
        user_model=str_or_none(mapping_get(info, "user_info", "llm")),
        domain=str_or_none(mapping_get(info, "environment_info", "domain_name")),
    )
    conversations = []
    for index, raw in enumerate(arr(doc.get("simulations"), f"{source.path}: simulations")):
        where = f"{source.path}: simulations.{index}"
        simulation = obj(raw, where)
        # The agent's system prompt is built from the domain policy; the policy is what the file keeps.
        system = text_parts(str_or_none(simulation.get("policy")) or policy)
        messages, user_calls = _tau2_messages(arr(simulation.get("messages"), f"{where}.messages"), where)
        meta = compact_meta(
            **run_meta,
            simulation_id=str_or_none(simulation.get("id")),
            reward=mapping_get(simulation, "reward_info", "reward"),
            termination_reason=str_or_none(simulation.get("termination_reason")),
            user_tool_calls=user_calls or None,
        )
        conversations.append(
            Conversation(
                id=_conversation_id(simulation.get("task_id"), simulation.get("trial")),
                source=TAU2,
                messages=messages,
                system=system,
                tools=tools,
                meta=frozen_mapping(meta),
            )
        )
    return tuple(conversations)


def _tau2_messages(raw_messages: list[Any], where: str) -> tuple[tuple[Message, ...], int]:
    """The neutral messages of one simulation, and how many tool calls the simulated user made."""
    out: list[Message] = []
    names = CallNames()
    # Whose call each id is: the latest call with an id decides, as ids are reused.
    by_user: dict[str, bool] = {}
    user_calls = 0
    for place, raw in _flat(raw_messages):
        message = obj(raw, f"{where}.messages.{place}")
        role = message.get("role")
        content = text_parts(message.get("content"))
        raw_calls = [dict_or_empty(c) for c in message.get("tool_calls") or []]
        if role == "tool":
            call_id = str_or_none(message.get("id"))
            requestor = message.get("requestor")
            if requestor == "user" or (requestor is None and by_user.get(call_id or "", False)):
                _user_side(out, [Text(_user_result_text(message, names.name(call_id)))])
                continue
            result = ToolResult(
                call_id,
                _result_text(message),
                is_error=message.get("error") is True,
                name=names.name(call_id),
            )
            out.append(Message("tool", (result,)))
        elif role == "assistant":
            calls = [names.add(_tau2_call(c)) for c in raw_calls]
            by_user.update((c.id, False) for c in calls if c.id is not None)
            if content or calls:
                out.append(Message("assistant", (*content, *calls)))
        elif role == "user":
            _user_side(out, content)
            for raw_call in raw_calls:
                call = names.add(_tau2_call(raw_call))
                if call.id is not None:
                    by_user[call.id] = True
                _user_side(out, [Text(_user_call_text(call))])
                user_calls += 1
        elif role == "system" and content:
            out.append(Message("system", content))
    return tuple(out), user_calls


def _flat(raw_messages: list[Any]) -> list[tuple[str, Any]]:
    """``(place, message)``, with each multi-tool message (``tool_messages``) replaced by its results."""
    out: list[tuple[str, Any]] = []
    for index, raw in enumerate(raw_messages):
        inner = raw.get("tool_messages") if isinstance(raw, dict) else None
        if isinstance(inner, list):
            out.extend((f"{index}.tool_messages.{n}", message) for n, message in enumerate(inner))
        else:
            out.append((str(index), raw))
    return out


def _user_side(out: list[Message], parts: Iterable[Part]) -> None:
    """Add what the simulated user said or did to the user's turn.

    Everything the user side does between two agent messages (speak, call their
    tools, read the results) is one turn: the user message just before, or a new
    one when the agent spoke last.
    """
    parts = tuple(parts)
    if not parts:
        return
    if out and out[-1].role == "user":
        out[-1] = Message("user", (*out[-1].parts, *parts))
    else:
        out.append(Message("user", parts))


def _user_call_text(call: ToolCall) -> str:
    arguments = call.arguments_json if call.arguments_json is not None else dumps(call.arguments).decode()
    return f"[user tool call] {call.name} {arguments}"


def _user_result_text(message: dict[str, Any], name: str | None) -> str:
    content = message.get("content")
    label = "user tool error" if message.get("error") is True else "user tool result"
    return f"[{label}] {name or 'tool'}: {content if isinstance(content, str) else ''}"


def _tau2_call(call: dict[str, Any]) -> ToolCall:
    arguments, arguments_json, ok = parse_arguments(call.get("arguments"))
    return ToolCall(str_or_none(call.get("id")), str(call.get("name", "")), arguments, arguments_json, ok)
