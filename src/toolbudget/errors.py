"""The one exception tree of toolbudget.

Every error the library raises on purpose is a :class:`ToolbudgetError`, so a
caller can catch the whole family in one place. The tree separates whose fault
an error is, because the shells translate each branch differently (the CLI into
an exit status, the proxy into an HTTP status)::

    ToolbudgetError
    ├── InputError                  the caller gave something we cannot use (ValueError)
    │   ├── InvalidJSON             not JSON at all, or truncated
    │   ├── EncodingError           bytes that are not UTF-8, or lone surrogates
    │   ├── ShapeError              JSON of the wrong shape for its API (unknown role, part type...)
    │   ├── UnknownAPIError         no such wire API, or a body whose API cannot be told
    │   └── TranscriptError         a session file that cannot be read as a transcript
    ├── NotFoundError               no archived original has that key in this session (LookupError)
    ├── StoreError                  the archive store failed (disk, database, network)
    │   └── StoreConfigError        the store cannot work as configured (its driver is not installed)
    ├── UnsupportedClient           ``wrap`` cannot manage that client, or that way of calling it (TypeError)
    ├── UpstreamError               the provider answered with an HTTP error, kept byte for byte
    ├── ContextWindowFull           an answer was stopped by the context window (read as an overflow)
    └── RecoveryExhausted           recovery from an overflow gave up; ``.error`` is the provider's error

A :class:`RecoveryExhausted` made by :func:`exhausted` is, where the provider's
error class allows, also an instance of that class (``anthropic.BadRequestError``),
so code that catches the SDK's own error keeps working.

Errors carry a ``location`` where one is known, written the way providers write
them (``messages.3.content.1``), so the one-line message can point at the spot.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .callreport import CallReport
    from .recovery.output import Cutoff

__all__ = [
    "ContextWindowFull",
    "EncodingError",
    "InputError",
    "InvalidJSON",
    "NotFoundError",
    "RecoveryExhausted",
    "ShapeError",
    "StoreConfigError",
    "StoreError",
    "ToolbudgetError",
    "TranscriptError",
    "UnknownAPIError",
    "UnsupportedClient",
    "UpstreamError",
    "exhausted",
]


class ToolbudgetError(Exception):
    """Base of every error toolbudget raises on purpose."""


class InputError(ToolbudgetError, ValueError):
    """The input cannot be used as given. Nothing was changed."""

    def __init__(self, message: str, *, location: str | None = None) -> None:
        self.location = location
        super().__init__(f"{location}: {message}" if location else message)


class InvalidJSON(InputError):
    """The text is not JSON, is empty, or stops in the middle of a value."""


class EncodingError(InputError):
    """The bytes are not UTF-8, or a string holds a lone surrogate."""


class ShapeError(InputError):
    """Valid JSON, but not a body (or transcript) of the expected shape."""


class UnknownAPIError(InputError):
    """The wire API named is not one we know, or a body's API cannot be told."""


class TranscriptError(InputError):
    """A session file is not in any transcript format we read, or is damaged."""


class NotFoundError(ToolbudgetError, LookupError):
    """No archived original has that key in this session (or the key is not a key at all)."""


class StoreError(ToolbudgetError):
    """The archive store could not keep or return an entry."""


class StoreConfigError(StoreError):
    """The store cannot work as configured, for example its driver is not installed.

    Unlike a store that is down, which costs cuts their recall until it is
    back, this never gets better by waiting: a session refuses to start.
    """


class UnsupportedClient(ToolbudgetError, TypeError):
    """``wrap`` was given a client it cannot manage, or a wrapped client was called a way it does not manage.

    Raised rather than letting a request go out unmanaged: the message names the
    client or the method (``beta.messages.tool_runner``) and what to call instead.
    """


