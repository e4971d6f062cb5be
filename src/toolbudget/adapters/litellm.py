"""toolbudget for LiteLLM (``pip install 'toolbudget[litellm]'``): its proxy, and its SDK.

**The proxy.** ``ToolbudgetLogger`` is a ``CustomLogger`` whose
``async_pre_call_hook`` manages each request before LiteLLM routes it:
repair, budgets and compaction on ``/chat/completions`` (openai-chat),
``/v1/messages`` (anthropic) and ``/v1/responses`` (openai-responses); other
routes pass unchanged. In ``config.yaml``::

    litellm_settings:
      callbacks: toolbudget_callbacks.handler   # a file with: handler = ToolbudgetLogger()

A pre-call hook runs once, before the call, and cannot send the request
again, so a context overflow is LiteLLM's to handle there
(``context_window_fallbacks``). The proxy's clients run their own tools, so
the recall tool is not added unless ``recall=True`` (for clients that answer
it, e.g. through toolbudget's MCP server); without it markers give the
archived file's path and the key.

**The SDK.** :func:`acompletion` and :func:`completion` are
``litellm.acompletion`` / ``litellm.completion`` as one managed call: managed,
sent, and sent again smaller when the provider refuses it as too long.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..callreport import CallReport
from ..flow import ManagedCall, Outcome, adrive, drive, opaque
from ..recall import recall_tool
from ..sdkdata import plain
from ..session import Session
from ..sessions import Sessions
from ._common import missing_extra

try:
    import litellm
    from litellm.integrations.custom_logger import CustomLogger
except ImportError as error:
    raise missing_extra("litellm", "litellm", error) from error

__all__ = ["ROUTES", "ToolbudgetLogger", "acompletion", "completion"]

ROUTES: dict[str, tuple[str, str]] = {
    "completion": ("openai-chat", "messages"),
    "acompletion": ("openai-chat", "messages"),
    "anthropic_messages": ("anthropic", "messages"),
    "responses": ("openai-responses", "input"),
    "aresponses": ("openai-responses", "input"),
}
"""LiteLLM call types managed, with their wire API and the field that holds the history."""

FIELDS: dict[str, tuple[str, ...]] = {
    "openai-chat": ("model", "messages", "tools", "max_tokens", "max_completion_tokens"),
    "anthropic": ("model", "system", "messages", "tools", "max_tokens"),
    "openai-responses": ("model", "instructions", "input", "tools", "max_output_tokens"),
}
"""The fields of LiteLLM's request data that make the wire body; everything else is LiteLLM's own."""


def _headers(data: Mapping[str, Any]) -> Mapping[str, str] | None:
    request = data.get("proxy_server_request")
    headers = request.get("headers") if isinstance(request, Mapping) else None
    return headers if isinstance(headers, Mapping) else None


class ToolbudgetLogger(CustomLogger):
    """A LiteLLM callback that manages every chat, messages and responses request before it is routed.

    ``session`` is one :class:`~toolbudget.Session` for all traffic, or a
    :class:`~toolbudget.Sessions` pool (the default, on the policy's store),
    which finds each request's session from its headers or its conversation
    (see :meth:`Sessions.for_request <toolbudget.Sessions.for_request>`).
    ``on_report`` is given each managed request's report.
    """

    def __init__(
        self,
        session: Session | Sessions | None = None,
        *,
        recall: bool = False,
        on_report: Callable[[Any], None] | None = None,
    ) -> None:
        super().__init__()
        self.source = session if session is not None else Sessions()
        self.recall = recall
        self.on_report = on_report

    def manage(self, data: Mapping[str, Any], call_type: str) -> dict[str, Any] | None:
        """``data`` with its history managed, as a new dict; ``None`` when there is nothing to change."""
        route = ROUTES.get(str(call_type))
        if route is None:
            return None
        api, field = route
        if not isinstance(data.get(field), list):
            return None  # a bare prompt string has no history
        body = {name: data[name] for name in FIELDS[api] if name in data}
        if self.recall:
            tool = recall_tool(api)
            tools = list(body.get("tools") or ())
            if tool not in tools:
                body["tools"] = [*tools, tool]
        if isinstance(self.source, Sessions):
            session = self.source.for_request(body, api=api, headers=_headers(data))
        else:
            session = self.source
        managed = session.manage(body, api)
        if self.on_report is not None:
            self.on_report(managed.report)
        if managed.body is body and not self.recall:
            return None
        return {**data, **{name: managed.body[name] for name in FIELDS[api] if name in managed.body}}

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        return self.manage(data, call_type)


def _is_json(value: Any) -> bool:
    """Whether ``value`` is JSON data already (dicts, lists, strings, numbers, booleans, ``None``)."""
    if isinstance(value, str | int | float | bool) or value is None:
        return True
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    if isinstance(value, list):
        return all(map(_is_json, value))
    return False


def _split(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The wire body among LiteLLM's arguments, and the rest (provider, keys, retries) as given.

    LiteLLM takes its own answers back in the history (``messages.append(response.choices[0]
    .message)``, as its docs do): such a message, or one holding SDK objects, is laid out as the
    JSON LiteLLM would send for it; a message that is JSON already stays the caller's object.
    """
    body = {name: value for name, value in kwargs.items() if name in FIELDS["openai-chat"]}
    for name in ("messages", "tools"):
        items = body.get(name)
        if isinstance(items, list | tuple) and not all(map(_is_json, items)):
            body[name] = [item if _is_json(item) else _plain(item) for item in items]
    return body, {name: value for name, value in kwargs.items() if name not in body}


def _plain(item: Any) -> Any:
    """``item`` as JSON, with the fields LiteLLM leaves out when they are ``None`` left out."""
    data = plain(item)
    if isinstance(data, dict):
        return {k: v for k, v in data.items() if v is not None or k == "content"}
    return data


def _answer(outcome: Outcome, on_report: Callable[[CallReport], None] | None) -> Any:
    if on_report is not None:
        on_report(outcome.report)
    return outcome.first


def completion(
    session: Session, *, on_report: Callable[[CallReport], None] | None = None, **kwargs: Any
) -> Any:
    """``litellm.completion(**kwargs)``, managed and recovered from context overflow.

    ``on_report`` is given the call's :class:`~toolbudget.CallReport`.
    """
    body, rest = _split(kwargs)
    call = ManagedCall(session, body, "openai-chat", read=opaque)
    return _answer(drive(call, lambda managed: litellm.completion(**managed, **rest)), on_report)


async def acompletion(
    session: Session, *, on_report: Callable[[CallReport], None] | None = None, **kwargs: Any
) -> Any:
    """``litellm.acompletion(**kwargs)``, managed and recovered from context overflow."""
    body, rest = _split(kwargs)
    call = ManagedCall(session, body, "openai-chat", read=opaque)

    async def send(managed: Mapping[str, Any]) -> Any:
        return await litellm.acompletion(**managed, **rest)

    return _answer(await adrive(call, send), on_report)
