"""Misra-Gries in the form seed 002 requires [002 Alg 1], as numba kernels (dp-misra-gries.md §2–§3).

Exactly K (key, counter) pairs at all times, starting from K dummy keys ``(SENTINEL_HI, j)`` with
counter 0. Dummy keys sort after every real key (real sources never have ``hi = SENTINEL_HI``,
keys.py), and their order is j.

* Branch 1: a stored key (even with counter 0) is incremented.
* Branch 2: otherwise, if no counter is 0, every counter drops by 1 and the item is discarded;
  keys that reach 0 **stay stored**.
* Branch 3: otherwise the stored zero-counter key that is **smallest in the fixed key order**
  (hi, lo) is replaced by the item, with counter 1.

Branch 2 costs O(K) but happens at most n/(K+1) times; it also rebuilds ``zq``, the zero slots
in key order, which a cursor then walks in O(1) amortised (§3.1: between two Branch-2 events
zero slots only leave the zero set and their keys do not change).

``MisraGries`` (name ``misragries``) is the non-private baseline: K = k~ counters (default 2k),
releasing the top k non-zero counters. The DP releases live in ``dptop.engine.single_release.dpmg``.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dptop.engine.core import hashtable as ht
from dptop.engine.core.base import Algorithm
from dptop.engine.core.hashtable import delete_at, found, probe, store
from dptop.engine.core.jit import inner, kernel
from dptop.engine.core.keys import KEY_DTYPE, SENTINEL_HI
from dptop.engine.core.registry import register
from dptop.engine.core.release import Release, sorted_items
from dptop.engine.core.settings import check_positive_int

# meta[] fields
ZQ_LEN, ZQ_POS, NZERO, ALPHA, N = 0, 1, 2, 3, 4


class MGState(NamedTuple):
    key_hi: np.ndarray  # uint64[K]
    key_lo: np.ndarray  # uint64[K]
    cnt: np.ndarray  # int64[K]
    zq: np.ndarray  # int64[K]: zero slots at the last rebuild, ascending key order
    meta: np.ndarray  # int64[5]: zq_len, zq_pos, nzero, alpha, n
    tab: ht.Table  # key -> slot


@kernel
def _insert_all(tab_hi, tab_lo, tab_val, hashing, key_hi, key_lo):
    for j in range(len(key_hi)):
        p = probe(tab_hi, tab_lo, hashing, key_hi[j], key_lo[j])
        tab_hi[p] = key_hi[j]
        tab_lo[p] = key_lo[j]
        tab_val[p] = j


def make_state(capacity: int) -> MGState:
    """INIT(K): K dummy keys with counter 0, all in the zero queue (dp-misra-gries.md §3.3)."""
    K = check_positive_int("capacity", capacity)
    key_hi = np.full(K, SENTINEL_HI, dtype=KEY_DTYPE)
    key_lo = np.arange(K, dtype=KEY_DTYPE)
    tab = ht.make_table(4 * K)
    _insert_all(tab.hi, tab.lo, tab.val, tab.hashing, key_hi, key_lo)
    meta = np.array([K, 0, K, 0, 0], dtype=np.int64)
    return MGState(key_hi, key_lo, np.zeros(K, np.int64), np.arange(K, dtype=np.int64), meta, tab)


@inner
def _key_less(key_hi, key_lo, a, b):
    return key_hi[a] < key_hi[b] or (key_hi[a] == key_hi[b] and key_lo[a] < key_lo[b])


@inner
def _sift_down(zq, key_hi, key_lo, root, end):
    while True:
        child = 2 * root + 1
        if child >= end:
            return
        if child + 1 < end and _key_less(key_hi, key_lo, zq[child], zq[child + 1]):
            child += 1
        if not _key_less(key_hi, key_lo, zq[root], zq[child]):
            return
        zq[root], zq[child] = zq[child], zq[root]
        root = child


@inner
def _sort_by_key(zq, length, key_hi, key_lo):
    """Heapsort of slot indices zq[:length] by key (hi, lo), in place (no allocation)."""
    for start in range(length // 2 - 1, -1, -1):
        _sift_down(zq, key_hi, key_lo, start, length)
    for end in range(length - 1, 0, -1):
        zq[0], zq[end] = zq[end], zq[0]
        _sift_down(zq, key_hi, key_lo, 0, end)


@inner
def _decrement_all(key_hi, key_lo, cnt, zq, meta):
    """Branch 2: every counter −1; rebuild the zero queue in key order. At most n/(K+1) times."""
    meta[ALPHA] += 1
    length = 0
    for j in range(len(cnt)):
        cnt[j] -= 1
        if cnt[j] == 0:
            zq[length] = j
            length += 1
    _sort_by_key(zq, length, key_hi, key_lo)
    meta[ZQ_LEN] = length
    meta[ZQ_POS] = 0
    meta[NZERO] = length


@inner
def _update(key_hi, key_lo, cnt, zq, meta, tab_hi, tab_lo, tab_val, hashing, hi, lo):
    """UPDATE(x) of dp-misra-gries.md §3.3 (arrays passed one by one: per-packet helpers that
    take the state tuple run several times slower)."""
    meta[N] += 1
    p = probe(tab_hi, tab_lo, hashing, hi, lo)
    if found(tab_hi, tab_lo, p, hi, lo):  # Branch 1
        s = tab_val[p]
        if cnt[s] == 0:
            meta[NZERO] -= 1
        cnt[s] += 1
        return
    if meta[NZERO] == 0:  # Branch 2
        _decrement_all(key_hi, key_lo, cnt, zq, meta)
        return
    pos = meta[ZQ_POS]  # Branch 3: the smallest-key zero slot
    y = zq[pos]
    while cnt[y] != 0:  # skipped slots left the zero set through Branch 1
        pos += 1
        y = zq[pos]
    meta[ZQ_POS] = pos + 1
    old = probe(tab_hi, tab_lo, hashing, key_hi[y], key_lo[y])
    delete_at(tab_hi, tab_lo, tab_val, hashing, old)
    p = probe(tab_hi, tab_lo, hashing, hi, lo)
    store(tab_hi, tab_lo, tab_val, p, hi, lo, y)
    key_hi[y] = hi
    key_lo[y] = lo
    cnt[y] = 1
    meta[NZERO] -= 1


@kernel
def update_batch(st, keys):
    key_hi, key_lo, cnt, zq, meta = st.key_hi, st.key_lo, st.cnt, st.zq, st.meta
    tab_hi, tab_lo, tab_val, hashing = st.tab
    for i in range(len(keys)):
        _update(key_hi, key_lo, cnt, zq, meta, tab_hi, tab_lo, tab_val, hashing, keys[i, 0], keys[i, 1])


def is_dummy(keys: np.ndarray) -> np.ndarray:
    """Rows of a ``(m, 2)`` key array that are dummy keys."""
    return keys[:, 0] == SENTINEL_HI


def snapshot(st: MGState) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Copies of all K stored keys ``(K, 2)`` (dummies included), counters, alpha and n."""
    keys = np.stack([st.key_hi, st.key_lo], axis=1).copy()
    return keys, st.cnt.copy(), int(st.meta[ALPHA]), int(st.meta[N])


@register
class MisraGries(Algorithm):
    """Non-private Misra-Gries with k~ counters (default 2k); releases the top k counters."""

    name = "misragries"

    def __init__(self, settings):
        super().__init__(settings)
        self.k = check_positive_int("k", settings.k)
        self.capacity = check_positive_int("k~", settings.k_tilde or 2 * self.k)
        if self.capacity < self.k:
            raise ValueError(f"k~ ({self.capacity}) must be >= k ({self.k})")
        self.state = make_state(self.capacity)

    def update(self, keys):
        update_batch(self.state, keys)

    def release(self) -> Release:
        keys, counts, _, _ = snapshot(self.state)
        keep = ~is_dummy(keys) & (counts > 0)
        return Release(self.name, self.span(),
                       sorted_items(keys[keep, 0], keys[keep, 1], counts[keep], limit=self.k))

    def reset(self):
        self.state = make_state(self.capacity)
        self.packets = 0
