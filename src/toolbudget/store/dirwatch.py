"""Which results directories lost an entry since last asked: Linux's inotify, read without waiting.

A dir store checks, before every request, that each key its markers name is
still held. Once a check has found a set of keys in a watched directory, the
next one need only ask the kernel whether anything left that directory since
(one ``read`` that returns at once) and look at the keys it has not found
before. The kernel queues the event inside the ``unlink`` or ``rename`` that
removes an entry, before that call returns, so a removal made by any process
before a check is seen by that check: there is no window, unlike a
directory's modification time, which a change within the same clock tick
leaves as it was.

Entries appearing are not asked about (a key found stays found until it
leaves), nor are the store's own temp files (``.part``) leaving. Where inotify
is missing (another system, a kernel without it, the per-user limits reached),
:meth:`DirWatch.watch` says ``False`` and the store falls back to its other check.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
import sys
import threading

__all__ = ["MAX_WATCHES", "DirWatch", "shared"]

_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_IN_MOVED_FROM = 0x00000040
_IN_DELETE = 0x00000200
_IN_DELETE_SELF = 0x00000400
_IN_MOVE_SELF = 0x00000800
_IN_Q_OVERFLOW = 0x00004000
_IN_IGNORED = 0x00008000
_IN_ONLYDIR = 0x01000000
_LEAVING = _IN_MOVED_FROM | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF
_HEADER = struct.Struct("iIII")
_TEMP_SUFFIX = b".part"


MAX_WATCHES = 4096
"""Directories watched at once by a process; past it the one met longest ago is let go (its
generation moves, so what was found there is looked at again when next met)."""


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # the process's own C library: nothing to look for
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return libc


class DirWatch:
    """One inotify instance watching results directories for entries leaving them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._libc = _libc()
        self._fd = -1
        self._paths: dict[int, str] = {}
        self._watches: dict[str, tuple[int, int]] = {}
        """Each watched path's watch descriptor, and the inode of the directory it watches."""
        self._left: dict[str, int] = {}
        self._overflows = 0
        if self._libc is not None:
            self._fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)

    @property
    def available(self) -> bool:
        return self._fd >= 0

    def watch(self, path: str, inode: int) -> bool:
        """Watch the directory ``path`` names, whose inode is ``inode``, from now on (a no-op if
        it is watched); ``False`` when it cannot be.

        A path that names another directory than it did (its archive moved away, and another
        made in its place) is watched again: a watch follows the directory, not its name.
        """
        with self._lock:
            held = self._watches.pop(path, None)
            if held is not None:
                self._watches[path] = held  # met now: the last to be let go
                if held[1] == inode:
                    return True
                self._left[path] = self._left.get(path, 0) + 1  # another directory: nothing found holds
                self._forget(path)
            if self._fd < 0 or self._libc is None:
                return False
            while len(self._watches) >= MAX_WATCHES:
                oldest = next(iter(self._watches))
                self._left[oldest] = self._left.get(oldest, 0) + 1
                self._forget(oldest)
            wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), _LEAVING | _IN_ONLYDIR)
            if wd < 0:
                return False
            self._watches[path] = (wd, inode)
            self._paths[wd] = path
            return True

    def generation(self, path: str) -> tuple[int, int] | None:
        """A count of the times an entry left ``path`` (with the times the kernel's queue
        overflowed, when any might have), ``None`` when it cannot be told.

        A check that found keys under one generation may trust them while the generation
        stays the same: whichever thread reads the kernel's news, it moves the count, so a
        check being made while an entry leaves is never taken for one made after.
        """
        with self._lock:
            if self._fd < 0 or not self._drain():
                return None
            return self._overflows, self._left.get(path, 0)

    def _drain(self) -> bool:
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return True
            except OSError:
                return False
            offset = 0
            while offset + _HEADER.size <= len(data):
                wd, mask, _, length = _HEADER.unpack_from(data, offset)
                name = data[offset + _HEADER.size : offset + _HEADER.size + length].rstrip(b"\0")
                offset += _HEADER.size + length
                if mask & _IN_Q_OVERFLOW:
                    self._overflows += 1
                    continue
                path = self._paths.get(wd)
                if path is None:
                    continue
                if mask & (_IN_IGNORED | _IN_DELETE_SELF | _IN_MOVE_SELF):
                    # The directory itself went (or its watch did): watched again when next met.
                    self._left[path] = self._left.get(path, 0) + 1
                    self._forget(path)
                elif not name.endswith(_TEMP_SUFFIX):
                    self._left[path] = self._left.get(path, 0) + 1

    def _forget(self, path: str) -> None:
        held = self._watches.pop(path, None)
        if held is not None:
            wd = held[0]
            if self._paths.get(wd) == path:
                del self._paths[wd]
            if self._libc is not None and self._fd >= 0:
                self._libc.inotify_rm_watch(self._fd, wd)  # already gone: fails harmlessly

    def close(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, -1
            self._watches.clear()
            self._paths.clear()
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


_shared: list[DirWatch] = []
_shared_lock = threading.Lock()


def shared() -> DirWatch:
    """The process's one watch, made when first asked for: every dir store of the process uses it
    (the kernel allows a user 128 inotify instances by default, and a process may open a store
    per session), and it lives as long as the process."""
    if not _shared:
        with _shared_lock:
            if not _shared:
                _shared.append(DirWatch())
    return _shared[0]
