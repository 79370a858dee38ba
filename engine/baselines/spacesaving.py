"""SpaceSaving with the paper's eviction rule, O(1) per update (docs/dpss-eehh.md §2–§3.1).

Among the minimum counters, evict the item whose **last arrival is most recent** [000 Alg 2].
The stream-summary layout (``summary``) makes that the tail of the minimum bucket: inside a
bucket, slots are kept in the order they entered it, which is their last-arrival order (§3.1).
DPSS reuses ``make_state``/``update_batch``/``snapshot`` with k~ counters.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dptop.engine.core import hashtable as ht
from dptop.engine.core.base import Algorithm, Footprint
from dptop.engine.core.hashtable import HOMES_CHUNK, delete_at, found, homes, probe_at, store
from dptop.engine.core.jit import hot, ix, kernel
from dptop.engine.core.keys import KEY_DTYPE
from dptop.engine.core.registry import register
from dptop.engine.core.release import Release, sorted_items
from dptop.engine.core.settings import PACKETS, check_positive_int
from dptop.engine.baselines.summary import (W, B_COUNT, B_MIN, B_TAIL, N, NIL, SLOT_BUCKET, USED, bucket_new, counters, links_bytes,
                                            make_links, move_up, slot_append)
from dptop.engine.core.facts import NO_FACTS


class SSState(NamedTuple):
    slot_hi: np.ndarray  # uint64[K]
    slot_lo: np.ndarray  # uint64[K]
    home: np.ndarray  # int64[K]: hash-table home position of each slot's key (no rehash to find it)
    chunk: np.ndarray  # int64[HOMES_CHUNK]: scratch, home positions of the keys of a batch chunk
    links: np.ndarray  # int64[(K+2)·W]: the stream-summary layout of ``summary``
    tab: ht.Table  # key -> slot


def make_state(capacity: int) -> SSState:
    """Empty SpaceSaving state with ``capacity`` counters (K in the spec)."""
    K = check_positive_int("capacity", capacity)
    return SSState(np.zeros(K, KEY_DTYPE), np.zeros(K, KEY_DTYPE), np.zeros(K, np.int64),
                   np.zeros(HOMES_CHUNK, np.int64), make_links(K), ht.make_table(4 * K))


def state_bytes(capacity: int) -> int:
    """The bytes ``make_state(capacity)`` allocates, from the capacity alone."""
    return 24 * capacity + 8 * HOMES_CHUNK + links_bytes(capacity) + ht.table_bytes(4 * capacity)


@hot
def update_batch(st, keys):
    """SS_UPDATE (docs/dpss-eehh.md §3.1 UPDATE) for every key of the batch, in order."""
    L = st.links
    slot_hi = st.slot_hi
    slot_lo = st.slot_lo
    slot_home = st.home
    tab_hi = st.tab.hi
    tab_lo = st.tab.lo
    tab_val = st.tab.val
    hashing = st.tab.hashing
    K = len(slot_hi)
    L[-W + N] += len(keys)
    home = st.chunk
    for i in range(len(keys)):
        c = i & (HOMES_CHUNK - 1)  # a power of two
        if c == 0:
            homes(keys, i, min(i + HOMES_CHUNK, len(keys)), hashing, home)
        hi = keys[ix(i), 0]
        lo = keys[ix(i), 1]
        h = home[ix(c)]
        p = probe_at(tab_hi, tab_lo, h, hi, lo)
        if found(tab_hi, tab_lo, p, hi, lo):
            move_up(L, tab_val[ix(p)])
            continue
        if L[-W + USED] < K:
            s = L[-W + USED]
            L[-W + USED] += 1
            bmin = L[-W + B_MIN]
            if bmin != NIL and L[ix(bmin * W + B_COUNT)] == 1:
                slot_append(L, s, bmin)
            else:
                slot_append(L, s, bucket_new(L, 1, NIL))
            store(tab_hi, tab_lo, tab_val, p, hi, lo, s)
        else:
            # Table full: the victim is the newest member of the minimum bucket. The new key takes
            # its empty position before the victim's is deleted (one probe fewer; the deletion's
            # backward shift may move it, which keeps the table valid).
            s = L[ix(L[-W + B_MIN] * W + B_TAIL)]
            old = probe_at(tab_hi, tab_lo, slot_home[ix(s)], slot_hi[ix(s)], slot_lo[ix(s)])
            store(tab_hi, tab_lo, tab_val, p, hi, lo, s)
            delete_at(tab_hi, tab_lo, tab_val, hashing, old)
            move_up(L, s)
        slot_hi[ix(s)] = hi
        slot_lo[ix(s)] = lo
        slot_home[ix(s)] = h


@kernel
def _counts(L):
    used = L[-W + USED]
    out = np.empty(used, dtype=np.int64)
    for s in range(used):
        out[s] = L[L[s * W + SLOT_BUCKET] * W + B_COUNT]
    return out


def snapshot(st: SSState) -> tuple[np.ndarray, np.ndarray, int]:
    """Copies of the tracked keys ``(m, 2)``, their counters ``(m,)`` and ``n`` (§3.1 SNAPSHOT)."""
    used = int(st.links[-W + USED])
    keys = np.stack([st.slot_hi[:used], st.slot_lo[:used]], axis=1).copy()
    return keys, _counts(st.links), int(st.links[-W + N])


@register
class SpaceSaving(Algorithm):
    """Non-private SpaceSaving with k~ counters (default 2k); releases the top k counters."""

    name = "spacesaving"

    def __init__(self, settings, facts=NO_FACTS, counting=PACKETS):
        super().__init__(settings, facts, counting)
        self.k = check_positive_int("k", settings.k)
        self.capacity = check_positive_int("k~", counters(settings), minimum=self.k)
        self.state = make_state(self.capacity)

    @classmethod
    def footprint(cls, settings, facts=NO_FACTS, counting=PACKETS):
        return Footprint(state_bytes(counters(settings)), f"k~ = {counters(settings)}")

    def update(self, keys):
        update_batch(self.state, keys)

    def release(self) -> Release:
        keys, counts, _ = snapshot(self.state)
        return Release(self.name, self.span(), sorted_items(keys[:, 0], keys[:, 1], counts, limit=self.k))

    def reset(self):
        self.state = make_state(self.capacity)
        self.packets = 0
