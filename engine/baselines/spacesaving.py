"""SpaceSaving with the paper's eviction rule, O(1) per update (dpss-eehh.md §2–§3.1).

Among the minimum counters, evict the item whose **last arrival is most recent** [000 Alg 2].
The stream-summary layout makes that the tail of the minimum bucket: slots are grouped in
buckets of equal count (a doubly linked list sorted by count) and, inside a bucket, kept in the
order they entered it, which is their last-arrival order (§3.1). DPSS reuses
``make_state``/``update_batch``/``snapshot`` with k~ counters.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dptop.engine.core import hashtable as ht
from dptop.engine.core.base import Algorithm
from dptop.engine.core.hashtable import delete_at, found, probe, store
from dptop.engine.core.jit import inner, kernel
from dptop.engine.core.keys import KEY_DTYPE
from dptop.engine.core.registry import register
from dptop.engine.core.release import Release, sorted_items
from dptop.engine.core.settings import check_positive_int

NIL = -1
# Columns of the int64 ``links`` array: row i holds the fields of slot i and of bucket i, so one
# update touches few cache lines; the last row holds the scalars. Packing the linked-list state
# into one array matters for speed: numba reference-counts every array argument of a call, so
# per-packet helpers take one array, not ten (measured: ~40x on the update path).
SLOT_BUCKET, SLOT_PREV, SLOT_NEXT = 0, 1, 2  # per slot; prev/next inside its bucket, head = oldest
B_COUNT, B_HEAD, B_TAIL, B_PREV, B_NEXT = 3, 4, 5, 6, 7  # per bucket; buckets sorted by count
B_FREE = 8  # stack of free bucket indices
USED, B_MIN, FREE_TOP, N = 0, 1, 2, 3  # columns of the last row


class SSState(NamedTuple):
    slot_hi: np.ndarray  # uint64[K]
    slot_lo: np.ndarray  # uint64[K]
    links: np.ndarray  # int64[K+2, 9], columns as above
    tab: ht.Table  # key -> slot


def make_state(capacity: int) -> SSState:
    """Empty SpaceSaving state with ``capacity`` counters (K in the spec)."""
    K = check_positive_int("capacity", capacity)
    links = np.full((K + 2, 9), NIL, dtype=np.int64)
    links[:, B_COUNT] = 0
    links[: K + 1, B_FREE] = np.arange(K + 1)
    links[-1, :4] = (0, NIL, K + 1, 0)
    return SSState(np.zeros(K, KEY_DTYPE), np.zeros(K, KEY_DTYPE), links, ht.make_table(4 * K))


@inner
def _bucket_new(L, count, after):
    """A new empty bucket with ``count``, linked after bucket ``after`` (front if NIL)."""
    L[-1, FREE_TOP] -= 1
    b = L[L[-1, FREE_TOP], B_FREE]
    L[b, B_COUNT] = count
    L[b, B_HEAD] = NIL
    L[b, B_TAIL] = NIL
    if after == NIL:
        first = L[-1, B_MIN]
        L[b, B_PREV] = NIL
        L[b, B_NEXT] = first
        if first != NIL:
            L[first, B_PREV] = b
        L[-1, B_MIN] = b
    else:
        nb = L[after, B_NEXT]
        L[b, B_PREV] = after
        L[b, B_NEXT] = nb
        L[after, B_NEXT] = b
        if nb != NIL:
            L[nb, B_PREV] = b
    return b


@inner
def _bucket_drop_if_empty(L, b):
    if L[b, B_HEAD] != NIL:
        return
    p = L[b, B_PREV]
    nx = L[b, B_NEXT]
    if p != NIL:
        L[p, B_NEXT] = nx
    else:
        L[-1, B_MIN] = nx
    if nx != NIL:
        L[nx, B_PREV] = p
    L[L[-1, FREE_TOP], B_FREE] = b
    L[-1, FREE_TOP] += 1


@inner
def _slot_unlink(L, s):
    b = L[s, SLOT_BUCKET]
    p = L[s, SLOT_PREV]
    nx = L[s, SLOT_NEXT]
    if p != NIL:
        L[p, SLOT_NEXT] = nx
    else:
        L[b, B_HEAD] = nx
    if nx != NIL:
        L[nx, SLOT_PREV] = p
    else:
        L[b, B_TAIL] = p


@inner
def _slot_append(L, s, b):
    t = L[b, B_TAIL]
    L[s, SLOT_PREV] = t
    L[s, SLOT_NEXT] = NIL
    if t != NIL:
        L[t, SLOT_NEXT] = s
    else:
        L[b, B_HEAD] = s
    L[b, B_TAIL] = s
    L[s, SLOT_BUCKET] = b


@inner
def _move_up(L, s):
    """The counter of slot ``s`` grows by one; ``s`` becomes the newest of its new bucket."""
    b = L[s, SLOT_BUCKET]
    c = L[b, B_COUNT]
    nb = L[b, B_NEXT]
    if L[b, B_HEAD] == s and L[b, B_TAIL] == s and (nb == NIL or L[nb, B_COUNT] > c + 1):
        L[b, B_COUNT] = c + 1  # alone in its bucket, no bucket at c + 1: the bucket moves up with it
        return
    if nb != NIL and L[nb, B_COUNT] == c + 1:
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
        L[-1, N] += 1
        p = probe(tab_hi, tab_lo, hashing, hi, lo)
        if found(tab_hi, tab_lo, p, hi, lo):
            _move_up(L, tab_val[p])
            continue
        if L[-1, USED] < K:
            s = L[-1, USED]
            L[-1, USED] += 1
            bmin = L[-1, B_MIN]
            if bmin != NIL and L[bmin, B_COUNT] == 1:
                _slot_append(L, s, bmin)
            else:
                _slot_append(L, s, _bucket_new(L, 1, NIL))
        else:
            # Table full: the victim is the newest member of the minimum bucket.
            s = L[L[-1, B_MIN], B_TAIL]
            old = probe(tab_hi, tab_lo, hashing, slot_hi[s], slot_lo[s])
            delete_at(tab_hi, tab_lo, tab_val, hashing, old)
            p = probe(tab_hi, tab_lo, hashing, hi, lo)
            _move_up(L, s)
        store(tab_hi, tab_lo, tab_val, p, hi, lo, s)
        slot_hi[s] = hi
        slot_lo[s] = lo


@kernel
def _counts(L):
    used = L[-1, USED]
    out = np.empty(used, dtype=np.int64)
    for s in range(used):
        out[s] = L[L[s, SLOT_BUCKET], B_COUNT]
    return out


def snapshot(st: SSState) -> tuple[np.ndarray, np.ndarray, int]:
    """Copies of the tracked keys ``(m, 2)``, their counters ``(m,)`` and ``n`` (§3.1 SNAPSHOT)."""
    used = int(st.links[-1, USED])
    keys = np.stack([st.slot_hi[:used], st.slot_lo[:used]], axis=1).copy()
    return keys, _counts(st.links), int(st.links[-1, N])


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
