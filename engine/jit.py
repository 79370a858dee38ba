"""The one numba decorator every engine and capture kernel uses.

``kernel`` is ``numba.njit(cache=True, nogil=True)``: compiled once and cached on disk (so a
restart does not recompile), and releasing the GIL so the runner's one-thread-per-algorithm
design really runs algorithms in parallel (HOUSE_STYLE.md, "Kernels vs. classes").
"""
import numba

kernel = numba.njit(cache=True, nogil=True)
