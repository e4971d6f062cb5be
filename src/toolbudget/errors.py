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
    └── UnsupportedClient           ``wrap`` cannot manage that client, or that way of calling it (TypeError)

Errors carry a ``location`` where one is known, written the way providers write
them (``messages.3.content.1``), so the one-line message can point at the spot.
"""

from __future__ import annotations

__all__ = [
    "EncodingError",
    "InputError",
    "InvalidJSON",
    "NotFoundError",
    "ShapeError",
    "StoreConfigError",
    "StoreError",
    "ToolbudgetError",
    "TranscriptError",
    "UnknownAPIError",
    "UnsupportedClient",
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
