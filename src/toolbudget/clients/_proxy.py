"""A transparent stand-in for an SDK object: everything not intercepted goes to the real one."""

from __future__ import annotations

import warnings
from typing import Any

from ..session import Session
from ._call import Wrapping

__all__ = ["Held", "Owned", "Proxy"]


class Proxy:
    """Delegates every attribute it does not define to the wrapped object.

    ``isinstance(proxy, type(wrapped))`` holds (``__class__`` answers with the
    wrapped type, as ``unittest.mock`` and ``wrapt`` do), so code that checks
    for an ``anthropic.Anthropic`` or an ``openai.OpenAI`` still accepts it.
    """

    __slots__ = ("_inner", "_wrapping")

    _inner: Any
    _wrapping: Wrapping

    def __init__(self, inner: Any, wrapping: Wrapping) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_wrapping", wrapping)

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return type(self._inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._inner)) | set(object.__dir__(self)))

    def __repr__(self) -> str:
        return f"<toolbudget-managed {self._inner!r}>"


class Held(Proxy):
    """A wrapped client, sync or async: its session exposed as ``client.toolbudget``.

    Closing the client (``close()``, or leaving ``with wrap(...) as c:``) also
    closes the session ``wrap`` made for it. Leaving the block never raises for
    the session: a store that fails to close is reported as a warning, so it
    cannot hide the exception that ended the block, nor turn a clean exit into one.
    """

    __slots__ = ()

    @property
    def toolbudget(self) -> Session:
        """The session that manages this client's conversation (made on first use when ``wrap`` got none)."""
        return self._wrapping.session

    def _close_session(self) -> None:
        try:
            self._wrapping.close()
        except Exception as exc:
            warnings.warn(f"toolbudget: the session could not be closed: {exc}", RuntimeWarning, stacklevel=3)


class Owned(Held):
    """A wrapped sync client, closed with its session."""

    __slots__ = ()

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._wrapping.close()

    def __enter__(self) -> Any:
        self._inner.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._inner.__exit__(*exc)
        finally:
            self._close_session()
