"""Keep the proxy's resident memory near what it holds: large buffers go back to the system when freed.

glibc serves an allocation of at least its mmap threshold (128 KiB at start)
with a mapping of its own, which a free hands back to the system. But every
such free raises the threshold to the freed size (up to 32 MiB), so after the
first 500 KB body, every later body, history copy and long tool output is
carved from the heap instead. Freed, those leave holes that smaller
allocations fill only in part, and the heap's top is seldom free to trim: a
proxy whose sessions come and go keeps growing its resident memory long after
what it holds stopped growing. Measured with ``bench/proxy.py soak --agents``
(sessions bounded by ``max_held_bytes``, Python's own allocated blocks flat),
resident memory still rose by a quarter over five minutes.

Setting the threshold once fixes it there (glibc then stops moving it): each
buffer of at least that size is a mapping of its own, given back when freed,
for the cost of a map and an unmap per large buffer (a few microseconds
beside the milliseconds a 500 KB body takes to manage). Elsewhere than glibc
there is nothing to set.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

__all__ = ["fix_mmap_threshold"]

_M_MMAP_THRESHOLD = -3
"""glibc's ``mallopt`` parameter for the mmap threshold (``malloc.h``)."""


def fix_mmap_threshold(size: int) -> bool:
    """Have glibc map every allocation of at least ``size`` bytes on its own; whether it took.

    Process-wide and lasting: a proxy's process calls it once, at start.
    """
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return False
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, ctypes.c_int(size)))
