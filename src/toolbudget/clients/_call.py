"""One intercepted SDK call: the SDK's objects into the one managed call, and back out.

The flow (:class:`toolbudget.flow.ManagedCall`) decides everything: what to
send, when to recover, lengthen or give up, and what the report says. This
module is the SDK's edge of it: a :class:`Plan` says how the flow reads the
SDK's answers (their JSON, or nothing for a stream or a raw response), and
how its outcome becomes what the SDK method returns (an answer of the SDK's
own type, carrying the report). :func:`run` and :func:`arun` drive it with
the SDK's sync or async method.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..callreport import CallReport
from ..flow import ManagedCall, Outcome, adrive, drive, opaque
from ..recovery.output import is_cut_off
from ..session import Session
from ._observe import observe

__all__ = ["Plan", "Wrapping", "arrival_time", "arun", "dump", "rebuild", "run"]

OnReport = Callable[[CallReport], None]


def arrival_time() -> float:
    """When a wrapped call is made: wall-clock seconds (:func:`time.time`).

    The schedule compares it with the previous request's arrival to tell an
    idle gap longer than the cache's TTL. It is the wall clock, not a
    monotonic one, because the previous arrival may have been recorded by
    another process or machine sharing the session's store, and their
    monotonic clocks share no origin.
    """
    return time.time()


class Wrapping:
    """What every wrapped resource of one client shares: the session, the report callback, recall."""

    def __init__(self, session: Session | None, on_report: OnReport | None, recall: bool = False) -> None:
        self._session = session
        self._owned: Session | None = None
        self.on_report = on_report
        self.recall = recall
        """Add the recall tool's definition to every request that lacks it."""

    @property
    def session(self) -> Session:
        """The session given to ``wrap``, or one made on first use (and closed with the client)."""
        if self._session is None:
            self._session = self._owned = Session()
        return self._session

    def close(self) -> None:
        """Close the session this wrapping made (a session given to ``wrap`` is the caller's to close)."""
        if self._owned is not None:
            self._owned.close()
            self._owned = self._session = None

    def deliver(self, target: Any, report: CallReport, *, callback: bool = True) -> None:
        """Set ``toolbudget_report`` on ``target`` (where it takes attributes) and tell ``on_report``."""
        attach(target, report)
        if callback and self.on_report is not None:
            self.on_report(report)


def attach(target: Any, report: CallReport) -> None:
    """``target.toolbudget_report = report``, bypassing pydantic's checks (it is not a field)."""
    with contextlib.suppress(AttributeError, TypeError):
        object.__setattr__(target, "toolbudget_report", report)


def dump(answer: Any) -> dict[str, Any]:
    """An SDK answer as its JSON (what the API sent)."""
    if isinstance(answer, Mapping):
        return dict(answer)
    data = answer.model_dump(mode="json", by_alias=True, exclude_unset=True, warnings=False)
    return data if isinstance(data, dict) else {}


def rebuild(template: Any, data: dict[str, Any]) -> Any:
    """An SDK answer of ``template``'s type holding ``data``, with its request id."""
    if isinstance(template, Mapping):
        return data
    answer = type(template).model_construct(**data)
    for name in ("_request_id", "_workspace_id"):
        value = getattr(template, name, None)
        if value is not None:
            with contextlib.suppress(AttributeError, TypeError, ValueError):
                setattr(answer, name, value)
    return answer


@dataclass(frozen=True, slots=True)
class Plan:
    """One intercepted call: its body, how the flow reads the SDK's answers, and what the caller gets.

    ``kind`` is ``create`` (a plain answer, read as JSON and lengthened when
    cut off), ``stream`` (a stream, recovered before its first event and then
    watched) or ``once`` (a raw response, a parsed answer, a token count:
    recovered, returned as the SDK made it).
    """

    wrapping: Wrapping
    api: str
    kind: str
    body: dict[str, Any]
    cap: int | None = None
    """A lower output cap than the model's, where the SDK refuses more (Anthropic without streaming)."""
    errors: tuple[type[BaseException], ...] = ()
    """The SDK's API errors (status, connection, timeout): a follow-up failing so ends the follow-ups."""
    remake: Callable[[Any, dict[str, Any]], Any] | None = None
    """How an answer of the SDK's type is made from merged JSON, where :func:`rebuild` cannot."""
    events: Callable[[Any], Any] | None = None
    """Where an opened stream's events are, when the SDK returns them inside another object (botocore)."""
    timed: bool = True
    """Whether the call reaches the model, so its arrival time counts for the cache (a token
    count does not: it neither reads nor refreshes the prompt cache)."""

    def flow(self) -> ManagedCall:
        return ManagedCall(
            self.wrapping.session,
            self.body,
            self.api,
            read=dump if self.kind == "create" else opaque,
            cap=self.cap,
            followup_errors=self.errors,
            stream=self.kind == "stream",
            now=arrival_time() if self.timed else None,
        )

    def finish(self, outcome: Outcome) -> Any:
        """What the SDK method returns: the answer (rebuilt when the flow changed it), with the report."""
        if self.kind == "stream":
            opened = outcome.first
            return _watch(
                self.wrapping, outcome.report, opened, self.events(opened) if self.events else opened
            )
        answer = outcome.first
        if outcome.changed and outcome.data is not None:
            answer = (self.remake or rebuild)(outcome.last, outcome.data)
        self.wrapping.deliver(answer, outcome.report)
        return answer

    def gave_up(self, error: BaseException) -> None:
        """The ladder ran out: ``on_report`` hears the report the provider's error carries."""
        report = getattr(error, "toolbudget_report", None)
        if isinstance(report, CallReport) and self.wrapping.on_report is not None:
            self.wrapping.on_report(report)


def run(plan: Plan, send: Callable[[Any], Any]) -> Any:
    """Drive ``plan``'s flow with the SDK's sync ``send``."""
    try:
        outcome = drive(plan.flow(), send)
    except Exception as exc:
        plan.gave_up(exc)
        raise
    return plan.finish(outcome)


async def arun(plan: Plan, send: Callable[[Any], Awaitable[Any]]) -> Any:
    """:func:`run` with the SDK's async ``send``."""
    try:
        outcome = await adrive(plan.flow(), send)
    except Exception as exc:
        plan.gave_up(exc)
        raise
    return plan.finish(outcome)


def _watch(wrapping: Wrapping, report: CallReport, opened: Any, events: Any) -> Any:
    """Report the opened stream now (recovery is over), and again, to ``on_report``, when it ends.

    ``events`` is what yields the stream's events: ``opened`` itself, or the
    part of it that does (botocore's ``EventStream`` under ``stream``).
    """
    wrapping.deliver(events, report, callback=False)
    api = report.api

    def ended(answer: dict[str, Any] | None, finished: bool) -> None:
        cut = is_cut_off(answer, api) if answer is not None else None
        final = replace(report, cutoffs=(cut,) if cut else (), final_cutoff=cut, stream_finished=finished)
        wrapping.deliver(events, final)

    if not observe(events, api, ended) and wrapping.on_report is not None:
        wrapping.on_report(report)  # a stream we cannot watch: report what is known now
    return opened
