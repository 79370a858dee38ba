"""Exact per-address counts: the ground truth for every utility metric.

Two growable tables, so memory follows the number of distinct sources:

- IPv4 sources, nearly all traffic, live in a *compact* table of one ``uint32`` word per slot
  (``quotient.py``: the address is rebuilt from the word and its position), which grows in place:
  2^24 distinct sources take 128 MiB, and growing never holds two tables.
  What passes a packed count's field is carried to its small heavy table.
- Every other key (IPv6) is counted in a *wide* table of 128-bit keys and int64 values
  (``dptop.engine.core.hashtable``: linear probing, load at most 1/2, doubled by copying).

``top(n)`` selects with a bounded heap over the slots, so a live view of millions of sources
allocates O(n), not a copy of every entry. A lock serialises counting and reading, so another
thread (a view's top list) may read while the table grows.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from dptop.engine.baselines import quotient as qt
from dptop.engine.core import hashtable as ht
from dptop.engine.core.hashtable import found, is_empty, probe, store
from dptop.engine.core.base import Algorithm, Footprint
from dptop.engine.core.jit import inner, kernel
from dptop.engine.core.keys import IPV4_MAPPED, KEY_DTYPE, random_seed64
from dptop.engine.core.registry import register
from dptop.engine.core.release import Release, sorted_items
from dptop.engine.core.facts import NO_FACTS
from dptop.engine.core.settings import PACKETS
from dptop.engine.core.status import ReleaseStatus

SCRAMBLED = 1024  # keys ``count_ipv4`` scrambles ahead of probing
HEAVY_CAPACITY = 64  # slots of a new counter's heavy table (it doubles as sources carry)


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
def _top_entries(slots, bits, seed, heavy_x, heavy_n, heavy, tab_hi, tab_lo, tab_val, limit):
    """The ``limit`` best entries of both tables (count desc, key asc), unordered: (his, los, counts)."""
    counts = np.empty(limit, np.int64)
    his = np.empty(limit, KEY_DTYPE)
    los = np.empty(limit, KEY_DTYPE)
    n = 0
    tag = np.uint64(IPV4_MAPPED)
    for p in range(len(slots)):
        if slots[p] != 0:
            ip, count = qt.entry(slots, bits, seed, heavy_x, heavy_n, heavy, p)
            n = _offer(counts, his, los, n, count, np.uint64(0), tag | ip)
    for p in range(len(tab_hi)):
        if not is_empty(tab_hi, tab_lo, p):
            n = _offer(counts, his, los, n, tab_val[p], tab_hi[p], tab_lo[p])
    return his[:n], los[:n], counts[:n]


_UNWEIGHTED = np.zeros(0, np.int64)


INITIAL_CAPACITY = 1 << 12
"""Homes of a new counter's compact table (it doubles as distinct keys arrive)."""


@dataclass(frozen=True, kw_only=True)
class DistinctFigures(ReleaseStatus):
    """What an exact release states beside its items: how many ``distinct`` keys it counted (NOT
    private)."""

    distinct: int


