"""Archive lifetime, store faults and markers, checked from outside the code they test.

Each test here is a scenario a user meets: a big session on a busy machine,
several threads sharing one session, sessions dropped without ``close()``, a
holder on a shared root renewed less often than the TTL, the recall tool
arriving midway through a conversation.
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

import toolbudget.session as session_module
from test_archive_lifetime import history, markers_of, outputs
from toolbudget import to_request, wire
from toolbudget.model import Conversation, Message, Text
from toolbudget.policy import Policy
from toolbudget.session import Session, conversation_id
from toolbudget.store import DirStore

POLICY = Policy(result_max_chars=2000, tool_caps={}, compaction="off")


def _store_threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name == "toolbudget-store"}


# -- the store's time is the time spent waiting for it -----------------------------------------------


def test_a_slow_request_of_its_own_does_not_use_up_the_store_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cutting hundreds of results on a busy machine takes longer than the store bound.

    That work is not the store's: a healthy store answers every call at once,
    so every marker must name a key, however long the cutting took.
    """
    real_enforce = session_module.enforce  # type: ignore[attr-defined]

    def slow_enforce(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.4)  # the request's own work, as on a loaded machine
        return real_enforce(*args, **kwargs)

    monkeypatch.setattr(session_module, "enforce", slow_enforce)
    policy = Policy(result_max_chars=2000, tool_caps={}, compaction="off", store_timeout=0.3)
    texts = outputs(4)
    with Session("busy", store=DirStore(tmp_path), policy=policy) as session:
        managed = session.manage(history(texts), "anthropic")
        assert managed.report.store_fallbacks == 0
        found = markers_of(managed.body)
        assert len(found) == 4
        for key, _ in found:
            assert key is not None
            assert session.original(key) in texts


# -- threads sharing one session ---------------------------------------------------------------------


def test_threads_sharing_a_session_only_send_markers_the_store_holds(tmp_path: Path) -> None:
    store = DirStore(tmp_path)
    session = Session("threads", store=store, policy=POLICY)
    problems: list[str] = []

    def work(thread: int) -> None:
        for n in range(6):
            body = history(outputs(5, tag=f"t{thread}n{n}-"), task=f"task {thread}")
            for key, _ in markers_of(session.manage(body, "anthropic").body):
                if key is None:
                    problems.append(f"thread {thread}: a cut could not be kept")
                elif store.get("threads", key) is None:
                    problems.append(f"thread {thread}: {key} is not in the store")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    session.close()
    assert problems == []


# -- sessions dropped without close() ------------------------------------------------------------------


def test_a_session_dropped_without_close_lets_go_of_its_holder_and_thread(tmp_path: Path) -> None:
    before = _store_threads()
    for n in range(5):
        session = Session(f"forgotten-{n}", store=f"dir:{tmp_path}", policy=POLICY)
        session.manage(history(outputs(2, tag=f"f{n}-")), "anthropic")
        assert DirStore(tmp_path, sweep=False).live_holders(f"forgotten-{n}")
        del session
    gc.collect()
    # Only the threads these sessions started: other tests' may end meanwhile.
    deadline = time.monotonic() + 10
    while _store_threads() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _store_threads() - before == set()
    store = DirStore(tmp_path, sweep=False)
    for n in range(5):
        assert store.live_holders(f"forgotten-{n}") == []
        assert store.keys(f"forgotten-{n}")  # let go of, not removed


# -- a reused pid does not keep a dead holder alive -----------------------------------------------------

_DIES_HOLDING = """
import os, sys
from toolbudget.session import Session
from toolbudget.policy import Policy
body = {"model": "m", "max_tokens": 10, "messages": [
    {"role": "user", "content": "go"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x" * 9000}]},
]}
session = Session("reused", store="dir:" + sys.argv[1], policy=Policy(result_max_chars=2000))
session.manage(body, "anthropic")
print(os.getpid(), flush=True)
os._exit(0)  # no cleanup at all, as under kill -9
"""

