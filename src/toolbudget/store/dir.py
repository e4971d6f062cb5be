"""The directory backend: one file per entry, inside the session workspace.

Files are what an agent can reach without any new tool: the marker names the
path and the agent's own read tool pages through it (ChatCLI's session
workspace, Claude Code's ``tool-results``). The layout is::

    <root>/toolbudget-<session>/tool-results/<key>.txt

The default root is the system temp dir, which other users share, so the
store trusts only directories it owns and keeps private (0700, files 0600):
a session directory planted by someone else, or a symlink in its place, is
refused rather than written into or read from. Entries are never cleaned up
behind the caller's back; :meth:`DirStore.drop` removes a session's directory
when the session ends.

A write goes through a hidden ``.<random>.part`` temp file. A process killed
in mid-write leaves that file behind, and nothing else would ever remove it,
so each write and each listing of a session directory removes the ``.part``
files there older than :data:`STALE_PART_SECONDS`. The age keeps a concurrent
writer's live temp file safe: it exists only for the moments of one write.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from ..errors import StoreError
from .base import Store, is_key, namespace

__all__ = ["STALE_PART_SECONDS", "DirStore"]

STALE_PART_SECONDS = 3600.0
"""Age past which a ``.part`` temp file is taken for one a killed writer left:
a live one lasts as long as one write of an in-memory buffer, far less."""

_RESULTS = "tool-results"
_SUFFIX = ".txt"
_PART = ".part"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)
# link() fails with these where the file system has no hard links (FAT, some FUSE and SMB mounts).
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK})


def _why(error: OSError) -> str:
    return error.strerror or str(error)


class DirStore(Store):
    """``dir:PATH`` (``dir:`` alone: the system temp dir)."""

    file_backed = True

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        super().__init__()
        raw = tempfile.gettempdir() if root is None or os.fspath(root) == "" else os.fspath(root)
        self.root = Path(os.path.abspath(os.path.expanduser(raw)))
        self.url = f"dir:{self.root}"
        try:
            os.makedirs(self.root, mode=0o700)
        except FileExistsError:
            pass
        except OSError as error:
            raise StoreError(f"cannot create the store directory {self.root}: {_why(error)}") from error
        else:
            # makedirs honours the umask; a root we made ourselves is private whatever it is.
            with contextlib.suppress(OSError):
                os.chmod(self.root, 0o700)
        if not self.root.is_dir():
            raise StoreError(f"the store root {self.root} exists and is not a directory")

    def workspace(self, session: str) -> Path:
        """The session's private directory, created if needed.

        The agent's read tool can be allowed this one directory and reach every
        original the session's markers name; other sessions stay out of it.
        """
        self._check_session(session)
        self._check_open()
        directory = self._session_dir(session)
        try:
            self._private_dir(directory)
        except OSError as error:
            raise StoreError(f"cannot create the session directory {directory}: {_why(error)}") from error
        return Path(directory)

    # -- the backend ---------------------------------------------------------

    def _put(self, session: str, key: str, data: bytes) -> None:
        directory = self._session_dir(session)
        results = os.path.join(directory, _RESULTS)
        try:
            self._private_dir(directory)
            self._private_dir(results)
            _sweep_parts(results)
            _write_new(results, key + _SUFFIX, data)
        except OSError as error:
            raise StoreError(f"cannot keep {key} in {results}: {_why(error)}") from error

    def _get(self, session: str, key: str) -> bytes | None:
        directory = self._existing_session_dir(session)
        if directory is None:
            return None
        file = os.path.join(directory, _RESULTS, key + _SUFFIX)
        try:
            fd = os.open(file, os.O_RDONLY | _NOFOLLOW | _BINARY)
        except FileNotFoundError:
            return None
        except OSError as error:
            raise StoreError(f"cannot read {file}: {_why(error)}") from error
        try:
            with os.fdopen(fd, "rb") as handle:
                return handle.read()
        except OSError as error:
            raise StoreError(f"cannot read {file}: {_why(error)}") from error

    def _path(self, session: str, key: str) -> str | None:
        directory = self._existing_session_dir(session)
        if directory is None:
            return None
        file = os.path.join(directory, _RESULTS, key + _SUFFIX)
        try:
            mode = os.lstat(file).st_mode
        except FileNotFoundError:
            return None
        except OSError as error:
            raise StoreError(f"cannot look at {file}: {_why(error)}") from error
        return file if stat.S_ISREG(mode) else None

    def _keys(self, session: str) -> list[str]:
        directory = self._existing_session_dir(session)
        if directory is None:
            return []
        results = os.path.join(directory, _RESULTS)
        try:
            names = os.listdir(results)
        except FileNotFoundError:
            return []
        except OSError as error:
            raise StoreError(f"cannot list {results}: {_why(error)}") from error
        _sweep_parts(results, names)
        # Half-written temp files and anything else left there are not entries.
        stems = [name.removesuffix(_SUFFIX) for name in names if name.endswith(_SUFFIX)]
        return [stem for stem in stems if is_key(stem)]

    def _drop(self, session: str) -> None:
        directory = self._existing_session_dir(session)
        if directory is None:
            return
        try:
            shutil.rmtree(directory)
        except FileNotFoundError:
            pass  # dropped at the same time by another thread or process
        except OSError as error:
            raise StoreError(f"cannot remove {directory}: {_why(error)}") from error

    # -- directories we trust ------------------------------------------------

    def _session_dir(self, session: str) -> str:
        # The prefix keeps every name clear of "." and ".." and of other programs' temp dirs.
        return os.path.join(self.root, "toolbudget-" + namespace(session))

    def _existing_session_dir(self, session: str) -> str | None:
        directory = self._session_dir(session)
        try:
            info = os.lstat(directory)
        except FileNotFoundError:
            return None
        except OSError as error:
            raise StoreError(f"cannot look at {directory}: {_why(error)}") from error
        _refuse_foreign(directory, info)
        return directory

    @staticmethod
    def _private_dir(directory: str) -> None:
        """Create ``directory`` 0700, or accept it only if it is ours.

        In a shared temp dir anyone can create ``toolbudget-<session>`` first;
        writing into it would hand them the originals, reading from it would
        take their content for ours. The sticky bit keeps a directory we own
        from being swapped after this check.
        """
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)
        info = os.lstat(directory)
        _refuse_foreign(directory, info)
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(directory, 0o700)


def _refuse_foreign(directory: str, info: os.stat_result) -> None:
    if not stat.S_ISDIR(info.st_mode):
        raise StoreError(f"{directory} is not a directory (a file or a symlink); refusing to use it")
    getuid = getattr(os, "getuid", None)
    if getuid is not None and info.st_uid != getuid():
        raise StoreError(f"{directory} belongs to another user (uid {info.st_uid}); refusing to use it")


def _sweep_parts(directory: str, names: Iterable[str] | None = None) -> None:
    """Remove the stale temp files in ``directory`` (among ``names``, when listed already).

    Best effort, never failing the write or listing it is part of. Only regular
    files named as :func:`_write_new` names them are touched, and only when
    their last write is :data:`STALE_PART_SECONDS` old.
    """
    if names is None:
        try:
            names = os.listdir(directory)
        except OSError:
            return
    now = time.time()
    for name in names:
        if not (name.startswith(".") and name.endswith(_PART)):
            continue
        path = os.path.join(directory, name)
        try:
            info = os.lstat(path)
            if stat.S_ISREG(info.st_mode) and now - info.st_mtime > STALE_PART_SECONDS:
                os.unlink(path)
        except OSError:
            continue  # gone already, or not ours to remove: the write or listing goes on


def _write_new(directory: str, name: str, data: bytes) -> None:
    """Create ``directory/name`` holding ``data``, unless it exists.

    The bytes go to a private temp file first and appear under their name in
    one step (a hard link, which also fails if the name exists), so a reader
    sees the whole file or none, and a concurrent writer of the same key
    leaves the first file in place.
    """
    final = os.path.join(directory, name)
    if os.path.lexists(final):
        return
    fd, temp = tempfile.mkstemp(prefix=".", suffix=_PART, dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            if hasattr(os, "fchmod"):
                os.fchmod(handle.fileno(), 0o600)  # whatever the umask
            handle.write(data)
            handle.flush()
            # A crash must not leave an empty or short file under a key a marker points at.
            os.fsync(handle.fileno())
        try:
            os.link(temp, final)
        except FileExistsError:
            pass
        except OSError as error:
            if error.errno not in _NO_HARD_LINKS:
                raise
            # Without hard links, rename still publishes the file whole; the
            # rare race with another writer of the same key writes the same bytes.
            if not os.path.lexists(final):
                os.replace(temp, final)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
