"""The numba decorators every engine and capture kernel uses, defined once.

``kernel`` is ``numba.njit(cache=True, nogil=True)``: compiled once and cached on disk (so a
restart does not recompile), and releasing the GIL so the runner's one-thread-per-algorithm
design really runs algorithms in parallel (HOUSE_STYLE.md, "Kernels vs. classes").

``inner`` is the same plus ``inline="always"``, for the small helpers called per packet from
inside a kernel (hash, probe, linked-list steps). Inlining at numba-IR level removes the call and
the per-call reference counting of every array in a state tuple, which otherwise costs about a
microsecond per update on state tuples of a dozen arrays.

The cache goes to a user-writable folder, never into site-packages (which may be read-only):
``$NUMBA_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/dptop/numba`` (``~/.cache/dptop/numba``).
Numba files each kernel under its source file's path, so two installs never share entries.
"""
import os
import threading
from pathlib import Path

import numba
import numpy as np
from numba.core import event


def cache_dir() -> Path:
    """Where compiled kernels are kept (see the module docstring)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "dptop" / "numba"


# Read by numba when each decorated function's cache is first located, so it must be set before
# any kernel below is decorated; setting it here (the only place kernels are decorated) suffices.
numba.config.CACHE_DIR = str(cache_dir())



class _Compiles(event.Listener):
    """Counts the functions numba really compiles: a kernel loaded from the cache fires no
    "numba:compile" event (numba/core/dispatcher.py, ``Dispatcher.compile``)."""

    def __init__(self):
        self.count = 0
        self._lock = threading.Lock()

    def on_start(self, ev):
        with self._lock:
            self.count += 1

    def on_end(self, ev):
        pass


_COMPILES = _Compiles()
event.register("numba:compile", _COMPILES)


def compiles() -> int:
    """Functions compiled (not loaded from the cache) in this process so far."""
    return _COMPILES.count


kernel = numba.njit(cache=True, nogil=True)
inner = numba.njit(cache=True, nogil=True, inline="always")
hot = numba.njit(cache=True, nogil=True, _nrt=False)
"""``kernel`` without numba's reference counting, for per-packet batch loops that create no array
(scratch comes in with the state). Inlined helpers that touch arrays inside branches otherwise pay
atomic reference-count updates numba cannot prune: 10-15% of a SpaceSaving update (measured)."""


@inner
def ix(i):
    """``i`` as an unsigned array index. Numba wraps a signed index around (a compare and an add
    on every access); per-packet paths whose indices are non-negative by construction index with
    ``ix`` (measured: 14 % of a SpaceSaving hit, lookup and stream-summary step)."""
    return np.uint64(i)