_SWEEPS = """
import os, sys, time
from toolbudget.store import DirStore
store = DirStore(sys.argv[1], ttl=5, clock=lambda: time.time() + 100, sweep=False)
print(os.getpid(), store.sweep(), flush=True)
"""


def _in_new_pid_namespace(script: str, root: Path) -> list[str]:
    """Run ``script`` as pid 1 of a new pid namespace: a container started again, same host name."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) to make pid namespaces")
    done = subprocess.run(
        [unshare, "-p", "-f", "--mount-proc", sys.executable, "-c", script, str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0 and "unshare" in done.stderr:
        pytest.skip(f"cannot make a pid namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    return done.stdout.split(maxsplit=1)


def test_a_holder_left_by_a_dead_process_does_not_live_on_in_a_reused_pid(tmp_path: Path) -> None:
    """A container restarted under the same host name runs its process as pid 1 again.

    The holder the first run left names pid 1, which is alive again, but it is
    another process: the archive is swept once its TTL has passed.
    """
    first = _in_new_pid_namespace(_DIES_HOLDING, tmp_path)
    assert first[0] == "1"
    holders = list((tmp_path / "toolbudget-reused" / "holders").iterdir())
    assert len(holders) == 1  # left behind: its process never closed the session
    second = _in_new_pid_namespace(_SWEEPS, tmp_path)
    assert second[0] == "1"  # the same pid, alive, while the sweep looks
    assert "toolbudget-reused" in second[1]
    assert not (tmp_path / "toolbudget-reused").exists()


# -- a sweep racing a session that starts on an expired archive -----------------------------------------


class _RacedSweep(DirStore):
    """A store whose sweep, right after it looked at a directory, lets ``racer`` run once.

    That is the moment another process's session may hold the directory: the
    look found it unheld and past its TTL, and the removal has not begun.
    """

    racer: Any = None

    def _live(self, directory: str) -> tuple[list[str], float]:
        seen = super()._live(directory)
        racer, self.racer = self.racer, None
        if racer is not None:
            racer()
        return seen


def test_a_sweep_never_removes_a_holder_that_came_after_its_look(tmp_path: Path) -> None:
    now = [time.time()]
    old = DirStore(tmp_path, ttl=100, clock=lambda: now[0], sweep=False)
    old.put("resumed", "0123456789abcdef0123456789abcdef", b"an old original")
    now[0] += 1000  # nobody used it for ten TTLs
    sweeper = _RacedSweep(tmp_path, ttl=100, clock=lambda: now[0], sweep=False)
    session = DirStore(tmp_path, ttl=100, clock=lambda: now[0], sweep=False)
    holder: list[str] = []
    sweeper.racer = lambda: holder.append(session.hold("resumed"))
    sweeper.sweep()
    assert holder
    assert session.live_holders("resumed") == holder
    # Held: a later sweep, however late, leaves it alone while its process runs.
    now[0] += 10_000
    assert DirStore(tmp_path, ttl=100, clock=lambda: now[0], sweep=False).sweep() == []
    session.put("resumed", "fedcba9876543210fedcba9876543210", b"a new original")
    assert session.get("resumed", "fedcba9876543210fedcba9876543210") == b"a new original"


def test_a_sweep_racing_a_first_write_leaves_the_holder_in_place(tmp_path: Path) -> None:
    """The racing session holds and writes before the sweep has removed anything."""
    now = [time.time()]
    old = DirStore(tmp_path, ttl=100, clock=lambda: now[0], sweep=False)
    old.put("resumed", "0123456789abcdef0123456789abcdef", b"an old original")
    now[0] += 1000
    sweeper = _RacedSweep(tmp_path, ttl=100, clock=lambda: now[0], sweep=False)
    session = DirStore(tmp_path, ttl=100, clock=lambda: now[0], sweep=False)
    key = "fedcba9876543210fedcba9876543210"
    holder: list[str] = []

    def hold_and_write() -> None:
        holder.append(session.hold("resumed"))
        session.put("resumed", key, b"a new original")

    sweeper.racer = hold_and_write
    sweeper.sweep()
    assert session.live_holders("resumed") == holder
    assert session.get("resumed", key) == b"a new original"


# -- holders renewed often enough, and made again when removed -------------------------------------------


def _small_body(task: str) -> dict[str, Any]:
    """A request with no result to cut: nothing in it touches the store but the holder."""
    return {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": task}]}


@pytest.mark.parametrize("retries", [False, True], ids=["new-requests", "retries-of-one-body"])
def test_a_holder_on_another_host_stays_live_while_its_session_sends_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, retries: bool
) -> None:
    """A TTL shorter than a minute: the holder must be renewed within it, or a host sharing the root sweeps.

    A retry of the same body is a sign of life too.
    """
    now = [time.time()]
    mine = DirStore(tmp_path, ttl=30, clock=lambda: now[0], sweep=False)
    with Session("remote", store=mine, policy=POLICY) as session:
        session.manage(history(outputs(2)), "anthropic")
        for n in range(6):
            now[0] += 20
            session.manage(_small_body("still working" if retries else f"step {n}"), "anthropic")
            # Another host, sharing the root, sweeps: this host's holders are foreign to it.
            monkeypatch.setattr("toolbudget.store.dir._host", lambda: "elsewhere")
            try:
                removed = DirStore(tmp_path, ttl=30, clock=lambda: now[0], sweep=False).sweep()
            finally:
                monkeypatch.undo()
            assert removed == []
        assert mine.keys("remote")


def test_a_session_holds_its_directory_again_when_it_was_removed_under_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    now = [time.time()]
    store = DirStore(tmp_path, clock=lambda: now[0], sweep=False)
    session = Session("removed", store=store, policy=POLICY)
    session.manage(history(outputs(2)), "anthropic")
    # The store's worker makes spare files there once a request has written (not a race to test).
    assert session._guard is not None and session._guard.settle(10.0)
    shutil.rmtree(tmp_path / "toolbudget-removed")
    now[0] += 120
    session.manage(_small_body("go on"), "anthropic")
    assert store.live_holders("removed") != []
    assert session._guard.settle(10.0)
    shutil.rmtree(tmp_path / "toolbudget-removed")
    with caplog.at_level("WARNING", logger="toolbudget"):
        session.close()  # nothing left to release is not worth a warning
    assert caplog.records == []


# -- a directory store on a mount that hangs -----------------------------------------------------------

_HUNG_MOUNT = """
import ctypes, json, os, sys, tempfile
from toolbudget import to_request, wire
from toolbudget.model import Conversation, Message, Text
from toolbudget.policy import Policy
from toolbudget.session import Session, conversation_id

