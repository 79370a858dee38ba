"""A kernel's state in one block: the arrays of a state tuple copied, in tuple order, into one
allocation, each 64-byte aligned (a cache line).

Allocated one by one, a state's arrays land wherever the allocator puts them, so where they fall
relative to each other changes from process to process. One arrival of LazyHH touches a dozen of
them (P, the released grid, the noise block, the generator's lanes, the candidates' cells, the key
table), and some placements make their lines meet in the same L1 sets or their addresses alias in
the store buffer's 4 KiB check: the same run took 0.112 or 0.120 us an arrival by how its arrays
happened to fall (bimodal over fresh processes, with fixed seeds too). Packed, the layout and the
speed are the same in every run.
"""
from __future__ import annotations

import numpy as np

LINE = 64


def _arrays(state):
    for x in state:
        if isinstance(x, np.ndarray):
            yield x
        elif isinstance(x, tuple):
            yield from _arrays(x)


def _rebuilt(state, arrays):
    fields = [next(arrays) if isinstance(x, np.ndarray) else _rebuilt(x, arrays) if isinstance(x, tuple) else x
              for x in state]
    return type(state)(*fields) if hasattr(state, "_fields") else type(state)(fields)


def _padded(nbytes: int) -> int:
    return -(-nbytes // LINE) * LINE


def packed(state):
    """A copy of ``state`` (a tuple or NamedTuple of arrays and of such tuples, any depth) whose
    arrays, same shapes, dtypes and values, C-contiguous, lie in one block in tuple order. The
    block starts zeroed and all-zero arrays are not copied, so their pages stay untouched (and
    out of the resident memory) until a kernel writes them, as they were."""
    arrays = list(_arrays(state))
    block = np.zeros(sum(_padded(a.nbytes) for a in arrays) + LINE, dtype=np.uint8)
    at = -block.ctypes.data % LINE
    moved = []
    for a in arrays:
        view = block[at:at + a.nbytes].view(a.dtype).reshape(a.shape)
        if a.any():
            view[...] = a
        moved.append(view)
        at += _padded(a.nbytes)
    return _rebuilt(state, iter(moved))
