"""Misra-Gries in the form paper 002 requires [002 Alg 1], O(1) amortised per update, as numba
kernels (docs/dp-misra-gries.md §2–§3.4).

Exactly K (key, counter) pairs at all times, starting from K dummy keys ``(SENTINEL_HI, j)`` with
counter 0. Dummy keys sort after every real key (real sources never have ``hi = SENTINEL_HI``,
keys.py), and their order is j.

* Branch 1: a stored key (even with counter 0) is incremented.
* Branch 2: otherwise, if no counter is 0, every counter drops by 1 and the item is discarded;
  keys that reach 0 **stay stored**.
* Branch 3: otherwise the stored zero-counter key that is **smallest in the fixed key order**
  (hi, lo) is replaced by the item, with counter 1.

Layout (§3.4): slots sit in the stream-summary buckets of ``summary`` (buckets of equal value,
sorted), but a bucket holds the *raw* value c + α, where α counts Branch-2 events. Branch 2 is then
``α += 1`` (O(1)); the zero slots are the minimum bucket when its raw value equals α, and Branch 1
moves a slot up one bucket as in SpaceSaving. When Branch 2 turns the minimum bucket into the zero
set, its members go into ``zq`` sorted by key (a radix sort for IPv4 keys, O(z); paid for by the
z increments that lifted them); Branch 3 takes them in order with a cursor, skipping slots that have left the zero
set through Branch 1 (they cannot re-enter it before the next Branch 2, which rebuilds the queue).

``MisraGries`` (name ``misragries``) is the non-private baseline: K = k~ counters (default 2k),
releasing the top k non-zero counters. The DP releases live in ``dptop.engine.single_release.dpmg``.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dptop.engine.core import hashtable as ht
from dptop.engine.core.base import Algorithm, Footprint
from dptop.engine.core.hashtable import HOMES_CHUNK, delete_at, found, homes, probe_at, store
from dptop.engine.core.jit import hot, inner, ix, kernel
from dptop.engine.core.keys import KEY_DTYPE, SENTINEL_HI
from dptop.engine.core.registry import register
from dptop.engine.core.release import Release, sorted_items
from dptop.engine.core.settings import PACKETS, check_positive_int
from dptop.engine.baselines.summary import (W, B_COUNT, B_HEAD, B_MIN, B_NEXT, B_TAIL, N, NIL, SLOT_BUCKET,
                                            SLOT_NEXT, USED, bucket_drop_if_empty, bucket_new, counters, links_bytes,
                                            make_links,
                                            move_up, slot_append)
from dptop.engine.core.facts import NO_FACTS

ALPHA, ZQ_POS = N + 1, N + 2  # more scalars in the last row of ``links``
ZERO_LEFT = B_TAIL  # in the zero bucket, which has no slot list: how many members it still has
_LOW32 = np.uint64(0xFFFF_FFFF)
_S32 = np.uint64(32)


class MGState(NamedTuple):
    key_hi: np.ndarray  # uint64[K]
    key_lo: np.ndarray  # uint64[K]
    home: np.ndarray  # int64[K]: hash-table home position of each slot's key (no rehash to find it)
    chunk: np.ndarray  # int64[HOMES_CHUNK]: scratch, home positions of the keys of a batch chunk
    links: np.ndarray  # int64[(K+2)·W]: ``summary`` layout, bucket values raw (c + α)
    zq: np.ndarray  # uint64[2K]: the zero set at its last rebuild in key order (slot id in the low
    #                 32 bits); zq[K:] is sort scratch
    digits: np.ndarray  # int64[4, 256]: radix-sort histograms
    tab: ht.Table  # key -> slot


@kernel
def _init(L, tab_hi, tab_lo, tab_val, hashing, key_hi, key_lo, home):
    b = bucket_new(L, 0, NIL)
    L[b * W + ZERO_LEFT] = len(key_hi)  # the zero bucket: members counted, not listed
    for j in range(len(key_hi)):
        L[j * W + SLOT_BUCKET] = b
        home[j] = ht.home(key_hi[j], key_lo[j], hashing)
        p = probe_at(tab_hi, tab_lo, home[j], key_hi[j], key_lo[j])
        store(tab_hi, tab_lo, tab_val, p, key_hi[j], key_lo[j], j)
    L[-W + USED] = len(key_hi)


def make_state(capacity: int) -> MGState:
    """INIT(K): K dummy keys with counter 0, all in the zero queue in key order (§3.3)."""
    K = check_positive_int("capacity", capacity)
    key_hi = np.full(K, SENTINEL_HI, dtype=KEY_DTYPE)
    key_lo = np.arange(K, dtype=KEY_DTYPE)
    st = MGState(key_hi, key_lo, np.zeros(K, np.int64), np.zeros(HOMES_CHUNK, np.int64), make_links(K),
                 np.arange(2 * K, dtype=KEY_DTYPE),
                 np.zeros((4, 256), np.int64), ht.make_table(4 * K))
    _init(st.links, st.tab.hi, st.tab.lo, st.tab.val, st.tab.hashing, key_hi, key_lo, st.home)
    return st


def state_bytes(capacity: int) -> int:
    """The bytes ``make_state(capacity)`` allocates, from the capacity alone."""
    return (24 + 16) * capacity + 8 * HOMES_CHUNK + links_bytes(capacity) + 8 * 4 * 256 + ht.table_bytes(4 * capacity)


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
def _heapsort_by_key(zq, z, key_hi, key_lo):
    """Slot ids zq[:z] in (hi, lo) key order, in place."""
    for start in range(z // 2 - 1, -1, -1):
        _sift_down(zq, key_hi, key_lo, start, z)
    for end in range(z - 1, 0, -1):
        zq[0], zq[end] = zq[end], zq[0]
        _sift_down(zq, key_hi, key_lo, 0, end)


@inner
def _radix_sort_high(zq, z, digits):
    """zq[:z] by their high 32 bits: LSD radix, 8-bit digits, skipping digits all words share;
    ping-pongs with zq[K:K+z]."""
    K = len(zq) // 2
    digits[:, :] = 0
    for i in range(z):
        w = zq[i] >> _S32
        for d in range(4):
            digits[d, (w >> np.uint64(8 * d)) & np.uint64(255)] += 1
    src, dst = 0, K
    for d in range(4):
        shift = np.uint64(32 + 8 * d)
        if digits[d, (zq[src] >> shift) & np.uint64(255)] == z:
            continue
        total = 0
        for v in range(256):
            c = digits[d, v]
            digits[d, v] = total
            total += c
        for i in range(z):
            w = zq[src + i]
            v = (w >> shift) & np.uint64(255)
            zq[dst + digits[d, v]] = w
            digits[d, v] += 1
        src, dst = dst, src
    if src != 0:
        for i in range(z):  # a loop, not a slice copy: no allocation in a ``hot`` kernel
            zq[i] = zq[K + i]


@inner
def _sort_high(zq, z, digits):
    """zq[:z] by their high 32 bits: one pass on the top byte into zq[K:], then an insertion sort
    that only fixes order inside each top-byte group (twice as fast as the radix sort for the
    usual few hundred words); the LSD radix sort for more words or a large group (traffic from
    few /8s), so the cost stays O(z)."""
    if z > 256:
        _radix_sort_high(zq, z, digits)
        return
    K = len(zq) // 2
    count = digits[0]
    count[:] = 0
    for i in range(z):
        count[zq[i] >> np.uint64(56)] += 1
    total = 0
    for v in range(256):
        c = count[v]
        if c > 16:
            _radix_sort_high(zq, z, digits)
            return
        count[v] = total
        total += c
    for i in range(z):
        w = zq[i]
        v = w >> np.uint64(56)
        zq[K + count[v]] = w
        count[v] += 1
    for i in range(1, z):
        w = zq[K + i]
        j = i - 1
        while j >= 0 and zq[K + j] > w:
            zq[K + j + 1] = zq[K + j]
            j -= 1
        zq[K + j + 1] = w
    for i in range(z):
        zq[i] = zq[K + i]


@inner
def _decrement_all(L, zq, digits, key_hi, key_lo):
    """Branch 2: α += 1 (every counter −1). If the minimum bucket reaches 0, its slots become the
    zero queue (``_queue_zeros``, a call: it is rare, and inlined its sorts would bloat the
    per-packet loop)."""
    L[-W + ALPHA] += 1
    if L[ix(L[-W + B_MIN] * W + B_COUNT)] == L[-W + ALPHA]:
        _queue_zeros(L, zq, digits, key_hi, key_lo)


@kernel
def _queue_zeros(L, zq, digits, key_hi, key_lo):
    """The minimum bucket's slots, now at counter 0, into ``zq`` sorted by key. When they share hi
    and the top half of lo (IPv4 sources all do), the word (low half of lo, slot) sorts by a radix
    sort on its high half; else a heapsort on (hi, lo) orders the slot ids."""
    b = L[-W + B_MIN]
    first = L[ix(b * W + B_HEAD)]
    z = 0
    packed = True
    s = first
    while s != NIL:
        packed = packed and key_hi[ix(s)] == key_hi[ix(first)] and (key_lo[ix(s)] >> _S32) == (key_lo[ix(first)] >> _S32)
        zq[ix(z)] = ((key_lo[ix(s)] & _LOW32) << _S32) | np.uint64(s)
        z += 1
        s = L[ix(s * W + SLOT_NEXT)]
    if packed:
        _sort_high(zq, z, digits)
    else:
        for i in range(z):
            zq[i] &= _LOW32
        _heapsort_by_key(zq, z, key_hi, key_lo)
    L[ix(b * W + B_HEAD)] = NIL  # from now on the zero bucket counts its members instead of listing them
    L[ix(b * W + ZERO_LEFT)] = z
    L[-W + ZQ_POS] = 0


@inner
def _increment(L, y):
    """Slot y's counter grows by one: as in SpaceSaving, or ``_leave_zero`` from 0."""
    b = L[ix(y * W + SLOT_BUCKET)]
    if L[ix(b * W + B_COUNT)] != L[-W + ALPHA]:
        move_up(L, y)
    else:
        _leave_zero(L, y)