libc = ctypes.CDLL(None, use_errno=True)
fds = []

def hang(path):
    # A FUSE file system whose daemon never answers: every call on it waits, as on a dead NFS server.
    fd = os.open("/dev/fuse", os.O_RDWR)
    options = f"fd={fd},rootmode=40000,user_id=0,group_id=0".encode()
    if libc.mount(b"hung", path.encode(), b"fuse", 0, options) != 0:
        print(json.dumps({"skip": os.strerror(ctypes.get_errno())}))
        sys.exit(0)
    fds.append(fd)

def body(n):
    messages = [{"role": "user", "content": "go"}]
    for k in range(n):
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"t{k}", "name": "Bash", "input": {"command": f"c{k}"}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{k}", "content": f"out {k} " * 2000}]})
    return {"model": "m", "max_tokens": 10, "messages": messages}

policy = Policy(result_max_chars=2000, tool_caps={}, compaction="off", store_timeout=0.5)
seen = {}
# The store's root is on the hung mount from the start.
hung = tempfile.mkdtemp()
hang(hung)
session = Session("hung", store=f"dir:{hung}/archives", policy=policy)
seen["open"] = [session.manage(body(n), "anthropic").report.store_fallbacks for n in (1, 2, 3)]
session.close()
# The mount hangs under a session that was working.
root = tempfile.mkdtemp()
session = Session("later", store=f"dir:{root}", policy=policy)
seen["before"] = session.manage(body(1), "anthropic").report.store_fallbacks
hang(root)
seen["after"] = [session.manage(body(n), "anthropic").report.store_fallbacks for n in (2, 3, 4)]
session.close()
# The mount comes back (here: the hung one goes away) after a session failed to open on it.
back = tempfile.mkdtemp()
hang(back)
session = Session("back", store=f"dir:{back}/archives", policy=policy)
seen["hung"] = session.manage(body(1), "anthropic").report.store_fallbacks
os.close(fds.pop())
libc.umount2(back.encode(), 2)  # MNT_DETACH
guard = session._guard
guard._stuck.exception(timeout=10)  # the call that hung fails at once now
guard._open_until = 0.0  # the cool-down is over
seen["back"] = session.manage(body(2), "anthropic").report.store_fallbacks
session.close()
print(json.dumps(seen), flush=True)
for fd in fds:
    os.close(fd)  # the daemon goes away: the calls still waiting fail, and the process can end
