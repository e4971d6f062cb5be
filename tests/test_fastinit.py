"""``fast_init`` builds the same objects the dataclass's own ``__init__`` builds, and keeps them frozen."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from dataclasses import InitVar, dataclass, field
from typing import Any

import pytest

from toolbudget._fastinit import fast_init
from toolbudget.budget import Budgeted, Cut, Trail, Unreachable
from toolbudget.compaction import SlotInfo
from toolbudget.incremental import Prefix
from toolbudget.session import Managed, Report


def _sample(name: str) -> type[Any]:
    """One frozen slots dataclass, made anew under ``name`` (a module-level name, for pickle)."""
    spec: dict[str, Any] = {
        "__module__": __name__,
        "__qualname__": name,
        "__annotations__": {
            "a": "int",
            "g": "int",
            "b": "str",
            "c": "tuple[int, ...]",
            "d": "dict[str, int]",
            "e": "Any",
            "f": "list[int]",
        },
        "c": (),
        "d": field(default_factory=dict),
        "e": field(default=None, init=False, compare=False),
        "f": field(default_factory=list, init=False),
        # Keyword-only, and declared before the fields it comes after in __init__.
        "g": field(default=7, kw_only=True),
    }
    return dataclass(frozen=True, slots=True)(type(name, (), spec))


_Plain = _sample("_Plain")
_Fast = fast_init(_sample("_Fast"))


def _both() -> tuple[type[Any], type[Any]]:
    return _Plain, _Fast


def _state(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((1, "x"), {}),
        ((1, "x", (2, 3)), {}),
        ((1,), {"b": "y", "d": {"k": 1}}),
        ((), {"a": 2, "b": "z", "c": (1,), "d": {}, "g": 9}),
    ],
)
def test_the_same_fields_as_the_dataclass_init(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    plain, fast = _both()
    made, quick = plain(*args, **kwargs), fast(*args, **kwargs)
    assert type(quick) is fast
    assert _state(quick) == _state(made)
    assert repr(quick).replace(fast.__qualname__, "") == repr(made).replace(plain.__qualname__, "")
    # Default factories give each object its own value, as they do in the dataclass.
    assert quick.d is not fast(*args, **kwargs).d or "d" in kwargs
    assert quick.f is not fast(*args, **kwargs).f


def test_still_frozen_and_a_value() -> None:
    _, fast = _both()
    obj = fast(1, "x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        obj.a = 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        del obj.b
    assert obj == fast(1, "x") and obj != fast(2, "x")
    assert dataclasses.replace(obj, a=5) == fast(5, "x")
    assert copy.copy(obj) == obj and copy.deepcopy(obj) == obj
    assert pickle.loads(pickle.dumps(obj)) == obj


def test_shows_the_dataclass_signature() -> None:
    plain, fast = _both()
    assert str(inspect.signature(fast)) == str(inspect.signature(plain))
    assert "_fi_" not in str(inspect.signature(Report))


def test_bad_calls_fail_as_the_dataclass_does() -> None:
    plain, fast = _both()
    for cls in (plain, fast):
        with pytest.raises(TypeError, match="b"):
            cls(1)
        with pytest.raises(TypeError):
            cls(1, "x", (), {}, 3)  # `g` is keyword-only
        with pytest.raises(TypeError):
            cls(1, "x", e=3)  # not an argument of __init__
    with pytest.raises(TypeError, match=r"missing required argument.*a, b"):
        fast(c=(1,))


def test_no_argument_at_all_is_a_bad_call_too() -> None:
    plain, fast = _both()
    for cls in (plain, fast):
        with pytest.raises(TypeError):
            cls()
    with pytest.raises(TypeError, match=r"_Fast.__init__\(\) got an unexpected keyword argument 'z'"):
        fast(1, "x", z=1)
    with pytest.raises(TypeError, match=r"_Fast.__init__\(\) missing required argument\(s\): a, b"):
        fast()


def test_a_class_of_defaults_alone_and_a_field_left_unset() -> None:
    def make(name: str) -> type[Any]:
        spec: dict[str, Any] = {
            "__module__": __name__,
            "__qualname__": name,
            "__annotations__": {"a": "int", "b": "list[int]", "unset": "int"},
            "a": 1,
            "b": field(default_factory=list),
            "unset": field(init=False, compare=False, repr=False),
        }
        return dataclass(frozen=True, slots=True)(type(name, (), spec))

    plain, fast = make("Plain"), fast_init(make("Fast"))
    made, quick = plain(), fast()
    assert (quick.a, quick.b) == (made.a, made.b) == (1, [])
    assert not hasattr(quick, "unset") and not hasattr(made, "unset")


def test_a_missing_sentinel_is_a_value_like_any_other() -> None:
    plain, fast = _both()
    assert fast(dataclasses.MISSING, "x").a is plain(dataclasses.MISSING, "x").a is dataclasses.MISSING
    assert fast(1, "x", c=dataclasses.MISSING).c is dataclasses.MISSING


def test_subclasses_are_built_by_the_dataclass_init() -> None:
    plain = type("Plain", (_Fast,), {"__slots__": ("extra",)})
    obj = plain(1, "x", g=3)
    assert _state(obj) == _state(_Plain(1, "x", g=3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        obj.a = 2

    spec = {"__module__": __name__, "__qualname__": "More", "__annotations__": {"h": "int"}, "h": 5}
    more_fields: Any = dataclass(frozen=True, slots=True)(type("More", (_Fast,), spec))
    more = more_fields(1, "x", (2,), h=6)
    assert (more.a, more.b, more.c, more.h) == (1, "x", (2,), 6)
    assert more_fields(1, "x").h == 5


def test_refuses_what_it_would_get_wrong() -> None:
    @dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            raise AssertionError

    with pytest.raises(TypeError, match="__post_init__"):
        fast_init(Checked)

    @dataclass(slots=True)
    class Mutable:
        a: int

    with pytest.raises(TypeError, match="not a frozen dataclass"):
        fast_init(Mutable)

    @dataclass(frozen=True)
    class NoSlots:
        a: int

    with pytest.raises(TypeError, match="slots"):
        fast_init(NoSlots)

    @dataclass(frozen=True, slots=True)
    class WithInitVar:
        a: int
        b: InitVar[int] = 0

    with pytest.raises(TypeError, match="otherwise than fast_init would"):
        fast_init(WithInitVar)


@pytest.mark.parametrize("cls", [Report, Managed, Prefix, Budgeted, Trail, Cut, Unreachable, SlotInfo])
def test_the_value_classes_built_every_request_use_it(cls: type[Any]) -> None:
    """The classes it is on build through ``__new__`` and keep the frozen ``__setattr__``."""
    assert cls.__init__ is object.__init__
    assert "__new__" in vars(cls)
    with pytest.raises(dataclasses.FrozenInstanceError):
        object.__new__(cls).__setattr__(dataclasses.fields(cls)[0].name, None)
