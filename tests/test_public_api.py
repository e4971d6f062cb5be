"""The public surface is deliberate: ``__all__`` lists exactly what the package offers."""

from __future__ import annotations

import types

import toolbudget


def test_all_names_exist_and_nothing_else_is_advertised() -> None:
    exported = set(toolbudget.__all__)
    assert len(exported) == len(toolbudget.__all__), "a name is listed twice"
    for name in exported:
        assert hasattr(toolbudget, name), name
    public = {
        name
        for name, value in vars(toolbudget).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }
    assert public - exported == set()
    assert {
        "validate",
        "repair",
        "load_transcript",
        "to_request",
        "detect_api",
        "ToolbudgetError",
    } <= exported
