"""Exact per-address counts: the ground truth for every utility metric.

Two growable open-addressing tables (``dptop.engine.core.hashtable`` rules: linear probing,
power-of-two capacity, load at most 1/2, the kernel stops at half load and the Python side
doubles the table and resumes), so memory follows the number of distinct sources:

- IPv4 sources, nearly all traffic, live in a *packed* table of one ``uint64`` per slot: the
  address in the high 32 bits and its count in the low 32. A probe touches one word, not three
  (key high, key low, value), and 2^24 distinct sources take 256 MiB, not 768 MiB.
- Every other key (IPv6), and the overflow of a packed count that would pass 2^32 − 2 (byte
  counting of a long session), is counted in a *wide* table of 128-bit keys and int64 values.
  A key's count is the sum of its two entries.

``top(n)`` selects with a bounded heap over the slots, so a live view of millions of sources
allocates O(n), not a copy of every entry.
"""
from __future__ import annotations

import numpy as np

from dptop.engine.core import hashtable as ht
from dptop.engine.core.hashtable import found, is_empty, probe, store
from dptop.engine.core.base import Algorithm, Footprint
from dptop.engine.core.jit import hot, inner, kernel
from dptop.engine.core.keys import IPV4_MAPPED, KEY_DTYPE, mix64, random_seed64
from dptop.engine.core.registry import register
from dptop.engine.core.release import Release, sorted_items

PACKED_EMPTY = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
"""An empty packed slot: address 255.255.255.255 with count 2^32 − 1, which no slot holds."""
PACKED_MAX = (1 << 32) - 2
"""The largest count a packed slot holds; more moves to the wide table (``_spill``)."""
_LOW32 = np.uint64(0xFFFF_FFFF)
_S32 = np.uint64(32)
_Z64 = np.uint64(0)
_TAG = np.uint64(IPV4_MAPPED >> 32)
GROW, DONE = -1, -2  # what ``_count_packed`` stopped for, besides a slot to spill
HOMES = 1024  # keys whose home positions ``_count_packed`` computes ahead of probing


@inner
def _packed_home(ip, hashing):
    return np.int64(mix64(ip ^ hashing[0]) >> hashing[1])


@inner
def _probe_packed(slots, p, ip):
    """From home position ``p``: (position, content) of the slot holding address ``ip``, or of the
    empty one where it goes."""
    mask = len(slots) - 1
    while True:
        slot = slots[p]
        if slot == PACKED_EMPTY or (slot >> _S32) == ip:
            return p, slot
        p = (p + 1) & mask


@hot
def _count_packed(slots, hashing, size, keys, weights, start, other, n_other, homes):
    """Count ``keys[start:]`` (``weights[i]`` each, 1 when ``weights`` is empty): IPv4 keys in the
    packed ``slots``, the indices of the others appended to ``other[n_other:]``. Returns
    (index reached, size, n_other, why): ``why`` is DONE, GROW (the next new key would pass half
    load: grow and resume at the index) or a slot whose count would pass PACKED_MAX (move the
    slot's count plus ``weights[index]`` to the wide table, zero it and resume after the index).
    ``homes``: scratch of ``HOMES + 1`` entries."""
    weighted = len(weights) > 0
    limit = len(slots) // 2
    for c in range(start, len(keys), HOMES):
        stop = min(len(keys), c + HOMES)
        for i in range(c, stop):  # the chunk's home positions first: a loop the compiler vectorises
            homes[i - c] = _packed_home(keys[i, 1] & _LOW32, hashing)
        touched = _Z64  # then a read of each home slot: independent loads whose cache misses overlap,
        for i in range(c, stop):  # so the probes below find their slots in the cache
            touched ^= slots[homes[i - c]]
        homes[HOMES] = np.int64(touched & _LOW32)  # kept, so the compiler keeps the loads
        for i in range(c, stop):
            hi = keys[i, 0]
            lo = keys[i, 1]
            if hi != 0 or (lo >> _S32) != _TAG:
                other[n_other] = i
                n_other += 1
                continue
            ip = lo & _LOW32
            w = np.uint64(weights[i]) if weighted else np.uint64(1)
            p, slot = _probe_packed(slots, homes[i - c], ip)
            if slot == PACKED_EMPTY:
                if size >= limit:
                    return i, size, n_other, GROW
                size += 1
                slots[p] = ip << _S32
                if w > PACKED_MAX:
                    return i, size, n_other, p
                slots[p] = (ip << _S32) | w
            elif (slot & _LOW32) + w > PACKED_MAX:
                return i, size, n_other, p
            else:
                slots[p] = slot + w
    return len(keys), size, n_other, DONE


