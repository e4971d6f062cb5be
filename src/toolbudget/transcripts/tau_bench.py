"""tau-bench and tau2-bench results: many simulated customer-service conversations per file.

tau-bench stores OpenAI Chat Completions messages (arguments as JSON strings);
tau2 its own messages (arguments as objects, results keyed by the call's id,
and an ``error`` flag). Both reuse call ids across turns of one conversation,
so a result is matched to the latest call with its id.
"""

from __future__ import annotations

from typing import Any

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
        meta = compact_meta(
            **run_meta,
            simulation_id=str_or_none(simulation.get("id")),
            reward=mapping_get(simulation, "reward_info", "reward"),
            termination_reason=str_or_none(simulation.get("termination_reason")),
        )
        conversations.append(
            Conversation(
                id=_conversation_id(simulation.get("task_id"), simulation.get("trial")),
                source=TAU2,
                messages=_tau2_messages(arr(simulation.get("messages"), f"{where}.messages"), where),
                system=system,
                tools=tools,
                meta=frozen_mapping(meta),
            )
        )
    return tuple(conversations)


def _tau2_messages(raw_messages: list[Any], where: str) -> tuple[Message, ...]:
    out: list[Message] = []
    names = CallNames()
    for index, raw in enumerate(raw_messages):
        message = obj(raw, f"{where}.messages.{index}")
        role = message.get("role")
        content = text_parts(message.get("content"))
        calls = [names.add(_tau2_call(dict_or_empty(c))) for c in message.get("tool_calls") or []]
        if role == "tool":
            call_id = str_or_none(message.get("id"))
            result = ToolResult(
                call_id,
                _result_text(message),
                is_error=message.get("error") is True,
                name=names.name(call_id),
                extra=_requestor(message),
            )
            out.append(Message("tool", (result,)))
        elif role == "assistant" and (content or calls):
            out.append(Message("assistant", (*content, *calls)))
        elif role == "user":
            if content:
                out.append(Message("user", content))
            if calls:
                # The simulated user's own tool calls (telecom domain, requestor "user").
                # They run and return results like the agent's, so they are laid out as
                # assistant calls: every result then answers a call in the message
                # before it, and call/result pairing needs no second rule.
                out.append(Message("assistant", tuple(calls)))
        elif role == "system" and content:
            out.append(Message("system", content))
    return tuple(out)


def _tau2_call(call: dict[str, Any]) -> ToolCall:
    arguments, arguments_json, ok = parse_arguments(call.get("arguments"))
    return ToolCall(
        str_or_none(call.get("id")),
        str(call.get("name", "")),
        arguments,
        arguments_json,
        ok,
        extra=_requestor(call),
    )


def _requestor(value: dict[str, Any]) -> Any:
    """``{"requestor": ...}`` when it is the simulated user, the one fact a neutral call cannot say."""
    requestor = value.get("requestor")
    return frozen_mapping({"requestor": requestor} if requestor == "user" else None)
