"""botocore's ``bedrock-runtime`` client (what ``boto3.client("bedrock-runtime")`` makes), managed.

A botocore client's keyword arguments are the Converse request itself
(``modelId``, ``messages``, ``system``, ``inferenceConfig``, ``toolConfig``...)
and its answers are plain dicts, so the edge is thin: the arguments go into
the one managed call as they are, and the answer comes back as the dict
botocore made, merged when the flow lengthened it.

=================================  ==============================================================
``converse``                       managed, recovered from overflow, lengthened after a cut-off
``converse_stream``                managed and recovered before the first event; the events are
                                   watched to report a cut-off, never lengthened
``count_tokens``                   the ``input.converse`` conversation managed, so the count is of
                                   what would be sent
``invoke_model`` (and its stream)  a body with ``messages`` is refused (use ``converse``); any
                                   other body (an embedding, an image) is the SDK's own
the rest                           the SDK's own (``apply_guardrail``, async invokes, ``meta``...)
=================================  ==============================================================

An operation of a newer botocore that this table does not know is refused, so
a conversation never goes out unmanaged by accident. botocore's answers are
dicts, which take no attribute: the :class:`CallReport` reaches the caller
through ``on_report`` (a stream's report is also set on its ``EventStream``).
The follow-ups of a cut-off answer end at botocore's ``ClientError`` or
``BotoCoreError`` with the best answer so far.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from ..errors import UnsupportedClient
from ..marker import RECALL_TOOL
from ..recall import recall_tool
from ..sdkdata import plain
from ._call import Plan, run
from ._proxy import Owned

__all__ = ["BedrockClient", "is_bedrock"]

API = "bedrock-converse"

_OWN = frozenset(
    {
        "apply_guardrail",
        "get_async_invoke",
        "invoke_guardrail_checks",
        "list_async_invokes",
        "start_async_invoke",
    }
)
"""Operations that send no conversation."""

_REFUSED = {
    "invoke_model_with_bidirectional_stream": "a bidirectional stream sends its events past the wrapper; "
    "use converse or converse_stream",
}


def is_bedrock(client: Any) -> bool:
    """Whether ``client`` is a botocore client of the ``bedrock-runtime`` service."""
    meta = getattr(client, "meta", None)
    service = getattr(getattr(meta, "service_model", None), "service_name", None)
    return type(client).__module__.startswith("botocore") and service == "bedrock-runtime"


def _errors() -> tuple[type[BaseException], ...]:
    from botocore.exceptions import BotoCoreError, ClientError

    return (ClientError, BotoCoreError)


def _events(opened: Any) -> Any:
    """The ``EventStream`` of an opened ``converse_stream`` answer."""
    return opened.get("stream") if isinstance(opened, Mapping) else opened


class BedrockClient(Owned):
    """A managed botocore ``bedrock-runtime`` client; every other attribute is the client's own."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name in _REFUSED:  # before botocore is asked: it lists the operation without a method
            raise UnsupportedClient(f"{name} is not managed by toolbudget: {_REFUSED[name]}")
        target = getattr(self._inner, name)
        operations = getattr(getattr(self._inner, "meta", None), "method_to_api_mapping", {})
        if name.startswith("_") or name not in operations or name in _OWN:
            return target
        if name == "converse":
            return self._call("create", target)
        if name == "converse_stream":
            return self._call("stream", target)
        if name == "count_tokens":
            return self._count(target)
        if name in ("invoke_model", "invoke_model_with_response_stream"):
            return _invoke(name, target)
        raise UnsupportedClient(
            f"{name} is not managed by toolbudget (this botocore version added it, or it sends "
            "requests of its own); use converse"
        )

    def _body(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {k: plain(v) for k, v in kwargs.items() if v is not None}
        if self._wrapping.recall:
            body = _with_recall(body)
        return body

    def _call(self, kind: str, target: Callable[..., Any]) -> Callable[..., Any]:
        wrapping = self._wrapping

        def call(**kwargs: Any) -> Any:
            if "messages" not in kwargs:
                return target(**kwargs)  # let botocore say what is missing
            errors = _errors() if kind == "create" else ()
            plan = Plan(wrapping, API, kind, self._body(kwargs), errors=errors, events=_events)
            return run(plan, lambda body: target(**body))

        return call

    def _count(self, target: Callable[..., Any]) -> Callable[..., Any]:
        wrapping = self._wrapping

        def count(**kwargs: Any) -> Any:
            given = kwargs.get("input")
            converse = given.get("converse") if isinstance(given, Mapping) else None
            if (
                not isinstance(given, Mapping)
                or not isinstance(converse, Mapping)
                or "messages" not in converse
            ):
                return _invoke("count_tokens", target)(**kwargs)
            body = {k: plain(v) for k, v in converse.items()}
            body["modelId"] = kwargs.get("modelId")

            def send(managed: Mapping[str, Any]) -> Any:
                inner = {k: v for k, v in managed.items() if k != "modelId"}
                return target(**{**kwargs, "input": {**given, "converse": inner}})

            return run(Plan(wrapping, API, "once", body, timed=False), send)

        return count


def _with_recall(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with the recall tool in ``toolConfig.tools``, unless it is there already."""
    config = body.get("toolConfig")
    config = dict(config) if isinstance(config, Mapping) else {}
    tools = config.get("tools")
    listed = list(tools) if isinstance(tools, list) else []
    named = (t.get("toolSpec", {}).get("name") for t in listed if isinstance(t, Mapping))
    if RECALL_TOOL in named:
        return body
    config["tools"] = [*listed, recall_tool(API)]
    return {**body, "toolConfig": config}


def _invoke(name: str, target: Callable[..., Any]) -> Callable[..., Any]:
    """``invoke_model``: refused when its body holds a conversation, which it would send unmanaged."""

    def invoke(**kwargs: Any) -> Any:
        if _holds_conversation(kwargs):
            raise UnsupportedClient(
                f"{name} with a body that holds messages is not managed by toolbudget: "
                "its body is the model provider's own format; use converse, which toolbudget manages"
            )
        return target(**kwargs)

    return invoke


def _holds_conversation(kwargs: Mapping[str, Any]) -> bool:
    body = kwargs.get("body")
    given = kwargs.get("input")
    if isinstance(given, Mapping) and isinstance(given.get("invokeModel"), Mapping):
        body = given["invokeModel"].get("body")
    if isinstance(body, (bytes, bytearray, str)):
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            return False
        return isinstance(data, dict) and "messages" in data
    return False
