"""What the scripted upstream answers, turn by turn.

A script is a function from the :class:`Turn` the upstream just received to
the :class:`Reply` it answers with: tool calls, or a final text. It sees the
newest tool results, so a step can depend on them ("if the last result names
a toolbudget marker, read the file it names"). :class:`Steps` plays a list of
steps in order and then says a final text.

Only requests that offer tools are turns of the script: a client's side
requests (a title, a quota probe) are answered with a short text and never
advance it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolbudget.marker import Marker, find_markers

__all__ = ["Call", "Reply", "Result", "Script", "Step", "Steps", "Turn", "say", "use"]


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call the model makes: the tool's name and its arguments."""

    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Reply:
    """An answer: text, then the tool calls (none means the turn ends)."""

    text: str = ""
    calls: tuple[Call, ...] = ()


def say(text: str) -> Reply:
    return Reply(text=text)


def use(name: str, text: str = "", **arguments: Any) -> Reply:
    return Reply(text=text, calls=(Call(name, arguments),))


@dataclass(frozen=True, slots=True)
class Result:
    """A tool result the request carries: the call it answers and its text."""

    call_id: str
    text: str
    is_error: bool = False

    def markers(self) -> list[Marker]:
        return find_markers(self.text)


@dataclass(frozen=True, slots=True)
class Turn:
    """A request that is a turn of the script."""

    api: str
    body: Mapping[str, Any]
    number: int
    """0 for the first turn of the script, counting only requests that offer tools."""
    results: tuple[Result, ...]
    """The tool results after the newest assistant message (the answers to the last calls)."""
    tools: tuple[str, ...]
    """The names of the tools the request defines."""

    def tool(self, *candidates: str) -> str:
        """The first of ``candidates`` the request defines (clients rename their tools)."""
        for name in candidates:
            if name in self.tools:
                return name
        raise LookupError(f"none of {candidates} among the request's tools {self.tools}")


Script = Callable[[Turn], Reply]
Step = Reply | Callable[[Turn], Reply]


@dataclass(frozen=True, slots=True)
class Steps:
    """Plays ``steps`` in order, one per turn, then answers ``final``.

    The upstream records each reply with its request (``Recorded.reply``).
    """

    steps: Sequence[Step]
    final: str = "Done."

    def __call__(self, turn: Turn) -> Reply:
        if turn.number >= len(self.steps):
            return say(self.final)
        step = self.steps[turn.number]
        return step(turn) if callable(step) else step
