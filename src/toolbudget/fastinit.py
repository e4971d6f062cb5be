"""Frozen value objects built at the cost of plain ones.

A frozen dataclass's ``__init__`` writes each field through
``object.__setattr__``, to get past the ``__setattr__`` that refuses writes:
on the 2-core machine the benchmarks run on, a 16-field frozen slots
dataclass took 3.4 µs to build and a plain one 0.3 µs. Every request an
agent sends builds about a dozen such objects (its report, what the session
keeps for the next request, the budget's trail), and on the small requests
of a session's start that was about a tenth of the request.

:func:`fast_init` gives a frozen slots dataclass a ``__new__`` that fills a
plain *draft* of the same slots (plain attribute stores) and then makes it an
instance of the class by assigning its ``__class__``, which Python allows
between classes of the same layout, as :mod:`toolbudget.wire._build` does
for the model's classes. The class's own ``__init__`` is then
``object.__init__``, which does nothing. Everything else stays the class's
own: it is still frozen, compares, hashes and prints as before, and
``dataclasses.replace``, :mod:`copy` and :mod:`pickle` work as before
(they build through ``__new__``; one called with no argument at all, as
they call it, gives a bare instance for their ``__setstate__`` to fill).
Arguments are taken as the dataclass's ``__init__`` takes them, defaults
and default factories included.

A class with a ``__post_init__``, or whose fields are not all slots, is
refused when decorated: nothing may be skipped silently.
"""

from __future__ import annotations

import inspect
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, TypeVar

__all__ = ["fast_init"]

_T = TypeVar("_T")


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
    draft = type(f"_{cls.__name__}Draft", (), {"__slots__": names, "__module__": cls.__module__})
    # Every name the built function uses besides the fields begins with "_fi_".
    space: dict[str, Any] = {"_fi_Draft": draft, "_fi_missing": MISSING, "_fi_bare": object.__new__}
    params: list[str] = []
    keyword_only = False
    sets: list[str] = []
    given: list[str] = []
    for f in fields(cls):
        name = f.name
        if not f.init:
            if f.default is not MISSING:
                space[f"_fi_d_{name}"] = f.default
                sets.append(f"_fi_obj.{name} = _fi_d_{name}")
            else:
                space[f"_fi_f_{name}"] = f.default_factory
                sets.append(f"_fi_obj.{name} = _fi_f_{name}()")
            continue
        if f.kw_only and not keyword_only:
            params.append("*")
            keyword_only = True
        # Every argument defaults to a sentinel, so that a call with none at all (copy, pickle)
        # is told from one that leaves some out.
        params.append(f"{name}=_fi_missing")
        given.append(name)
        if f.default is not MISSING:
            space[f"_fi_d_{name}"] = f.default
            sets.append(f"_fi_obj.{name} = _fi_d_{name} if {name} is _fi_missing else {name}")
        elif f.default_factory is not MISSING:
            space[f"_fi_f_{name}"] = f.default_factory
            sets.append(f"_fi_obj.{name} = _fi_f_{name}() if {name} is _fi_missing else {name}")
        else:
            sets.append(f"_fi_obj.{name} = {name}")
    required = [
        f.name for f in fields(cls) if f.init and f.default is MISSING and f.default_factory is MISSING
    ]
    check = ""
    if given:
        none = " and ".join(f"{name} is _fi_missing" for name in given)
        check = f"    if {none}:\n        return _fi_bare(_fi_cls)\n"
    if required:
        absent = " or ".join(f"{name} is _fi_missing" for name in required)
        listed = ", ".join(f"({name!r}, {name})" for name in required)
        check += (
            f"    if {absent}:\n"
            f"        left = [n for n, v in ({listed},) if v is _fi_missing]\n"
            f"        raise TypeError('{cls.__name__}() missing required argument(s): ' + ', '.join(left))\n"
        )
    source = (
        f"def __new__(_fi_cls, {', '.join(params)}):\n"
        f"{check}"
        "    _fi_obj = _fi_Draft()\n"
        + "".join(f"    {line}\n" for line in sets)
        + "    _fi_obj.__class__ = _fi_cls\n    return _fi_obj\n"
    )
    exec(source, space)  # made above from the class's own field names and defaults
    probe = draft()
    for name in names:
        setattr(probe, name, None)
    probe.__class__ = cls  # TypeError now, when decorated, if the two layouts ever differ
    # What help() and inspect show stays the dataclass's own signature, not the sentinels.
    own = inspect.signature(cls.__init__)
    type.__setattr__(cls, "__signature__", own.replace(parameters=list(own.parameters.values())[1:]))
    cls.__new__ = staticmethod(space["__new__"])  # type: ignore[method-assign]
    cls.__init__ = object.__init__  # type: ignore[method-assign]
    return cls
