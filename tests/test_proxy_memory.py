"""The proxy's process gives large freed buffers back to the system, so its memory follows what it holds."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

from toolbudget import InputError
from toolbudget.proxy import ProxyConfig

_GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# Starts a proxy app (its startup runs, nothing is served), then frees a 2 MB buffer, which raises
# glibc's own mmap threshold past 600 KB unless the threshold is fixed, and keeps a 600 KB one:
# prints the bytes glibc holds in mappings of their own, where a fixed threshold puts that buffer.
_PROBE = textwrap.dedent(
    """
    import asyncio, ctypes, sys
    from aiohttp import web
    from toolbudget.proxy import ProxyConfig, create_app

    class Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
            "fordblks", "keepcost")]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = Info
    threshold = None if sys.argv[1] == "none" else 256 * 1024

    async def main():
        runner = web.AppRunner(create_app(ProxyConfig(store="memory:", mmap_threshold=threshold)))
        await runner.setup()
        big = bytes(2_000_000)
        del big
        before = libc.mallinfo2().hblkhd
        kept = bytes(600_000)
        print(libc.mallinfo2().hblkhd - before)
        await runner.cleanup()

    asyncio.run(main())
    """
)


def _mapped_growth(threshold: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, threshold], capture_output=True, text=True, timeout=60, check=True
    )
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(not _GLIBC, reason="the mmap threshold is glibc's; other allocators have none to fix")
def test_a_large_buffer_is_mapped_on_its_own_after_a_larger_one_was_freed() -> None:
    assert _mapped_growth("fixed") >= 600_000
    assert _mapped_growth("none") < 600_000  # glibc's own threshold moved past it: carved from the heap


def test_the_threshold_is_checked() -> None:
    for bad in (0, -1, 64 * 1024 * 1024):
        with pytest.raises(InputError, match="mmap_threshold"):
            ProxyConfig(mmap_threshold=bad)
    assert ProxyConfig(mmap_threshold=None).mmap_threshold is None