class ExactCounter:
    """A multiset of keys with exact counts (used by ``Exact``, the ground truth and the metrics)."""

    def __init__(self, capacity: int = INITIAL_CAPACITY):
        self.bits = min(qt.MAX_BITS, max(qt.MIN_BITS, int(np.ceil(np.log2(max(2, capacity))))))
        self.slots = np.zeros((1 << self.bits) + qt.PAD, dtype=np.uint32)
        self.seed = np.uint64(int(random_seed64()) & 0xFFFF_FFFF)
        self.compact = 0  # distinct keys in the compact table
        self.heavy_x = np.full(HEAVY_CAPACITY, qt.HEAVY_EMPTY, dtype=np.uint64)  # its carried counts
        self.heavy_n = np.zeros(HEAVY_CAPACITY, dtype=np.int64)
        self.heavy = 0
        self.table = ht.make_table(8)  # the wide table
        self.wide = 0  # distinct keys in the wide table
        self.total = 0
        self._xs = np.empty(SCRAMBLED + 1, np.uint64)  # scratch of ``count_ipv4``
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        """Distinct keys counted."""
        return self.compact + self.wide

    def add(self, keys: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Count every key once, or ``weights[i]`` times (e.g. its packet's bytes)."""
        w = _UNWEIGHTED if weights is None else np.ascontiguousarray(weights, dtype=np.int64)
        other = np.empty(len(keys), np.int64)
        start, n_other = 0, 0
        with self._lock:
            while start < len(keys):
                start, self.compact, n_other, self.heavy, why = qt.count_ipv4(
                    self.slots, self.bits, self.seed, self.compact, keys, w, start, other, n_other, self._xs,
                    self.heavy_x, self.heavy_n, self.heavy)
                if why == qt.GROW:
                    self._grow()
                elif why == qt.GROW_HEAVY:
                    self._grow_heavy()
            if n_other:
                self._add_wide(keys, w, other[:n_other])
            self.total += len(keys) if weights is None else int(w.sum())

    def _grow(self) -> None:
        """Double the compact table in place, until every entry has its slot."""
        stash_x = np.empty(qt.STASH, np.uint64)
        stash_c = np.empty(qt.STASH, np.uint64)
        left = 0
        while True:
            if self.bits >= qt.MAX_BITS:
                raise MemoryError("the exact table holds 2^31 homes, its largest size")
            self.slots.resize((2 << self.bits) + qt.PAD, refcheck=False)  # pages move, zeros after
            left = qt.regrow(self.slots, self.bits, stash_x, stash_c, left)
            self.bits += 1
            if left == 0:
                return
            if left < 0:
                raise RuntimeError("exact table: more entries set aside while growing than the stash holds")

    def _grow_heavy(self) -> None:
        x = np.full(2 * len(self.heavy_x), qt.HEAVY_EMPTY, dtype=np.uint64)
        n = np.zeros(len(x), dtype=np.int64)
        qt.regrow_heavy(self.heavy_x, self.heavy_n, x, n)
        self.heavy_x, self.heavy_n = x, n

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
        with self._lock:
            ips, counts = qt.entries(self.slots, self.bits, self.seed, self.heavy_x, self.heavy_n, self.heavy > 0)
            keys = np.zeros((len(ips), 2), dtype=KEY_DTYPE)
            keys[:, 1] = np.uint64(IPV4_MAPPED) | ips
            if self.wide:
                idx = ht.occupied(self.table.hi, self.table.lo)
                wide_keys = np.stack([self.table.hi[idx], self.table.lo[idx]], axis=1)
                keys, counts = np.concatenate([keys, wide_keys]), np.concatenate([counts, self.table.val[idx]])
            return keys, counts

    def count_of(self, hi: int, lo: int) -> int:
        with self._lock:
            if hi == 0 and lo >> 32 == IPV4_MAPPED >> 32:
                return int(qt.count_of(self.slots, self.bits, self.seed, self.heavy_x, self.heavy_n,
                                       np.uint64(lo & 0xFFFF_FFFF)))
            t = self.table
            p = ht.probe(t.hi, t.lo, t.hashing, np.uint64(hi), np.uint64(lo))
            return int(t.val[p]) if ht.found(t.hi, t.lo, p, np.uint64(hi), np.uint64(lo)) else 0

    def top(self, n: int | None = None):
        """The ``n`` heaviest (all with ``None``), count descending, ties by key ascending."""
        if n is None:
            keys, counts = self.items()
            return sorted_items(keys[:, 0], keys[:, 1], counts, limit=n)
        if n <= 0:
            return ()
        with self._lock:
            his, los, counts = _top_entries(self.slots, self.bits, self.seed, self.heavy_x, self.heavy_n,
                                            self.heavy > 0, self.table.hi, self.table.lo, self.table.val, int(n))
        return sorted_items(his, los, counts, limit=n)


@register
class Exact(Algorithm):
    """Exact counts; ``release()`` lists the top ``k`` sources (``extra['top']`` overrides; 0 = all)."""

    name = "exact"
    parameters = ("top",)

    def __init__(self, settings, facts=NO_FACTS, counting=PACKETS):
        super().__init__(settings, facts, counting)
        self.counter = ExactCounter()

    @classmethod
    def footprint(cls, settings, facts=NO_FACTS, counting=PACKETS):
        """The starting tables only: exact counts grow with the distinct keys of the traffic, which
        no parameter bounds (a non-private baseline, beside the private ones)."""
        return Footprint(4 * (INITIAL_CAPACITY + qt.PAD) + 8 * (SCRAMBLED + 1) + 16 * HEAVY_CAPACITY + ht.table_bytes(8),
                         "the distinct keys seen (grows with them)")

    def update(self, keys):
        self.counter.add(keys)

    def warm_up(self) -> None:
        """The base warm-up, and the whole-table read (``ExactCounter.items``: every count, as
        ``top(None)`` and a capture agent's heartbeat read them), on an empty counter."""
        super().warm_up()
        ExactCounter().items()

    def live(self) -> Release | None:
        """The top ``k`` now: a scan of the whole table, so taken only when a view shows it (the
        runner asks for live views on demand) and not again while no packet arrived since."""
        if self._last is None or self._last.span.end != self.packets:
            self._last = self.release()
        return self._last

    def release(self) -> Release:
        n = int(self.settings.extra.get("top", self.settings.k))
        return Release(self.name, self.span(), self.counter.top(n or None), status=DistinctFigures(distinct=self.counter.size))

    def reset(self):
        self.counter = ExactCounter()
        self.packets = 0
