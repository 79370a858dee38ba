"""Exact per-address counts: the ground truth for every utility metric.

A growable hash table of counts (``dptop.engine.core.hashtable``). The kernel stops when the table reaches
half load and the Python side doubles it and resumes, so memory follows the number of distinct
sources, not the batch size.
"""
from __future__ import annotations

import numpy as np

from dptop.engine.core import hashtable as ht
from dptop.engine.core.hashtable import found, probe, store
from dptop.engine.core.base import Algorithm
from dptop.engine.core.jit import kernel
from dptop.engine.core.registry import register
from dptop.engine.core.release import Release, sorted_items


@kernel
def _count_batch(tab_hi, tab_lo, tab_val, hashing, size, limit, keys, weights, start):
    """Add ``weights[i]`` (1 when ``weights`` is empty) for ``keys[start:]`` until ``size`` would
    exceed ``limit``; return (next index, size)."""
    weighted = len(weights) > 0
    for i in range(start, len(keys)):
        hi = keys[i, 0]
        lo = keys[i, 1]
        w = weights[i] if weighted else 1
        p = probe(tab_hi, tab_lo, hashing, hi, lo)
        if found(tab_hi, tab_lo, p, hi, lo):
            tab_val[p] += w
        else:
            if size >= limit:
                return i, size
            store(tab_hi, tab_lo, tab_val, p, hi, lo, w)
            size += 1
    return len(keys), size


_UNWEIGHTED = np.zeros(0, np.int64)


class ExactCounter:
    """A multiset of keys with exact counts (used by ``Exact`` and by the metrics)."""

    def __init__(self, capacity: int = 1 << 12):
        self.table = ht.make_table(capacity)
        self.size = 0
        self.total = 0

    def add(self, keys: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Count every key once, or ``weights[i]`` times (e.g. its packet's bytes)."""
        w = _UNWEIGHTED if weights is None else np.ascontiguousarray(weights, dtype=np.int64)
        start = 0
        while True:
            t = self.table
            start, self.size = _count_batch(t.hi, t.lo, t.val, t.hashing, self.size, len(t.hi) // 2, keys, w, start)
            if start >= len(keys):
                break
            self.table = ht.grown(t)
        self.total += len(keys) if weights is None else int(w.sum())

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """``(keys (m, 2), counts (m,))`` of every distinct key, in table order."""
        idx = ht.occupied(self.table.hi, self.table.lo)
        keys = np.stack([self.table.hi[idx], self.table.lo[idx]], axis=1)
        return keys, self.table.val[idx].copy()

    def count_of(self, hi: int, lo: int) -> int:
        t = self.table
        p = ht.probe(t.hi, t.lo, t.hashing, np.uint64(hi), np.uint64(lo))
        return int(t.val[p]) if ht.found(t.hi, t.lo, p, np.uint64(hi), np.uint64(lo)) else 0

    def top(self, n: int | None = None):
        keys, counts = self.items()
        return sorted_items(keys[:, 0], keys[:, 1], counts, limit=n)


@register
class Exact(Algorithm):
    """Exact counts; ``release()`` lists the top ``k`` sources (``extra['top']`` overrides; 0 = all)."""

    name = "exact"
    parameters = ("top",)

    def __init__(self, settings):
        super().__init__(settings)
        self.counter = ExactCounter()

    def update(self, keys):
        self.counter.add(keys)

    def release(self) -> Release:
        n = int(self.settings.extra.get("top", self.settings.k))
        return Release(self.name, self.span(), self.counter.top(n or None), status={"distinct": self.counter.size})

    def reset(self):
        self.counter = ExactCounter()
        self.packets = 0