class UpstreamError(ToolbudgetError):
    """The provider answered with an HTTP error: its status, headers and body exactly as they came.

    A proxy raises it where the upstream refused a request, and returns the
    three unchanged to its own caller: the body stays bytes, and the headers a
    tuple of ``(name, value)`` pairs in their order and case, repeated names
    included (from an ``httpx.Headers``, its raw pairs, read as Latin-1 as
    HTTP defines them), since re-encoding either would change what the client reads.
    :func:`~toolbudget.recovery.classify` reads it like any HTTP error (the
    status, the body's JSON, Bedrock's ``x-amzn-errortype`` header).
    """

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def __init__(
        self,
        status: int,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        body: bytes | bytearray | memoryview = b"",
    ) -> None:
        if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
            raise InputError(f"an HTTP status is a number from 100 to 599, not {status!r}")
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise InputError(f"an upstream body is bytes, not {type(body).__name__}")
        self.status = status
        self.headers = _header_pairs(headers)
        self.body = bytes(body)
        super().__init__(f"the upstream answered HTTP {status}{_excerpt(self.body)}")

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (any case), or ``None``."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)


def _header_pairs(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    raw = getattr(headers, "raw", None)  # httpx.Headers: the names in their case, repeats kept
    if isinstance(raw, list):
        items: Iterable[Any] = [
            tuple(part.decode("latin-1") if isinstance(part, bytes) else part for part in pair)
            for pair in raw
        ]
    elif isinstance(headers, Mapping):
        items = headers.items()
    else:
        items = headers
    pairs: list[tuple[str, str]] = []
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2 and all(isinstance(v, str) for v in item)):
            raise InputError(f"upstream headers are (name, value) pairs of text, not {item!r}")
        pairs.append(item)
    return tuple(pairs)


_EXCERPT_CHARS = 300


def _excerpt(body: bytes) -> str:
    """The start of the body, on one line, for the message (the body itself stays whole)."""
    text = " ".join(body[: _EXCERPT_CHARS * 4].decode("utf-8", errors="replace").split())
    if not text:
        return ""
    return f": {text[:_EXCERPT_CHARS]}{'...' if len(text) > _EXCERPT_CHARS else ''}"


class ContextWindowFull(ToolbudgetError):
    """An answer stopped by the context window, raised inside a send so the ladder shrinks the history.

    It carries what a provider's overflow error would (``code``), so
    :func:`~toolbudget.recovery.classify` reads it as a context overflow, and
    the cut answer itself, for when the ladder has nothing smaller to send.
    """

    code = "model_context_window_exceeded"

    def __init__(self, response: Any, cutoff: Cutoff) -> None:
        self.response = response
        self.cutoff = cutoff
        tokens = f" after {cutoff.output_tokens} output tokens" if cutoff.output_tokens is not None else ""
        super().__init__(f"the answer filled the model's context window ({cutoff.reason!r}{tokens})")


class RecoveryExhausted(ToolbudgetError):
    """Recovery from a context overflow gave up: nothing smaller fits, or its attempts ran out.

    ``error`` is the provider's error that started recovery, as it was raised;
    ``report`` the call's :class:`~toolbudget.CallReport` (what managing the
    history did, and in ``report.recovery`` the levels tried); ``reason`` why
    it stopped. ``toolbudget_report`` is the name the report had before this
    class existed. Make one with :func:`exhausted`, which keeps the
    provider's class catchable too.
    """

    error: BaseException
    report: CallReport
    reason: str | None
    toolbudget_report: Any

    def __init__(self, error: BaseException, report: CallReport, reason: str | None = None) -> None:
        _attach(self, error, report, reason)
        why = f" ({reason})" if reason else ""
        super().__init__(f"recovery from the context overflow gave up{why}: {type(error).__name__}: {error}")

    def __reduce__(self) -> tuple[Any, ...]:
        # Copies and pickles are made again by exhausted(): neither this __init__ nor the
        # provider's can be called with the args alone.
        return (exhausted, (self.error, self.report, self.reason), dict(vars(self)))


def _attach(target: RecoveryExhausted, error: BaseException, report: CallReport, reason: str | None) -> None:
    target.error = error
    target.report = report
    target.reason = reason
    target.toolbudget_report = report


_EXHAUSTED: dict[type[BaseException], type[RecoveryExhausted] | None] = {}
"""One give-up class per provider error class (``None``: that class cannot be subclassed)."""


