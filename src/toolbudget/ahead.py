"""What a compaction event will make, made between requests.

Nearly every request of a session that cuts anything is a compaction event:
a few results the agent has moved past go from their full text to a
head-and-tail preview or a one-line summary. Making those (finding the kind
of output, its error lines, its hunks, rows or records) was most of such a
request's time, though every one of those results had arrived turns before.

So once a request has returned, the store's worker, while no call waits,
makes the key, the preview and the summary of each result that a later event
may compact (:func:`toolbudget.budget.make_ahead`): one longer than
``microcompact_min_chars`` that is not itself a cut sent back, whether it
went out whole or was cut at its cap. The event
then finds them made, as a warm session finds any preview it made before.
They are the same functions of the same inputs, so what is sent is the same
bytes whether the worker ran or not; nothing is written to the store ahead
(an original is archived, and checked, by the request whose marker names it).

An agent's next request comes seconds after the last one returned, so this
runs while the caller waits for its model; a caller that sends requests back
to back finds less of it done, never a different answer. It is one result a
step: a store call that comes meanwhile waits for one result's forms at most,
and a thread of the caller's that runs meanwhile (sending the request, relaying
a stream) shares the interpreter with that much work at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence

from .budget import Archive, make_ahead, result_text
from .model import Message, Request, ToolCall, ToolResult
from .policy import Policy

__all__ = ["candidates", "step"]


def candidates(
    new: Sequence[Message], least: int, plain: Container[str] = ()
) -> list[tuple[str, ToolResult, ToolCall]]:
    """The results among ``new`` that a later event may compact, each with its text and its call.

    A result counts when it is longer than ``least`` characters and holds no
    marker (a cut sent back is the event's to read); one cut as it came (over
    its cap) counts too, since an event makes its compaction forms from its
    original. Its call is one of ``new`` (a result of an earlier call is left
    to the event). A text in ``plain`` was looked through already, by the
    request's own budget: it is not searched for a marker again.
    """
    calls: dict[str, ToolCall] = {}
    found: list[tuple[str, ToolResult, ToolCall]] = []
    for message in new:
        for part in message.parts:
            if isinstance(part, ToolCall):
                if part.id is not None:
                    calls[part.id] = part
            elif isinstance(part, ToolResult) and part.call_id is not None:
                call = calls.get(part.call_id)
                text = result_text(part) if call is not None else None
                if call is None or text is None or len(text) <= least:
                    continue
                if text in plain or "[toolbudget: " not in text:
                    found.append((text, part, call))
    return found


def step(
    archive: Archive, policy: Policy, request: Request, results: list[tuple[str, ToolResult, ToolCall]]
) -> Callable[[], bool]:
    """The idle step (see :meth:`~toolbudget.store.guard.StoreGuard.when_idle`) that makes them, one
    result a step: a store call that comes meanwhile (the next request's) waits for one at most."""
    left = iter(results)

    def run() -> bool:
        one = next(left, None)
        if one is None:
            return False
        make_ahead(archive, policy, request, [one])
        return True

    return run
