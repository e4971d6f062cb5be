"""What every dialect's reply reading shares: the :class:`Dialect` base and small readers.

A reply is the JSON an API answers with (what the SDKs' ``model_dump`` gives,
or the body of the HTTP answer). The output-limit plan in
:mod:`toolbudget.recovery.output` works on *units*, the pieces of a reply's
content (a text block, a tool call, a thinking block), and asks the dialect of
its API for everything else, so it knows no provider's field names. The base
here holds the defaults most APIs share; each wire package subclasses it once
and exposes the instance as ``DIALECT``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..model import Usage
from ._stream import Folder

__all__ = [
    "Dialect",
    "as_dict",
    "as_list",
    "count",
    "parses_to_object",
    "sum_usage",
    "text_field",
    "usage_with_cached",
]


def as_dict(value: Any) -> Mapping[str, Any]:
    """``value`` when it is an object, else an empty one: replies are read, never trusted."""
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def count(value: Any) -> int | None:
    """A token count: a whole number (not a boolean), or ``None``."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def text_field(unit: Any) -> str:
    value = as_dict(unit).get("text")
    return value if isinstance(value, str) else ""


def usage_with_cached(prompt: int | None, output: int | None, cached: int | None) -> Usage:
    """The usage of an API whose prompt count includes the tokens read from its cache (OpenAI, Gemini)."""
    uncached = prompt - cached if prompt is not None and cached is not None else prompt
    return Usage(uncached, output, cached, None)


def parses_to_object(arguments: Any) -> bool:
    """Whether a call's arguments are whole: an object, or JSON text of one."""
    if isinstance(arguments, Mapping):
        return True
    if not isinstance(arguments, str):
        return False
    if not arguments.strip():
        return True  # a call without arguments: some servers send "" for {}
    try:
        return isinstance(json.loads(arguments), dict)
    except ValueError:
        return False


def sum_usage(usages: Sequence[Any]) -> Any:
    """Numbers added up, key by key and level by level; anything else from the last."""
    present = [u for u in usages if u is not None]
    if not present:
        return None
    if all(isinstance(u, (int, float)) and not isinstance(u, bool) for u in present):
        return sum(present)
    if all(isinstance(u, Mapping) for u in present):
        keys: dict[str, None] = {}
        for usage in present:
            keys.update(dict.fromkeys(usage))
        return {k: sum_usage([u.get(k) for u in present]) for k in keys}
    return copy.deepcopy(present[-1])


class Dialect:
    """How one API lays out a reply and a request's output limit.

    Units are the reply's own values (dicts), so a rebuilt reply keeps every
    field the dialect does not model. Methods never mutate a reply they are
    given, except :meth:`with_units`, which fills in the copy it is handed.
    """

    api: str = ""
    cut_stops: frozenset[str] = frozenset()
    """Stop values that mean the reply was cut off before it was done."""
    window_stops: frozenset[str] = frozenset()
    """Those of :attr:`cut_stops` that mean the context window, not ``max_tokens``, stopped it."""
    cut_stop: str = ""
    """The stop value a reply gets when it is marked cut (the ``max_tokens`` one)."""
    suspect_last_call: bool = False
    """Whether a call ending a cut reply may be unfinished although it looks whole
    (APIs that send arguments already parsed cannot show it)."""
    usage_field: str = "usage"
    continues_prefill: bool = False
    """Whether an assistant message ending a request is a prefill the reply continues."""
    max_tokens_required: bool = False
    """Whether a request must state its output limit."""
    new_max_tokens_slot: tuple[str | None, str] = (None, "max_tokens")
    """Where a body that states no limit yet gets one: (the object holding it, its key)."""

    # --- the stop signal and the units --------------------------------------------------

    def stop(self, reply: Mapping[str, Any]) -> str | None:
        raise NotImplementedError

    def units(self, reply: Mapping[str, Any]) -> list[Any]:
        raise NotImplementedError

    def with_units(self, reply: dict[str, Any], units: list[Any], stop: str | None) -> dict[str, Any]:
        """``reply`` (a copy the caller owns) holding ``units``, and ``stop`` when it is given."""
        raise NotImplementedError

    def is_text(self, unit: Any) -> bool:
        raise NotImplementedError

    def text(self, unit: Any) -> str:
        return text_field(unit)

    def append_text(self, unit: Any, text: str) -> Any:
        return {**unit, "text": self.text(unit) + text}

    def is_call(self, unit: Any) -> bool:
        raise NotImplementedError

    def call_whole(self, unit: Any) -> bool:
        """Whether a call's arguments arrived whole (they parse to an object)."""
        raise NotImplementedError

    def window_full(self, reply: Mapping[str, Any], stop: str | None) -> bool:
        """Whether a cut ``reply`` was stopped by the context window rather than its ``max_tokens``."""
        return stop in self.window_stops

    # --- usage ------------------------------------------------------------------------

    def usage(self, reply: Mapping[str, Any]) -> Usage | None:
        """The reply's token counts, or ``None`` when it states none."""
        usage = reply.get(self.usage_field)
        return self.read_usage(usage) if isinstance(usage, Mapping) else None

    def read_usage(self, usage: Mapping[str, Any]) -> Usage:
        """The counts of the reply's usage object."""
        raise NotImplementedError

    def with_summed_usage(self, reply: dict[str, Any], pieces: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """``reply`` (a copy the caller owns) with the usage of ``pieces`` added up, when any states one."""
        if any(self.usage_field in p for p in pieces):
            reply[self.usage_field] = sum_usage([p.get(self.usage_field) for p in pieces])
        return reply

    # --- the request's output limit -----------------------------------------------------

    def max_tokens_slot(self, body: Mapping[str, Any]) -> tuple[str | None, str]:
        """Where ``body`` states its output limit: (the object holding it, ``None`` for the top; its key)."""
        return self.new_max_tokens_slot

    def max_tokens(self, body: Mapping[str, Any]) -> int | None:
        """The output limit ``body`` sets, or ``None`` when it sets none."""
        holder, key = self.max_tokens_slot(body)
        return count((as_dict(body.get(holder)) if holder else body).get(key))

    def with_max_tokens(self, body: Mapping[str, Any], value: int) -> dict[str, Any]:
        """A copy of ``body`` with its output limit set to ``value``, in the field the body uses."""
        holder, key = self.max_tokens_slot(body)
        out = dict(body)
        if holder is None:
            out[key] = value
        else:
            out[holder] = {**as_dict(body.get(holder)), key: value}
        return out

    def model(self, body: Mapping[str, Any]) -> str | None:
        """The model a request body names, or ``None`` (an API may name it in the URL instead)."""
        value = body.get("model")
        return value if isinstance(value, str) else None

    def several_choices(self, body: Mapping[str, Any]) -> bool:
        """Whether ``body`` asks for more than one answer (which cannot be continued as one)."""
        return False

    # --- streams and the recall tool ----------------------------------------------------

    def folder(self) -> Folder:
        """A new folder for one stream of this API."""
        raise NotImplementedError

    def recall_tool(self) -> dict[str, Any]:
        """The recall tool's definition in this API's form."""
        raise NotImplementedError


class TypedTextDialect(Dialect):
    """Text units of the ``{"type": "text", "text": ...}`` shape (Anthropic, and Chat's own)."""

    def is_text(self, unit: Any) -> bool:
        return isinstance(unit, Mapping) and unit.get("type") == "text"