def exhausted(error: BaseException, report: CallReport, reason: str | None = None) -> RecoveryExhausted:
    """The error to raise when recovery gives up on ``error``: a :class:`RecoveryExhausted`.

    Where ``type(error)`` can be subclassed, the result is an instance of
    ``RecoveryExhausted[ThatClass]``, a class made once per error class that
    derives from both, holding a copy of the error's state (its attributes,
    ``args``, traceback, cause, context and notes) without calling its
    ``__init__``: ``except anthropic.BadRequestError``, ``exc.status_code``,
    ``exc.body`` and ``str(exc)`` behave as on the provider's error, and
    ``except ToolbudgetError``, ``exc.error``, ``exc.report`` as on ours.
    Otherwise (a final class, a layout a subclass cannot share, state that
    cannot be copied) it is a plain :class:`RecoveryExhausted` whose
    ``__cause__`` is ``error``. ``error`` itself is never changed.
    """
    kind = _exhausted_class(type(error))
    if kind is not None:
        try:
            return _copy_into(kind, error, report, reason)
        except Exception:  # a foreign __new__ or slot that refuses: fall back, never fail the give-up
            pass
    plain = RecoveryExhausted(error, report, reason)
    plain.__cause__ = error
    return plain


def _exhausted_class(cls: type[BaseException]) -> type[RecoveryExhausted] | None:
    if issubclass(cls, RecoveryExhausted):
        return cls  # already both: a give-up seen through another wrapped client
    if not issubclass(cls, Exception):
        return None  # KeyboardInterrupt and friends stay what they are
    if not _plain_layout(cls):
        return None  # OSError's errno, StopIteration's value...: C fields a copy would lose
    if cls in _EXHAUSTED:
        return _EXHAUSTED[cls]
    name = f"RecoveryExhausted[{cls.__name__}]"
    made: type[RecoveryExhausted] | None
    try:
        made = type(
            name,
            (RecoveryExhausted, cls),
            {
                "__module__": __name__,
                "__qualname__": name,
                "__doc__": f"A {cls.__module__}.{cls.__qualname__} on which recovery gave up.",
            },
        )
    except TypeError:  # final class, instance layout conflict, metaclass conflict
        made = None
    return _EXHAUSTED.setdefault(cls, made)  # two threads racing keep one class


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement, not in C


def _plain_layout(cls: type) -> bool:
    """Whether every C-level base of ``cls`` keeps no more state than ``BaseException`` does.

    Then an instance's whole state is ``args``, the traceback, cause, context
    and the attributes in its ``__dict__`` and slots, all of which
    :func:`_copy_into` copies.
    """
    size = BaseException.__basicsize__
    return all(
        klass is object or klass.__flags__ & _HEAPTYPE or klass.__basicsize__ == size for klass in cls.__mro__
    )


def _copy_into(
    kind: type[RecoveryExhausted], error: BaseException, report: CallReport, reason: str | None
) -> RecoveryExhausted:
    made = kind.__new__(kind, *error.args)
    made.args = error.args
    state = getattr(error, "__dict__", None)
    if state:
        made.__dict__.update(state)
        notes = state.get("__notes__")
        if isinstance(notes, list):
            made.__dict__["__notes__"] = list(notes)  # add_note on ours must not reach theirs
    for name in _slot_names(type(error)):
        try:
            value = getattr(error, name)
        except AttributeError:
            continue  # an unset slot stays unset
        setattr(made, name, value)
    made.__traceback__ = error.__traceback__
    made.__cause__ = error.__cause__
    made.__context__ = error.__context__
    made.__suppress_context__ = error.__suppress_context__
    _attach(made, error, report, reason)
    if reason:
        made.add_note(f"toolbudget: recovery gave up: {reason}")
    return made


def _slot_names(cls: type) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot in ("__dict__", "__weakref__"):
                continue
            if slot.startswith("__") and not slot.endswith("__"):
                slot = f"_{klass.__name__.lstrip('_')}{slot}"  # a private slot is stored mangled
            names.append(slot)
    return names
