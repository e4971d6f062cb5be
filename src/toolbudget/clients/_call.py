"""One intercepted SDK call: manage, send, recover, lengthen, report. Sync and async alike.

The recovery loop (:mod:`toolbudget.recovery.loop`) and the output plan
(:class:`~toolbudget.recovery.output.Stretch`) decide everything; this module
only drives them with the SDK's own method and turns answers into JSON and back.

An answer stopped by the context window (not by ``max_tokens``) is raised
inside the send as :class:`~toolbudget.recovery.output.ContextWindowFull`, so
the ladder shrinks the history exactly as for a refused prompt. If the ladder
runs out while the last answer was such a cut one, that answer is returned
(cut off, and saying so) rather than an error: the provider did answer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..recovery.ladder import RecoveryReport
from ..recovery.loop import Climb, acall_with_recovery, call_with_recovery
from ..recovery.output import ContextWindowFull, Cutoff, Stretch, finalize, is_cut_off
from ..session import Report, Session
from ._body import CallArgs
from ._observe import observe
from ._report import CallReport

__all__ = [
    "Endpoint",
    "Wrapping",
    "acall",
    "aonce",
    "astream",
    "call",
    "dump",
    "once",
    "rebuild",
    "stream",
]

OnReport = Callable[[CallReport], None]


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


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One SDK method toolbudget manages, and what it needs to know about it."""

    api: str
    method: Callable[..., Any]
    errors: tuple[type[BaseException], ...]
    """The SDK's API errors (status, connection, timeout): a follow-up failing so ends the follow-ups."""
    cap: int | None = None
    """A lower output cap than the model's, where the SDK refuses more (Anthropic without streaming)."""


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


def _manage_report(session: Session, climb: Climb | None) -> Report:
    if climb is not None:
        return climb.managed.report
    report = session.last_report
    assert report is not None  # Climb managed the body before anything could fail
    return report


class _Window:
    """The last answer cut by the context window, if the last send got one."""

    def __init__(self) -> None:
        self.answer: Any = None
        self.cutoff: Cutoff | None = None

    def check(self, answer: Any, api: str) -> Any:
        self.answer, self.cutoff = None, None
        cut = is_cut_off(dump(answer), api)
        if cut is not None and cut.context_window:
            self.answer, self.cutoff = answer, cut
            raise ContextWindowFull(answer, cut)
        return answer


def _finish(
    wrapping: Wrapping, endpoint: Endpoint, climb: Climb, first: Any, last: Any, stretch: Stretch
) -> Any:
    result, dropped = stretch.result()
    changed = stretch.followed_up or dropped
    answer = rebuild(last, result) if changed else first
    report = CallReport(
        endpoint.api,
        climb.managed.report,
        climb.report(bool(climb.attempts)),
        stretch.escalations,
        stretch.continuations,
        tuple(stretch.cutoffs),
        is_cut_off(result, endpoint.api),
        dropped,
        stretch.error,
    )
    wrapping.deliver(answer, report)
    return answer


def _window_answer(wrapping: Wrapping, endpoint: Endpoint, window: _Window, error: BaseException) -> Any:
    """The ladder ran out, but the last try got an answer (cut by the window): return it."""
    result, dropped = finalize(dump(window.answer), endpoint.api)
    answer = rebuild(window.answer, result) if dropped else window.answer
    recovery = getattr(error, "toolbudget_report", None)
    assert window.cutoff is not None
    report = CallReport(
        endpoint.api,
        _manage_report(wrapping.session, None),
        recovery if isinstance(recovery, RecoveryReport) else RecoveryReport(),
        cutoffs=(window.cutoff,),
        final_cutoff=is_cut_off(result, endpoint.api) or window.cutoff,
        dropped_calls=dropped,
    )
    wrapping.deliver(answer, report)
    return answer


def _gave_up(wrapping: Wrapping, api: str, error: BaseException) -> None:
    """The ladder ran out: the provider's error carries the call's report (and ``on_report`` hears it)."""
    recovery = getattr(error, "toolbudget_report", None)
    if isinstance(recovery, RecoveryReport):
        wrapping.deliver(error, CallReport(api, _manage_report(wrapping.session, None), recovery))


