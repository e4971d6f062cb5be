"""Every way a wrapped SDK client offers to send a conversation, each managed or refused.

An SDK reaches one endpoint by many paths: ``client.messages.create``,
``client.beta.messages.create``, ``client.messages.with_raw_response.create``,
``client.with_raw_response.messages.create``, their ``with_streaming_response``
twins, ``stream`` helpers, ``parse``, token counting, and the same on the async
client. Each path ends in one :class:`Resource`, the wrapped SDK resource in a
*mode* (plain, raw response, streaming response), which looks each method up
in its :class:`Spec`:

``create``
    plain: managed, recovered from overflow and lengthened after a cut-off
    (with ``stream=True``: recovered before the first event). Through
    ``with_raw_response`` it returns the SDK's raw response, managed and
    recovered but not lengthened (its bytes are the caller's to read); through
    ``with_streaming_response`` the context manager sends the request on
    ``__enter__``, managed and recovered there.
``stream``
    the SDK's stream helper (``messages.stream``, ``chat.completions.stream``,
    ``responses.stream``), sent on ``__enter__``, managed and recovered there.
``once``
    ``parse``, token counting, ``responses.compact``: managed and recovered,
    not lengthened (the SDK parses the answer into the caller's own types).
``pass``
    sends no conversation (``retrieve``, ``list``, ``delete``...): the SDK's own.

A refused method, and any public method the spec does not know (a newer SDK's),
raises :class:`~toolbudget.errors.UnsupportedClient` naming it: a request never
goes out unmanaged by accident.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Union

from ..errors import UnsupportedClient
from ..marker import RECALL_TOOL
from ..recall import recall_tool
from ._body import SDK_OPTIONS, CallArgs, split
from ._call import Plan, Wrapping, arun, run
from ._proxy import Proxy

__all__ = ["MODES", "Namespace", "Resource", "Spec", "Tree", "is_async"]

MODES = ("with_raw_response", "with_streaming_response")
"""The SDKs' views of a resource whose methods return the HTTP response instead of the parsed answer."""

_MANAGED = frozenset({"create", "stream", "once"})
COUNTS = frozenset({"count_tokens", "count"})
"""Methods that count a request's tokens (``messages.count_tokens``, ``responses.input_tokens.count``):
managed like a call, but no arrival, since a count neither reads nor refreshes the prompt cache."""


@dataclass(frozen=True, slots=True)
class Spec:
    """One SDK resource that sends conversations: what each of its methods is."""

    api: str
    history: str
    """The keyword argument that holds the conversation (``messages``, ``input``)."""
    sdk: str
    """The SDK's module, whose ``APIError`` ends the follow-ups of a call."""
    methods: Mapping[str, str]
    """Method name to ``create``, ``stream``, ``once`` or ``pass``."""
    refused: Mapping[str, str] = field(default_factory=dict)
    """Method name to why it is refused and what to call instead."""
    subs: Mapping[str, Spec] = field(default_factory=dict)
    """Sub-resources that send conversations too (``batches``, ``input_tokens``)."""
    options: frozenset[str] = SDK_OPTIONS
    """Keyword arguments that are the SDK's own, never body fields."""
    cap: Callable[[CallArgs], int | None] | None = None
    """A lower output cap for a non-streaming ``create`` than the model's, where the SDK refuses more."""


Tree = Mapping[str, Union[Spec, "Tree"]]
"""A namespace: attribute name to a resource's spec, or to a nested namespace."""


def is_async(obj: Any) -> bool:
    return any(cls.__name__.startswith("Async") for cls in type(obj).__mro__)


def takes_tools(method: Callable[..., Any]) -> bool:
    """Whether an SDK method has a ``tools`` argument (``responses.compact`` and ``decisions`` do not)."""
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    return "tools" in parameters


