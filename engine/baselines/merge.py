"""Mergeable summaries: the DataSketches ``merge(other)`` verb for the non-private summaries, so many
capture points can each keep a small summary and one collector can combine them.

Every summary is a frozen value built from a kernel state's public ``snapshot`` (or the exact
counter's items); ``merge`` returns a new summary and never touches its inputs.

* ``CountSummary`` — exact counts: key-wise sum. Associative and commutative.
* ``MGSummary`` — Misra-Gries with K counters, merged as docs/dp-misra-gries.md §8 (Agarwal et al.'s
  mergeable summaries): sum the counters key-wise, subtract the (K+1)-th largest value, drop the
  non-positive ones. Commutative, not associative; after any tree of merges every estimate lies in
  ``[f(x) − (n − Σc)/(K+1), f(x)]`` (``error_bound``), and ``(n − Σc)/(K+1) <= n/(K+1)``.
* ``SSSummary`` — SpaceSaving with K counters and a ``floor``, the bound on the count of any key it
  does not store (its minimum counter when full, else 0). Merge: a key absent from one side counts
  as that side's floor, the K largest sums are kept (ties by key), and the new floor is the largest
  dropped sum (or the sum of the floors when nothing is dropped). Commutative, not associative.
  Invariants: f(x) <= estimate <= f(x) + floor and Σc <= n, so K·floor <= n after any merge tree.
* ``SketchSummary`` — a linear sketch (CountMin cells) plus its tracked candidate labels: cells
  sum, candidates unite. Needs the same hash seeds on every side (the collector draws them once and
  ships them, ``derive_seeds``). Associative and commutative.

The summarizers below build these summaries at a capture point from the engine's public kernels;
the end of the module declares each baseline's mergeability in the registry (``WholeStreamMerge``).
"""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

import numpy as np

from dptop.engine.baselines import misragries, spacesaving
from dptop.engine.baselines.countmin import CountMinHeap, cms_column, make_cms_hashing
from dptop.engine.baselines.exact import DistinctFigures, Exact, ExactCounter
from dptop.engine.baselines.summary import counters
from dptop.engine.core.jit import kernel
from dptop.engine.core.keys import KEY_DTYPE
from dptop.engine.core.mergeable import WholeStreamMerge
from dptop.engine.core.registry import declare_mergeable
from dptop.engine.core.status import NO_FIGURES, ReleaseStatus
from dptop.engine.core.release import ReleasedItem, sorted_items
from dptop.engine.core.settings import check_positive_int
from dptop.engine.core.topk import tracked

_NO_KEYS = np.zeros((0, 2), KEY_DTYPE)
_NO_COUNTS = np.zeros(0, np.int64)


