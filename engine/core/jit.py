"""The numba decorators every engine and capture kernel uses, defined once.

``kernel`` is ``numba.njit(cache=True, nogil=True)``: compiled once and cached on disk (so a
restart does not recompile), and releasing the GIL so the runner's one-thread-per-algorithm
design really runs algorithms in parallel (ARCHITECTURE.md, "Adding an algorithm").

``inner`` is the same plus ``inline="always"``, for the small helpers called per packet from
inside a kernel (hash, probe, linked-list steps). Inlining at numba-IR level removes the call and
the per-call reference counting of every array in a state tuple, which otherwise costs about a
microsecond per update on state tuples of a dozen arrays.

The cache goes to a user-writable folder, never into site-packages (which may be read-only):
``$NUMBA_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/dptop/numba`` (``~/.cache/dptop/numba``), in a
subfolder named by a digest of every kernel source (engine/ and capture/). Numba checks only a
kernel's own file before it loads the kernel from its cache, not the files of the helpers inlined
into it: after a change to a helper alone it would run the old machine code (which, with a changed
layout, crashes). Any change to the sources names a new subfolder, so every kernel compiles anew.
Numba fixes a kernel's cache folder when the kernel is decorated, so the folder (and the digest
naming it, a few milliseconds) is chosen when this module is imported; tidying old folders
(``prune``) is left to ``dptop compile``. Numba files each kernel under its source file's path, so
two installs never share entries.
"""
import hashlib
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import numba
import numpy as np
from numba.core import event


STALE_DAYS = 7
"""Cache subfolders of other sources not written for this long are removed."""


def sources_digest(engine: Path = Path(__file__).resolve().parents[1]) -> str:
    """16 hex digits over the path and bytes of every source file of ``engine`` and of the capture
    package beside it (bytes, not modification times: a checkout or a touch that leaves the sources
    as they were keeps the compiled kernels)."""
    digest = hashlib.blake2b(digest_size=8)
    for root in (engine, engine.parent / "capture"):
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(root.parent)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_dir() -> Path:
    """Where compiled kernels are kept (see the module docstring)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        base = Path(os.environ["NUMBA_CACHE_DIR"])
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dptop" / "numba"
    return base / _DIGEST


def prune(folder: Path) -> None:
    """Mark ``folder`` as in use and remove its sibling subfolders (other sources) that were not
    used for ``STALE_DAYS`` (``dptop compile`` calls it; importing this module does not)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        os.utime(folder)
        siblings = [p for p in folder.parent.iterdir() if p != folder and p.is_dir() and len(p.name) == 16
                    and all(c in "0123456789abcdef" for c in p.name)]
        for p in siblings:
            if time.time() - p.stat().st_mtime > STALE_DAYS * 86400:
                shutil.rmtree(p, ignore_errors=True)
    except OSError:
        pass  # a cache we cannot tidy still works


_DIGEST = sources_digest()


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


BLAS_PROBE = "scipy.linalg.cython_blas"


class _ArrayMaths(event.Listener):
    """The first time numba takes its compiler lock (a kernel compiled, or loaded from the cache),
    it loads its array maths (numba/np/arraymath.py), which probe for a BLAS by importing SciPy's
    linear algebra when SciPy is installed (the test extra brings it; the product does not use it):
    0.1-0.2 CPU-s, a tenth of a replay's start-up. The probe only chooses BLAS for the inner product
    of ``np.convolve`` and ``np.correlate``, which no kernel here calls (``np.dot`` and ``np.linalg``
    look for SciPy themselves when a kernel uses them), so the array maths are loaded first here,
    with the probe's import answered "not installed", as in a plain install."""

    def __init__(self):
        self.loaded = False
        self._lock = threading.Lock()

    def on_start(self, ev):
        if self.loaded:
            return
        with self._lock:
            if self.loaded:
                return
            self.loaded = True
            if "numba.np.arraymath" in sys.modules or BLAS_PROBE in sys.modules:
                return
            sys.modules[BLAS_PROBE] = None  # an import of it raises ModuleNotFoundError at once
            try:
                import numba.np.arraymath  # noqa: F401
            finally:
                if sys.modules.get(BLAS_PROBE, 0) is None:
                    del sys.modules[BLAS_PROBE]

    def on_end(self, ev):
        pass


event.register("numba:compiler_lock", _ArrayMaths())


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