def _tool_name(tool: Any) -> Any:
    if not isinstance(tool, Mapping):
        return None
    for nest in ("function", "toolSpec"):
        inner = tool.get(nest)
        if isinstance(inner, Mapping):
            return inner.get("name")
    return tool.get("name")


def strict_recall_tool() -> dict[str, Any]:
    """The Chat Completions recall tool in strict form, which ``parse`` and ``stream`` demand of every tool.

    Strict mode wants every property required and nothing else allowed; the
    Chat dialect writes it (:func:`toolbudget.wire.openai_chat.strict_recall_tool`).
    """
    from ..wire import openai_chat

    return openai_chat.strict_recall_tool()


def with_recall(args: CallArgs, api: str, *, strict: bool = False) -> CallArgs:
    """``args`` with the recall tool's definition added to the tools, unless they already define it."""
    tools = args.body.get("tools")
    listed = tools if isinstance(tools, list) else []
    if any(_tool_name(t) == RECALL_TOOL for t in listed):
        return args
    return args.with_field("tools", [*listed, strict_recall_tool() if strict else recall_tool(api)])


class _Node(Proxy):
    """A wrapped SDK object, reached by ``path``, in a ``mode`` ("" for the plain one)."""

    __slots__ = ("_mode", "_path")

    _mode: str
    _path: str

    def __init__(self, inner: Any, wrapping: Wrapping, path: str, mode: str = "") -> None:
        super().__init__(inner, wrapping)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_mode", mode)

    def _variant(self) -> Any:
        """The SDK's own object for this mode (``resource.with_raw_response``, or the resource)."""
        return getattr(self._inner, self._mode) if self._mode else self._inner

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return type(self._variant())

    def _child(self, name: str) -> str:
        return f"{self._path}.{name}" if self._path else name


class Namespace(_Node):
    """A client, or a namespace of it (``beta``, ``chat``), whose ``tree`` leads to the managed resources."""

    __slots__ = ("_tree",)

    _tree: Tree

    def __init__(self, inner: Any, wrapping: Wrapping, tree: Tree, path: str = "", mode: str = "") -> None:
        super().__init__(inner, wrapping, path, mode)
        object.__setattr__(self, "_tree", tree)

    def __getattr__(self, name: str) -> Any:
        node = self._tree.get(name)
        if isinstance(node, Spec):
            return Resource(getattr(self._inner, name), self._wrapping, node, self._child(name), self._mode)
        if node is not None:
            return Namespace(getattr(self._inner, name), self._wrapping, node, self._child(name), self._mode)
        if name in MODES and not self._mode:
            getattr(self._inner, name)  # AttributeError where the SDK has no such view
            return Namespace(self._inner, self._wrapping, self._tree, self._child(name), name)
        return getattr(self._variant(), name)


