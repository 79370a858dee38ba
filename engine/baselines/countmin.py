"""CountMin sketch with a top-k heap: the non-private sketch baseline.

d rows of w counters (w a power of two); row r hashes a key with its own seed. The estimate of
a key is the minimum of its d counters (never below the true count). Each arrival offers the
fresh estimate to a ``TopK`` tracker of k~ candidates; ``release()`` lists the top k.
The DP sketches (EEHH, LazySketch, DPSW) reuse ``make_cms``/``cms_columns``.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dptop.engine.baselines.summary import counters
from dptop.engine.core.base import Algorithm, Footprint
from dptop.engine.core.jit import inner, kernel
from dptop.engine.core.keys import hash_key, random_seed64
from dptop.engine.core.registry import register
from dptop.engine.core.release import Release, sorted_items
from dptop.engine.core.settings import PACKETS, check_positive_int
from dptop.engine.core.topk import make_topk, offer, topk_bytes, tracked
from dptop.engine.core.facts import NO_FACTS


class CMSHashing(NamedTuple):
    seeds: np.ndarray  # uint64[d]
    shift: np.ndarray  # uint64[1]: 64 - log2(w)


def make_cms_hashing(depth: int, width: int, seeds: np.ndarray | None = None) -> CMSHashing:
    """Row seeds (``seeds``, else from the OS) and the shift for a power-of-two ``width``."""
    depth = check_positive_int("depth", depth)
    width = check_positive_int("width", width, minimum=2)
    if width & (width - 1):
        raise ValueError(f"width ({width}) must be a power of two")
    if seeds is None:
        seeds = np.array([random_seed64() for _ in range(depth)], dtype=np.uint64)
    return CMSHashing(seeds, np.array([64 - (width.bit_length() - 1)], dtype=np.uint64))


@inner
def cms_column(hashing, row, hi, lo):
    """Column of key ``(hi, lo)`` in ``row``."""
    return np.int64(hash_key(hi, lo, hashing.seeds[row]) >> hashing.shift[0])


@kernel
def _update_batch(counts, hashing, topk, keys):
    d = counts.shape[0]
    for i in range(len(keys)):
        hi = keys[i, 0]
        lo = keys[i, 1]
        est = np.int64(1) << 62
        for r in range(d):
            c = cms_column(hashing, r, hi, lo)
            counts[r, c] += 1
            if counts[r, c] < est:
                est = counts[r, c]
        offer(topk, hi, lo, est)


@register
class CountMinHeap(Algorithm):
    """CountMin (depth 4, width ``extra['width']`` or the power of two >= 8k) + top-k~ heap."""

    name = "countmin"
    parameters = ("depth", "width")

    def __init__(self, settings, facts=NO_FACTS, counting=PACKETS):
        super().__init__(settings, facts, counting)
        self.k = check_positive_int("k", settings.k)
        self.capacity = check_positive_int("k~", counters(settings), minimum=self.k)
        self.depth, self.width = self.shape(settings)
        check_positive_int("depth", self.depth)
        self.reset()

    @staticmethod
    def shape(settings) -> tuple[int, int]:
        """(depth, width) of the sketch: ``--param depth`` (4), ``--param width`` (power of two >= 8k)."""
        return (int(settings.extra.get("depth", 4)),
                int(settings.extra.get("width", 1 << max(1, (8 * settings.k - 1).bit_length()))))

    @classmethod
    def footprint(cls, settings, facts=NO_FACTS, counting=PACKETS):
        """The depth x width counters and their seeds, and the top-k~ heap."""
        depth, width = cls.shape(settings)
        k_tilde = counters(settings)
        sized_by = f"k~ = {k_tilde}" if topk_bytes(k_tilde) >= 8 * depth * width else f"depth x width = {depth} x {width}"
        return Footprint(8 * depth * (width + 1) + 8 + topk_bytes(k_tilde), sized_by)

    def reset(self):
        seed = self.settings.seed  # --seed: the same rows on every run (NOT private, like every seeded run)
        seeds = None if seed is None else np.random.SeedSequence((int(seed), 0xC0DE)).generate_state(
            self.depth, dtype=np.uint64)
        self.hashing = make_cms_hashing(self.depth, self.width, seeds)
        self.counts = np.zeros((self.depth, self.width), dtype=np.int64)
        self.topk = make_topk(self.capacity)
        self.packets = 0

    def update(self, keys):
        _update_batch(self.counts, self.hashing, self.topk, keys)

    def release(self) -> Release:
        keys, values = tracked(self.topk)
        return Release(self.name, self.span(), sorted_items(keys[:, 0], keys[:, 1], values, limit=self.k))
