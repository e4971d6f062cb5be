"""A transparent stand-in for an SDK object: everything not intercepted goes to the real one."""

from __future__ import annotations

from typing import Any

from ._call import Wrapping

__all__ = ["AsyncClientProxy", "ClientProxy", "Proxy"]


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


class ClientProxy(Proxy):
    """A wrapped sync client: its copies (``with_options``, ``copy``) are wrapped too, with the same session.

    Closing it (``close``, or leaving its ``with`` block) also closes the session
    ``wrap`` made for it, which removes that session's workspace.
    """

    def with_options(self, *args: Any, **kwargs: Any) -> Any:
        return type(self)(self._inner.with_options(*args, **kwargs), self._wrapping)

    def copy(self, *args: Any, **kwargs: Any) -> Any:
        return type(self)(self._inner.copy(*args, **kwargs), self._wrapping)

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
            self._wrapping.close()


class AsyncClientProxy(Proxy):
    """A wrapped async client: :class:`ClientProxy` with ``async`` closing."""

    def with_options(self, *args: Any, **kwargs: Any) -> Any:
        return type(self)(self._inner.with_options(*args, **kwargs), self._wrapping)

    def copy(self, *args: Any, **kwargs: Any) -> Any:
        return type(self)(self._inner.copy(*args, **kwargs), self._wrapping)

    async def close(self) -> None:
        try:
            await self._inner.close()
        finally:
            self._wrapping.close()

    async def __aenter__(self) -> Any:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self._inner.__aexit__(*exc)
        finally:
            self._wrapping.close()
