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
from engine.jit import kernel
from engine.keys import KEY_DTYPE
from engine.registry import register
from engine.release import Release, sorted_items
from engine.settings import check_positive_int

NIL = -1
# meta[] fields
USED, B_MIN, FREE_TOP, N = 0, 1, 2, 3


class SSState(NamedTuple):
    slot_hi: np.ndarray  # uint64[K]
    slot_lo: np.ndarray  # uint64[K]
    slot_bucket: np.ndarray  # int64[K]
    slot_prev: np.ndarray  # int64[K], neighbours inside the bucket, head = oldest
    slot_next: np.ndarray
    b_count: np.ndarray  # int64[K+1]
    b_head: np.ndarray
    b_tail: np.ndarray
    b_prev: np.ndarray  # buckets sorted by count ascending
    b_next: np.ndarray
    b_free: np.ndarray  # stack of free bucket indices
    meta: np.ndarray  # int64[4]: used, b_min, free_top, n
    tab: ht.Table  # key -> slot


def make_state(capacity: int) -> SSState:
    """Empty SpaceSaving state with ``capacity`` counters (K in the spec)."""
    K = check_positive_int("capacity", capacity)
    nil = lambda m: np.full(m, NIL, dtype=np.int64)  # noqa: E731
    meta = np.array([0, NIL, K + 1, 0], dtype=np.int64)
    return SSState(
        np.zeros(K, KEY_DTYPE), np.zeros(K, KEY_DTYPE), nil(K), nil(K), nil(K),
        np.zeros(K + 1, np.int64), nil(K + 1), nil(K + 1), nil(K + 1), nil(K + 1),
        np.arange(K + 1, dtype=np.int64), meta, ht.make_table(4 * K),
    )


@kernel
def _bucket_new(st, count, after):
    """A new empty bucket with ``count``, linked after bucket ``after`` (front if NIL)."""
    st.meta[FREE_TOP] -= 1
    b = st.b_free[st.meta[FREE_TOP]]
    st.b_count[b] = count
    st.b_head[b] = NIL
    st.b_tail[b] = NIL
    if after == NIL:
        first = st.meta[B_MIN]
        st.b_prev[b] = NIL
        st.b_next[b] = first
        if first != NIL:
            st.b_prev[first] = b
        st.meta[B_MIN] = b
    else:
        nb = st.b_next[after]
        st.b_prev[b] = after
        st.b_next[b] = nb
        st.b_next[after] = b
        if nb != NIL:
            st.b_prev[nb] = b
    return b


@kernel
def _bucket_drop_if_empty(st, b):
    if st.b_head[b] != NIL:
        return
    p = st.b_prev[b]
    nx = st.b_next[b]
    if p != NIL:
        st.b_next[p] = nx
    else:
        st.meta[B_MIN] = nx
    if nx != NIL:
        st.b_prev[nx] = p
    st.b_free[st.meta[FREE_TOP]] = b
    st.meta[FREE_TOP] += 1


@kernel
def _slot_unlink(st, s):
    b = st.slot_bucket[s]
    p = st.slot_prev[s]
    nx = st.slot_next[s]
    if p != NIL:
        st.slot_next[p] = nx
    else:
        st.b_head[b] = nx
    if nx != NIL:
        st.slot_prev[nx] = p
    else:
        st.b_tail[b] = p


@kernel
def _slot_append(st, s, b):
    t = st.b_tail[b]
    st.slot_prev[s] = t
    st.slot_next[s] = NIL
    if t != NIL:
        st.slot_next[t] = s
    else:
        st.b_head[b] = s
    st.b_tail[b] = s
    st.slot_bucket[s] = b


@kernel
def _move_up(st, s):
    """The counter of slot ``s`` grows by one; ``s`` becomes the newest of its new bucket."""
    b = st.slot_bucket[s]
    c = st.b_count[b]
    nb = st.b_next[b]
    if nb != NIL and st.b_count[nb] == c + 1:
        target = nb
    else:
        target = _bucket_new(st, c + 1, b)
    _slot_unlink(st, s)
    _slot_append(st, s, target)
    _bucket_drop_if_empty(st, b)


@kernel
def update_one(st, hi, lo):
    """SS_UPDATE for one arrival (dpss-eehh.md §3.1 UPDATE)."""
    tab = st.tab
    st.meta[N] += 1
    p = probe(tab.hi, tab.lo, tab.hashing, hi, lo)
    if found(tab.hi, tab.lo, p, hi, lo):
        _move_up(st, tab.val[p])
        return
    K = len(st.slot_hi)
    if st.meta[USED] < K:
        s = st.meta[USED]
        st.meta[USED] += 1
        st.slot_hi[s] = hi
        st.slot_lo[s] = lo
        tab.hi[p] = hi
        tab.lo[p] = lo
        tab.val[p] = s
        bmin = st.meta[B_MIN]
        if bmin != NIL and st.b_count[bmin] == 1:
            _slot_append(st, s, bmin)
        else:
            _slot_append(st, s, _bucket_new(st, 1, NIL))
        return
    # Table full: the victim is the newest member of the minimum bucket.
    s = st.b_tail[st.meta[B_MIN]]
    old = probe(tab.hi, tab.lo, tab.hashing, st.slot_hi[s], st.slot_lo[s])
    delete_at(tab.hi, tab.lo, tab.val, tab.hashing, old)
    p = probe(tab.hi, tab.lo, tab.hashing, hi, lo)
    tab.hi[p] = hi
    tab.lo[p] = lo
    tab.val[p] = s
    st.slot_hi[s] = hi
    st.slot_lo[s] = lo
    _move_up(st, s)


@kernel
def update_batch(st, keys):
    for i in range(len(keys)):
        update_one(st, keys[i, 0], keys[i, 1])


@kernel
def _counts(st):
    used = st.meta[USED]
    out = np.empty(used, dtype=np.int64)
    for s in range(used):
        out[s] = st.b_count[st.slot_bucket[s]]
    return out


def snapshot(st: SSState) -> tuple[np.ndarray, np.ndarray, int]:
    """Copies of the tracked keys ``(m, 2)``, their counters ``(m,)`` and ``n`` (§3.1 SNAPSHOT)."""
    used = int(st.meta[USED])
    keys = np.stack([st.slot_hi[:used], st.slot_lo[:used]], axis=1).copy()
    return keys, _counts(st), int(st.meta[N])


@register
class SpaceSaving(Algorithm):
    """Non-private SpaceSaving with k~ counters (default 2k); releases the top k counters."""

    name = "spacesaving"

    def __init__(self, settings):
        super().__init__(settings)
        self.k = check_positive_int("k", settings.k)
        self.capacity = check_positive_int("k~", settings.k_tilde or 2 * self.k)
        self.state = make_state(self.capacity)

    def update(self, keys):
        update_batch(self.state, keys)

    def release(self) -> Release:
        keys, counts, _ = snapshot(self.state)
        return Release(self.name, self.span(), sorted_items(keys[:, 0], keys[:, 1], counts, limit=self.k))

    def reset(self):
        self.state = make_state(self.capacity)
        self.packets = 0
