"""The directory backend: one file per entry, inside the session workspace.

Files are what an agent can reach without any new tool: the marker names the
path and the agent's own read tool pages through it (ChatCLI's session
workspace, Claude Code's ``tool-results``). The layout is::

    <root>/toolbudget-<session>/tool-results/<key>.txt
    <root>/toolbudget-<session>/records
    <root>/toolbudget-<session>/holders/<host>-<pid>-<start>-<token>
    <root>/toolbudget-<session>/used

The session's own records (entries that begin with
:data:`~toolbudget.store.MARK`: what each cut was of, the texts
sent as cuts, previews' records, the schedule's decisions) are appended to
``records`` instead (see :mod:`toolbudget.store._recordlog`): no marker names
them, and a file each made a cutting request several file creations dearer.
On a network file system, whose appends may interleave, they stay files.

The default root is ``toolbudget/archives`` in the user's cache directory
(``$XDG_CACHE_HOME`` or ``~/.cache``), private to the user (0700, files
0600): tool outputs can hold secrets. Any root may be shared with other users
(``dir:/tmp``), so the store trusts only directories it owns and keeps
private: a session directory planted by someone else, or a symlink in its
place, is refused rather than written into or read from.

An archive outlives the sessions that point at it. A live session, in any
process, holds its directory with a file under ``holders``; closing it only
removes that file. A directory nobody holds is removed once it has not been
used for the store's TTL (a week by default), because markers live on in the
agent's own transcript after the session that made them has ended. The sweep
runs at most once an hour when a store is opened, and by ``toolbudget clean``;
neither ever removes a directory with a live holder, not even one that came
in after the sweep looked: a directory leaves its name (a rename) before it is
looked at again and removed. A holder is live while
its process runs (on this host) or, for a holder from another host, while it
was renewed within the TTL. A process is known by its pid and its start (the
boot and the start time the kernel gives it, where ``/proc`` tells them): a
pid is reused, after a reboot or in a container restarted under the same host
name, where pid 1 is always alive, and a holder naming only the pid would then
keep its archive for ever.

A write goes through a hidden ``.<random>.part`` temp file and appears under
its name in one step, so a process killed at any moment leaves either the
whole entry or none. It is not flushed to the disk (``fsync``) unless the URL
says ``?sync=1``: a flush costs about a millisecond and a half per entry,
several times the JSON round trip of the request that writes it, and buys only
safety against a power loss or a kernel crash, after which an entry may read
back empty or short. Keys are keyed hashes of the entries' bytes, so the
session that reads an entry back checks it against its key and takes one
that does not match for missing, which the store contract already handles (a
marker's key is kept again, or the cut falls back).

Making a file is most of what keeping an original costs (a median 150 µs
on the 2-core VM the benchmarks run on, against under 60 µs to write an
original's bytes into a file already made and link it under its name). So a
store keeps a few empty private files ready in each results directory it
writes to, named as temp files are, made by the store's worker while no call
waits (:meth:`DirStore.idle`), and a write takes one when it is still an
empty file of its own; the temp name it leaves beside the entry is removed
then too. A session's release removes its directory's spares.

A process killed
in mid-write leaves its temp file behind, and nothing else would ever remove it,
so each listing of a session directory, and a store's first write there and
then one every :data:`PARTS_EVERY` seconds, removes the ``.part`` files there
older than :data:`STALE_PART_SECONDS`. The age keeps a concurrent writer's live
temp file safe: it exists only for the moments of one write. Not every write
lists the directory: that cost each write a read of every entry the session
holds, so a long session's per-request records grew dearer with its length.

Every request checks that each key its markers name is still held, dozens
to thousands of them. A directory's modification time changes whenever an
entry is added or removed, so once a check has found a set of keys while the
results directory had a given inode and time, a later check that finds the
same inode and time needs to look only at the keys it has not found before:
one ``stat`` for the rest. A time is trusted only when it was already
:data:`RACY_NS` old when read (a change within the same clock tick would
otherwise leave it as it was), and two seconds old on a file system that
keeps whole seconds. Only the time of a local file system is trusted (a
network one's client may show another host's change late). A session's own
write changes the time too, so after one the store's worker checks the
session's keys again between requests (:meth:`DirStore.recheck`), and the
next request finds the new time vouched for. An entry changed in
place by another program, keeping its inode and its directory's time, is not
looked at again by the process that found it; a new process sees its length.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import secrets
import shutil
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from ..errors import StoreError
from ._recordlog import MARK, RecordLog, make, write_all
from ._recordlog import append as append_records
from .base import DEFAULT_TTL, Store, is_key, namespace

__all__ = ["STALE_PART_SECONDS", "DirStore", "default_dir_root"]

STALE_PART_SECONDS = 3600.0
"""Age past which a ``.part`` temp file is taken for one a killed writer left:
a live one lasts as long as one write of an in-memory buffer, far less."""

_RESULTS = "tool-results"
_RECORDS = "records"
_HOLDERS = "holders"
_USED = "used"
_SWEPT = ".swept"
_OWN_NAMES = frozenset({_RESULTS, _RECORDS, _HOLDERS, _USED})
"""What a session directory holds that this store made."""
_SUFFIX = ".txt"
_LSTAT_UP_TO = 8
"""Up to this many keys a check looks at each file; past it, it lists the directory once."""
RACY_NS = 20_000_000
"""How old (ns) a directory's modification time must be to vouch for what it holds: past the
kernel's timestamp tick (at most 10 ms) with room to spare. Not waited for where the file
system's times are fine-grained (:func:`_fine_grained`)."""
_PREFIX = "toolbudget-"
_REMOVING = ".toolbudget-removing-"
SWEEP_EVERY = 3600.0
"""Seconds between automatic sweeps of a root."""
RENEW_EVERY = 60.0
"""A session renews its holder and ``used`` stamp at most this often (and at least four times a TTL)."""
PARTS_EVERY = 600.0
"""At most how often a store's writes look for stale temp files in one directory: a file is
stale only an hour after its last write, so ten minutes later changes nothing."""
_PART = ".part"
SPARES = 8
"""Empty private files a store keeps ready in a results directory it writes to (see
:meth:`DirStore.idle`): making a file was most of the cost of keeping an original."""
_SPARE_DIRS = 64
"""The most results directories a store keeps spares in (a proxy's sessions come and go)."""
_LOCAL_FILESYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "bcachefs", "f2fs", "jfs", "zfs", "tmpfs", "ramfs", "overlay"}
)
"""File systems on this machine's own disks or memory: looking at a file there never waits on a
network or a daemon. FUSE, NFS, SMB, 9p and the like may stop answering, so they are not here."""
_WRITERS = 4
_PARALLEL_FROM = 64
"""Batches this large are written by :data:`_WRITERS` threads at once."""
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)
# link() fails with these where the file system has no hard links (FAT, some FUSE and SMB mounts).
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK})


