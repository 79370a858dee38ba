"""Memory of long-running views: sessions come and go (Start/Stop in the window, a new key in the
terminal view), and what a closed session held must go back to the system.

glibc gives each thread that allocates its own heap arena (up to 8 per core) and keeps an arena's
peak after its arrays are freed; every session starts fresh worker threads, so without a bound
each Start/Stop cycle left tens of MiB behind (measured: +120 MiB over 20 cycles on a 300k-packet
capture, flat with two arenas). The other leftover is a replay's large per-batch arrays: glibc
raises its mmap threshold to the largest block freed (up to 32 MiB), so after the first batches
they came from the arenas, whose peak stayed; a fixed threshold (``map_large_blocks``) maps them
on their own and gives them back when freed (measured: -29 MiB of peak RSS replaying 2^24
distinct sources with the default algorithms). These functions are no-ops where there is no
glibc.
"""
from __future__ import annotations

import ctypes
import gc
import os

M_MMAP_THRESHOLD = -3  # mallopt parameters (malloc.h)
M_ARENA_MAX = -8
ARENAS = 2
LARGE_BLOCK = 1 << 20
"""Bytes from which an allocation gets a mapping of its own (``map_large_blocks``)."""


def _libc():
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def limit_arenas(arenas: int = ARENAS) -> None:
    """Cap the allocator's arenas for threads created from now on (call once, at start)."""
    libc = _libc()
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(M_ARENA_MAX, arenas)


def map_large_blocks(threshold: int = LARGE_BLOCK) -> None:
    """Map every allocation of ``threshold`` bytes or more on its own, returned to the system when
    freed (call once, at start: it also stops glibc from moving the threshold)."""
    libc = _libc()
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(M_MMAP_THRESHOLD, threshold)


def release_memory() -> None:
    """After a session is closed: collect its reference cycles, then return free heap pages."""
    gc.collect()
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def resident() -> int | None:
    """The process's resident memory in bytes (/proc/self/statm), or None where unknown."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class MemoryWatch:
    """The memory limit held for the whole run, not only checked at its start: the run may grow
    the process's resident memory by the limit plus ``ALLOWANCE`` of it (batches in flight, the
    ground truth's recording, the views: what is not the algorithms' state) over what the process
    held when the watch began. ``exceeded()`` says in one line when it has grown past that."""

    ALLOWANCE = 0.25

    def __init__(self, limit):
        self.limit, self.base = limit, resident()

    def exceeded(self) -> str | None:
        now = resident()
        if self.limit is None or self.base is None or now is None:
            return None
        ceiling = self.base + int(self.limit.nbytes * (1 + self.ALLOWANCE))
        if now <= ceiling:
            return None
        return (f"the run's memory grew by {(now - self.base) >> 20} MiB, past the limit of "
                f"{self.limit.nbytes >> 20} MiB ({self.limit.source}) and its {self.ALLOWANCE:.0%} allowance; stopped")
