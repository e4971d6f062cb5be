"""What ties a session's own records to the code and the policy that made them.

A session started again reads back records (previews and summaries in
:mod:`toolbudget.readback`, the schedule's state in
:mod:`toolbudget.schedulerecord`) instead of making them again. A record is
only the bytes the code would make now if the code and the policy are the
ones that made it, so each record's key carries a digest of both.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from pathlib import Path

from .policy import Policy

__all__ = ["PolicyTexts", "digest_of", "package_root"]


def package_root() -> Path:
    """The directory this package's sources are read from."""
    from . import __file__ as package_file

    return Path(package_file).parent


def digest_of(files: Iterable[Path], person: bytes) -> str:
    """A digest of the named source files, or of the installed version when there are no
    sources to read (a frozen build), or ``""`` when nothing names this code: then no
    record is kept or read."""
    digest = hashlib.blake2b(digest_size=12, person=person)
    try:
        for file in files:
            digest.update(file.name.encode() + b"\x00" + file.read_bytes())
    except OSError:
        from importlib.metadata import PackageNotFoundError, version

        try:
            digest.update(b"version\x00" + version("toolbudget").encode())
        except PackageNotFoundError:
            return ""
    return digest.hexdigest()


class PolicyTexts:
    """The code's digest with a policy's fingerprint, worked out once per policy object.

    A fingerprint costs a pass over every setting; a fresh session would pay it on its
    first request. Holding the policy itself keeps its id from being reused while cached.
    """

    def __init__(self, code: Callable[[], str]) -> None:
        self._code = code
        self._texts: dict[int, tuple[Policy, str]] = {}

    def __call__(self, policy: Policy) -> str:
        found = self._texts.get(id(policy))
        if found is not None and found[0] is policy:
            return found[1]
        if len(self._texts) >= 64:
            self._texts.clear()
        code = self._code()
        text = f"{code}\x00{policy.fingerprint()}" if code else ""
        self._texts[id(policy)] = (policy, text)
        return text
