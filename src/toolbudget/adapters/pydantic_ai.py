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
import operator
from collections.abc import Callable, Sequence
from itertools import groupby
from typing import Any

from ..budget import result_text
from ..callreport import CallReport
from ..flow import ManagedCall, Steps, opaque
from ..marker import RECALL_TOOL
from ..model import Message, Request, Text
from ..recall import RECALL_DESCRIPTION, RECALL_PARAMETERS
from ..session import Session
from ._common import SessionSource, arguments_of, missing_extra, session_for

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


def _wire(messages: Sequence[ModelMessage]) -> tuple[list[dict[str, Any]], list[Piece]]:
    """The history as openai-chat messages, and the part (or response) each came from."""
    pieces: list[Piece] = []
    for index, message in enumerate(messages):
        whole = isinstance(message, ModelResponse)
        pieces += [(index, message)] if whole else [(index, part) for part in message.parts]
    wire = [_wire_response(o) if isinstance(o, ModelResponse) else _wire_part(o) for _, o in pieces]
    return wire, pieces


def _guessed(given: Request, sent: Request) -> list[int | None]:
    """Origins for a body of the recovery ladder, which does not trace them: a message it kept is
    the given object, a result it cut is the given result of its call id, anything else is new."""
    kept = {id(m): k for k, m in enumerate(given.messages)}
    calls = {p.call_id: k for k, m in enumerate(given.messages) for p in m.tool_results()}
    out: list[int | None] = []
    for message in sent.messages:
        result = next(message.tool_results(), None)
        out.append(kept.get(id(message), calls.get(result.call_id) if result else None))
    return out


@dataclasses.dataclass
class _Flow:
    """One model request step's managed call, alive across its attempts, and the way back from
    the requests it sends to pydantic-ai's messages.

    ``pieces`` are the given parts and responses, one for each message of the
    request laid out from them, so an origin (:attr:`toolbudget.Managed.origins`)
    names the object a managed message came from: untouched, that very
    object; changed, a copy with the new content (keeping what no wire
    message carries: model name, timestamps, provider details); made by
    toolbudget, a new one.
    """

    call: ManagedCall
    steps: Steps
    given: Sequence[ModelMessage]
    pieces: list[Piece]
    pending: list[ModelMessage] | None = None

    def messages(self) -> list[ModelMessage]:
        """The pydantic-ai messages of the request the flow sends now."""
        climb = self.call.climb
        assert climb is not None  # the flow has started
        origins: Sequence[int | None]
        if climb.attempts:
            sent, origins = climb.sent, _guessed(climb.original, climb.sent)
        else:
            sent, origins = climb.managed.request, climb.managed.origins
        pieces = [
            self._piece(m, o, o is not None and m is climb.original.messages[o])
            for m, o in zip(sent.messages, origins, strict=True)
        ]
        out: list[ModelMessage] = []
        # Parts in a row that came from one given request are that request again.
        for (index, whole), run in groupby(pieces, lambda p: (p[0], isinstance(p[1], ModelResponse))):
            parts = [obj for _, obj in run]
            source = self.given[index] if index is not None else None
            if whole:
                out.extend(parts)
            elif not isinstance(source, ModelRequest):
                out.append(ModelRequest(parts=parts))
            elif len(parts) == len(source.parts) and all(map(operator.is_, parts, source.parts)):
                out.append(source)
            else:
                out.append(dataclasses.replace(source, parts=parts))
        return out

    def _piece(self, message: Message, origin: int | None, untouched: bool) -> Piece:
        index, base = self.pieces[origin] if origin is not None else (None, None)
        if untouched:
            return index, base
        texts = [p.text for p in message.parts if isinstance(p, Text)]
        if message.role == "assistant":
            parts: list[Any] = [TextPart(text) for text in texts]
            parts += [ToolCallPart(c.name, c.arguments, c.id or "") for c in message.tool_calls()]
            if isinstance(base, ModelResponse):
                return index, dataclasses.replace(base, parts=parts)
            return None, ModelResponse(parts=parts)
        result = next(message.tool_results(), None)
        if result is not None:
            text = result_text(result) or ""
            if isinstance(base, ToolReturnPart | RetryPromptPart):
                return index, dataclasses.replace(base, content=text)
            return None, ToolReturnPart(result.name or "unknown", text, result.call_id or "")
        return index, (SystemPromptPart if message.role == "system" else UserPromptPart)("".join(texts))


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

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        messages = list(request_context.messages)
        wire, pieces = _wire(messages)
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
        flow = self._flows[ctx.run_id] = _Flow(call, call.steps(), messages, pieces)
        next(flow.steps)
        request_context.messages = flow.messages()
        return request_context

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        flow = self._flows.get(ctx.run_id)
        if flow is not None and flow.pending is not None:
            request_context.messages, flow.pending = flow.pending, None
        return request_context

    async def on_model_request_error(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, error: Exception
    ) -> ModelResponse:
        flow = self._flows.get(ctx.run_id)
        if flow is None:
            raise error
        try:
            flow.steps.throw(error)  # the next, smaller body, or the error itself raised
            flow.pending = flow.messages()
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