@inner
def _leave_zero(L, y):
    """Slot y's counter goes from 0 to 1: it joins the bucket of raw value α + 1. The zero bucket
    keeps no slot list (its slots are in ``zq``), only a member count, so nothing is unlinked; it
    is dropped when its last member leaves."""
    b = L[ix(y * W + SLOT_BUCKET)]
    nb = L[ix(b * W + B_NEXT)]
    if nb != NIL and L[ix(nb * W + B_COUNT)] == L[ix(b * W + B_COUNT)] + 1:
        target = nb
    else:
        target = bucket_new(L, L[ix(b * W + B_COUNT)] + 1, b)
    slot_append(L, y, target)
    L[ix(b * W + ZERO_LEFT)] -= 1
    if L[ix(b * W + ZERO_LEFT)] == 0:
        bucket_drop_if_empty(L, b)


@inner
def _smallest_zero(L, zq):
    """Branch 3's victim: the smallest-key slot with counter 0. Queue entries whose slot left the
    zero set through Branch 1 are skipped (they cannot return before the next rebuild)."""
    alpha = L[-W + ALPHA]
    pos = L[-W + ZQ_POS]
    while True:
        y = np.int64(zq[ix(pos)] & _LOW32)
        pos += 1
        if L[ix(L[ix(y * W + SLOT_BUCKET)] * W + B_COUNT)] == alpha:
            L[-W + ZQ_POS] = pos
            return y


