"""Previews and summaries a session started again reads back instead of making them again.

A warm session makes each preview and one-line summary once and keeps it in
memory. A session started again (a restarted proxy, another replica, a
stateless worker) sees the same history and would make every one of them
again: most of its first request's time. So each one made is also archived
as a record keyed by its inputs: the key of the original (a keyed hash of its
whole text), every argument the preview or summary was made with, the marker
it carries (route and path), the policy's fingerprint and a digest of the code
that makes them. A cold session computes these keys for the results of its
first request, reads every record that exists in one ``get_many``, and takes
one only when it checks out: its header names the same inputs and its text
has the digest written beside it. What it reads is then the very bytes it
would have made; anything else (a record of another policy, another version,
a torn file) is made again as before.

Records are written once, with the request that made them, and not checked
again on later requests: a lost one costs only a recomputation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import orjson

from .codedigest import PolicyTexts, digest_of, package_root
from .model import ToolCall
from .previews import Preview

__all__ = [
    "MADE_PREFIX",
    "code_digest",
    "made_at",
    "policy_digest",
    "preview_inputs",
    "read",
    "record",
    "summary_inputs",
]

MADE_PREFIX = "\x00toolbudget: sent as a cut\x00made from\x00"
"""What the inputs of a record are archived under, prefixed: never the text of a tool result.

It begins with :data:`toolbudget.budget.FORM_PREFIX`: these are records of cuts too, and
whatever tells a session's own records from originals (the MCP server's ``stats``) skips them.
"""

_SHAPERS = ("budget.py", "compaction.py", "marker.py", "tools.py", "measure.py", "readback.py")
"""The modules, besides ``previews/``, whose code decides a preview's or a summary's bytes."""


@functools.cache
def code_digest() -> str:
    """A digest of the code that makes previews and summaries: another version never reads back."""
    root = package_root()
    return digest_of(
        [*sorted((root / "previews").glob("*.py")), *(root / name for name in _SHAPERS)], b"toolbudget-code"
    )


policy_digest = PolicyTexts(code_digest)
"""The policy's fingerprint with the code's digest, worked out once per policy object."""


def preview_inputs(
    policy: str,
    key: str,
    path: str | None,
    limit: int,
    head_ratio: float,
    is_error: bool,
    stderr_limit: int | None,
    route: str | None,
) -> str:
    """Everything a preview's bytes depend on, as one text."""
    return "\x00".join(
        (
            "preview",
            policy,
            key,
            path or "",
            str(limit),
            repr(head_ratio),
            str(is_error),
            str(stderr_limit),
            str(route),
        )
    )


def summary_inputs(
    policy: str,
    key: str,
    path: str | None,
    tool: str | None,
    call: ToolCall | None,
    is_error: bool,
    route: str | None,
) -> str:
    """Everything a one-line summary's bytes depend on (the call's whole arguments among them)."""
    if call is None:
        shown = "-"
    else:
        try:
            arguments = orjson.dumps(call.arguments).decode()
        except TypeError:
            arguments = repr(call.arguments)
        shown = f"{call.name}\x00{arguments}\x00{call.arguments_json}"
    return "\x00".join(("summary", policy, key, path or "", str(tool), shown, str(is_error), str(route)))


def record(name: str, made: Preview, digest: Callable[[str], str], at: int = 0) -> str | None:
    """The record of ``made``: its inputs' key ``name``, the request point it was made at (how
    many messages that request held), what it is, a digest of its text, the text.

    ``None`` when its kind or detail is not one line, which the record's header could not hold.
    The point tells a session started again where the session last wrote to its store, so
    where the record of its schedule's decisions is (:mod:`toolbudget.schedulerecord`).
    """
    if "\n" in made.kind or "\n" in made.detail:
        return None
    return (
        f"{MADE_PREFIX}{name}\n{at}\n{made.kind}\n{made.omitted}\n{made.detail}\n"
        f"{digest(made.text)}\n{made.text}"
    )


def read(data: str, name: str, digest: Callable[[str], str]) -> Preview | None:
    """The preview or summary a record holds, or ``None`` unless it is the record of ``name``, whole."""
    head = f"{MADE_PREFIX}{name}\n"
    if not data.startswith(head):
        return None
    fields = data[len(head) :].split("\n", 5)
    if len(fields) != 6:
        return None
    at, kind, omitted, detail, text_digest, text = fields
    if not at.isdigit() or not omitted.isdigit() or digest(text) != text_digest:
        return None
    return Preview(text, kind, int(omitted), detail)


def made_at(data: str, name: str) -> int | None:
    """The request point a record says it was made at, or ``None`` (only a hint: nothing checks it)."""
    head = f"{MADE_PREFIX}{name}\n"
    if not data.startswith(head):
        return None
    at = data[len(head) : data.find("\n", len(head))]
    return int(at) if at.isdigit() and len(at) < 12 else None
