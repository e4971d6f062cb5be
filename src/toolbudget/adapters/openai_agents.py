"""toolbudget for the OpenAI Agents SDK (``pip install 'toolbudget[openai-agents]'``).

The SDK's history is already Responses-shaped (``TResponseInputItem`` dicts),
so nothing is converted: the core manages ``{"input": items, "instructions":
...}`` as an ``openai-responses`` body, and untouched items come back as the
very objects given (the SDK tracks pending input by identity).

- :meth:`Toolbudget.input_filter` is a ``RunConfig.call_model_input_filter``:
  repair, budgets and compaction on each call's input. A filter runs before
  the model and never sees its errors, so
- :meth:`Toolbudget.model` wraps the agent's ``Model``: each call (streamed
  too, before its first event) is the core's managed call, and a context
  overflow is recovered with a smaller input;
- :meth:`Toolbudget.tool` wraps a ``FunctionTool`` so its result is cut where
  it is made, and :meth:`Toolbudget.recall_tool` is the recall tool as a
  ``FunctionTool``.

Managing twice (the filter, then the model) changes nothing the second time:
a managed body is its own managed form.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from ..callreport import CallReport
from ..flow import ManagedCall, Outcome, adrive, opaque
from ..marker import RECALL_TOOL
from ..recall import RECALL_DESCRIPTION, RECALL_PARAMETERS
from ..session import Session
from ._common import missing_extra

try:
    from agents import FunctionTool, Model, ModelResponse, RunConfig, Tool
    from agents.models.multi_provider import MultiProvider
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool_context import ToolContext
except ImportError as error:
    raise missing_extra("openai_agents", "openai-agents", error) from error

__all__ = ["Toolbudget", "ToolbudgetModel"]

API = "openai-responses"


def _tool_defs(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """Function tools as Responses tool definitions: what the request defines, the recall tool included."""
    return [
        {"type": "function", "name": t.name, "parameters": t.params_json_schema}
        for t in tools
        if isinstance(t, FunctionTool)
    ]


def _body(instructions: str | None, items: str | list[Any], tools: Sequence[Any]) -> dict[str, Any]:
    listed = [{"role": "user", "content": items}] if isinstance(items, str) else list(items)
    body: dict[str, Any] = {"input": listed}
    if instructions is not None:
        body["instructions"] = instructions
    defs = _tool_defs(tools)
    if defs:
        body["tools"] = defs
    return body


class Toolbudget:
    """One conversation's toolbudget for the Agents SDK: a filter, a model wrapper and tool wrappers.

    ``session`` is the conversation's :class:`~toolbudget.Session` (from a
    :class:`~toolbudget.Sessions` pool: ``pool.get(conversation_id)``).
    ``recall=False`` makes markers name the archived file instead of the
    recall tool. ``on_report`` is given each model call's
    :class:`~toolbudget.CallReport` (from :meth:`model`).
    """

    def __init__(
        self,
        session: Session,
        *,
        recall: bool = True,
        on_report: Callable[[CallReport], None] | None = None,
    ) -> None:
        self.session = session
        self.recall = recall
        self.on_report = on_report

    # --- the history, before each call ---------------------------------------------------

    def input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``RunConfig(call_model_input_filter=...)``: the call's input, managed."""
        given = data.model_data
        body = _body(given.instructions, given.input, getattr(data.agent, "tools", ()))
        managed = self.session.manage(body, API).body
        if managed is body:
            return given
        return ModelInputData(input=managed["input"], instructions=managed.get("instructions"))

    def run_config(self, **options: Any) -> RunConfig:
        """A ``RunConfig`` with :meth:`input_filter` and ``options``."""
        return RunConfig(call_model_input_filter=self.input_filter, **options)

    def model(self, model: Model | str) -> ToolbudgetModel:
        """``model`` with every call managed and recovered from context overflow.

        A model name (``"gpt-5-mini"``, what ``Agent(model=...)`` takes too) is resolved the way
        the SDK resolves an agent's model name by default (``MultiProvider``).
        """
        if isinstance(model, str):
            model = MultiProvider().get_model(model)
        return ToolbudgetModel(model, self)

    # --- tools ---------------------------------------------------------------------------

    def tool(self, tool: FunctionTool) -> FunctionTool:
        """``tool`` whose text results are cut where they are made (the original goes to the store)."""
        invoke = tool.on_invoke_tool
        route = RECALL_TOOL if self.recall else None

        async def cut(context: ToolContext[Any], arguments: str) -> Any:
            result = await invoke(context, arguments)
            if not isinstance(result, str):
                return result
            return self.session.cut_result(tool.name, result, call_id=context.tool_call_id, recall_tool=route)

        return dataclasses.replace(tool, on_invoke_tool=cut)

    def tools(self, tools: Sequence[Tool]) -> list[Tool]:
        """Each function tool wrapped by :meth:`tool`, the others as given, and the recall tool."""
        wrapped = [self.tool(t) if isinstance(t, FunctionTool) else t for t in tools]
        return [*wrapped, self.recall_tool()] if self.recall else wrapped

    def recall_tool(self) -> FunctionTool:
        """The recall tool; its arguments go to :meth:`Session.handle_recall` as the model wrote them."""

        async def recall(context: ToolContext[Any], arguments: str) -> str:
            return self.session.handle_recall(arguments)

        return FunctionTool(
            name=RECALL_TOOL,
            description=RECALL_DESCRIPTION,
            params_json_schema=RECALL_PARAMETERS,
            on_invoke_tool=recall,
            strict_json_schema=False,
        )

    def _answer(self, outcome: Outcome) -> Any:
        if self.on_report is not None:
            self.on_report(outcome.report)
        return outcome.first


class ToolbudgetModel(Model):
    """A ``Model`` whose every call runs the core's managed call around the wrapped model's."""

    def __init__(self, inner: Model, owner: Toolbudget) -> None:
        self.inner = inner
        self.owner = owner

    async def close(self) -> None:
        await self.inner.close()

    def get_retry_advice(self, request: Any) -> Any:
        return self.inner.get_retry_advice(request)

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Tool],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        call = ManagedCall(self.owner.session, _body(system_instructions, input, tools), API, read=opaque)

        async def send(body: Mapping[str, Any]) -> ModelResponse:
            return await self.inner.get_response(
                body.get("instructions"),
                body["input"],
                model_settings,
                tools,
                output_schema,
                handoffs,
                tracing,
                previous_response_id=previous_response_id,
                conversation_id=conversation_id,
                prompt=prompt,
            )

        response: ModelResponse = self.owner._answer(await adrive(call, send))
        return response

    async def stream_response(  # an async generator, as the SDK's own models
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Tool],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> AsyncIterator[Any]:
        call = ManagedCall(
            self.owner.session, _body(system_instructions, input, tools), API, read=opaque, stream=True
        )

        async def send(body: Mapping[str, Any]) -> tuple[Any, AsyncIterator[Any]]:
            # An overflow is refused when the stream opens: recovery happens before the first event.
            events = self.inner.stream_response(
                body.get("instructions"),
                body["input"],
                model_settings,
                tools,
                output_schema,
                handoffs,
                tracing,
                previous_response_id=previous_response_id,
                conversation_id=conversation_id,
                prompt=prompt,
            )
            return await anext(events), events

        first, events = self.owner._answer(await adrive(call, send))
        yield first
        async for event in events:
            yield event
