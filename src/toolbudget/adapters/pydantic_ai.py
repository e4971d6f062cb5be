"""toolbudget as a pydantic-ai 2.x capability (``pip install 'toolbudget[pydantic-ai]'``).

``Agent(model, capabilities=[Toolbudget(session)])``:

- ``after_tool_execute`` cuts each fresh result where the tool returns it, so
  the run's history holds the preview and marker, and the original is in the
  store;
- ``before_model_request`` lays the request's messages out as an openai-chat
  body (one wire message per request part, one per response), starts the
  core's managed call over it and gives the model the managed messages;
- ``on_model_request_error`` hands the model's error to that call: an
  overflow climbs the recovery ladder and asks pydantic-ai for another attempt
  (``RetryModelRequest``), whose ``prepare_model_request`` sends the smaller
  history; any other error is raised as it came;
- ``after_model_request`` ends the call and reports it;
- ``get_toolset`` offers the recall tool.

Instructions are pydantic-ai's own (``instruction_parts``) and are neither
counted nor changed. With a :class:`~toolbudget.Sessions` pool each
conversation (``RunContext.conversation_id``) has its session.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..callreport import CallReport
from ..flow import ManagedCall, Steps, opaque
from ..marker import RECALL_TOOL
from ..recall import RECALL_DESCRIPTION, RECALL_PARAMETERS
from ..session import Session
from ._common import SessionSource, arguments_of, map_back, missing_extra, session_for

try:
    from pydantic_ai import RunContext, Tool
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import RetryModelRequest
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.toolsets import FunctionToolset
    from pydantic_core import to_json
except ImportError as error:
    raise missing_extra("pydantic_ai", "pydantic-ai", error) from error

__all__ = ["Toolbudget"]

API = "openai-chat"

Piece = tuple[int | None, Any]
"""A request part or a whole response, with the index of the message it came from (``None``: made anew)."""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(item for item in content if isinstance(item, str))
    return str(content)


def _call(part: ToolCallPart) -> dict[str, Any]:
    name = {"name": part.tool_name, "arguments": part.args_as_json_str()}
    return {"id": part.tool_call_id, "type": "function", "function": name}


def _wire_part(part: Any) -> dict[str, Any]:
    """One request part as an openai-chat message."""
    if isinstance(part, SystemPromptPart):
        return {"role": "system", "content": part.content}
    if isinstance(part, ToolReturnPart):
        return {"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response_str()}
    if isinstance(part, RetryPromptPart) and part.tool_name is not None:
        return {"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response()}
    if isinstance(part, RetryPromptPart):
        return {"role": "user", "content": part.model_response()}
    return {"role": "user", "content": _text(getattr(part, "content", ""))}


def _wire_response(message: ModelResponse) -> dict[str, Any]:
    text = "".join(part.content for part in message.parts if isinstance(part, TextPart))
    out: dict[str, Any] = {"role": "assistant", "content": text or None}
    calls = [_call(part) for part in message.parts if isinstance(part, ToolCallPart)]
    if calls:
        out["tool_calls"] = calls
    return out


def _wire(
    messages: Sequence[ModelMessage],
) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], Piece]]]:
    """The history as openai-chat messages, each paired with the part (or response) it came from."""
    pairs: list[tuple[dict[str, Any], Piece]] = []
    for index, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            pairs.append((_wire_response(message), (index, message)))
        else:
            pairs.extend((_wire_part(part), (index, part)) for part in message.parts)
    return [wire for wire, _ in pairs], pairs


class _Back:
    """Turns a managed body's messages into pydantic-ai messages, reusing every untouched object."""

    def __init__(self, messages: Sequence[ModelMessage], pairs: list[tuple[dict[str, Any], Piece]]) -> None:
        self.messages = messages
        self.pairs = pairs
        self.names = {
            part.tool_call_id: part.tool_name
            for message in messages
            if isinstance(message, ModelResponse)
            for part in message.parts
            if isinstance(part, ToolCallPart)
        }

    def rebuild(self, wire: Mapping[str, Any], original: Piece | None) -> Piece:
        role, text = wire.get("role"), _text(wire.get("content") or "")
        if role == "tool":
            call_id = str(wire.get("tool_call_id"))
            if original is not None and isinstance(original[1], ToolReturnPart | RetryPromptPart):
                return original[0], dataclasses.replace(original[1], content=text)
            return None, ToolReturnPart(self.names.get(call_id, "unknown"), text, call_id)
        if role == "system":
            return None, SystemPromptPart(text)
        if role == "assistant":
            parts: list[Any] = [TextPart(text)] if text else []
            for call in wire.get("tool_calls") or ():
                function = call["function"]
                parts.append(ToolCallPart(function["name"], function["arguments"], call["id"]))
            return None, ModelResponse(parts=parts)
        return None, UserPromptPart(text)

    def messages_of(self, body: Mapping[str, Any]) -> list[ModelMessage]:
        pieces = map_back(self.pairs, body["messages"], self.rebuild)
        out: list[ModelMessage] = []
        group: list[Any] = []
        origin: int | None = None

        def flush() -> None:
            if not group:
                return
            source = self.messages[origin] if origin is not None else None
            if (
                source is not None
                and list(source.parts) == group
                and all(a is b for a, b in zip(source.parts, group, strict=True))
            ):
                out.append(source)
            elif isinstance(source, ModelRequest):
                out.append(dataclasses.replace(source, parts=list(group)))
            else:
                out.append(ModelRequest(parts=list(group)))
            group.clear()

        for index, obj in pieces:
            if isinstance(obj, ModelResponse):
                flush()
                out.append(obj)
                continue
            if index != origin:
                flush()
                origin = index
            group.append(obj)
        flush()
        return out


