"""The numba decorators every engine and capture kernel uses, defined once.

``kernel`` is ``numba.njit(cache=True, nogil=True)``: compiled once and cached on disk (so a
restart does not recompile), and releasing the GIL so the runner's one-thread-per-algorithm
design really runs algorithms in parallel (HOUSE_STYLE.md, "Kernels vs. classes").

``inner`` is the same plus ``inline="always"``, for the small helpers called per packet from
inside a kernel (hash, probe, linked-list steps). Inlining at numba-IR level removes the call and
the per-call reference counting of every array in a state tuple, which otherwise costs about a
microsecond per update on state tuples of a dozen arrays.
"""
import numba

kernel = numba.njit(cache=True, nogil=True)
inner = numba.njit(cache=True, nogil=True, inline="always")
