"""The proxy hands freed memory back to the system after sessions are dropped, so its memory follows
what it holds."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from toolbudget import InputError, Sessions
from toolbudget.proxy import ProxyConfig
from toolbudget.proxy import app as proxy_app
from toolbudget.proxy.server import running

_GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# 200 freed buffers of 300 KB, carved from the heap (a 4 MB buffer freed first raised glibc's mmap
# threshold past them) under one still held at the heap's top: the heap cannot shrink from its top,
# so their pages stay resident until trimmed. Prints resident MB before and after.
_PROBE = textwrap.dedent(
    """
    import sys
    from toolbudget.proxy.memory import trim

    def rss():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024

    big = bytes(4_000_000)
    del big
    held = [bytes(300_000 + i) for i in range(200)]
    last = held[-1]
    del held
    before = rss()
    if sys.argv[1] == "trim":
        assert trim()
    print(before, rss())
    """
)


def _resident(how: str) -> tuple[int, int]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, how], capture_output=True, text=True, timeout=60, check=True
    )
    before, after = done.stdout.split()
    return int(before), int(after)


@pytest.mark.skipif(not _GLIBC, reason="malloc_trim is glibc's; other allocators have nothing to ask")
def test_trim_gives_back_the_pages_of_freed_buffers() -> None:
    before, after = _resident("trim")
    assert after <= before - 20, (before, after)
    before, after = _resident("leave")
    assert after >= before - 5, (before, after)  # left alone, the freed pages stay resident


def test_the_proxy_trims_after_sessions_were_dropped_and_only_then(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def counted() -> bool:
        calls.append(threading.current_thread().name)
        return True

    monkeypatch.setattr(proxy_app, "trim", counted)
    with (
        Sessions(store="memory:", max_sessions=1) as pool,
        running(ProxyConfig(store="memory:", trim_seconds=0.02), sessions=pool),
    ):
        pool.get("one")
        time.sleep(0.3)
        assert calls == []  # nothing dropped, nothing to give back
        pool.get("two")  # past max_sessions: "one" is dropped
        deadline = time.monotonic() + 10
        while not calls and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(calls) == 1 and calls[0] != "toolbudget-proxy"  # once, and off the proxy's loop
        time.sleep(0.3)
        assert len(calls) == 1  # no drop since


def test_trim_seconds_is_checked() -> None:
    for bad in (0, -1.0):
        with pytest.raises(InputError, match="trim_seconds"):
            ProxyConfig(trim_seconds=bad)
    assert ProxyConfig(trim_seconds=None).trim_seconds is None