def _why(error: OSError) -> str:
    return error.strerror or str(error)


def default_dir_root() -> Path:
    """Where ``dir:`` with no path keeps archives: the user's private cache directory."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "toolbudget" / "archives"


class DirStore(Store):
    """``dir:PATH?ttl=SECONDS&sync=1`` (``dir:`` alone: :func:`default_dir_root`).

    ``sync`` flushes every entry to the disk before it is published (see the
    module docstring for why that is off by default). ``clock`` replaces
    :func:`time.time` so tests can move time.
    """

    file_backed = True

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.time,
        sweep: bool = True,
        sync: bool = False,
    ) -> None:
        super().__init__()
        self.sync = bool(sync)
        if not ttl > 0:
            raise StoreError(f"the dir store's ttl must be a positive number of seconds, not {ttl!r}")
        raw = default_dir_root() if root is None or os.fspath(root) == "" else os.fspath(root)
        self.root = Path(os.path.abspath(os.path.expanduser(raw)))
        self.ttl = float(ttl)
        self._clock = clock
        options = ([f"ttl={self.ttl:g}"] if self.ttl != DEFAULT_TTL else []) + (["sync=1"] if sync else [])
        self.url = f"dir:{self.root}" + ("?" + "&".join(options) if options else "")
        self._renewed: dict[str, float] = {}
        self._stamped: dict[str, float] = {}
        """When this store last stamped each session directory's ``used`` file."""
        self._swept: dict[str, float] = {}
        """When this store's writes last looked for stale temp files in each results directory."""
        self._dirs: dict[str, str] = {}
        """Each session's directory, by id: worked out on every call, and a pure function of it."""
        self._lengths: dict[str, dict[str, tuple[int, int]]] = {}
        """Each results directory's entries this store has looked at: key to (inode, byte length)."""
        self._found: dict[str, tuple[tuple[int, int], dict[str, int | None]]] = {}
        """Each results directory's (inode, modification time) when a check found these keys there,
        with their byte lengths (see the module docstring)."""
        self._logs: dict[str, RecordLog] = {}
        """Each session directory's record log, as indexed so far."""
        self._logs_lock = threading.Lock()
        self._spares: dict[str, list[str]] = {}
        """Each results directory's spare files (empty, 0600, made by this store), newest last."""
        self._used_spares: list[str] = []
        """The temp names of spares that now hold an entry under its own name, to remove when idle."""
        self._spares_lock = threading.Lock()
        self._spares_pid = os.getpid()
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
        self.local = _filesystem_of(os.path.realpath(self.root)) in _LOCAL_FILESYSTEMS
        """Whether the root is on a local file system (see :meth:`checks_inline`)."""
        self.fine = self.local and _fine_grained(str(self.root))
        """Whether a directory's time here moves on at every change, however close (see
        :func:`_fine_grained`): then a time read just now vouches at once."""
        self._checked: dict[str, tuple[list[str], dict[str, int] | None, tuple[int, int, int, int, int]]] = {}
        """Each session's keys a check last found all held, with the sizes it was asked them at and
        the versions of its results directory and record log read before that check (see
        :meth:`missing`)."""
        self._forgotten = 0
        """How many times this store forgot a logged record (a torn one, :meth:`_discard`): that
        changes neither the log's inode nor its length, so the versions count it too."""
        self._places: dict[str, tuple[str, str]] = {}
        """Each session's results directory and record log, by session (see :meth:`_versions`)."""
        self.swept: list[str] = []
        """The session directories the sweep on opening removed."""
        if sweep:
            # Best effort: a root we cannot tidy is still a root we can keep entries in.
            with contextlib.suppress(StoreError, OSError):
                self.swept = self._sweep_now_and_then()

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

    def location(self, session: str, key: str) -> str | None:
        if not is_key(key):
            return None
        return os.path.join(self._session_dir(session), _RESULTS, key + _SUFFIX)

    def checks_inline(self, session: str) -> bool:
        """On a local file system, a check is a few ``lstat`` calls and writes nothing, unless the
        ``used`` stamp is due (at most every :data:`RENEW_EVERY` seconds): then it goes the way
        of every other call, since a write may wait (a frozen file system)."""
        return self.local and not self._stamp_due(self._session_dir(session))

    def reads_inline(self, session: str) -> bool:
        """On a local file system, a read is a look at the record log and a file or two; the
        ``used`` stamp is left to the request's check of its keys (:meth:`peek_many`)."""
        return self.local

    def _peek_many(self, session: str, keys: list[str]) -> dict[str, bytes]:
        """The read without the ``used`` stamp, a write: a frozen file system stalls it where a
        read goes on. The request that reads also checks the keys its markers name, and that
        check stamps when it is due."""
        return self._read_many(session, keys)

    # -- holders and the TTL -----------------------------------------------------

    def hold(self, session: str) -> str:
        """Mark the session's archive as in use by this process; returns the holder's name."""
        self._check_session(session)
        self._check_open()
        directory = self._session_dir(session)
        holders = os.path.join(directory, _HOLDERS)
        pid, start = _own_start()
        name = "-".join([_host(), str(pid), *([start] if start else []), secrets.token_hex(4)])
        try:
            self._private_dir(directory)
            self._private_dir(holders)
            fd = os.open(os.path.join(holders, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
            os.close(fd)
            self._stamp(directory)
        except OSError as error:
            raise StoreError(f"cannot hold the session directory {directory}: {_why(error)}") from error
        self._renewed[session] = self._clock()
        return name

    def renew_due(self, session: str) -> bool:
        """Whether :meth:`renew` would write now; no I/O, so a caller can skip the call."""
        last = self._renewed.get(session, float("-inf"))
        return self._clock() - last >= min(RENEW_EVERY, self.ttl / 4)

    def renew(self, session: str, holder: str | None) -> None:
        """Note that the session is in use now; cheap enough to call on every request.

        It writes at most every :data:`RENEW_EVERY` seconds, and at least four
        times a TTL, so a holder on another host, judged by when it was last
        renewed, never looks dead while its session sends requests. A holder
        whose file is gone (its directory removed by hand while the session
        ran) is made again.
        """
        if not self.renew_due(session):
            return
        now = self._clock()
        self._renewed[session] = now
        directory = self._session_dir(session)
        with contextlib.suppress(OSError):
            if holder is not None:
                path = os.path.join(directory, _HOLDERS, holder)
                try:
                    os.utime(path, (now, now))
                except FileNotFoundError:
                    self._private_dir(directory)
                    self._private_dir(os.path.join(directory, _HOLDERS))
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | _NOFOLLOW, 0o600))
                    os.utime(path, (now, now))
            self._stamp(directory)

    def release(self, session: str, holder: str) -> None:
        """The holder is done; the archive stays until its TTL after the last use.

        An archive that holds nothing (its session never cut, though its
        directory was made ahead of a first cut) is removed at once, unless
        another holder lives or a write is under way there.
        """
        directory = self._session_dir(session)
        self._drop_spares(os.path.join(directory, _RESULTS))
        with contextlib.suppress(OSError):
            self._stamp(directory)
        try:
            os.unlink(os.path.join(directory, _HOLDERS, holder))
        except FileNotFoundError:
            return  # the directory was removed meanwhile: nothing is held
        except OSError as error:
            raise StoreError(f"cannot release {directory}: {_why(error)}") from error
        with contextlib.suppress(OSError):
            if not self._holds_anything(directory):
                self._remove(directory, self._holds_anything)

    def live_holders(self, session: str) -> list[str]:
        """The holders of the session that are alive now."""
        directory = self._existing_session_dir(session)
        return [] if directory is None else self._live(directory)[0]

    def sweep(self) -> list[str]:
        """Remove every session directory nobody holds and nobody used for the TTL; returns their names."""
        self._check_open()
        removed: list[str] = []
        try:
            names = sorted(os.listdir(self.root))
        except OSError as error:
            raise StoreError(f"cannot list {self.root}: {_why(error)}") from error
        now = self._clock()
        for name in names:
            if not name.startswith((_PREFIX, _REMOVING)):
                continue
            directory = os.path.join(self.root, name)
            try:
                info = os.lstat(directory)
                if not stat.S_ISDIR(info.st_mode) or info.st_uid != _uid(info):
                    continue
                live, last = self._live(directory)
                if name.startswith(_REMOVING):
                    if not live:  # left by a sweep that was killed halfway
                        shutil.rmtree(directory)
                    continue
                if (
                    live
                    or now - last < self.ttl
                    or not self._remove(directory, lambda at: self._in_use(at, now))
                ):
                    continue
            except FileNotFoundError:
                continue
            except OSError:
                continue  # another process is using or removing it; the next sweep will see
            removed.append(name)
        with contextlib.suppress(OSError):
            Path(self.root, _SWEPT).touch(mode=0o600)
            os.utime(os.path.join(self.root, _SWEPT), (now, now))
        return removed

    def _remove(self, directory: str, keep: Callable[[str], bool]) -> bool:
        """Remove a session directory found unheld and unused (or empty), unless a session came in
        since: ``keep`` looks again.

        Between that look and the removal another process may hold the
        directory and write to it. So the directory first leaves its name in
        one step (a rename), which no new holder or write can enter, and is
        looked at again there: what came in is put back, and only then is the
        rest removed. Returns whether it was removed.
        """
        trash = os.path.join(self.root, f"{_REMOVING}{secrets.token_hex(6)}")
        os.rename(directory, trash)
        if keep(trash):
            self._put_back(trash, directory)
            return False
        shutil.rmtree(trash)
        return True

    def _in_use(self, directory: str, now: float) -> bool:
        live, last = self._live(directory)
        return bool(live) or now - last < self.ttl

    def _holds_anything(self, directory: str) -> bool:
        """Whether a session directory holds an entry, a record, a live holder, a write under way or
        anything this store did not put there (anything but the spare files its holder made, which
        release removes first)."""
        if not set(os.listdir(directory)) <= _OWN_NAMES or self._live(directory)[0]:
            return True
        try:
            if os.listdir(os.path.join(directory, _RESULTS)):
                return True
        except FileNotFoundError:
            pass
        try:
            return os.lstat(os.path.join(directory, _RECORDS)).st_size > 0
        except FileNotFoundError:
            return False

    def _put_back(self, trash: str, directory: str) -> None:
        """Return a directory the sweep took to its name, or, if the name is in use again, its holders."""
        try:
            os.rename(trash, directory)
            return
        except OSError as error:
            if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
        # The session made the directory again meanwhile: its holders move there; the old
        # entries, unused for the TTL, go.
        holders = os.path.join(directory, _HOLDERS)
        self._private_dir(holders)
        try:
            moved = os.listdir(os.path.join(trash, _HOLDERS))
        except FileNotFoundError:
            moved = []
        for holder in moved:
            with contextlib.suppress(FileExistsError):
                os.rename(os.path.join(trash, _HOLDERS, holder), os.path.join(holders, holder))
        self._stamp(directory)
        shutil.rmtree(trash)

    def _sweep_now_and_then(self) -> list[str]:
        try:
            last = os.stat(os.path.join(self.root, _SWEPT)).st_mtime
        except FileNotFoundError:
            last = float("-inf")
        return self.sweep() if self._clock() - last >= SWEEP_EVERY else []

    def _live(self, directory: str) -> tuple[list[str], float]:
        """The live holders of a session directory, and when it was last used."""
        holders = os.path.join(directory, _HOLDERS)
        last = _mtime(os.path.join(directory, _USED))
        if last is None:
            last = _mtime(directory) or 0.0
        live: list[str] = []
        now = self._clock()
        try:
            names = sorted(os.listdir(holders))
        except FileNotFoundError:
            names = []
        host = _host()
        for name in names:
            seen = _mtime(os.path.join(holders, name))
            if seen is None:
                continue
            last = max(last, seen)
            owner, pid, start = _holder_parts(name)
            # On this host a holder lives as long as its process; from elsewhere, while renewed.
            alive = _runs(pid, start) if owner == host and pid is not None else now - seen < self.ttl
            if alive:
                live.append(name)
            elif owner == host:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(holders, name))  # its process is gone
        return live, last

    def _stamp_due(self, directory: str) -> bool:
        last = self._stamped.get(directory, float("-inf"))
        return self._clock() - last >= min(RENEW_EVERY, self.ttl / 4)

    def _stamp_now_and_then(self, directory: str) -> None:
        """Note a read's use of the directory, at most every :data:`RENEW_EVERY` seconds.

        A stamp is a write (``utime``) that cost every request's check about a
        third of its time; the TTL it is measured against is days, so a minute
        late changes nothing, and a holder keeps the directory meanwhile.
        """
        if self._stamp_due(directory):
            with contextlib.suppress(OSError):
                self._stamp(directory)

    def _stamp(self, directory: str) -> None:
        used = os.path.join(directory, _USED)
        now = self._clock()
        self._stamped[directory] = now
        try:
            os.utime(used, (now, now))
        except FileNotFoundError:
            fd = os.open(used, os.O_WRONLY | os.O_CREAT | _NOFOLLOW, 0o600)
            os.close(fd)
            os.utime(used, (now, now))

    # -- the backend ---------------------------------------------------------

    def _put(self, session: str, key: str, data: bytes) -> None:
        self._put_each(session, {key: data})

    def _put_many(self, session: str, items: dict[str, bytes], check: list[str]) -> set[str]:
        """The writes alone. The look at ``check`` afterwards is for a store that evicts an entry
        to make room for a new one; a directory never does, and the session's batch looked at
        those keys in the same trip, just before (a look cost a cutting request a tenth of its
        time)."""
        return self._put_each(session, items) if items else set()

    def _put_each(self, session: str, items: dict[str, bytes]) -> set[str]:
        """Keep a batch, readying the directory (and tidying its temp files) once, not once an entry.

        A long history's first request keeps thousands of cuts in one batch,
        within the request's store bound; listing the directory before every
        write made that cost the batch's size squared.
        """
        directory = self._session_dir(session)
        results = os.path.join(directory, _RESULTS)
        what = next(iter(items)) if len(items) == 1 else f"{len(items)} entries"
        try:
            self._private_dir(directory)
            self._private_dir(results)
            now = self._clock()
            if now - self._swept.get(results, float("-inf")) >= PARTS_EVERY:
                self._swept[results] = now
                _sweep_parts(results)
        except OSError as error:
            raise StoreError(f"cannot keep {what} in {results}: {_why(error)}") from error
        failed: dict[str, OSError] = {}
        sync = self.sync

        def write(batch: list[tuple[str, bytes]]) -> None:
            for key, data in batch:
                try:
                    used = _write_new(results, key + _SUFFIX, data, sync, lambda: self._take_spare(results))
                except OSError as error:
                    failed[key] = error
                    continue
                if used is not None:
                    with self._spares_lock:
                        self._used_spares.append(used)

        entries = list(items.items())
        if self.local:
            # A record holding a frame's first byte stays a file: a reader that resyncs after a
            # torn or half-written frame would otherwise take a frame quoted inside it for one.
            records = [(key, data) for key, data in entries if data.startswith(MARK) and b"\x1e" not in data]
            if records:
                logged = {key for key, _ in records}
                entries = [(key, data) for key, data in entries if key not in logged]
                self._append(directory, records, failed)
        if len(entries) < _PARALLEL_FROM or not sync:
            write(entries)
        else:
            # Each entry waits for its flush; a few writers at once share the file system's
            # journal commits, and a long history's first batch takes about half the time.
            writers = [
                threading.Thread(target=write, args=(entries[n::_WRITERS],), daemon=True)
                for n in range(_WRITERS)
            ]
            for writer in writers:
                writer.start()
            for writer in writers:
                writer.join()
        self._want_spares(results)
        if failed and len(failed) == len(items):
            why = _why(next(iter(failed.values())))
            raise StoreError(f"cannot keep {what} in {results}: {why}")
        return set(failed)

    def ready(self, session: str) -> None:
        """Make now what the session's first write would otherwise make while a request waits: its
        results directory, its record log, and (by :meth:`idle`, later) its spare files.

        Best effort, for a session's holder to call ahead of its first cut; a
        write makes whatever is missing, as before. Making the directories, the
        holder and the log cost a session's first cut about 2 ms here, ten to a
        hundred times the round trip of the small body it came in.
        """
        directory = self._session_dir(session)
        results = os.path.join(directory, _RESULTS)
        with contextlib.suppress(OSError):
            self._private_dir(directory)
            self._private_dir(results)
            if self.local:
                make(os.path.join(directory, _RECORDS))
            self._want_spares(results)

    def _want_spares(self, results: str) -> None:
        """Keep spares ready in ``results`` from now on, made when the store is idle (:meth:`idle`)."""
        with self._spares_lock:
            if results not in self._spares and len(self._spares) < _SPARE_DIRS:
                self._spares[results] = []

    def _take_spare(self, results: str) -> str | None:
        with self._spares_lock:
            if self._spares_pid != os.getpid():
                # A forked child: its parent holds the same spares, and both would write one.
                self._spares_pid, self._spares, self._used_spares = os.getpid(), {}, []
                return None
            spares = self._spares.get(results)
            return spares.pop() if spares else None

    def idle(self) -> bool:
        """Do one step of the work a write left for later; returns whether more is left.

        Called by the store's worker when no call is waiting (see
        :class:`~toolbudget.store.guard.StoreGuard`). Making a file here cost
        a median 150 µs (the name, the inode, the journal) where writing one
        of an original's size to a file already made cost under 60 µs. So
        each results directory this store writes to keeps :data:`SPARES`
        empty private files ready, made now rather than while a request
        waits, and the temp name a spare leaves beside its entry is removed
        now too. A spare is named as a temp file is, so one this process
        leaves behind is removed as stale as theirs are.
        """
        with self._spares_lock:
            if self._used_spares:
                done = self._used_spares.pop()
                results = None
            else:
                done = None
                results = next((r for r, spares in self._spares.items() if len(spares) < SPARES), None)
        if done is not None:
            with contextlib.suppress(OSError):
                os.unlink(done)
            return True
        if results is None or self._closed:
            return False
        try:
            fd, path = _new_temp(results, "spare")
            os.close(fd)
        except OSError:
            with self._spares_lock:
                self._spares.pop(results, None)  # gone or unwritable: writes there make their own
            return True
        with self._spares_lock:
            spares = self._spares.get(results)
            if spares is not None and len(spares) < SPARES and self._spares_pid == os.getpid():
                spares.append(path)
                return True
        with contextlib.suppress(OSError):
            os.unlink(path)  # no longer wanted: another thread's idle work filled the directory
        return True

    def recheck(self, session: str, keys: list[str], sizes: Mapping[str, int] | None) -> Callable[[], bool]:
        """An idle step (see :meth:`idle`) that checks ``keys`` again once a write's work is done.

        A write changes the results directory, so the check that follows it
        finds a time it has not vouched for and looks at every key: on the
        request after each cut, three times the two ``stat`` calls a check
        costs otherwise. Made between requests, after the spares (queued
        behind :meth:`idle`, which changes the directory too), the check
        leaves a time the next request's own check finds vouched for. Where
        a time vouches only once it is :data:`RACY_NS` old, the step waits
        for that a millisecond at a time, so a call that comes meanwhile
        waits a millisecond at most.
        """
        results = os.path.join(self._session_dir(session), _RESULTS)
        keys = list(keys)
        sizes = dict(sizes) if sizes is not None else None

        def step() -> bool:
            if self._closed or not self.local:
                return False
            if not self.fine:
                try:
                    mtime = os.stat(results).st_mtime_ns
                except OSError:
                    return False
                if not self._vouches(mtime, time.time_ns() - 1_000_000):
                    if _racy_margin(mtime) > RACY_NS:
                        return False  # whole seconds: not worth two seconds of the worker
                    time.sleep(0.001)
                    return True
            with contextlib.suppress(StoreError, OSError):
                self.missing(session, keys, sizes)
            return False

        return step

    def _get(self, session: str, key: str) -> bytes | None:
        directory = self._existing_session_dir(session)
        if directory is None:
            return None
        data = _read(os.path.join(directory, _RESULTS, key + _SUFFIX))
        if data is None:
            data = self._log_read(directory, [key]).get(key)
        return data

    def _get_many(self, session: str, keys: list[str]) -> dict[str, bytes]:
        found = self._read_many(session, keys)
        if found:
            self._stamp_now_and_then(self._session_dir(session))
        return found

    def _read_many(self, session: str, keys: list[str]) -> dict[str, bytes]:
        directory = self._existing_session_dir(session)
        if directory is None:
            return {}
        results = os.path.join(directory, _RESULTS)
        # The log first: one look answers for every record, where each file is a look of its own.
        # A log that cannot be read fails only the keys no file holds: an original is a file.
        unread: StoreError | None = None
        try:
            found = self._log_read(directory, keys)
        except StoreError as error:
            unread, found = error, {}
        rest = [key for key in keys if key not in found]
        if len(rest) > _LSTAT_UP_TO:
            # A cold session asks for the records of every result that may be cut, most never
            # made: past a few keys, one listing answers for the absent ones, where each would
            # cost a failed open (and its exception).
            try:
                names = set(os.listdir(results))
            except FileNotFoundError:
                names = set()
            except OSError as error:
                raise StoreError(f"cannot list {results}: {_why(error)}") from error
            rest = [key for key in rest if key + _SUFFIX in names]
        for key in rest:
            data = _read(os.path.join(results, key + _SUFFIX))
            if data is not None:
                found[key] = data
        if unread is not None and len(found) < len(keys):
            raise unread
        return found

    def _find(self, key: str, within: str) -> bytes | None:
        head = _PREFIX + within
        try:
            names = sorted(name for name in os.listdir(self.root) if name.startswith(head))
        except FileNotFoundError:
            return None
        except OSError as error:
            raise StoreError(f"cannot list {self.root}: {_why(error)}") from error
        for name in names:
            directory = os.path.join(self.root, name)
            try:
                info = os.lstat(directory)
            except FileNotFoundError:
                continue
            except OSError as error:
                raise StoreError(f"cannot look at {directory}: {_why(error)}") from error
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != _uid(info):
                continue  # only our own session directories
            data = _read(os.path.join(directory, _RESULTS, key + _SUFFIX))
            if data is not None:
                return data
        return None

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

    def missing(self, session: str, keys: list[str], sizes: Mapping[str, int] | None = None) -> set[str]:
        """:meth:`Store.missing`, answered by two ``stat`` calls when nothing changed.

        An agent's next request names the keys the last one named. When a
        check found every one of them held, and neither the results directory
        nor the record log has changed since (the same inode and time, the
        same inode and length, read before that check), they are all still
        held. A time vouches only as in the check itself (see the module
        docstring), and only on a local file system. A request that cuts names
        those keys and its new ones: only the new ones are looked at (on the
        Claude Code session's cutting requests, the check took 100-140 us on
        the store's worker, every key looked at).
        """
        self._check_session(session)
        self._check_open()
        # The clock is read before the versions, and their time judged by it (as in the check).
        read_at = time.time_ns()
        versions = self._versions(session) if self.local else None
        look = keys
        if versions is not None:
            last = self._checked.get(session)
            if last is not None and last[2] == versions:
                # The keys and sizes compared as they came (in C): an agent's next request names
                # the very keys the last one did. A request that cuts names them and its new keys:
                # only those are looked at (a key vouched for with another size, or with none, is
                # looked at again).
                same = last[0] == keys and last[1] == sizes
                look = [] if same else _unvouched(keys, sizes, last[0], last[1])
                if not look:
                    # What was vouched for stays so (a check without sizes takes none away).
                    self._stamp_now_and_then(self._session_dir(session))
                    return set()
        absent = super().missing(session, look, sizes)
        if versions is not None and not absent and self._vouches(versions[1], read_at):
            if len(self._checked) >= 4096:
                self._checked.clear()  # a bound, not an index
            self._checked[session] = (list(keys), None if sizes is None else dict(sizes), versions)
        else:
            self._checked.pop(session, None)
        return absent

    def _versions(self, session: str) -> tuple[int, int, int, int, int] | None:
        """The results directory's inode and time, the record log's inode and length, and how many
        records this store has forgotten; ``None`` when the directory cannot be read (absent:
        nothing to vouch for). The count is read first: a record forgotten while a check looks
        (another thread's) leaves that check's versions behind the next ones."""
        forgotten = self._forgotten
        places = self._places.get(session)
        if places is None:
            if len(self._places) >= 4096:
                self._places.clear()  # a bound, not an index
            directory = self._session_dir(session)
            places = (os.path.join(directory, _RESULTS), os.path.join(directory, _RECORDS))
            self._places[session] = places
        try:
            results = os.stat(places[0])
        except OSError:
            return None
        try:
            log = os.stat(places[1])
        except FileNotFoundError:
            return results.st_ino, results.st_mtime_ns, 0, -1, forgotten  # no record yet
        except OSError:
            return None
        return results.st_ino, results.st_mtime_ns, log.st_ino, log.st_size, forgotten

    def _vouches(self, mtime: int, read_at: int) -> bool:
        """Whether a directory time read at ``read_at`` tells every later change apart from it."""
        return self.fine or mtime < read_at - _racy_margin(mtime)

    def _missing(self, session: str, keys: list[str]) -> set[str]:
        held = self._sizes(session, keys)
        return {key for key in keys if key not in held}

    def _sizes(self, session: str, keys: list[str]) -> dict[str, int | None]:
        """The byte length of each of ``keys`` held (a regular file), in one look at the directory.

        A request's check names every key its markers do, dozens to thousands:
        one ``lstat`` each cost more than the request's JSON round trip. So
        past a few keys the directory is listed once, and a file's length is
        looked up only the first time this store sees its inode: an entry is
        never written in place (it appears whole, by a link), so a name with
        the same inode has the same bytes (a file removed and made again by
        hand, with other bytes, may land on the same inode number: a hand edit
        of the archive is not told). What a power loss tears, a new
        process (with nothing remembered) finds by its length. A directory
        that has not changed since a check found keys there is not listed
        again (see the module docstring).
        """
        directory = self._existing_session_dir(session)
        if directory is None:
            return {}
        logged = self._log_lengths(directory, keys)
        rest = [key for key in keys if key not in logged] if logged else keys
        held = self._file_sizes(directory, rest) if rest else {}
        if logged:
            held.update(logged)
            self._stamp_now_and_then(directory)
        return held

    def _file_sizes(self, directory: str, keys: list[str]) -> dict[str, int | None]:
        """:meth:`_sizes` of the keys kept as files."""
        results = os.path.join(directory, _RESULTS)
        # The clock is read before the directory's time, and the time is judged by it: a time
        # that was RACY_NS old when read cannot be the time of a change made after the look
        # (which in the same tick would leave it as it was), however long the look took.
        read_at = time.time_ns()
        try:
            info = os.stat(results)
        except FileNotFoundError:
            return {}
        except OSError as error:
            raise StoreError(f"cannot look at {results}: {_why(error)}") from error
        version = (info.st_ino, info.st_mtime_ns)
        # A network file system's client may show another host's change late: only a local one's
        # time is trusted.
        found = self._found.get(results) if self.local else None
        if found is not None and found[0] == version:
            # Nothing came or went since these keys were found: only the others are looked at.
            known = found[1]
            rest = [key for key in keys if key not in known]
            held = {key: known[key] for key in keys if key in known}
            if rest:
                more = self._look(results, rest)
                known.update(more)
                held.update(more)
        else:
            held = self._look(results, keys)
            self._found.pop(results, None)
            mtime = info.st_mtime_ns
            if self.local and mtime < read_at - (0 if self.fine else _racy_margin(mtime)):
                if len(self._found) >= 256:
                    self._found.clear()  # a bound, not an index
                self._found[results] = (version, dict(held))
        if held:
            self._stamp_now_and_then(directory)
        return held

    def _look(self, results: str, keys: list[str]) -> dict[str, int | None]:
        return self._held(results, keys) if len(keys) > _LSTAT_UP_TO else self._looked_at(results, keys)

    def _looked_at(self, results: str, keys: list[str]) -> dict[str, int | None]:
        within = os.path.join(results, "")
        held: dict[str, int | None] = {}
        for key in keys:
            try:
                info = os.lstat(within + key + _SUFFIX)
            except FileNotFoundError:
                continue
            except OSError as error:
                raise StoreError(f"cannot look at {results}: {_why(error)}") from error
            if stat.S_ISREG(info.st_mode):
                held[key] = info.st_size
        return held

    def _held(self, results: str, keys: list[str]) -> dict[str, int | None]:
        try:
            with os.scandir(results) as listing:
                entries = {entry.name: entry for entry in listing}
        except FileNotFoundError:
            return {}
        except OSError as error:
            raise StoreError(f"cannot list {results}: {_why(error)}") from error
        known = self._lengths.get(results)
        if known is None:
            if len(self._lengths) >= 256:
                self._lengths.clear()  # a bound, not an index: forgetting costs one lstat a key
            known = self._lengths[results] = {}
        held: dict[str, int | None] = {}
        for key in keys:
            entry = entries.get(key + _SUFFIX)
            if entry is None:
                continue
            try:
                if not entry.is_file(follow_symlinks=False):
                    continue
                inode = entry.inode()
                seen = known.get(key)
                if seen is None or seen[0] != inode:
                    seen = known[key] = (inode, entry.stat(follow_symlinks=False).st_size)
            except FileNotFoundError:
                continue  # removed since the listing
            except OSError as error:
                raise StoreError(f"cannot look at {results}: {_why(error)}") from error
            held[key] = seen[1]
        return held

    def _discard(self, session: str, keys: list[str]) -> None:
        directory = self._existing_session_dir(session)
        if directory is None:
            return
        # A logged record is never torn (its frame checks out); one named here is taken for absent.
        self._forgotten += 1  # before: a check that looks meanwhile vouches for nothing after it
        self._log(directory).forget(keys)
        results = os.path.join(directory, _RESULTS)
        known = self._lengths.get(results, {})
        self._found.pop(results, None)
        for key in keys:
            known.pop(key, None)
            try:
                os.unlink(os.path.join(results, key + _SUFFIX))
            except FileNotFoundError:
                pass
            except OSError as error:
                raise StoreError(f"cannot remove a torn entry from {results}: {_why(error)}") from error

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
        entries = [stem for stem in stems if is_key(stem)]
        files = set(entries)
        return entries + [key for key in self._log(directory).held() if is_key(key) and key not in files]

    def _drop(self, session: str) -> None:
        directory = self._existing_session_dir(session)
        if directory is None:
            return
        live = self._live(directory)[0]
        if live:
            raise StoreError(
                f"{directory} is held by {len(live)} live session(s) ({', '.join(live)}); "
                "it is removed once they end and its TTL has passed"
            )
        try:
            shutil.rmtree(directory)
        except FileNotFoundError:
            pass  # dropped at the same time by another thread or process
        except OSError as error:
            raise StoreError(f"cannot remove {directory}: {_why(error)}") from error

    def _drop_spares(self, results: str) -> None:
        """Remove the spares kept in ``results``, and the temp names used ones left there."""
        within = os.path.join(results, "")
        with self._spares_lock:
            leftover = [*self._spares.pop(results, ())]
            leftover += [path for path in self._used_spares if path.startswith(within)]
            self._used_spares = [path for path in self._used_spares if not path.startswith(within)]
        for path in leftover:
            with contextlib.suppress(OSError):
                os.unlink(path)

    def _close(self) -> None:
        super()._close()
        # Nothing is removed here, on the caller's thread (the mount may hang): a session's
        # release removes its spares, and any left are stale temp files to every sweep.
        with self._spares_lock:
            self._used_spares, self._spares = [], {}
        with self._logs_lock:
            for log in self._logs.values():
                log.close()
            self._logs.clear()

    # -- the record log --------------------------------------------------------

    def _log(self, directory: str) -> RecordLog:
        with self._logs_lock:
            log = self._logs.get(directory)
            if log is None:
                if len(self._logs) >= 256:  # each holds its file open
                    for old in self._logs.values():
                        old.close()
                    self._logs.clear()  # a bound, not an index: forgetting costs one read of a log
                log = self._logs[directory] = RecordLog(os.path.join(directory, _RECORDS))
            return log

    def _append(self, directory: str, records: list[tuple[str, bytes]], failed: dict[str, OSError]) -> None:
        """Append the records the log does not hold yet (a ``put`` of a held entry only renews it)."""
        log = self._log(directory)
        try:
            held = log.lengths(key for key, _ in records)
            append_records(log.path, [(key, data) for key, data in records if key not in held], self.sync)
        except OSError as error:
            failed.update((key, error) for key, _ in records)

    def _log_lengths(self, directory: str, keys: list[str]) -> dict[str, int]:
        try:
            return self._log(directory).lengths(keys)
        except OSError as error:
            raise StoreError(f"cannot read {os.path.join(directory, _RECORDS)}: {_why(error)}") from error

    def _log_read(self, directory: str, keys: list[str]) -> dict[str, bytes]:
        try:
            return self._log(directory).read(keys)
        except OSError as error:
            raise StoreError(f"cannot read {os.path.join(directory, _RECORDS)}: {_why(error)}") from error

    # -- directories we trust ------------------------------------------------

    def _session_dir(self, session: str) -> str:
        directory = self._dirs.get(session)
        if directory is None:
            if len(self._dirs) >= 4096:
                self._dirs.clear()  # a proxy's sessions come and go: a bound, not an index
            # The prefix keeps every name clear of "." and ".." and of other programs' temp dirs.
            directory = self._dirs[session] = os.path.join(self.root, _PREFIX + namespace(session))
        return directory

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
        # Looked at first: every write passes here twice, and a directory is there nearly
        # always. Made only when it is not (a failed ``mkdir`` cost a raised error each time).
        try:
            info = os.lstat(directory)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                os.mkdir(directory, 0o700)
            info = os.lstat(directory)
        _refuse_foreign(directory, info)
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(directory, 0o700)


