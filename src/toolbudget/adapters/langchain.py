"""toolbudget as a LangChain 1.x agent middleware (``pip install 'toolbudget[langchain]'``).

``ToolbudgetMiddleware`` plugs into ``create_agent(..., middleware=[...])`` and
into deepagents' ``create_deep_agent(..., middleware=[...])``:

- ``wrap_tool_call`` cuts each fresh result where the tool node makes it, so
  the agent's state (and its checkpoints) hold the preview and marker, and the
  original is in the store;
- ``wrap_model_call`` lays the request out as an openai-chat body (LangChain's
  own ``convert_to_openai_messages``), runs the core's managed call over it
  (repair, turn budget, cache-aware compaction, overflow recovery: the handler
  is called again with a smaller history when the model refuses one as too
  long), and hands the handler the managed messages; untouched messages are
  the request's own objects;
- ``tools`` registers the recall tool, which answers from the run's session.

Put it after ``SummarizationMiddleware`` in the list, so that what gets
summarised is the previews. With a :class:`~toolbudget.Sessions` pool each
LangGraph thread (``config["configurable"]["thread_id"]``) has its session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ._common import missing_extra

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain_core.messages import AnyMessage, BaseMessage, SystemMessage, ToolMessage
    from langchain_core.messages.utils import convert_to_messages, convert_to_openai_messages
    from langchain_core.tools import BaseTool, StructuredTool
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.types import Command
except ImportError as error:
    raise missing_extra("langchain", "langchain", error) from error

from ..callreport import CallReport
from ..flow import ManagedCall, Outcome, adrive, drive, opaque
from ..marker import RECALL_TOOL
from ..recall import RECALL_DESCRIPTION, RECALL_PARAMETERS
from ..session import Session
from ._common import SessionSource, arguments_of, map_back, session_for, text_of

__all__ = ["ToolbudgetMiddleware", "managed_request", "recall_tool"]

API = "openai-chat"


def _thread_id() -> str | None:
    """The LangGraph thread of the running graph, when there is one."""
    from langgraph.config import get_config

    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # outside a graph
        return None
    thread = configurable.get("thread_id")
    return None if thread is None else str(thread)


def recall_tool(session: SessionSource) -> BaseTool:
    """The recall tool as a LangChain tool, answering from the session of the run that calls it."""

    def recall(key: str, lines: str | None = None, grep: str | None = None, chars: str | None = None) -> str:
        chosen = session_for(session, _thread_id())
        return chosen.handle_recall(arguments_of(key=key, lines=lines, grep=grep, chars=chars))

    return StructuredTool.from_function(
        func=recall, name=RECALL_TOOL, description=RECALL_DESCRIPTION, args_schema=RECALL_PARAMETERS
    )


def _rebuild(message: Mapping[str, Any], original: BaseMessage | None) -> BaseMessage:
    if isinstance(original, ToolMessage):
        return original.model_copy(update={"content": message.get("content") or ""})
    return convert_to_messages([dict(message)])[0]


def _wire(request: ModelRequest[Any]) -> tuple[dict[str, Any], list[tuple[dict[str, Any], BaseMessage]]]:
    """The request as an openai-chat body, and each wire message paired with the message it came from."""
    messages: list[BaseMessage] = list(request.messages)
    if request.system_message is not None:
        messages.insert(0, request.system_message)
    wire = [convert_to_openai_messages(message) for message in messages]
    body: dict[str, Any] = {"messages": wire}
    model = getattr(request.model, "model_name", None) or getattr(request.model, "model", None)
    if isinstance(model, str):
        body["model"] = model
    if request.tools:
        # a provider's own tool (a dict such as {"type": "web_search"}) is passed as given
        body["tools"] = [
            tool if isinstance(tool, dict) else convert_to_openai_tool(tool) for tool in request.tools
        ]
    return body, list(zip(wire, messages, strict=True))


def managed_request(
    request: ModelRequest[Any], body: Mapping[str, Any], originals: list[tuple[dict[str, Any], BaseMessage]]
) -> ModelRequest[Any]:
    """``request`` with the messages of a managed ``body`` (the system prompt as its system message)."""
    messages = map_back(originals, body["messages"], _rebuild)
    system: SystemMessage | None = None
    if messages and isinstance(messages[0], SystemMessage):
        system = messages[0]
        messages = messages[1:]
    chat: list[AnyMessage] = list(messages)  # type: ignore[arg-type]  # convert_to_messages makes AnyMessage
    return request.override(messages=chat, system_message=system)


class ToolbudgetMiddleware(AgentMiddleware[Any, Any, Any]):
    """Cuts tool results at the source, manages every model call, and offers the recall tool.

    ``session`` is one :class:`~toolbudget.Session` (every run shares its
    archive and schedule) or a :class:`~toolbudget.Sessions` pool (one
    session per LangGraph thread id). ``recall=False`` leaves the recall tool
    out; markers then name the archived file instead. ``on_report`` is given
    each model call's :class:`~toolbudget.CallReport` (what was cut, which
    recovery level made it fit).
    """

    def __init__(
        self,
        session: SessionSource,
        *,
        recall: bool = True,
        on_report: Callable[[CallReport], None] | None = None,
    ) -> None:
        super().__init__()
        self.source = session
        self.recall = recall
        self.on_report = on_report
        self.tools = [recall_tool(session)] if recall else []

    def session(self) -> Session:
        """The session of the running thread."""
        return session_for(self.source, _thread_id())

    # --- tool results, cut where they are made ---------------------------------------

    def _cut(self, result: ToolMessage | Command[Any]) -> ToolMessage | Command[Any]:
        if not isinstance(result, ToolMessage):
            return result
        text = text_of(result.content)
        if text is None:
            return result
        cut = self.session().cut_result(
            result.name,
            text,
            call_id=result.tool_call_id,
            is_error=result.status == "error",
            recall_tool=RECALL_TOOL if self.recall else None,
        )
        return result if cut == text else result.model_copy(update={"content": cut})

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        return self._cut(handler(request))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        return self._cut(await handler(request))

    # --- model calls, managed and recovered ------------------------------------------

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        body, originals = _wire(request)
        call = ManagedCall(self.session(), body, API, read=opaque)
        outcome = drive(call, lambda managed: handler(managed_request(request, managed, originals)))
        return self._answer(outcome)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        body, originals = _wire(request)
        call = ManagedCall(self.session(), body, API, read=opaque)

        async def send(managed: Mapping[str, Any]) -> ModelResponse[Any]:
            return await handler(managed_request(request, managed, originals))

        return self._answer(await adrive(call, send))

    def _answer(self, outcome: Outcome) -> ModelResponse[Any]:
        if self.on_report is not None:
            self.on_report(outcome.report)
        response: ModelResponse[Any] = outcome.first
        return response
