"""Frozen value objects built at the cost of plain ones.

A frozen dataclass's ``__init__`` writes each field through
``object.__setattr__``, to get past the ``__setattr__`` that refuses writes:
on the 2-core machine the benchmarks run on, a 16-field frozen slots
dataclass took 3.4 µs to build and a plain one 0.3 µs. Every request an
agent sends builds about a dozen such objects (its report, what the session
keeps for the next request, the budget's trail), and side by side with the
code before (``bench/loop_ab.py``) building them this way made the median
request of six shared sessions 2-10% cheaper.

:func:`fast_init` gives a frozen slots dataclass a ``__new__`` that fills a
plain *draft* of the same slots (plain attribute stores) and then makes it an
instance of the class by assigning its ``__class__``, which Python allows
between classes of the same layout, as :mod:`toolbudget.wire._build` does
for the model's classes. The class's own ``__init__`` is then
``object.__init__``, which does nothing. Everything else stays the class's
own: it is still frozen, compares, hashes and prints as before. It takes its
arguments as the dataclass's ``__init__`` does (defaults, default factories,
keyword-only fields last) and refuses the same bad calls. ``copy`` and
``pickle`` rebuild an object from its state without calling ``__new__``
(:meth:`__reduce_ex__`), and a subclass is built by its own ``__init__``, or
the dataclass's when it has none, since a draft has the layout of the
decorated class alone.

The decorator refuses what it cannot build exactly: a class with a
``__post_init__`` or an ``InitVar``, one whose fields are not exactly its
slots, or whose ``__init__`` takes other arguments than the ones it would.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, TypeVar

__all__ = ["fast_init"]

_T = TypeVar("_T")

_ABSENT = object()
"""What an argument left out is, inside a built ``__new__``: no caller can pass it."""


def fast_init(cls: type[_T]) -> type[_T]:
    """Build instances of the frozen slots dataclass ``cls`` without its ``__init__``.

    Apply above ``@dataclass(frozen=True, slots=True)``.
    """
    params_of: Any = getattr(cls, "__dataclass_params__", None)
    if not is_dataclass(cls) or params_of is None or not params_of.frozen:
        raise TypeError(f"{cls.__name__} is not a frozen dataclass")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__, which fast_init would skip")
    names = tuple(f.name for f in fields(cls))
    if tuple(getattr(cls, "__slots__", ())) != names:
        raise TypeError(f"{cls.__name__}'s fields are not exactly its slots")
    if any(name.startswith("_fi_") for name in names):
        raise TypeError(f"{cls.__name__} has a field named _fi_*, which fast_init's own names use")
    own_init: Callable[..., None] = cls.__init__
    draft = type(f"_{cls.__name__}Draft", (), {"__slots__": names, "__module__": cls.__module__})
    new = _build_new(cls, draft, own_init)
    probe = draft()
    for name in names:
        setattr(probe, name, None)
    probe.__class__ = cls  # TypeError now, when decorated, if the two layouts ever differ
    # What inspect and help show stays the dataclass's own signature.
    own = inspect.signature(own_init)
    type.__setattr__(cls, "__signature__", own.replace(parameters=list(own.parameters.values())[1:]))
    cls.__new__ = staticmethod(new)  # type: ignore[method-assign]
    cls.__init__ = object.__init__  # type: ignore[method-assign]
    type.__setattr__(cls, "__reduce_ex__", _reduce_ex)
    type.__setattr__(cls, "__init_subclass__", classmethod(_subclass_builds_itself(cls, own_init)))
    return cls


def _build_new(cls: type, draft: type, own_init: Callable[..., None]) -> Callable[..., Any]:
    """The ``__new__`` of ``cls``: its arguments as ``own_init`` takes them, its fields set on a draft."""
    space: dict[str, Any] = {
        "_fi_Draft": draft,
        "_fi_ABSENT": _ABSENT,
        "_fi_TypeError": TypeError,
    }
    positional: list[str] = []
    keyword: list[str] = []
    sets: list[str] = []
    required: list[str] = []
    for f in fields(cls):
        name = f.name
        default: str | None = None  # the expression of the field's default, if it has one
        if f.default is not MISSING:
            space[f"_fi_d_{name}"] = f.default
            default = f"_fi_d_{name}"
        elif f.default_factory is not MISSING:
            space[f"_fi_f_{name}"] = f.default_factory
            default = f"_fi_f_{name}()"
        if not f.init:
            if default is not None:  # without one, the dataclass leaves the slot unset too
                sets.append(f"_fi_obj.{name} = {default}")
            continue
        (keyword if f.kw_only else positional).append(f"{name}=_fi_ABSENT")
        if default is None:
            required.append(name)
            sets.append(f"_fi_obj.{name} = {name}")
        else:
            sets.append(f"_fi_obj.{name} = {default} if {name} is _fi_ABSENT else {name}")
    params = ["_fi_cls", *positional, *(["*", *keyword] if keyword else [])]
    as_keyword = inspect.Parameter.KEYWORD_ONLY
    as_either = inspect.Parameter.POSITIONAL_OR_KEYWORD
    built = [(p.split("=")[0], as_either) for p in positional] + [
        (p.split("=")[0], as_keyword) for p in keyword
    ]
    takes = [(p.name, p.kind) for p in list(inspect.signature(own_init).parameters.values())[1:]]
    if built != takes:
        wanted = [name for name, _ in takes]
        raise TypeError(f"{cls.__name__}.__init__ takes {wanted} otherwise than fast_init would")
    lines = [f"def __init__({', '.join(params)}):"]
    if required:
        absent = " or ".join(f"{name} is _fi_ABSENT" for name in required)
        listed = ", ".join(f"({name!r}, {name})" for name in required)
        lines += [
            f"    if {absent}:",
            f"        _fi_left = [n for n, v in ({listed},) if v is _fi_ABSENT]",
            f"        raise _fi_TypeError('{cls.__qualname__}.__init__() missing required argument(s): '"
            " + ', '.join(_fi_left))",
        ]
    lines.append("    _fi_obj = _fi_Draft()")
    lines += [f"    {line}" for line in sets]
    lines += ["    _fi_obj.__class__ = _fi_cls", "    return _fi_obj"]
    exec("\n".join(lines) + "\n", space)  # made above from the class's own field names and defaults
    new: Any = space["__init__"]
    # Named as the dataclass's __init__, so that Python's own errors (an unexpected keyword, an
    # argument given twice) name what the caller called.
    new.__code__ = new.__code__.replace(co_qualname=f"{cls.__qualname__}.__init__")
    new.__qualname__ = f"{cls.__qualname__}.__init__"
    return new  # type: ignore[no-any-return]


def _reduce_ex(self: Any, protocol: Any) -> tuple[Any, ...]:
    """``copy`` and ``pickle``: a bare object of the class, then the dataclass's ``__setstate__``."""
    return (object.__new__, (type(self),), self.__getstate__())


def _subclass_builds_itself(top: type, own_init: Callable[..., None]) -> Callable[..., None]:
    """A subclass's ``__init_subclass__``: it is built as a plain dataclass is (a draft has the
    layout of ``top`` alone), by its own ``__init__`` (a ``@dataclass`` on it makes one), or by
    the one of ``top``'s dataclass when it has none."""

    def new(cls: Any, *args: Any, **kwargs: Any) -> Any:
        obj = object.__new__(cls)
        if cls.__init__ is object.__init__:
            own_init(obj, *args, **kwargs)
        return obj

    def init_subclass(sub: type, **kwargs: Any) -> None:
        above: Any = top
        super(above, sub).__init_subclass__(**kwargs)
        type.__setattr__(sub, "__new__", staticmethod(new))

    return init_subclass