def _unescape_mount(field: str) -> str:
    """A mount point as ``/proc/self/mountinfo`` writes it, with its octal escapes (``\\040``) read."""
    if "\\" not in field:
        return field
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _filesystem_of(path: str, mountinfo: str | None = None) -> str | None:
    """The type of the file system ``path`` is on, as the kernel names it; ``None`` where
    ``/proc/self/mountinfo`` (or the text given as ``mountinfo``) does not say (not Linux),
    so nothing is taken for local."""
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo", "rb") as file:
                mountinfo = file.read().decode("utf-8", "replace")
        except OSError:
            return None
    best, kind = -1, None
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or not tail:
            continue
        point = _unescape_mount(fields[4])
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        # The longest mount point holding the path; of two alike, the later one is on top.
        if inside and len(point) >= best:
            best, kind = len(point), tail[0]
    return kind


def _host() -> str:
    """This host's name, as a holder file name can carry it."""
    name = "".join(c if c.isalnum() or c in "._" else "_" for c in socket.gethostname())
    return name[:64] or "host"


def _holder_parts(name: str) -> tuple[str, int | None, str | None]:
    """The host, pid and start a holder's name carries (``host-pid-token`` has no start)."""
    parts = name.split("-")
    if len(parts) not in (3, 4) or not parts[1].isdigit():
        return parts[0], None, None
    return parts[0], int(parts[1]), parts[2] if len(parts) == 4 else None


