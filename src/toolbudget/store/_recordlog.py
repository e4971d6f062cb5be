"""A session directory's records, appended to one file rather than written one file each.

A request that cuts a result keeps its original, which the marker names by
path, and up to four records that no agent opens by hand: what the cut was of
(``stats``), the text it went out as, the record of its preview (which a cold
process reads back instead of making it again) and the schedule's decision.
Where making a file costs a tenth of a millisecond to a millisecond, those
files were most of a cutting request's time. They go instead to one
append-only file, a batch in one ``write``.

Each record is a frame: ``\\x1e<key> <length> <crc32>\\n`` then its bytes. A
frame that a killed writer or a power loss left short, or that fails its CRC,
is skipped, and reading goes on at the next frame that checks out, so a torn
frame is never read as an entry, nor does it hide the frames after it. What
the file holds is indexed once (key to offset and length) and only its new
tail is read afterwards; a file of another inode, or a shorter one, is
indexed again from the start. The indexed file is held open, so that no new
log (after a ``clean`` and a new run) can take its inode number meanwhile.
A record whose bytes hold the frame mark (``\x1e``) is never appended (the
store keeps it as a file): a frame quoted inside a torn record could
otherwise be taken for a real one.
"""

from __future__ import annotations

import os
import re
import threading
import zlib
from collections.abc import Iterable

__all__ = ["MARK", "RecordLog", "append", "make", "write_all"]

MARK = b"\x00toolbudget: "
"""How every record a session keeps of its own begins (cuts, the texts sent as cuts, previews'
records, the schedule's): no tool's output is read back as one, and no record as an output."""

_HEADER = re.compile(rb"\x1e([!-~]{1,256}) (\d{1,15}) ([0-9a-f]{8})\n")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _BINARY | _CLOEXEC


def frame(key: str, data: bytes) -> bytes:
    return b"\x1e%s %d %08x\n%s" % (key.encode("ascii"), len(data), zlib.crc32(data), data)


def append(path: str, items: Iterable[tuple[str, bytes]], sync: bool = False) -> None:
    """Append ``items`` to the log at ``path`` (made 0600 if missing), in one write where the
    system takes it whole: appends of other processes land before or after it, not inside."""
    data = b"".join(frame(key, value) for key, value in items)
    if not data:
        return
    fd = os.open(path, _APPEND, 0o600)
    try:
        write_all(fd, data, sync)
    finally:
        os.close(fd)


def make(path: str) -> None:
    """Make the log at ``path`` (0600, empty) if it is missing, ahead of its first append."""
    os.close(os.open(path, _APPEND, 0o600))


def write_all(fd: int, data: bytes, sync: bool = False) -> None:
    """Write every byte of ``data`` to ``fd`` (a write may take only part), flushed to the disk
    when ``sync`` says so."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    if sync:
        os.fsync(fd)


class RecordLog:
    """What one log file holds: each key's offset and length, brought up to date on demand."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._inode: int | None = None
        self._end = 0
        """Where indexing stopped: the end of the last frame that checked out."""
        self._seen = 0
        """The file's size when last indexed: a tail that has not grown is not read again."""
        self._at: dict[str, tuple[int, int]] = {}
        self._fd: int | None = None
        """The indexed file, held open: while it is, no new file can take its inode number (ext4
        hands a freed one out again at once), so the same number at the path is the same file."""
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._reset(None)

    def __del__(self) -> None:
        if self._fd is not None:
            os.close(self._fd)

    def lengths(self, keys: Iterable[str]) -> dict[str, int]:
        """The byte length of each of ``keys`` the log holds."""
        with self._lock:
            self._refresh()
            at = self._at
            return {key: at[key][1] for key in keys if key in at}

    def held(self) -> list[str]:
        """Every key the log holds."""
        with self._lock:
            self._refresh()
            return list(self._at)

    def forget(self, keys: Iterable[str]) -> None:
        """Take ``keys`` for absent until they are appended again."""
        with self._lock:
            for key in keys:
                self._at.pop(key, None)

    def read(self, keys: Iterable[str]) -> dict[str, bytes]:
        """The bytes of each of ``keys`` the log holds."""
        with self._lock:
            self._refresh()
            wanted = [(key, self._at[key]) for key in keys if key in self._at]
            if not wanted or self._fd is None:
                return {}
            found: dict[str, bytes] = {}
            for key, (offset, length) in wanted:
                data = os.pread(self._fd, length, offset)
                if len(data) == length:
                    found[key] = data
            return found

    def _reset(self, inode: int | None) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
        self._inode, self._end, self._seen, self._at = inode, 0, 0, {}

    def _refresh(self) -> None:
        try:
            info = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            self._reset(None)
            return
        if self._fd is None or info.st_ino != self._inode or info.st_size < self._end:
            self._reset(None)
            try:
                fd = _no_follow(self.path, os.O_RDONLY | _BINARY)
            except FileNotFoundError:
                return
            self._fd = fd
            info = os.fstat(fd)
            self._inode = info.st_ino
        if info.st_size == self._seen:
            return
        chunks = []
        at, want = self._end, info.st_size - self._end
        while want > 0 and (chunk := os.pread(self._fd, min(want, 1 << 30), at)):
            chunks.append(chunk)
            at += len(chunk)
            want -= len(chunk)
        tail = b"".join(chunks)
        self._seen = self._end + len(tail)
        self._end += self._index(tail, self._end)

    def _index(self, data: bytes, base: int) -> int:
        """Index the frames of ``data`` (read at ``base``); returns how far they were read."""
        at = self._at
        pos = 0
        size = len(data)
        while pos < size:
            found = _frame_at(data, pos)
            if found is not None:
                key, start, length = found
                # The first frame of a key stands, as the first file of a name does.
                at.setdefault(key, (base + start, length))
                pos = start + length
                continue
            # Not a whole frame here: a torn one, or the tail of one still being written. Go on
            # at the next frame that checks out; with none, wait for the rest.
            later = _next_frame(data, pos + 1)
            if later is None:
                break
            pos = later
        return pos


def _frame_at(data: bytes, pos: int) -> tuple[str, int, int] | None:
    """The key, start and length of a whole frame that checks out at ``pos`` of ``data``."""
    header = _HEADER.match(data, pos)
    if header is None:
        return None
    start = header.end()
    length = int(header[2])
    if start + length > len(data):
        return None
    if zlib.crc32(data[start : start + length]) != int(header[3], 16):
        return None
    return header[1].decode("ascii"), start, length


def _next_frame(data: bytes, pos: int) -> int | None:
    while (pos := data.find(b"\x1e", pos)) >= 0:
        if _frame_at(data, pos) is not None:
            return pos
        pos += 1
    return None


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | _NOFOLLOW | _CLOEXEC)
