"""A transparent stand-in for an SDK object: everything not intercepted goes to the real one."""

from __future__ import annotations

from typing import Any

from ._call import Wrapping

__all__ = ["Proxy"]


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
