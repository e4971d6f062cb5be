"""The ``toolbudget`` console script: the command line, or one line saying how to install it.

The library needs only ``orjson`` and ``google-re2``; the command line also
needs ``click`` (its commands) and ``rich`` (the tables of ``toolbudget demo``),
which come with the ``cli`` extra. The script is installed with the package
either way, so without them it must not die in a traceback on an import: it
says ``pip install 'toolbudget[cli]'`` on one line and exits with status 2,
the status of every input the command cannot use. Nothing here imports either
package before it knows both are there.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any, NoReturn

__all__ = ["CLI_PACKAGES", "INSTALL_HINT", "main", "missing"]

CLI_PACKAGES = ("click", "rich")
"""What the ``cli`` extra adds to the library's own dependencies."""

INSTALL_HINT = "pip install 'toolbudget[cli]'"


def missing() -> list[str]:
    """The packages of the ``cli`` extra that cannot be imported here."""
    absent = []
    for name in CLI_PACKAGES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a parent package that fails, a broken __spec__
            found = False
        if not found:
            absent.append(name)
    return absent


def _refuse(absent: list[str]) -> NoReturn:
    names = " and ".join(absent)
    print(f"toolbudget: error: the command line needs {names}: {INSTALL_HINT}", file=sys.stderr)
    raise SystemExit(2)


def main(*args: Any, **kwargs: Any) -> Any:
    """Run the ``toolbudget`` command (arguments as for a click command), or refuse in one line."""
    absent = missing()
    if absent:
        _refuse(absent)
    try:
        from .cli import main as command
    except ModuleNotFoundError as exc:  # found above, yet failing to import: name it the same way
        if exc.name and exc.name.partition(".")[0] in CLI_PACKAGES:
            _refuse([exc.name.partition(".")[0]])
        raise
    return command(*args, **kwargs)