_BOOT: list[str] = []


def _boot_id() -> str:
    """This boot of the kernel, so that a start time is never compared across reboots."""
    if not _BOOT:
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
                _BOOT.append("".join(c for c in handle.read() if c.isalnum())[:12])
        except (OSError, ValueError):
            _BOOT.append("")
    return _BOOT[0]


_OWN: list[tuple[int, str | None]] = []


def _own_start() -> tuple[int, str | None]:
    """This process's pid and :func:`_start_of`, read from ``/proc`` once per process (a fork
    reads its own): a session's first request holds its directory, and the read was a third of
    that hold."""
    pid = os.getpid()
    if not _OWN or _OWN[0][0] != pid:
        _OWN[:] = [(pid, _start_of(pid))]
    return _OWN[0]


def _start_of(pid: int) -> str | None:
    """When process ``pid`` started, as ``<boot>.<clock ticks since boot>``; ``None`` without ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat_line = handle.read()
        # The command name, in parentheses, may hold spaces and ")": fields follow the last ")".
        ticks = stat_line[stat_line.rindex(b")") + 2 :].split()[19].decode("ascii")
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return None
    boot = _boot_id()
    return f"{boot}.{ticks}" if boot and ticks.isdigit() else None


def _runs(pid: int, start: str | None) -> bool:
    """Whether the process a holder names still runs: its pid is alive and started when it did."""
    if not _pid_alive(pid):
        return False
    if start is None:
        return True  # a holder written where /proc is absent: the pid is all there is
    now = _start_of(pid)
    return now is None or now == start


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, and someone else's
    except OSError:
        return True
    return True


_READ_CHUNK = 1 << 16
"""Bytes asked of each read: small enough to come from the heap, not a mapping of its own."""


def _read(file: str) -> bytes | None:
    """An entry's bytes, or ``None`` when it is absent; a link is never followed."""
    try:
        fd = os.open(file, os.O_RDONLY | _NOFOLLOW | _BINARY)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise StoreError(f"cannot read {file}: {_why(error)}") from error
    # Read with the descriptor alone: a cold session reads back dozens of small records per
    # request, and a buffered file object around each costs more than the read.
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, _READ_CHUNK):
            chunks.append(chunk)
    except OSError as error:
        raise StoreError(f"cannot read {file}: {_why(error)}") from error
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _regular(path: str) -> bool:
    """Whether ``path`` is a regular file itself (a link to one is not)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


_FINE: dict[int, bool] = {}
"""Each file system's answer to :func:`_fine_grained`, by device."""