@hot
def update_batch(st, keys):
    """UPDATE(x) of docs/dp-misra-gries.md §3.3 for every key of the batch, in order."""
    L, zq, digits, key_hi, key_lo, slot_home = st.links, st.zq, st.digits, st.key_hi, st.key_lo, st.home
    tab_hi, tab_lo, tab_val, hashing = st.tab
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
        if found(tab_hi, tab_lo, p, hi, lo):  # Branch 1
            _increment(L, tab_val[ix(p)])
            continue
        if L[ix(L[-W + B_MIN] * W + B_COUNT)] != L[-W + ALPHA]:  # Branch 2: no zero counter
            _decrement_all(L, zq, digits, key_hi, key_lo)
            continue
        y = _smallest_zero(L, zq)  # Branch 3
        old = probe_at(tab_hi, tab_lo, slot_home[ix(y)], key_hi[ix(y)], key_lo[ix(y)])
        store(tab_hi, tab_lo, tab_val, p, hi, lo, y)  # before the deletion, as in SpaceSaving
        delete_at(tab_hi, tab_lo, tab_val, hashing, old)
        key_hi[ix(y)] = hi
        key_lo[ix(y)] = lo
        slot_home[ix(y)] = h
        _leave_zero(L, y)


@kernel
def _counts(L):
    alpha = L[-W + ALPHA]
    out = np.empty(len(L) // W - 2, dtype=np.int64)
    for s in range(len(out)):
        out[s] = L[L[s * W + SLOT_BUCKET] * W + B_COUNT] - alpha
    return out


def is_dummy(keys: np.ndarray) -> np.ndarray:
    """Rows of a ``(m, 2)`` key array that are dummy keys."""
    return keys[:, 0] == SENTINEL_HI


def snapshot(st: MGState) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Copies of all K stored keys ``(K, 2)`` (dummies included), counters, alpha and n."""
    keys = np.stack([st.key_hi, st.key_lo], axis=1).copy()
    return keys, _counts(st.links), int(st.links[-W + ALPHA]), int(st.links[-W + N])


@register
class MisraGries(Algorithm):
    """Non-private Misra-Gries with k~ counters (default 2k); releases the top k counters."""

    name = "misragries"

    def __init__(self, settings, facts=NO_FACTS, counting=PACKETS):
        super().__init__(settings, facts, counting)
        self.k = check_positive_int("k", settings.k)
        self.capacity = check_positive_int("k~", counters(settings))
        if self.capacity < self.k:
            raise ValueError(f"k~ ({self.capacity}) must be >= k ({self.k})")
        self.state = make_state(self.capacity)

    @classmethod
    def footprint(cls, settings, facts=NO_FACTS, counting=PACKETS):
        return Footprint(state_bytes(counters(settings)), f"k~ = {counters(settings)}")

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
