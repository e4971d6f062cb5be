"""Keep the proxy's resident memory near what it holds: the allocator's free pages go back to the system.

A proxy's sessions come and go (the pool drops the least recently used past
its bounds), and each freed history leaves holes in glibc's heap: its large
buffers (500 KB bodies, history copies, long tool outputs) are carved from
the heap once the first such buffer freed has raised glibc's mmap threshold
past their size, and a heap is trimmed only from its top, which a buffer
still in use usually holds. Measured with ``bench/proxy.py soak --agents``
(sessions bounded by ``max_held_bytes``, Python's own allocated blocks flat),
resident memory still rose by a quarter over five minutes after the bound
was reached.

``malloc_trim`` hands every free page back, wherever it lies. The proxy
calls it from a worker thread (the call holds no interpreter lock) now and
then, only after sessions were dropped: a few milliseconds of the
allocator's time, during which the loop's own allocations may wait for it.
Fixing the mmap threshold instead bounds the heap as well, but costs a map,
an unmap and the page faults for every large buffer: measured, 0.4 to 0.8 ms
of CPU more per 500 KB request. Elsewhere than glibc there is nothing to do.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
from collections.abc import Callable
from functools import cache

__all__ = ["trim"]


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    found: Callable[[int], int] | None = getattr(libc, "malloc_trim", None)
    return found


def trim() -> bool:
    """Give the allocator's free pages back to the system; whether there was an allocator to ask."""
    malloc_trim = _malloc_trim()
    if malloc_trim is None:
        return False
    malloc_trim(0)
    return True