def _racy_margin(mtime: int) -> int:
    """How old a directory time must be to vouch where times keep to the clock tick: past a tick,
    or past two seconds for a time in whole seconds (a file system that keeps seconds)."""
    return RACY_NS if mtime % 1_000_000_000 else 2_000_000_000 + RACY_NS


def _fine_grained(root: str) -> bool:
    """Whether changes to a directory under ``root`` each move its time on, however close.

    Linux keeps file times to the clock tick (1-10 ms), so two changes in
    one tick leave a directory's time as the first made it, unless the file
    system keeps multigrain times (Linux 6.13 and later, on ext4, XFS, Btrfs
    and tmpfs): a time someone has read is followed by a later one at the
    next change. Asked of the file system itself, once per device: four
    renames in a row, the directory's time read after each, must each move
    it on by less than a tick after the first. A coarse clock leaves two of them equal, or,
    across a tick, moves one by a whole tick.
    """
    try:
        device = os.stat(root).st_dev
    except OSError:
        return False
    known = _FINE.get(device)
    if known is not None:
        return known
    stem = os.path.join(root, f".toolbudget-probe-{os.getpid()}-{threading.get_ident()}")
    names = [f"{stem}-0", f"{stem}-1"]
    fine = False
    try:
        os.close(os.open(names[0], os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600))
        try:
            os.stat(root)  # read once, so that a multigrain file system stamps the next change finely
            times = []
            # The first time read may be one the creation stamped coarsely, before anyone read it.
            for n in range(4):
                os.rename(names[n % 2], names[(n + 1) % 2])
                times.append(os.stat(root).st_mtime_ns)
        finally:
            for name in names:
                with contextlib.suppress(OSError):
                    os.unlink(name)
        fine = all(0 < later - earlier < 500_000 for earlier, later in itertools.pairwise(times))
    except OSError:
        fine = False
    _FINE[device] = fine
    return fine


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _uid(info: os.stat_result) -> int:
    getuid = getattr(os, "getuid", None)
    return getuid() if getuid is not None else info.st_uid