class Resource(_Node):
    """An SDK resource that sends conversations, with each method managed, refused or its own."""

    __slots__ = ("_spec",)

    _spec: Spec

    def __init__(self, inner: Any, wrapping: Wrapping, spec: Spec, path: str, mode: str = "") -> None:
        super().__init__(inner, wrapping, path, mode)
        object.__setattr__(self, "_spec", spec)

    def __getattr__(self, name: str) -> Any:
        spec = self._spec
        if name.startswith("_"):
            return getattr(self._variant(), name)
        if name in spec.refused:
            raise UnsupportedClient(f"{self._child(name)} is not managed by toolbudget: {spec.refused[name]}")
        if name in spec.subs:
            return Resource(
                getattr(self._inner, name), self._wrapping, spec.subs[name], self._child(name), self._mode
            )
        if name in MODES and not self._mode:
            getattr(self._inner, name)
            return Resource(self._inner, self._wrapping, spec, self._child(name), name)
        kind = spec.methods.get(name)
        target = getattr(self._variant(), name)  # AttributeError where the SDK has none
        if kind == "pass":
            return target
        if kind in _MANAGED:
            return self._managed(kind, name, target)
        raise UnsupportedClient(
            f"{self._child(name)} is not managed by toolbudget (this SDK version added it, or it sends "
            "requests of its own); use the create method of the same resource"
        )

    def _managed(self, kind: str, name: str, target: Callable[..., Any]) -> Callable[..., Any]:
        spec, wrapping, mode = self._spec, self._wrapping, self._mode
        # The SDK's Chat helpers that parse tool calls refuse any tool that is not strict.
        strict = spec.api == "openai-chat" and name in ("parse", "stream")
        opens_later = kind == "stream" or mode == "with_streaming_response"

        def prepare(kwargs: dict[str, Any]) -> tuple[CallArgs, Plan] | None:
            args = split(kwargs, spec.options, spec.history)
            if spec.history not in args.body:
                return (
                    None  # nothing to manage (a server-side conversation), or let the SDK say what is missing
                )
            if wrapping.recall and takes_tools(target):
                args = with_recall(args, spec.api, strict=strict)
            plan = _plan(wrapping, spec, kind, mode, args)
            return args, plan if name not in COUNTS else replace(plan, timed=False)

        if is_async(self._inner):
            if opens_later:

                def aopen(**kwargs: Any) -> Any:
                    prepared = prepare(kwargs)
                    return target(**kwargs) if prepared is None else _AsyncContext(*prepared, target)

                return aopen

            async def asend(**kwargs: Any) -> Any:
                prepared = prepare(kwargs)
                if prepared is None:
                    return await target(**kwargs)
                args, plan = prepared

                async def send(body: Any) -> Any:
                    return await target(**args.kwargs(body))

                return await arun(plan, send)

            return asend

        def call(**kwargs: Any) -> Any:
            prepared = prepare(kwargs)
            if prepared is None:
                return target(**kwargs)
            if opens_later:
                return _Context(*prepared, target)
            args, plan = prepared
            return run(plan, lambda body: target(**args.kwargs(body)))

        return call


def _plan(wrapping: Wrapping, spec: Spec, kind: str, mode: str, args: CallArgs) -> Plan:
    """How the flow treats this call: a plain ``create`` is read and lengthened, a stream watched."""
    if mode or kind == "once":
        return Plan(wrapping, spec.api, "once", args.body)
    if kind == "stream" or args.stream:
        return Plan(wrapping, spec.api, "stream", args.body)
    error: type[BaseException] = importlib.import_module(spec.sdk).APIError
    return Plan(wrapping, spec.api, "create", args.body, spec.cap(args) if spec.cap else None, (error,))


class _Context:
    """A method whose request is sent on ``__enter__`` (stream helpers, ``with_streaming_response``).

    The SDK's manager takes the arguments when it is made, so recovery makes a
    new one for each smaller history and enters it; the caller gets what the
    SDK's manager yields, and leaving the block leaves the manager that answered.
    """

    def __init__(self, args: CallArgs, plan: Plan, make: Any) -> None:
        self._args, self._plan, self._make = args, plan, make
        self._manager: Any = None

    def _open(self, body: Any) -> Any:
        manager = self._make(**self._args.kwargs(body))
        opened = manager.__enter__()
        self._manager = manager
        return opened

    def __enter__(self) -> Any:
        return run(self._plan, self._open)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        if self._manager is not None:
            return self._manager.__exit__(exc_type, exc, tb)
        return None


class _AsyncContext(_Context):
    """:class:`_Context` for ``async with``."""

    def __enter__(self) -> Any:
        raise TypeError("this is an async client's context manager: use `async with`")

    async def _aopen(self, body: Any) -> Any:
        manager = self._make(**self._args.kwargs(body))
        opened = await manager.__aenter__()
        self._manager = manager
        return opened

    async def __aenter__(self) -> Any:
        return await arun(self._plan, self._aopen)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        if self._manager is not None:
            return await self._manager.__aexit__(exc_type, exc, tb)
        return None