def sum_by_key(keys: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys in (hi, lo) order with the sum of their counts."""
    if len(keys) == 0:
        return _NO_KEYS, _NO_COUNTS
    order = np.lexsort((keys[:, 1], keys[:, 0]))
    k, c = keys[order], counts[order].astype(np.int64)
    starts = np.flatnonzero(np.concatenate(([True], np.any(k[1:] != k[:-1], axis=1))))
    return np.ascontiguousarray(k[starts]), np.add.reduceat(c, starts)


def unique_keys(keys: np.ndarray) -> np.ndarray:
    """Distinct rows of a key array in (hi, lo) order."""
    return sum_by_key(keys, np.zeros(len(keys), np.int64))[0]


def _lookup(keys: np.ndarray, counts: np.ndarray, query: np.ndarray, absent: int) -> np.ndarray:
    """Counts of ``query`` rows in a key-sorted summary (``absent`` where not stored)."""
    out = np.full(len(query), absent, np.int64)
    if len(keys) == 0 or len(query) == 0:
        return out
    view = np.dtype([("hi", KEY_DTYPE), ("lo", KEY_DTYPE)])
    table = np.ascontiguousarray(keys).view(view).ravel()
    wanted = np.ascontiguousarray(query, dtype=KEY_DTYPE).view(view).ravel()
    pos = np.minimum(np.searchsorted(table, wanted), len(table) - 1)
    hit = table[pos] == wanted
    out[hit] = counts[pos[hit]]
    return out


def _check_same(what: str, mine, theirs) -> None:
    if mine != theirs:
        raise ValueError(f"cannot merge summaries with different {what} ({mine} and {theirs})")


class _Counters:
    """Counts per stored key (``keys`` in key order, ``counts``); an absent key counts ``absent``."""

    absent = 0

    def estimate(self, query: np.ndarray) -> np.ndarray:
        return _lookup(self.keys, self.counts, query, self.absent)

    def top(self, limit: int | None = None) -> tuple[ReleasedItem, ...]:
        return sorted_items(self.keys[:, 0], self.keys[:, 1], self.counts, limit=limit)


@dataclass(frozen=True, eq=False)
class CountSummary(_Counters):
    """Exact counts of every key seen: ``keys`` in key order, ``counts``, ``n`` packets."""

    keys: np.ndarray
    counts: np.ndarray
    n: int

    @classmethod
    def empty(cls) -> "CountSummary":
        return cls(_NO_KEYS, _NO_COUNTS, 0)

    @classmethod
    def of_counter(cls, counter: ExactCounter) -> "CountSummary":
        keys, counts = counter.items()
        return cls(*sum_by_key(keys, counts), counter.total)

    def merge(self, other: "CountSummary") -> "CountSummary":
        keys, counts = sum_by_key(np.concatenate([self.keys, other.keys]),
                                  np.concatenate([self.counts, other.counts]))
        return CountSummary(keys, counts, self.n + other.n)



@dataclass(frozen=True, eq=False)
class MGSummary(_Counters):
    """Misra-Gries counters (positive only, key order) of a K-counter summary over ``n`` packets."""

    keys: np.ndarray
    counts: np.ndarray
    n: int
    capacity: int

    @classmethod
    def empty(cls, capacity: int) -> "MGSummary":
        return cls(_NO_KEYS, _NO_COUNTS, 0, check_positive_int("capacity", capacity))

    @classmethod
    def of_state(cls, state: misragries.MGState) -> "MGSummary":
        """Alg 1's state without its dummies and zero-count keys (they count 0 in a merge)."""
        keys, counts, _, n = misragries.snapshot(state)
        keep = ~misragries.is_dummy(keys) & (counts > 0)
        return cls(*sum_by_key(keys[keep], counts[keep]), n, len(counts))

    def merge(self, other: "MGSummary") -> "MGSummary":
        """docs/dp-misra-gries.md §8: sum, subtract the (K+1)-th largest, drop non-positive counters."""
        _check_same("capacity K", self.capacity, other.capacity)
        keys, counts = sum_by_key(np.concatenate([self.keys, other.keys]),
                                  np.concatenate([self.counts, other.counts]))
        K = self.capacity
        if len(counts) > K:
            counts = counts - np.partition(counts, len(counts) - K - 1)[len(counts) - K - 1]
            keep = counts > 0
            keys, counts = keys[keep], counts[keep]
        return MGSummary(keys, counts, self.n + other.n, K)

    @property
    def error_bound(self) -> float:
        """Every estimate is within this below the truth: (n − Σc)/(K+1) <= n/(K+1)."""
        return (self.n - int(self.counts.sum())) / (self.capacity + 1)



@dataclass(frozen=True, eq=False)
class SSSummary(_Counters):
    """SpaceSaving counters (key order) of a K-counter summary; absent keys count at most ``floor``."""

    keys: np.ndarray
    counts: np.ndarray
    floor: int
    n: int
    capacity: int

    @classmethod
    def empty(cls, capacity: int) -> "SSSummary":
        return cls(_NO_KEYS, _NO_COUNTS, 0, 0, check_positive_int("capacity", capacity))

    @classmethod
    def of_state(cls, state: spacesaving.SSState) -> "SSSummary":
        keys, counts, n = spacesaving.snapshot(state)
        capacity = len(state.slot_hi)
        floor = int(counts.min()) if len(counts) == capacity else 0
        return cls(*sum_by_key(keys, counts), floor, n, capacity)

    def merge(self, other: "SSSummary") -> "SSSummary":
        _check_same("capacity K", self.capacity, other.capacity)
        # estimate(x) = floor + (c(x) − floor)·[x stored], so the pairwise sum is one key-wise sum
        keys, excess = sum_by_key(np.concatenate([self.keys, other.keys]),
                                  np.concatenate([self.counts - self.floor, other.counts - other.floor]))
        counts = excess + (self.floor + other.floor)
        floor = self.floor + other.floor
        K = self.capacity
        if len(counts) > K:
            order = np.lexsort((keys[:, 1], keys[:, 0], -counts))  # value descending, ties by key
            floor = int(counts[order[K]])
            keep = np.sort(order[:K])
            keys, counts = keys[keep], counts[keep]
        return SSSummary(keys, counts, floor, self.n + other.n, K)

    @property
    def error_bound(self) -> int:
        """Every estimate is within this above the truth (<= n/K)."""
        return self.floor

    @property
    def absent(self) -> int:
        return self.floor


@dataclass(frozen=True, eq=False)
class SketchSummary:
    """A linear sketch's cells (built with hash ``seeds``), its candidate labels and ``n``."""

    cells: np.ndarray
    seeds: np.ndarray
    candidates: np.ndarray
    n: int

    def merge(self, other: "SketchSummary") -> "SketchSummary":
        _check_same("sketch shape", self.cells.shape, other.cells.shape)
        if not np.array_equal(self.seeds, other.seeds):
            raise ValueError("cannot merge sketches built with different hash seeds: the collector "
                             "must ship one set of seeds to every capture point")
        candidates = unique_keys(np.concatenate([self.candidates, other.candidates]))
        return SketchSummary(self.cells + other.cells, self.seeds, candidates, self.n + other.n)


def merge_all(summaries):
    """Left fold of ``merge`` in the given order (a fixed order keeps non-associative merges
    reproducible)."""
    return functools.reduce(lambda a, b: a.merge(b), summaries)


def derive_seeds(master: bytes, label: str, count: int) -> np.ndarray:
    """``count`` uint64 hash seeds derived from the collector's secret ``master`` for ``label``
    (e.g. ``"eehh-cms/epoch/3"``): keyed BLAKE2b as a PRF, so capture points given the same
    master agree on every epoch's seeds and nobody without it can predict them."""
    out = bytearray()
    block = 0
    while len(out) < 8 * count:
        h = hashlib.blake2b(f"{label}/{block}".encode(), key=master[:64], digest_size=64)
        out += h.digest()
        block += 1
    return np.frombuffer(bytes(out[:8 * count]), dtype=np.uint64).copy()


# --- summarizers: a capture point's side --------------------------------------------------------

class CountSummarizer:
    """Exact counts at one capture point."""

    def __init__(self):
        self.counter = ExactCounter()

    def update(self, keys: np.ndarray) -> None:
        self.counter.add(keys)

    def summary(self) -> CountSummary:
        return CountSummary.of_counter(self.counter)


class _KernelSummarizer:
    """A counter summary with ``capacity`` counters run by its module's public kernels."""

    kernels = None  # the module with make_state / update_batch
    summary_type = None  # the summary built by of_state

    def __init__(self, capacity: int):
        self.state = self.kernels.make_state(capacity)

    def update(self, keys: np.ndarray) -> None:
        self.kernels.update_batch(self.state, keys)

    def summary(self):
        return self.summary_type.of_state(self.state)


class MGSummarizer(_KernelSummarizer):
    """Alg 1 Misra-Gries at one capture point."""

    kernels, summary_type = misragries, MGSummary


class SSSummarizer(_KernelSummarizer):
    """SpaceSaving at one capture point."""

    kernels, summary_type = spacesaving, SSSummary


class CountMinSummarizer:
    """The ``countmin`` baseline (CountMin + top-k~ heap) at one capture point, hashing with the
    row ``seeds`` the collector shipped instead of its own."""

    def __init__(self, settings, seeds: np.ndarray):
        self.algorithm = CountMinHeap(settings)
        self.algorithm.hashing = make_cms_hashing(self.algorithm.depth, self.algorithm.width, seeds)
        self.n = 0

    def update(self, keys: np.ndarray) -> None:
        self.algorithm.update(keys)
        self.n += len(keys)

    def summary(self) -> SketchSummary:
        candidates, _ = tracked(self.algorithm.topk)
        return SketchSummary(self.algorithm.counts.copy(), self.algorithm.hashing.seeds.copy(),
                             unique_keys(candidates), self.n)


@kernel
def _cms_query(counts, hashing, keys):
    out = np.empty(len(keys), dtype=np.int64)
    for i in range(len(keys)):
        est = np.int64(1) << 62
        for r in range(counts.shape[0]):
            est = min(est, counts[r, cms_column(hashing, r, keys[i, 0], keys[i, 1])])
        out[i] = est
    return out


def countmin_top(summary: SketchSummary, limit: int) -> tuple[ReleasedItem, ...]:
    """The ``countmin`` baseline's release of a merged sketch: the merged sketch's estimate of
    every candidate any capture point tracked, top ``limit``."""
    hashing = make_cms_hashing(summary.cells.shape[0], summary.cells.shape[1], summary.seeds)
    est = _cms_query(summary.cells, hashing, summary.candidates)
    return sorted_items(summary.candidates[:, 0], summary.candidates[:, 1], est, limit=limit)


# --- mergeability: what the cluster reads from the registry ---------------------------------------

def _counter_capacity(settings) -> int:
    """k~ counters per capture point, at least k (as SpaceSaving and Misra-Gries require)."""
    return check_positive_int("k~", counters(settings), minimum=check_positive_int("k", settings.k))


def _exact_top(merged: CountSummary, settings):
    """The top ``extra['top']`` (default k, 0 = all) of the merged exact counts, and how many keys."""
    top = int(settings.extra.get("top", settings.k))
    return merged.top(top or None), DistinctFigures(distinct=len(merged.keys))


@dataclass(frozen=True, kw_only=True)
class BoundFigures(ReleaseStatus):
    """What a merged Misra-Gries or SpaceSaving release states beside its items: the
    ``error_bound`` of every estimate (NOT private)."""

    error_bound: float


def _counters_top(merged, settings):
    """The top k of merged Misra-Gries or SpaceSaving counters, with their error bound."""
    return merged.top(settings.k), BoundFigures(error_bound=merged.error_bound)


def _countmin_summarizer(settings, master: bytes) -> CountMinSummarizer:
    """CountMin hashing with row seeds every capture point derives from the collector's secret."""
    depth, _ = CountMinHeap.shape(settings)
    return CountMinSummarizer(settings, derive_seeds(master, CountMinHeap.name, depth))


declare_mergeable(Exact, WholeStreamMerge(
    CountSummary, lambda settings, master: CountSummarizer(), merge_all, _exact_top, ground_truth=True))
declare_mergeable(spacesaving.SpaceSaving, WholeStreamMerge(
    SSSummary, lambda settings, master: SSSummarizer(_counter_capacity(settings)), merge_all, _counters_top))
declare_mergeable(misragries.MisraGries, WholeStreamMerge(
    MGSummary, lambda settings, master: MGSummarizer(_counter_capacity(settings)), merge_all, _counters_top))
declare_mergeable(CountMinHeap, WholeStreamMerge(
    SketchSummary, _countmin_summarizer, merge_all,
    lambda merged, settings: (countmin_top(merged, settings.k), NO_FIGURES)))
