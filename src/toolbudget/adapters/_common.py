"""What the framework adapters share: the session of a call, and the way back to the framework's objects.

An adapter lays the framework's history out as a wire body, the core manages
it, and the body the core sends must become the framework's messages again.
Most of it is untouched, and an untouched message must come back as the
caller's very object (frameworks keep ids, metadata and provider fields on
it that no wire form carries); a tool result whose text was cut comes back as
its own message with the new text; only what the core made (a synthesized
result, a recovery notice, a shortened assistant text) is built anew.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import orjson

from ..errors import InputError
from ..session import Session
from ..sessions import Sessions

__all__ = ["SessionSource", "arguments_of", "map_back", "missing_extra", "session_for", "text_of"]

T = TypeVar("T")

SessionSource = Session | Sessions
"""One session for every conversation the adapter sees, or a pool keyed by the framework's thread id."""


def missing_extra(module: str, extra: str, error: ImportError) -> ImportError:
    """The error for an adapter whose framework is not installed: one line naming the extra to install."""
    package = (error.name or extra).partition(".")[0]
    hint = ImportError(f"toolbudget.adapters.{module} needs {package}: pip install 'toolbudget[{extra}]'")
    hint.name = error.name
    return hint


def session_for(source: SessionSource, conversation: str | None) -> Session:
    """The session of one conversation: ``source`` itself, or the pool's session for ``conversation``."""
    if isinstance(source, Session):
        return source
    if isinstance(source, Sessions):
        if conversation is None:
            raise InputError(
                "a pool of sessions needs each run's conversation id (a thread id); give a Session instead"
            )
        return source.get(conversation)
    raise InputError(f"an adapter needs a toolbudget Session or Sessions, not {type(source).__name__}")


def _value(message: Mapping[str, Any]) -> bytes:
    return orjson.dumps(message, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def _result_id(message: Mapping[str, Any]) -> str | None:
    """The call id a tool result answers (openai-chat ``tool_call_id``, responses ``call_id``)."""
    if message.get("role") == "tool":
        value = message.get("tool_call_id")
    elif message.get("type") == "function_call_output":
        value = message.get("call_id")
    else:
        return None
    return value if isinstance(value, str) else None


def map_back(
    originals: Sequence[tuple[Mapping[str, Any], T]],
    managed: Sequence[Mapping[str, Any]],
    rebuild: Callable[[Mapping[str, Any], T | None], T],
) -> list[T]:
    """The framework's messages for a managed body's messages.

    ``originals`` pairs each wire message the adapter made with the
    framework's object it came from. A managed message that is one of them,
    or equal to one, is that object; a tool result for a known call id is
    ``rebuild(message, original)`` (the result's own object, to copy with
    the new content); anything else is ``rebuild(message, None)``.
    """
    by_identity = {id(wire): obj for wire, obj in originals}
    by_value: dict[bytes, T] = {}
    by_call: dict[str, T] = {}
    for wire, obj in originals:
        by_value.setdefault(_value(wire), obj)
        call = _result_id(wire)
        if call is not None:
            by_call.setdefault(call, obj)
    out: list[T] = []
    for message in managed:
        found = by_identity.get(id(message))
        if found is None:
            found = by_value.get(_value(message))
        if found is None:
            call = _result_id(message)
            found = rebuild(message, by_call.get(call) if call is not None else None)
        out.append(found)
    return out


def text_of(content: Any) -> str | None:
    """A tool result's text: a str, or a list of text parts joined; ``None`` when it holds anything else."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content:
        texts: list[str] = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif (
                isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)
            ):
                texts.append(part["text"])
            else:
                return None
        return "".join(texts)
    return None


def arguments_of(**arguments: Any) -> dict[str, Any]:
    """A recall call's arguments without the ones a framework passes as ``None`` for "not given"."""
    return {name: value for name, value in arguments.items() if value is not None}