_NO_SIZE = object()
"""A key asked about without a size: told apart from any value a size may be given as."""


def _unvouched(
    keys: list[str],
    sizes: Mapping[str, int] | None,
    vouched: list[str],
    vouched_sizes: Mapping[str, int] | None,
) -> list[str]:
    """The ``keys`` a check must look at, when ``vouched`` were found held (with ``vouched_sizes``)
    and nothing changed since: the others, and those asked about with a size the check did not
    find them with."""
    known = set(vouched)
    if sizes is None:
        return [key for key in keys if key not in known]
    if vouched_sizes is None:
        return list(keys)
    return [
        key
        for key in keys
        if key not in known or sizes.get(key, _NO_SIZE) != vouched_sizes.get(key, _NO_SIZE)
    ]


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


_TEMP_COUNT = itertools.count()


def _new_temp(directory: str, name: str) -> tuple[int, str]:
    """A new private temp file for entry ``name``: its descriptor and path.

    Named by this process and thread and a count, without the random draws
    of ``tempfile`` (an event writes several entries, each paying for its
    name); a name a killed process left behind (its pid reused) is skipped.
    """
    while True:
        unique = f"{os.getpid()}.{threading.get_ident()}.{next(_TEMP_COUNT)}"
        temp = os.path.join(directory, f".{name}.{unique}{_PART}")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _BINARY, 0o600)
        except FileExistsError:
            continue
        if hasattr(os, "fchmod"):
            try:
                os.fchmod(fd, 0o600)  # whatever the umask
            except OSError:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
        return fd, temp


