"""SpaceSaving with the paper's eviction rule, O(1) per update (dpss-eehh.md §2–§3.1).

Among the minimum counters, evict the item whose **last arrival is most recent** [000 Alg 2].
The stream-summary layout makes that the tail of the minimum bucket: slots are grouped in
buckets of equal count (a doubly linked list sorted by count) and, inside a bucket, kept in the
order they entered it, which is their last-arrival order (§3.1). DPSS (issue 4) reuses
``make_state``/``update_batch``/``snapshot`` with k~ counters.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from engine import hashtable as ht
from engine.base import Algorithm
from engine.hashtable import delete_at, found, probe
from engine.jit import inner, kernel
from engine.keys import KEY_DTYPE
from engine.registry import register
from engine.release import Release, sorted_items
from engine.settings import check_positive_int

NIL = -1
# Rows of the int64 ``links`` array. Packing the linked-list state into one array matters for
# speed: numba reference-counts every array argument of a call, so per-packet helpers take one
# array, not ten (measured: ~10x on the update path).
SLOT_BUCKET, SLOT_PREV, SLOT_NEXT = 0, 1, 2  # per slot; prev/next inside its bucket, head = oldest
B_COUNT, B_HEAD, B_TAIL, B_PREV, B_NEXT = 3, 4, 5, 6, 7  # per bucket; buckets sorted by count
B_FREE = 8  # stack of free bucket indices
META = 9  # META row, columns:
USED, B_MIN, FREE_TOP, N = 0, 1, 2, 3


class SSState(NamedTuple):
    slot_hi: np.ndarray  # uint64[K]
    slot_lo: np.ndarray  # uint64[K]
    links: np.ndarray  # int64[10, max(K+1, 4)], rows as above
    tab: ht.Table  # key -> slot


def make_state(capacity: int) -> SSState:
    """Empty SpaceSaving state with ``capacity`` counters (K in the spec)."""
    K = check_positive_int("capacity", capacity)
    links = np.full((10, max(K + 1, 4)), NIL, dtype=np.int64)
    links[B_COUNT] = 0
    links[B_FREE, : K + 1] = np.arange(K + 1)
    links[META, :4] = (0, NIL, K + 1, 0)
    return SSState(np.zeros(K, KEY_DTYPE), np.zeros(K, KEY_DTYPE), links, ht.make_table(4 * K))


@inner
def _bucket_new(L, count, after):
    """A new empty bucket with ``count``, linked after bucket ``after`` (front if NIL)."""
    L[META, FREE_TOP] -= 1
    b = L[B_FREE, L[META, FREE_TOP]]
    L[B_COUNT, b] = count
    L[B_HEAD, b] = NIL
    L[B_TAIL, b] = NIL
    if after == NIL:
        first = L[META, B_MIN]
        L[B_PREV, b] = NIL
        L[B_NEXT, b] = first
        if first != NIL:
            L[B_PREV, first] = b
        L[META, B_MIN] = b
    else:
        nb = L[B_NEXT, after]
        L[B_PREV, b] = after
        L[B_NEXT, b] = nb
        L[B_NEXT, after] = b
        if nb != NIL:
            L[B_PREV, nb] = b
    return b


@inner
def _bucket_drop_if_empty(L, b):
    if L[B_HEAD, b] != NIL:
        return
    p = L[B_PREV, b]
    nx = L[B_NEXT, b]
    if p != NIL:
        L[B_NEXT, p] = nx
    else:
        L[META, B_MIN] = nx
    if nx != NIL:
        L[B_PREV, nx] = p
    L[B_FREE, L[META, FREE_TOP]] = b
    L[META, FREE_TOP] += 1


@inner
def _slot_unlink(L, s):
    b = L[SLOT_BUCKET, s]
    p = L[SLOT_PREV, s]
    nx = L[SLOT_NEXT, s]
    if p != NIL:
        L[SLOT_NEXT, p] = nx
    else:
        L[B_HEAD, b] = nx
    if nx != NIL:
        L[SLOT_PREV, nx] = p
    else:
        L[B_TAIL, b] = p


@inner
def _slot_append(L, s, b):
    t = L[B_TAIL, b]
    L[SLOT_PREV, s] = t
    L[SLOT_NEXT, s] = NIL
    if t != NIL:
        L[SLOT_NEXT, t] = s
    else:
        L[B_HEAD, b] = s
    L[B_TAIL, b] = s
    L[SLOT_BUCKET, s] = b


@inner
def _move_up(L, s):
    """The counter of slot ``s`` grows by one; ``s`` becomes the newest of its new bucket."""
    b = L[SLOT_BUCKET, s]
    c = L[B_COUNT, b]
    nb = L[B_NEXT, b]
    if nb != NIL and L[B_COUNT, nb] == c + 1:
        target = nb
    else:
        target = _bucket_new(L, c + 1, b)
    _slot_unlink(L, s)
    _slot_append(L, s, target)
    _bucket_drop_if_empty(L, b)


@kernel
def update_batch(st, keys):
    """SS_UPDATE (dpss-eehh.md §3.1 UPDATE) for every key of the batch, in order."""
    L = st.links
    slot_hi = st.slot_hi
    slot_lo = st.slot_lo
    tab_hi = st.tab.hi
    tab_lo = st.tab.lo
    tab_val = st.tab.val
    hashing = st.tab.hashing
    K = len(slot_hi)
    for i in range(len(keys)):
        hi = keys[i, 0]
        lo = keys[i, 1]
        L[META, N] += 1
        p = probe(tab_hi, tab_lo, hashing, hi, lo)
        if found(tab_hi, tab_lo, p, hi, lo):
            _move_up(L, tab_val[p])
            continue
        if L[META, USED] < K:
            s = L[META, USED]
            L[META, USED] += 1
            bmin = L[META, B_MIN]
            if bmin != NIL and L[B_COUNT, bmin] == 1:
                _slot_append(L, s, bmin)
            else:
                _slot_append(L, s, _bucket_new(L, 1, NIL))
        else:
            # Table full: the victim is the newest member of the minimum bucket.
            s = L[B_TAIL, L[META, B_MIN]]
            old = probe(tab_hi, tab_lo, hashing, slot_hi[s], slot_lo[s])
            delete_at(tab_hi, tab_lo, tab_val, hashing, old)
            p = probe(tab_hi, tab_lo, hashing, hi, lo)
            _move_up(L, s)
        tab_hi[p] = hi
        tab_lo[p] = lo
        tab_val[p] = s
        slot_hi[s] = hi
        slot_lo[s] = lo


@kernel
def _counts(L):
    used = L[META, USED]
    out = np.empty(used, dtype=np.int64)
    for s in range(used):
        out[s] = L[B_COUNT, L[SLOT_BUCKET, s]]
    return out


def snapshot(st: SSState) -> tuple[np.ndarray, np.ndarray, int]:
    """Copies of the tracked keys ``(m, 2)``, their counters ``(m,)`` and ``n`` (§3.1 SNAPSHOT)."""
    used = int(st.links[META, USED])
    keys = np.stack([st.slot_hi[:used], st.slot_lo[:used]], axis=1).copy()
    return keys, _counts(st.links), int(st.links[META, N])


@register
class SpaceSaving(Algorithm):
    """Non-private SpaceSaving with k~ counters (default 2k); releases the top k counters."""

    name = "spacesaving"

    def __init__(self, settings):
        super().__init__(settings)
        self.k = check_positive_int("k", settings.k)
        self.capacity = check_positive_int(
            "k~", 2 * self.k if settings.k_tilde is None else settings.k_tilde, minimum=self.k)
        self.state = make_state(self.capacity)

    def update(self, keys):
        update_batch(self.state, keys)

    def release(self) -> Release:
        keys, counts, _ = snapshot(self.state)
        return Release(self.name, self.span(), sorted_items(keys[:, 0], keys[:, 1], counts, limit=self.k))

    def reset(self):
        self.state = make_state(self.capacity)
        self.packets = 0
