"""The package's layout: no module reaches into another package's private modules or names.

A leading underscore says "this package's own business": a module may use its
own package's ``_private`` modules and its own ``_names``, never another's,
or every refactoring inside one package would break another. Shared helpers
are offered by their package's ``__init__`` instead. The same goes for other
projects' privates, with the exceptions listed below, each decided on purpose.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Another project's private name, read on purpose: (file, what), and why.
DECIDED = {
    ("toolbudget/clients/_anthropic.py", "anthropic._constants"): (
        "the SDK's per-model non-streaming limits have no public form; read defensively, with a fallback"
    ),
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_of(path: Path) -> tuple[str, str]:
    """The dotted name of the module at ``path`` (under ``src``), and of the package it belongs to."""
    parts = list(path.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def _owner_of_private(dotted: str) -> str | None:
    """The package whose private module ``dotted`` is (``a.b`` for ``a.b._c.d``), or ``None``."""
    parts = dotted.split(".")
    for at, part in enumerate(parts):
        if _private(part):
            return ".".join(parts[:at])
    return None


def _inside(package: str, owner: str) -> bool:
    return package == owner or package.startswith(owner + ".")


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def reaches(path: Path, source: str) -> list[str]:
    """Every private module or name of another package (or module) that ``source``, at ``path``, uses."""
    module, package = _module_of(path)
    tree = ast.parse(source)
    found: list[str] = []
    imported: set[str] = set()  # names bound to modules of other projects by ``import x``
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported.add((alias.asname or alias.name).partition(".")[0])
                owner = _owner_of_private(alias.name)
                if owner is not None and not _inside(package, owner):
                    found.append(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            owner = _owner_of_private(source)
            if owner is not None and not _inside(package, owner):
                found.append(source)
            for alias in node.names:
                if _private(alias.name) and source != module:
                    found.append(f"{source}.{alias.name}")
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            dotted = _dotted(node)
            if dotted and dotted.partition(".")[0] in imported:
                found.append(dotted)
        elif isinstance(node, ast.Call) and _dotted(node.func) in (
            "importlib.import_module",
            "import_module",
        ):
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                name = node.args[0].value
                owner = _owner_of_private(name)
                if owner is not None and not _inside(package, owner):
                    found.append(name)
    return found


def test_no_module_reaches_into_another_packages_private_parts() -> None:
    offending = []
    seen_decided = set()
    for path in sorted((SRC / "toolbudget").rglob("*.py")):
        where = path.relative_to(SRC).as_posix()
        for what in reaches(path.relative_to(SRC), path.read_text(encoding="utf-8")):
            if (where, what) in DECIDED:
                seen_decided.add((where, what))
            else:
                offending.append(f"{where}: {what}")
    assert offending == []
    assert seen_decided == set(DECIDED), "an exception below is no longer needed: remove it"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from ..wire._common import dumps_text", ["toolbudget.wire._common"]),
        ("from ._base import Span", []),
        ("from ..previews import _lines", ["toolbudget.previews._lines"]),
        ("from ..budget import _helper", ["toolbudget.budget._helper"]),
        ("from .ladder import _Goal", ["toolbudget.recovery.ladder._Goal"]),
        ("import json\njson.encoder._make_iterencode", ["json.encoder._make_iterencode"]),
        ("import importlib\nimportlib.import_module('anthropic._constants')", ["anthropic._constants"]),
        ("def f(self):\n    return self._own", []),
    ],
)
def test_the_check_sees_each_kind_of_reach(source: str, expected: list[str]) -> None:
    assert reaches(Path("toolbudget/recovery/probe.py"), source) == expected


# --------------------------------------------------------------------------- one meaning for "convert"


def test_convert_means_a_conversation_made_into_a_request_body() -> None:
    import toolbudget
    import toolbudget.convert
    from toolbudget import wire
    from toolbudget.model import Conversation, Message, Request, Text

    assert isinstance(toolbudget.convert, ModuleType)  # the module, no longer shadowed by a function
    assert toolbudget.to_request is toolbudget.convert.to_request
    assert not hasattr(wire, "convert") and "convert" not in toolbudget.__all__
    conversation = Conversation("c", "test", (Message("user", (Text("hi"),)),))
    body = toolbudget.to_request(conversation, "gemini")
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    adapted = toolbudget.adapt(
        wire.parse(toolbudget.to_request(conversation, "anthropic"), "anthropic"), "gemini"
    )
    assert isinstance(adapted, Request) and adapted.api == "gemini"
    assert wire.render(adapted) == body


# --------------------------------------------------------------------------- the SDK's private table


def _cap_of(model: str) -> int | None:
    from toolbudget.clients._anthropic import _cap
    from toolbudget.clients._body import CallArgs

    return _cap(CallArgs({"model": model, "max_tokens": 1}, {}, frozenset({"model", "max_tokens"})))


def test_the_sdks_nonstreaming_limits_are_read_from_the_sdk() -> None:
    from toolbudget.clients._anthropic import sdk_nonstreaming_tokens

    constants = importlib.import_module("anthropic._constants")
    assert sdk_nonstreaming_tokens() is constants.MODEL_NONSTREAMING_TOKENS
    assert _cap_of("claude-opus-4-0") == min(21_333, constants.MODEL_NONSTREAMING_TOKENS["claude-opus-4-0"])
    assert _cap_of("claude-sonnet-4-6") == 21_333


@pytest.mark.parametrize("broken", ["missing module", "missing name", "not a table"])
def test_the_sdks_nonstreaming_limits_fall_back_when_the_sdk_moves_them(
    monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    constants: Any = importlib.import_module("anthropic._constants")
    if broken == "missing module":
        monkeypatch.setitem(sys.modules, "anthropic._constants", None)
    elif broken == "missing name":
        monkeypatch.delattr(constants, "MODEL_NONSTREAMING_TOKENS")
    else:
        monkeypatch.setattr(constants, "MODEL_NONSTREAMING_TOKENS", [("claude-opus-4-0", 8_192)])
    assert _cap_of("claude-opus-4-0") == 8_192  # the SDK would refuse more without streaming
    assert _cap_of("claude-opus-4-1@20250805") == 8_192
    assert _cap_of("claude-sonnet-4-6") == 21_333
