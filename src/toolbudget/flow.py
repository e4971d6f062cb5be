"""One managed provider call, as a flow that does no I/O of its own.

Every shell that sends a conversation (the SDK wrappers, a proxy, a framework
adapter) needs the same policy around one provider call:

1. **manage** the body (:meth:`Session.manage <toolbudget.Session.manage>`);
2. **send** it, and when the provider refuses the prompt as too long, or the
   answer stops because it filled the context window, **climb the recovery
   ladder** (:class:`~toolbudget.recovery.Climb`) and send a smaller history;
   any other error goes back to the caller unchanged;
3. **lengthen** an answer cut off by ``max_tokens``: escalate, then continue,
   then merge the pieces, and never hand back a truncated tool call
   (:class:`~toolbudget.recovery.Stretch`);
4. **report** what happened (:class:`~toolbudget.CallReport`).

:class:`ManagedCall` is that policy as a generator, in the manner of httpx's
``auth_flow``: it yields each body to send and is sent back the provider's
answer, or has the provider's exception thrown into it. It never touches the
network, a clock or a thread, so one flow serves sync and async callers, and a
shell adds only what is its own: how a body becomes a request, and how an
answer becomes its JSON. :func:`drive` and :func:`adrive` run a flow with a
sync or an async ``send``; they are the only sync/async twins of the core.

Streams and other answers whose content the flow cannot read (a raw HTTP
response, a parsed object) run the same flow up to the first byte: recovery
from an overflow, which the provider states when the request is opened, and
nothing after.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .callreport import CallReport
from .errors import exhausted
from .recovery.loop import Climb
from .recovery.output import ContextWindowFull, Cutoff, Stretch, finalize, is_cut_off

if TYPE_CHECKING:
    from .session import Session

__all__ = [
    "ManagedCall",
    "Outcome",
    "Steps",
    "acall_with_recovery",
    "adrive",
    "call_with_recovery",
    "drive",
    "opaque",
    "read_mapping",
]

T = TypeVar("T")

Steps = Generator[Any, Any, "Outcome"]
"""A running flow: yields bodies to send, is sent answers (or thrown errors), returns the outcome."""


def read_mapping(answer: Any) -> Mapping[str, Any] | None:
    """An answer's JSON when it is a mapping already; ``None`` (opaque) otherwise."""
    return answer if isinstance(answer, Mapping) else None


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one managed call ended: the answers it got, the answer to give, and the report."""

    first: Any
    """The answer to the request as managed (or recovered), as the sender returned it."""
    last: Any
    """The last answer received (a follow-up's, after an escalation or continuation)."""
    data: dict[str, Any] | None
    """The answer's JSON to give the caller: merged, with truncated calls removed. ``None`` if opaque."""
    changed: bool
    """Whether ``data`` differs from ``first``: a shell that holds typed answers rebuilds one from it."""
    report: CallReport

    @property
    def answer(self) -> Any:
        """``first`` as received when nothing changed it, else the JSON in ``data``."""
        return self.data if self.changed else self.first


class ManagedCall:
    """The whole policy of one provider call over wire dicts; drive it with :func:`drive` or :func:`adrive`.

    ``read`` turns what the sender returns into the answer's JSON, or ``None``
    when the answer cannot be read before the caller gets it (a stream, a raw
    response): such calls are recovered from overflow but never lengthened.
    ``lengthen=False`` does the same for readable answers. ``cap`` lowers the
    most ``max_tokens`` may grow to (a non-streaming SDK call refuses more).
    A follow-up (an escalation or a continuation) that fails with one of
    ``followup_errors`` ends the follow-ups with the best answer so far; any
    other exception goes to the caller. ``stream`` marks the report as a
    stream's. ``now`` is when the request arrived (wall-clock seconds, see
    :meth:`Session.manage <toolbudget.Session.manage>`): the flow reads no
    clock itself, so a shell that knows the time passes it.

    After a run, :attr:`climb` and :attr:`stretch` hold the state of each part.
    """

    def __init__(
        self,
        session: Session,
        body: Any,
        api: str | None = None,
        *,
        read: Callable[[Any], Mapping[str, Any] | None] = read_mapping,
        lengthen: bool = True,
        cap: int | None = None,
        followup_errors: tuple[type[BaseException], ...] = (Exception,),
        stream: bool = False,
        now: float | None = None,
    ) -> None:
        self.session = session
        self.now = now
        self.body = body
        self.api = api
        self.read = read
        self.lengthen = lengthen
        self.cap = cap
        self.followup_errors = followup_errors
        self.stream = stream
        self.climb: Climb | None = None
        self.stretch: Stretch | None = None

    def steps(self) -> Steps:
        """The flow: send what it yields, and send it back the answer (or throw in the error)."""
        climb = self.climb = Climb(self.session, self.body, self.api, now=self.now)
        api = climb.api
        full: tuple[Any, Mapping[str, Any], Cutoff] | None = None  # the last answer that filled the window
        while True:
            try:
                answer = yield climb.body
            except Exception as exc:
                error: BaseException = exc
            else:
                data = self.read(answer)
                cut = is_cut_off(data, api) if data is not None else None
                if data is None or cut is None or not cut.context_window:
                    climb.answered()
                    break
                full = (answer, data, cut)
                error = ContextWindowFull(answer, cut)
            if climb.retry(error) is None:  # raises ``error`` itself when it is not an overflow
                if full is not None:
                    return self._window_full(*full)
                assert climb.first_error is not None  # only an overflow leads here
                raise exhausted(climb.first_error, self._report(recovered=False), climb.reason)
        if data is None or not self.lengthen:
            return Outcome(answer, answer, None if data is None else dict(data), False, self._report())
        return (yield from self._lengthen(answer, data))

    def _lengthen(self, first: Any, data: Mapping[str, Any]) -> Steps:
        climb = self.climb
        assert climb is not None
        stretch = self.stretch = Stretch(climb.body, climb.api, self.session.policy, cap=self.cap)
        last = first
        body = stretch.next_body(data)
        while body is not None:
            try:
                last = yield body
            except self.followup_errors as exc:
                body = stretch.failed(exc)
                continue
            body = stretch.next_body(self.read(last) or {})
        result, dropped = stretch.result()
        report = CallReport(
            climb.api,
            climb.managed.report,
            climb.report(bool(climb.attempts)),
            stretch.escalations,
            stretch.continuations,
            tuple(stretch.cutoffs),
            is_cut_off(result, climb.api),
            dropped,
            stretch.error,
        )
        return Outcome(first, last, result, stretch.followed_up or bool(dropped), report)

    def _window_full(self, answer: Any, data: Mapping[str, Any], cut: Cutoff) -> Outcome:
        """The ladder ran out, but the last answer it got (cut by the window) is an answer: give it."""
        climb = self.climb
        assert climb is not None
        result, dropped = finalize(data, climb.api)
        report = CallReport(
            climb.api,
            climb.managed.report,
            climb.report(False),
            cutoffs=(cut,),
            final_cutoff=is_cut_off(result, climb.api) or cut,
            dropped_calls=dropped,
        )
        return Outcome(answer, answer, result, bool(dropped), report)

    def _report(self, *, recovered: bool = True) -> CallReport:
        climb = self.climb
        assert climb is not None
        recovery = climb.report(recovered and bool(climb.attempts))
        if self.stream:
            return CallReport(climb.api, climb.managed.report, recovery, stream=True, stream_finished=False)
        return CallReport(climb.api, climb.managed.report, recovery)


def drive(call: ManagedCall, send: Callable[[Any], Any]) -> Outcome:
    """Run ``call``, sending each body with ``send`` (which returns the answer or raises)."""
    steps = call.steps()
    try:
        body = next(steps)
        while True:
            try:
                answer = send(body)
            except Exception as exc:
                body = steps.throw(exc)
            else:
                body = steps.send(answer)
    except StopIteration as done:
        outcome: Outcome = done.value
        return outcome


async def adrive(
    call: ManagedCall,
    send: Callable[[Any], Awaitable[Any]],
    *,
    heavy: Callable[..., Awaitable[tuple[bool, Any]]] | None = None,
) -> Outcome:
    """:func:`drive` with an async ``send``.

    ``heavy(fn, *args)``, when given, runs the steps that manage a body where
    the caller wants them (the proxy: off its event loop while the store is
    slow): the first step, and each after an error, since a rung of the
    recovery ladder manages the body again. What follows an answer (reading
    it, asking for more of a cut-off one) is light and runs here.
    """
    steps = call.steps()

    async def managing(advance: Callable[[Any], Any], given: Any) -> tuple[bool, Any]:
        return _step(advance, given) if heavy is None else await heavy(_step, advance, given)

    done, value = await managing(steps.send, None)
    while not done:
        try:
            answer = await send(value)
        except Exception as exc:
            done, value = await managing(steps.throw, exc)
        else:
            done, value = _step(steps.send, answer)
    outcome: Outcome = value
    return outcome


def _step(advance: Callable[[Any], Any], given: Any) -> tuple[bool, Any]:
    """One step of a flow: ``(False, body to send)``, or ``(True, outcome)`` when it ended.

    The end is a ``StopIteration``, which a future cannot carry: it is returned instead.
    """
    try:
        return False, advance(given)
    except StopIteration as end:
        return True, end.value


def opaque(answer: Any) -> None:
    """A ``read`` for answers the flow must not look into: a stream, a raw response, a parsed object."""


def _climbed(call: ManagedCall) -> Climb:
    assert call.climb is not None  # the flow has run
    return call.climb


def call_with_recovery(
    session: Session, body: Any, send: Callable[[Any], T], api: str | None = None
) -> tuple[T, Climb]:
    """Manage ``body``, send it, and climb the ladder while the provider says it is too long.

    The flow without its reading of answers: whatever ``send`` returns is the
    answer, never inspected or lengthened.
    """
    call = ManagedCall(session, body, api, read=opaque)
    return drive(call, send).first, _climbed(call)


async def acall_with_recovery(
    session: Session, body: Any, send: Callable[[Any], Awaitable[T]], api: str | None = None
) -> tuple[T, Climb]:
    """:func:`call_with_recovery` for async senders."""
    call = ManagedCall(session, body, api, read=opaque)
    return (await adrive(call, send)).first, _climbed(call)
