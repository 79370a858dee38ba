"""A bounded top-K tracker: min-heap of slots keyed by value, with a key -> slot hash table.

Used by CountMin + heap (non-private baseline) and available to any sketch that tracks the
current top candidates. ``offer(st, hi, lo, value)`` records the latest value of a key: a
tracked key's value is replaced (values only grow in the sketches that use it), an untracked
key enters when there is room or when it beats the minimum, which it then evicts.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dptop.engine.core import hashtable as ht
from dptop.engine.core.hashtable import delete_at, found, probe, store
from dptop.engine.core.jit import inner
from dptop.engine.core.keys import KEY_DTYPE


class TopK(NamedTuple):
    slot_hi: np.ndarray  # uint64[K]
    slot_lo: np.ndarray  # uint64[K]
    slot_val: np.ndarray  # int64[K]
    slot_pos: np.ndarray  # int64[K]: heap index of the slot
    heap: np.ndarray  # int64[K]: slot ids, min-heap on slot_val
    size: np.ndarray  # int64[1]
    tab: ht.Table  # key -> slot id


def make_topk(capacity: int) -> TopK:
    return TopK(
        np.zeros(capacity, KEY_DTYPE), np.zeros(capacity, KEY_DTYPE), np.zeros(capacity, np.int64),
        np.zeros(capacity, np.int64), np.zeros(capacity, np.int64), np.zeros(1, np.int64),
        ht.make_table(4 * capacity),
    )


def topk_bytes(capacity: int) -> int:
    """The bytes ``make_topk(capacity)`` allocates."""
    return 40 * capacity + 8 + ht.table_bytes(4 * capacity)


@inner
def _swap(st, i, j):
    a = st.heap[i]
    b = st.heap[j]
    st.heap[i] = b
    st.heap[j] = a
    st.slot_pos[b] = i
    st.slot_pos[a] = j


@inner
def _sift_up(st, i):
    while i > 0:
        parent = (i - 1) >> 1
        if st.slot_val[st.heap[i]] >= st.slot_val[st.heap[parent]]:
            break
        _swap(st, i, parent)
        i = parent


@inner
def _sift_down(st, i):
    n = st.size[0]
    while True:
        left = 2 * i + 1
        if left >= n:
            return
        child = left
        right = left + 1
        if right < n and st.slot_val[st.heap[right]] < st.slot_val[st.heap[left]]:
            child = right
        if st.slot_val[st.heap[i]] <= st.slot_val[st.heap[child]]:
            return
        _swap(st, i, child)
        i = child


@inner
def offer(st, hi, lo, value):
    tab = st.tab
    p = probe(tab.hi, tab.lo, tab.hashing, hi, lo)
    if found(tab.hi, tab.lo, p, hi, lo):
        s = tab.val[p]
        old = st.slot_val[s]
        st.slot_val[s] = value
        if value >= old:
            _sift_down(st, st.slot_pos[s])
        else:
            _sift_up(st, st.slot_pos[s])
        return
    n = st.size[0]
    if n < len(st.heap):
        s = n
        st.size[0] = n + 1
        st.heap[n] = s
        st.slot_pos[s] = n
    else:
        s = st.heap[0]
        if value <= st.slot_val[s]:
            return
        old = probe(tab.hi, tab.lo, tab.hashing, st.slot_hi[s], st.slot_lo[s])
        delete_at(tab.hi, tab.lo, tab.val, tab.hashing, old)
        p = probe(tab.hi, tab.lo, tab.hashing, hi, lo)
    store(tab.hi, tab.lo, tab.val, p, hi, lo, s)
    st.slot_hi[s] = hi
    st.slot_lo[s] = lo
    st.slot_val[s] = value
    if n < len(st.heap):
        _sift_up(st, st.slot_pos[s])
    else:
        _sift_down(st, 0)


def tracked(st: TopK) -> tuple[np.ndarray, np.ndarray]:
    """Copies of the tracked keys ``(m, 2)`` and their values."""
    n = int(st.size[0])
    return np.stack([st.slot_hi[:n], st.slot_lo[:n]], axis=1).copy(), st.slot_val[:n].copy()


@inner
def select(a, k):
    """The k-th smallest of ``a`` (reorders ``a``): in-place quickselect, middle pivot. For a
    few values (a median of d rows); over hundreds, where its branches follow the data,
    ``kth_smallest`` is 3x faster."""
    lo = 0
    hi = len(a) - 1
    while lo < hi:
        pivot = a[(lo + hi) // 2]
        i = lo
        j = hi
        while i <= j:
            while a[i] < pivot:
                i += 1
            while a[j] > pivot:
                j -= 1
            if i <= j:
                a[i], a[j] = a[j], a[i]
                i += 1
                j -= 1
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            return a[k]
    return a[k]


@inner
def kth_smallest(src, n, k, buf):
    """The k-th smallest (0-based) of ``src[:n]``, which is left as it is: quickselect whose
    partitions have no data-dependent branch, so its cost does not hang on mispredicted
    compares. Each pass (median-of-3 pivot p) writes every value both to the next slot of the
    values < p, growing up from one end of a free half of ``buf`` (>= 2n + 2 values), and to
    the next slot of those > p, growing down from the other end, and advances one count or the
    other (or neither: = p). The two halves take turns; a pass never reads the half it writes.
    Each pass drops at least the values equal to p, so it ends."""
    half = n + 1
    lo = 0
    m = n
    base = -1  # the first pass reads src
    while True:
        arr, at = (src, 0) if base < 0 else (buf, lo)
        a = arr[at]
        b = arr[at + (m - 1) // 2]
        c = arr[at + m - 1]
        p = max(min(a, b), min(max(a, b), c))
        out = 0 if base != 0 else half
        top = out + half - 1
        below = 0
        above = 0
        for i in range(at, at + m):
            v = arr[i]
            buf[out + below] = v
            buf[top - above] = v
            below += v < p
            above += v > p
        if k < below:
            lo, m = out, below
        elif k < m - above:
            return p
        else:
            k -= m - above
            lo, m = top - above + 1, above
        base = out
