"""The writer for bodies orjson cannot write (integers past 64 bits, deep nesting) that hold literals.

It lays values out exactly as ``json.dumps`` does, and writes kept literals
verbatim, without the standard library's private encoder.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbudget.errors import ShapeError
from toolbudget.jsonio import ExactFloat, ExactInt, dumps, loads_exact
from toolbudget.jsonio import _with_literals as with_literals

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(values, st.booleans())
def test_the_layout_is_the_standard_librarys(value: Any, indent: bool) -> None:
    expected = json.dumps(
        value,
        ensure_ascii=False,
        allow_nan=False,
        indent=2 if indent else None,
        separators=(",", ": ") if indent else (",", ":"),
    )
    assert with_literals(value, indent) == expected


def test_kept_literals_are_written_verbatim_where_orjson_cannot_write() -> None:
    body = loads_exact(
        b'{"n": [1E5, -0, 1.50, 123456789012345678901234567890], "1E2": {"k": 1.0000000000000000000001}}'
    )
    assert body is not None
    assert (
        dumps(body)
        == b'{"n":[1E5,-0,1.50,123456789012345678901234567890],"1E2":{"k":1.0000000000000000000001}}'
    )
    assert dumps(body, indent=True).decode() == (
        '{\n  "n": [\n    1E5,\n    -0,\n    1.50,\n    123456789012345678901234567890\n  ],\n'
        '  "1E2": {\n    "k": 1.0000000000000000000001\n  }\n}'
    )
    keys = {ExactInt("-0"): 1, ExactFloat("1E5"): 2, 7: 3, True: 4, None: 5, "big": 2**70}
    assert (
        with_literals(keys, False) == '{"-0":1,"1E5":2,"7":3,"true":4,"null":5,"big":1180591620717411303424}'
    )


@pytest.mark.parametrize(
    "value",
    [
        [float("nan"), ExactInt("-0"), 2**70],
        {(1, 2): ExactInt("-0"), "big": 2**70},
        [object(), ExactInt("-0"), 2**70],
    ],
    ids=["nan", "tuple-key", "object"],
)
def test_what_json_cannot_hold_is_a_shape_error(value: Any) -> None:
    with pytest.raises(ShapeError):
        dumps(value)


def test_a_cycle_is_refused_like_the_standard_library_refuses_it() -> None:
    cycle: list[Any] = [ExactInt("-0"), 2**70]
    cycle.append(cycle)
    with pytest.raises(ShapeError, match="Circular reference detected"):
        dumps(cycle)
    shared = [ExactInt("-0")]
    assert with_literals([shared, shared, 2**70], False) == "[[-0],[-0],1180591620717411303424]"


def test_literals_of_a_body_nested_past_pythons_stack_give_the_body_back_not_a_recursion_error() -> None:
    import orjson

    from toolbudget.jsonio import keep_literals

    raw = b'{"a":' + b"[" * 990 + b"1.50" + b"]" * 990 + b',"b":1.50}'
    parsed = orjson.loads(raw)
    out = {**parsed, "c": 1}
    kept = keep_literals(out, parsed, raw)
    assert kept is out  # the numbers go as they were read; writing it is the caller's ShapeError
    with pytest.raises(ShapeError):
        dumps(kept)