@kernel
def _count_wide(tab_hi, tab_lo, tab_val, hashing, size, limit, keys, weights, rows, start):
    """Add ``weights[r]`` (1 when ``weights`` is empty) for ``keys[r]``, ``r`` in ``rows[start:]``,
    until ``size`` would exceed ``limit``; return (next position in ``rows``, size)."""
    weighted = len(weights) > 0
    for j in range(start, len(rows)):
        r = rows[j]
        hi = keys[r, 0]
        lo = keys[r, 1]
        w = weights[r] if weighted else 1
        p = probe(tab_hi, tab_lo, hashing, hi, lo)
        if found(tab_hi, tab_lo, p, hi, lo):
            tab_val[p] += w
        else:
            if size >= limit:
                return j, size
            store(tab_hi, tab_lo, tab_val, p, hi, lo, w)
            size += 1
    return len(rows), size


@kernel
def _regrow_packed(old, new, hashing):
    for slot in old:
        if slot != PACKED_EMPTY:
            ip = slot >> _S32
            new[_probe_packed(new, _packed_home(ip, hashing), ip)[0]] = slot


@inner
def _worse(count_a, hi_a, lo_a, count_b, hi_b, lo_b):
    """Entry a ranks below b: a smaller count, or the same count and a larger key (P12 order)."""
    if count_a != count_b:
        return count_a < count_b
    if hi_a != hi_b:
        return hi_a > hi_b
    return lo_a > lo_b


@inner
def _offer(counts, his, los, n, count, hi, lo):
    """Keep the ``len(counts)`` best entries in a min-heap (root: the worst kept); returns its size."""
    if n < len(counts):
        i = n
        n += 1
    elif _worse(counts[0], his[0], los[0], count, hi, lo):
        i = 0
    else:
        return n
    # sift the new entry from position i: up when appended, down when it replaced the root
    if i > 0:
        while i > 0:
            parent = (i - 1) >> 1
            if not _worse(count, hi, lo, counts[parent], his[parent], los[parent]):
                break
            counts[i], his[i], los[i] = counts[parent], his[parent], los[parent]
            i = parent
    else:
        while True:
            child = 2 * i + 1
            if child >= n:
                break
            if child + 1 < n and _worse(counts[child + 1], his[child + 1], los[child + 1],
                                        counts[child], his[child], los[child]):
                child += 1
            if not _worse(counts[child], his[child], los[child], count, hi, lo):
                break
            counts[i], his[i], los[i] = counts[child], his[child], los[child]
            i = child
    counts[i], his[i], los[i] = count, hi, lo
    return n


@kernel
def _top_entries(slots, tab_hi, tab_lo, tab_val, limit):
    """The ``limit`` best entries of both tables (count desc, key asc), unordered: (his, los, counts)."""
    counts = np.empty(limit, np.int64)
    his = np.empty(limit, KEY_DTYPE)
    los = np.empty(limit, KEY_DTYPE)
    n = 0
    tag = _TAG << _S32
    for slot in slots:
        if slot != PACKED_EMPTY:
            n = _offer(counts, his, los, n, np.int64(slot & _LOW32), np.uint64(0), tag | (slot >> _S32))
    for p in range(len(tab_hi)):
        if not is_empty(tab_hi, tab_lo, p):
            n = _offer(counts, his, los, n, tab_val[p], tab_hi[p], tab_lo[p])
    return his[:n], los[:n], counts[:n]


_UNWEIGHTED = np.zeros(0, np.int64)


INITIAL_CAPACITY = 1 << 12
"""Positions of a new counter's packed table (it doubles as distinct keys arrive)."""


