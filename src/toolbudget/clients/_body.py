"""An SDK call's keyword arguments as a request body, and back.

The keyword arguments of ``messages.create`` or ``chat.completions.create`` are
the request body, plus a few options of the SDK's own (``extra_headers``,
``timeout``...) that never reach the body. The body goes through the session
as plain JSON; the options go back to the SDK untouched.

The body is always a new structure: the caller's lists and dicts are copied
on the way in (SDK objects such as a previous answer's content blocks become
their JSON, as the SDK itself would send them), so nothing toolbudget does can
change the caller's history.

An argument given as ``None``, ``NOT_GIVEN`` or ``omit`` is absent from the
body: the SDKs accept ``tools=None`` or ``system=None`` and mean "none", and a
JSON ``null`` where a provider expects an array is not a body toolbudget can
manage. A class (``response_format=MyModel`` for ``parse``) is not JSON either;
it goes to the SDK with the options. A field toolbudget did not change (the
tools, say) is handed back as the caller's own object, so an SDK helper that
keeps a Python type inside it (``openai.pydantic_function_tool``) still finds
it; a list only extended at its end keeps the caller's items.

``extra_body`` is part of the body: the SDK lays its fields over the named
arguments, so a history given there (``extra_body={"messages": ...}``) would
reach the provider unmanaged. Its fields are read into the body, over the
named ones as the SDK would, and what toolbudget does not send as a named
argument goes back in ``extra_body``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..sdkdata import omitted, plain

__all__ = ["SDK_OPTIONS", "CallArgs", "split"]

SDK_OPTIONS = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})
"""Keyword arguments every Stainless SDK method takes that are not body fields."""


@dataclass(frozen=True, slots=True)
class CallArgs:
    """One call's arguments: the body, and the SDK options to pass along unchanged."""

    body: dict[str, Any]
    options: dict[str, Any]
    fields: frozenset[str]
    """The body fields the caller gave as keyword arguments."""
    given: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)
    """For the non-history fields given as lists or dicts: the caller's object, and its plain copy."""

    def with_field(self, name: str, value: Any) -> CallArgs:
        """These arguments with one more body field, sent as a keyword argument of its own."""
        return CallArgs({**self.body, name: value}, self.options, self.fields | {name}, self.given)

    @property
    def stream(self) -> bool:
        return self.body.get("stream") is True

    def kwargs(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Keyword arguments that send ``body``: its fields, the options, anything new in ``extra_body``."""
        out = {k: self._restore(k, v) for k, v in body.items() if k in self.fields}
        new = {k: v for k, v in body.items() if k not in self.fields}
        out.update(self.options)
        if new:
            extra = self.options.get("extra_body")
            out["extra_body"] = {**(extra if isinstance(extra, Mapping) else {}), **new}
        return out

    def _restore(self, name: str, value: Any) -> Any:
        """The caller's object for a field sent as it was given (or only extended at its end)."""
        if name not in self.given:
            return value
        original, before = self.given[name]
        if value is before or value == before:
            return original
        if isinstance(value, list) and isinstance(before, list) and value[: len(before)] == before:
            return [*original, *value[len(before) :]]
        return value


def split(
    kwargs: Mapping[str, Any], options: frozenset[str] = SDK_OPTIONS, history: str = "messages"
) -> CallArgs:
    """Split an SDK call's keyword arguments into a plain body and the SDK's own options.

    ``history`` names the field that holds the conversation: it is always sent
    as managed, never as the caller's own object.
    """
    body: dict[str, Any] = {}
    passed: dict[str, Any] = {}
    given: dict[str, tuple[Any, Any]] = {}
    for key, value in kwargs.items():
        if key in options or isinstance(value, type):
            passed[key] = value
        elif value is not None and not omitted(value):
            body[key] = plain(value)
            if key != history and isinstance(value, (list, tuple, dict)):
                given[key] = (value, body[key])
    extra = passed.get("extra_body")
    if isinstance(extra, Mapping):
        del passed["extra_body"]
        for key, value in extra.items():
            body[key] = plain(value)  # as the SDK would send it: over a named argument
            given.pop(key, None)
        named = frozenset(k for k in body if k not in extra or k in kwargs)
        return CallArgs(body, passed, named, given)
    return CallArgs(body, passed, frozenset(body), given)
