"""The library installs with orjson and google-re2 alone; the command line is the ``cli`` extra.

Without click or rich, ``import toolbudget`` and every library module work, and
the console script says how to install the command line in one line (exit 2)
instead of dying in a traceback. The packages are hidden from a fresh
interpreter by ``sys.modules[name] = None``, which makes any import of them
fail as a missing package does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
HINT = "pip install 'toolbudget[cli]'"
CLI_ONLY = {
    "toolbudget.cli",
    "toolbudget.cli_input",
    "toolbudget.cli_progress",
    "toolbudget.demo",
    "toolbudget.__main__",
    "toolbudget.inspection_view",
}


def pyproject() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def python(
    code: str, *, hide: tuple[str, ...] = (), argv: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter on this tree's sources, with ``hide`` not importable."""
    prelude = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in hide)
    prelude += f"sys.argv = {['toolbudget', *argv]!r}\n"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_the_core_depends_on_orjson_and_re2_only_and_the_cli_is_an_extra() -> None:
    project = pyproject()["project"]
    names = {req.split(">")[0].split("=")[0].split("[")[0].strip() for req in project["dependencies"]}
    assert names == {"orjson", "google-re2"}
    extras = project["optional-dependencies"]
    assert {req.split(">")[0] for req in extras["cli"]} == {"click", "rich"}
    assert "toolbudget[cli]" in extras["dev"]
    assert project["scripts"]["toolbudget"] == "toolbudget.cli_entry:main"
    setup = (REPO / "scripts" / "setup.sh").read_text(encoding="utf-8")
    assert "-e '.[cli,dev]'" in setup  # what scripts/test.sh, example.sh and .ci/run install


def test_the_library_imports_and_works_without_click_or_rich() -> None:
    code = f"""
import importlib, pkgutil
import toolbudget
skipped = set()
for info in pkgutil.walk_packages(toolbudget.__path__, "toolbudget."):
    if info.name in {CLI_ONLY!r}:
        skipped.add(info.name)
        continue
    importlib.import_module(info.name)
body = {{"model": "m", "max_tokens": 10, "messages": [
    {{"role": "user", "content": "run it"}},
    {{"role": "assistant", "content": [{{"type": "tool_use", "id": "t1", "name": "sh", "input": {{}}}}]}},
]}}
fixed = toolbudget.repair(body, api="anthropic")
assert toolbudget.validate(fixed.body, api="anthropic") == [], fixed
with toolbudget.Session("no-cli", store="memory:") as session:
    managed = session.manage(fixed.body, api="anthropic")
cli_packages = ("click", "rich")
loaded = sorted(m for m in sys.modules if m.partition(".")[0] in cli_packages and sys.modules[m] is not None)
print(sorted(skipped), loaded)
"""
    result = python(code, hide=("click", "rich"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{sorted(CLI_ONLY)} []"


def _entry_point() -> tuple[str, str]:
    module, _, attr = pyproject()["project"]["scripts"]["toolbudget"].partition(":")
    return module, attr


@pytest.mark.parametrize("hide", [("click",), ("rich",), ("click", "rich")])
def test_the_console_script_without_the_cli_extra_says_how_to_install_it(hide: tuple[str, ...]) -> None:
    module, attr = _entry_point()
    code = f"import importlib\nsys.exit(getattr(importlib.import_module({module!r}), {attr!r})())"
    result = python(code, hide=hide, argv=("validate", "-"))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert HINT in lines[0] and all(name in lines[0] for name in hide)
    assert lines[0] == f"toolbudget: error: the command line needs {' and '.join(hide)}: {HINT}"


def test_python_dash_m_toolbudget_says_the_same() -> None:
    result = python("import runpy\nrunpy.run_module('toolbudget', run_name='__main__')", hide=("click",))
    assert (result.returncode, result.stderr.strip()) == (
        2,
        f"toolbudget: error: the command line needs click: {HINT}",
    )


def test_the_console_script_runs_the_command_when_the_extra_is_there() -> None:
    module, attr = _entry_point()
    code = f"import importlib\ngetattr(importlib.import_module({module!r}), {attr!r})()"
    result = python(code, argv=("--version",))
    assert result.returncode == 0, result.stderr
    assert "0.1.0" in result.stdout
    invalid = python(code, argv=("validate", "--api", "nope", "-"))
    assert invalid.returncode == 2 and invalid.stderr.startswith("toolbudget: error:")


@pytest.mark.slow
def test_the_built_wheel_requires_click_and_rich_only_for_the_cli_extra_and_holds_the_license(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, tree / name)
    shutil.copytree(REPO / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "--wheel-dir",
            str(tmp_path),
            str(tree),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if built.returncode != 0 and "Could not find a version" in built.stderr and not os.environ.get("CI"):
        pytest.skip("the build backend could not be fetched (no package index reachable)")
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("toolbudget-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        requires = [
            line.partition(":")[2].strip()
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist:")
        ]
        entry_points = archive.read(metadata.replace("METADATA", "entry_points.txt")).decode()
        fields = archive.read(metadata).decode().split("\n\n", 1)[0].splitlines()
        licensed = archive.read(metadata.replace("METADATA", "licenses/LICENSE")).decode()
    assert "License-Expression: MIT" in fields and "License-File: LICENSE" in fields
    assert licensed == (REPO / "LICENSE").read_text(encoding="utf-8")
    assert licensed.startswith("MIT License") and "Copyright (c) 2026 the toolbudget authors" in licensed
    core = [req for req in requires if ";" not in req]
    assert sorted(core) == ["google-re2>=1.1", "orjson>=3.10"]
    for package in ("click", "rich"):
        (line,) = [req for req in requires if req.startswith(package)]
        assert line.endswith('extra == "cli"'), line
    assert "toolbudget = toolbudget.cli_entry:main" in entry_points