class ExactCounter:
    """A multiset of keys with exact counts (used by ``Exact``, the ground truth and the metrics)."""

    def __init__(self, capacity: int = INITIAL_CAPACITY):
        bits = max(3, int(np.ceil(np.log2(max(2, capacity)))))
        self.slots = np.full(1 << bits, PACKED_EMPTY, dtype=np.uint64)
        self.hashing = np.array([random_seed64(), 64 - bits], dtype=np.uint64)
        self.packed = 0  # distinct keys in the packed table
        self.table = ht.make_table(8)  # the wide table
        self.wide = 0  # distinct keys in the wide table
        self.shared = 0  # IPv4 keys whose count has spilled: in both tables
        self.total = 0
        self._homes = np.empty(HOMES + 1, np.int64)  # scratch of ``_count_packed``

    @property
    def size(self) -> int:
        """Distinct keys counted."""
        return self.packed + self.wide - self.shared

    def add(self, keys: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Count every key once, or ``weights[i]`` times (e.g. its packet's bytes)."""
        w = _UNWEIGHTED if weights is None else np.ascontiguousarray(weights, dtype=np.int64)
        other = np.empty(len(keys), np.int64)
        start, n_other = 0, 0
        while start < len(keys):
            start, self.packed, n_other, why = _count_packed(self.slots, self.hashing, self.packed, keys, w, start,
                                                             other, n_other, self._homes)
            if why == GROW:
                self._grow_packed()
            elif why != DONE:
                self._spill(int(why), int(w[start]) if len(w) else 1)
                start += 1
        if n_other:
            self._add_wide(keys, w, other[:n_other])
        self.total += len(keys) if weights is None else int(w.sum())

    def _grow_packed(self) -> None:
        bigger = np.full(2 * len(self.slots), PACKED_EMPTY, dtype=np.uint64)
        self.hashing[1] -= np.uint64(1)
        _regrow_packed(self.slots, bigger, self.hashing)
        self.slots = bigger

    def _spill(self, pos: int, weight: int) -> None:
        """Move packed slot ``pos``'s count plus ``weight`` to the wide table; the slot keeps 0."""
        slot = int(self.slots[pos])
        ip, count = slot >> 32, slot & 0xFFFF_FFFF
        self.slots[pos] = np.uint64(ip << 32)
        first = self.count_of(0, IPV4_MAPPED | ip) == 0  # not yet in the wide table
        key = np.array([[0, IPV4_MAPPED | ip]], dtype=KEY_DTYPE)
        self._add_wide(key, np.array([count + weight], np.int64), np.zeros(1, np.int64))
        if first:  # the key is now in both tables
            self.shared += 1

    def _add_wide(self, keys, weights, rows) -> None:
        start = 0
        while True:
            t = self.table
            start, self.wide = _count_wide(t.hi, t.lo, t.val, t.hashing, self.wide, len(t.hi) // 2, keys, weights,
                                           rows, start)
            if start >= len(rows):
                return
            self.table = ht.grown(t)

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """``(keys (m, 2), counts (m,))`` of every distinct key (no order promised)."""
        full = self.slots[self.slots != PACKED_EMPTY]
        keys = np.zeros((len(full), 2), dtype=KEY_DTYPE)
        keys[:, 1] = np.uint64(IPV4_MAPPED) | (full >> _S32)
        counts = (full & _LOW32).astype(np.int64)
        if self.wide:
            idx = ht.occupied(self.table.hi, self.table.lo)
            wide_keys = np.stack([self.table.hi[idx], self.table.lo[idx]], axis=1)
            keys, counts = np.concatenate([keys, wide_keys]), np.concatenate([counts, self.table.val[idx]])
            if self.shared:
                keys, inverse = np.unique(keys, axis=0, return_inverse=True)
                counts = np.bincount(inverse.ravel(), weights=counts, minlength=len(keys)).astype(np.int64)
        return keys, counts

    def count_of(self, hi: int, lo: int) -> int:
        count = 0
        if hi == 0 and lo >> 32 == IPV4_MAPPED >> 32:
            ip = np.uint64(lo & 0xFFFF_FFFF)
            _, slot = _probe_packed(self.slots, _packed_home(ip, self.hashing), ip)
            if slot != PACKED_EMPTY:
                count = int(slot & _LOW32)
        t = self.table
        p = ht.probe(t.hi, t.lo, t.hashing, np.uint64(hi), np.uint64(lo))
        return count + (int(t.val[p]) if ht.found(t.hi, t.lo, p, np.uint64(hi), np.uint64(lo)) else 0)

    def top(self, n: int | None = None):
        """The ``n`` heaviest (all with ``None``), count descending, ties by key ascending."""
        if n is None or self.shared:
            keys, counts = self.items()
            return sorted_items(keys[:, 0], keys[:, 1], counts, limit=n)
        if n <= 0:
            return ()
        his, los, counts = _top_entries(self.slots, self.table.hi, self.table.lo, self.table.val, int(n))
        return sorted_items(his, los, counts, limit=n)


@register
class Exact(Algorithm):
    """Exact counts; ``release()`` lists the top ``k`` sources (``extra['top']`` overrides; 0 = all)."""

    name = "exact"
    parameters = ("top",)

    def __init__(self, settings):
        super().__init__(settings)
        self.counter = ExactCounter()

    @classmethod
    def footprint(cls, settings):
        """The starting tables only: exact counts grow with the distinct keys of the traffic, which
        no parameter bounds (a non-private baseline, beside the private ones)."""
        return Footprint(8 * INITIAL_CAPACITY + 16 + ht.table_bytes(8), "the distinct keys seen (grows with them)")

    def update(self, keys):
        self.counter.add(keys)

    def release(self) -> Release:
        n = int(self.settings.extra.get("top", self.settings.k))
        return Release(self.name, self.span(), self.counter.top(n or None), status={"distinct": self.counter.size})

    def reset(self):
        self.counter = ExactCounter()
        self.packets = 0
