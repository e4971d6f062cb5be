"""The public surface is deliberate: ``__all__`` lists exactly what the package offers."""

from __future__ import annotations

import toolbudget


def test_all_names_exist_and_nothing_else_is_advertised() -> None:
    exported = set(toolbudget.__all__)
    assert len(exported) == len(toolbudget.__all__), "a name is listed twice"
    for name in exported:
        assert hasattr(toolbudget, name), name
    public = {n for n in vars(toolbudget) if not n.startswith("_")}
    submodules = {"errors", "model", "pairing", "transcripts", "wire", "jsonio", "annotations"}
    assert public - exported - submodules == set()
    assert {
        "validate",
        "repair",
        "load_transcript",
        "to_request",
        "detect_api",
        "ToolbudgetError",
    } <= exported