def _open_spare(path: str) -> int | None:
    """A spare made by :meth:`DirStore.idle`, opened to be written, if it is still one: a
    regular empty file of this user's with no other name (a stale one may have been removed)."""
    try:
        # Not blocking: a FIFO put in its place would otherwise hold the write until a reader came.
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | _NOFOLLOW | _BINARY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o600)  # whatever was done to it since it was made
    except OSError:
        info = None
    getuid = getattr(os, "getuid", None)
    if (
        info is None
        or not stat.S_ISREG(info.st_mode)
        or info.st_size
        or info.st_nlink != 1
        or (getuid is not None and info.st_uid != getuid())
    ):
        os.close(fd)
        return None
    return fd


def _write_new(
    directory: str,
    name: str,
    data: bytes,
    sync: bool = False,
    take_spare: Callable[[], str | None] | None = None,
) -> str | None:
    """Create ``directory/name`` holding ``data``, unless it exists as a regular file.

    The bytes go to a private temp file first and appear under their name in
    one step (a hard link, which also fails if the name exists), so a reader
    sees the whole file or none, and a concurrent writer of the same key
    leaves the first file in place. ``sync`` flushes the file to the disk
    before it appears, which only a power loss can tell apart.

    ``take_spare`` hands out a file :meth:`DirStore.idle` made, taken only
    when the entry is not held already; it is the temp file when it is still
    one. The temp name of a spare that now holds the entry is returned
    for the caller to remove later (a second name of the entry's file, which
    no reader looks at); any other temp file is removed here.
    """
    final = os.path.join(directory, name)
    try:
        if stat.S_ISREG(os.lstat(final).st_mode):
            return None  # held already: the first file stands
    except FileNotFoundError:
        pass
    spare = take_spare() if take_spare is not None else None
    fd = _open_spare(spare) if spare is not None else None
    if fd is not None and spare is not None:
        temp = spare
    else:
        fd, temp = _new_temp(directory, name)
    published = False
    try:
        try:
            write_all(fd, data, sync)
        finally:
            os.close(fd)
        try:
            os.link(temp, final)
            published = temp == spare
        except FileNotFoundError:
            if temp != spare:
                raise
            # The spare was taken for a stale temp file and removed since it was opened (it
            # was over an hour old): the entry is written again through a temp file of its own.
            return _write_new(directory, name, data, sync)
        except FileExistsError:
            # A link, a directory or anything else in an entry's place holds no entry (a check
            # finds it missing): the entry takes its place, or, where it cannot (a directory),
            # the write fails and the cut says so, rather than a marker naming what is not there.
            if not _regular(final):
                os.replace(temp, final)
        except OSError as error:
            if error.errno not in _NO_HARD_LINKS:
                raise
            # Without hard links, rename still publishes the file whole; the
            # rare race with another writer of the same key writes the same bytes.
            if not os.path.lexists(final):
                os.replace(temp, final)
    finally:
        if not published:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
    return temp if published else None