"""


def test_a_directory_store_on_a_hung_mount_costs_each_request_its_bound_and_close_returns() -> None:
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        pytest.skip("needs root, unshare(1) and /dev/fuse to make a mount that hangs")
    try:
        done = subprocess.run(
            [unshare, "-m", sys.executable, "-c", _HUNG_MOUNT],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("a session on a hung mount hung its caller")
    assert done.returncode == 0, done.stderr
    seen = orjson.loads(done.stdout.strip().splitlines()[-1])
    if "skip" in seen:
        pytest.skip(f"cannot mount a FUSE file system here: {seen['skip']}")
    # Every cut made while the store hangs says it could not be kept; none names a lost key.
    assert seen == {"open": [1, 2, 3], "before": 0, "after": [2, 3, 4], "hung": 1, "back": 0}


# -- the cost of keeping many cuts at once ----------------------------------------------------------------


def test_keeping_a_batch_in_the_dir_store_lists_its_directory_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first request of a long history keeps thousands of cuts in one batch, within one bound.

    Each entry listed the whole directory (for stale temp files) before its
    write, so a batch cost its size squared: 2000 cuts took seconds, and every
    one of them was reported lost.
    """
    store = DirStore(tmp_path, sweep=False)
    items = {f"{n:032x}": f"entry {n}".encode() for n in range(300)}
    listings: list[str] = []
    real_listdir = os.listdir

    def counting_listdir(path: Any = ".") -> list[str]:
        listings.append(str(path))
        return real_listdir(path)

    monkeypatch.setattr(os, "listdir", counting_listdir)
    assert store.put_many("batch", items) == set()
    monkeypatch.undo()
    assert len(listings) <= 2
    assert all(store.get("batch", key) == data for key, data in items.items())


# -- derived ids tell tasks apart when the task is not the first user message ------------------------------


def test_a_derived_id_tells_tasks_apart_behind_the_same_opening_user_message() -> None:
    """Claude Code opens a session with a fixed caveat before the user's own words.

    Anthropic and Bedrock merge the user messages in a row into one; the
    OpenAI and Gemini forms keep them apart, and the id there hashed only the
    caveat, so every session of the tool shared one id.
    """
    caveat = "Caveat: The messages below were generated by the user while running local commands."
    for api in ("anthropic", "openai-chat", "openai-responses", "gemini", "bedrock-converse"):
        ids = set()
        for task in ("review the architecture notes", "fix the tracking of files"):
            messages = (Message("user", (Text(caveat),)), Message("user", (Text(task),)))
            body = to_request(Conversation("c", "t", messages), api, model="m")
            ids.add(conversation_id(wire.parse(body, api)))
        assert len(ids) == 2, api