@dataclasses.dataclass
class _Flow:
    """One model request step's managed call, alive across its attempts."""

    steps: Steps
    back: _Back
    pending: Mapping[str, Any] | None = None


@dataclasses.dataclass
class Toolbudget(AbstractCapability[Any]):
    """Cuts tool results at the source, manages every model request, and offers the recall tool.

    ``session`` is one :class:`~toolbudget.Session`, or a
    :class:`~toolbudget.Sessions` pool (one session per conversation id).
    ``recall=False`` leaves the recall tool out; markers then name the
    archived file. ``on_report`` is given each request's
    :class:`~toolbudget.CallReport`.
    """

    session: SessionSource
    recall: bool = True
    on_report: Callable[[CallReport], None] | None = None
    _flows: dict[str | None, _Flow] = dataclasses.field(default_factory=dict, repr=False)

    def session_of(self, ctx: RunContext[Any]) -> Session:
        """The session of the conversation ``ctx`` belongs to."""
        return session_for(self.session, ctx.conversation_id)

    # --- the recall tool ---------------------------------------------------------------

    def get_toolset(self) -> FunctionToolset[Any] | None:
        if not self.recall:
            return None

        def recall(
            ctx: RunContext[Any],
            key: str,
            lines: str | None = None,
            grep: str | None = None,
            chars: str | None = None,
        ) -> str:
            arguments = arguments_of(key=key, lines=lines, grep=grep, chars=chars)
            return self.session_of(ctx).handle_recall(arguments)

        tool = Tool.from_schema(recall, RECALL_TOOL, RECALL_DESCRIPTION, RECALL_PARAMETERS, takes_ctx=True)
        return FunctionToolset([tool])

    # --- tool results, cut where they are made ---------------------------------------

    async def after_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any, result: Any
    ) -> Any:
        text = result if isinstance(result, str) else to_json(result).decode()
        cut = self.session_of(ctx).cut_result(
            call.tool_name,
            text,
            call_id=call.tool_call_id,
            recall_tool=RECALL_TOOL if self.recall else None,
        )
        return result if cut == text else cut

    # --- model requests, managed and recovered ---------------------------------------

    def _use(self, request_context: ModelRequestContext, back: _Back, body: Mapping[str, Any]) -> None:
        request_context.messages = back.messages_of(body)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        messages = list(request_context.messages)
        wire, pairs = _wire(messages)
        body: dict[str, Any] = {"messages": wire}
        tools = request_context.model_request_parameters.function_tools
        if tools:
            body["tools"] = [
                {"type": "function", "function": {"name": t.name, "parameters": t.parameters_json_schema}}
                for t in tools
            ]
        if request_context.model.model_name:
            body["model"] = request_context.model.model_name
        call = ManagedCall(self.session_of(ctx), body, API, read=opaque)
        flow = self._flows[ctx.run_id] = _Flow(call.steps(), _Back(messages, pairs))
        self._use(request_context, flow.back, next(flow.steps))
        return request_context

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        flow = self._flows.get(ctx.run_id)
        if flow is not None and flow.pending is not None:
            self._use(request_context, flow.back, flow.pending)
            flow.pending = None
        return request_context

    async def on_model_request_error(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, error: Exception
    ) -> ModelResponse:
        flow = self._flows.get(ctx.run_id)
        if flow is None:
            raise error
        try:
            flow.pending = flow.steps.throw(error)  # the next, smaller body, or the error itself raised
        except BaseException:
            self._flows.pop(ctx.run_id, None)
            raise
        raise RetryModelRequest()

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        flow = self._flows.pop(ctx.run_id, None)
        if flow is not None:
            try:
                flow.steps.send(response)
            except StopIteration as done:
                if self.on_report is not None:
                    self.on_report(done.value.report)
        return response