def call(wrapping: Wrapping, endpoint: Endpoint, args: CallArgs) -> Any:
    """A non-streaming call, managed, recovered and lengthened."""
    session = wrapping.session
    window = _Window()

    def send(body: Any) -> Any:
        return window.check(endpoint.method(**args.kwargs(body)), endpoint.api)

    try:
        first, climb = call_with_recovery(session, args.body, send, endpoint.api)
    except Exception as exc:
        if window.answer is None:
            _gave_up(wrapping, endpoint.api, exc)
            raise
        return _window_answer(wrapping, endpoint, window, exc)
    stretch = Stretch(climb.body, endpoint.api, session.policy, cap=endpoint.cap)
    last = first
    body = stretch.next_body(dump(first))
    while body is not None:
        try:
            last = endpoint.method(**args.kwargs(body))
        except endpoint.errors as exc:
            body = stretch.failed(exc)
            continue
        body = stretch.next_body(dump(last))
    return _finish(wrapping, endpoint, climb, first, last, stretch)


async def acall(wrapping: Wrapping, endpoint: Endpoint, args: CallArgs) -> Any:
    """:func:`call` for an async SDK method."""
    session = wrapping.session
    window = _Window()

    async def send(body: Any) -> Any:
        return window.check(await endpoint.method(**args.kwargs(body)), endpoint.api)

    try:
        first, climb = await acall_with_recovery(session, args.body, send, endpoint.api)
    except Exception as exc:
        if window.answer is None:
            _gave_up(wrapping, endpoint.api, exc)
            raise
        return _window_answer(wrapping, endpoint, window, exc)
    stretch = Stretch(climb.body, endpoint.api, session.policy, cap=endpoint.cap)
    last = first
    body = stretch.next_body(dump(first))
    while body is not None:
        try:
            last = await endpoint.method(**args.kwargs(body))
        except endpoint.errors as exc:
            body = stretch.failed(exc)
            continue
        body = stretch.next_body(dump(last))
    return _finish(wrapping, endpoint, climb, first, last, stretch)


# --------------------------------------------------------------------------- streams


def _watch(wrapping: Wrapping, api: str, climb: Climb, opened: Any) -> Any:
    """Report the opened stream now (recovery is over), and again, to ``on_report``, when it ends."""
    report = CallReport(
        api, climb.managed.report, climb.report(bool(climb.attempts)), stream=True, stream_finished=False
    )
    wrapping.deliver(opened, report, callback=False)

    def ended(answer: dict[str, Any] | None, finished: bool) -> None:
        cut = is_cut_off(answer, api) if answer is not None else None
        final = replace(report, cutoffs=(cut,) if cut else (), final_cutoff=cut, stream_finished=finished)
        wrapping.deliver(opened, final)

    if not observe(opened, api, ended) and wrapping.on_report is not None:
        wrapping.on_report(report)  # a stream we cannot watch: report what is known now
    return opened


def stream(wrapping: Wrapping, api: str, body: dict[str, Any], open_: Callable[[Any], Any]) -> Any:
    """Open a stream with the history managed, recovering from overflow before its first byte."""
    try:
        opened, climb = call_with_recovery(wrapping.session, body, open_, api)
    except Exception as exc:
        _gave_up(wrapping, api, exc)
        raise
    return _watch(wrapping, api, climb, opened)


async def astream(
    wrapping: Wrapping, api: str, body: dict[str, Any], open_: Callable[[Any], Awaitable[Any]]
) -> Any:
    """:func:`stream` for an async SDK."""
    try:
        opened, climb = await acall_with_recovery(wrapping.session, body, open_, api)
    except Exception as exc:
        _gave_up(wrapping, api, exc)
        raise
    return _watch(wrapping, api, climb, opened)


# --------------------------------------------------------------------------- sent once


def _once_report(wrapping: Wrapping, api: str, climb: Climb, result: Any) -> Any:
    wrapping.deliver(result, CallReport(api, climb.managed.report, climb.report(bool(climb.attempts))))
    return result


def once(wrapping: Wrapping, api: str, body: dict[str, Any], open_: Callable[[Any], Any]) -> Any:
    """Managed and recovered from overflow, but never lengthened: raw responses, ``parse``, counting.

    What these return is read by the caller in its own way (the HTTP response,
    a parsed Python object), so a second answer cannot be merged into it.
    """
    try:
        result, climb = call_with_recovery(wrapping.session, body, open_, api)
    except Exception as exc:
        _gave_up(wrapping, api, exc)
        raise
    return _once_report(wrapping, api, climb, result)


async def aonce(
    wrapping: Wrapping, api: str, body: dict[str, Any], open_: Callable[[Any], Awaitable[Any]]
) -> Any:
    """:func:`once` for an async SDK."""
    try:
        result, climb = await acall_with_recovery(wrapping.session, body, open_, api)
    except Exception as exc:
        _gave_up(wrapping, api, exc)
        raise
    return _once_report(wrapping, api, climb, result)
