"""``window-exact``: exact source counts over the last w packets (the sliding-window ground truth).

A ring buffer of the last ``w`` keys and an open-addressing count table (``dptop.engine.core.hashtable``) of
fixed capacity >= 2w (at most ``w`` distinct keys, so the load stays <= 1/2). Each arrival evicts
the key ``w`` positions back (decrement; delete at zero by backward shift) and counts the new one.
Not private: the GUI's comparison column and the metrics' truth for DPSW (docs/dpsw-sketch.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dptop.engine.core import hashtable as ht
from dptop.engine.core.base import Algorithm, Footprint
from dptop.engine.core.hashtable import delete_at, found, probe, store
from dptop.engine.core.jit import kernel
from dptop.engine.core.registry import register
from dptop.engine.core.release import Release, Span, sorted_items
from dptop.engine.core.settings import PACKETS, check_positive_int
from dptop.engine.core.facts import NO_FACTS
from dptop.engine.core.status import ReleaseStatus

DEFAULT_WINDOW = 100_000


@kernel
def _slide(ring, clock, tab_hi, tab_lo, tab_val, hashing, keys):
    """Push ``keys`` into the window: ``clock = [items seen, window length]``."""
    w = clock[1]
    for i in range(keys.shape[0]):
        pos = clock[0] % w
        if clock[0] >= w:
            ohi = ring[pos, 0]
            olo = ring[pos, 1]
            p = probe(tab_hi, tab_lo, hashing, ohi, olo)
            tab_val[p] -= 1
            if tab_val[p] == 0:
                delete_at(tab_hi, tab_lo, tab_val, hashing, p)
        hi = keys[i, 0]
        lo = keys[i, 1]
        ring[pos, 0] = hi
        ring[pos, 1] = lo
        p = probe(tab_hi, tab_lo, hashing, hi, lo)
        if found(tab_hi, tab_lo, p, hi, lo):
            tab_val[p] += 1
        else:
            store(tab_hi, tab_lo, tab_val, p, hi, lo, 1)
        clock[0] += 1


@dataclass(frozen=True, kw_only=True)
class WindowFigures(ReleaseStatus):
    """What an exact window release states beside its items: the ``distinct`` keys in the window
    and its length in packets (NOT private)."""

    distinct: int
    window: int


class ExactWindow:
    """Exact multiset of the last ``w`` keys: ``add(keys)``, ``items()``, ``count_of(hi, lo)``, ``top(n)``."""

    def __init__(self, window: int):
        self.window = check_positive_int("window", window)
        self.ring = np.zeros((self.window, 2), dtype=np.uint64)
        self.clock = np.array([0, self.window], dtype=np.int64)
        self.table = ht.make_table(2 * self.window)

    @staticmethod
    def nbytes(window: int) -> int:
        """The bytes ``ExactWindow(window)`` allocates: the ring of keys, the clock, the table."""
        return 16 * window + 16 + ht.table_bytes(2 * window)

    @property
    def seen(self) -> int:
        return int(self.clock[0])

    def add(self, keys: np.ndarray) -> None:
        if len(keys):
            t = self.table
            _slide(self.ring, self.clock, t.hi, t.lo, t.val, t.hashing,
                   np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1, 2))

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """``(keys (m, 2), counts (m,))`` of the distinct keys in the window."""
        idx = ht.occupied(self.table.hi, self.table.lo)
        return np.stack([self.table.hi[idx], self.table.lo[idx]], axis=1), self.table.val[idx].copy()

    def count_of(self, hi: int, lo: int) -> int:
        t = self.table
        h, l = np.uint64(hi), np.uint64(lo)
        p = probe(t.hi, t.lo, t.hashing, h, l)
        return int(t.val[p]) if found(t.hi, t.lo, p, h, l) else 0

    def top(self, n: int | None = None):
        keys, counts = self.items()
        return sorted_items(keys[:, 0], keys[:, 1], counts, limit=n)


@register
class WindowExact(Algorithm):
    """Exact counts of the last ``window`` packets: items with count >= γ·w when ``gamma`` is set,
    else the top ``k`` (``extra['top']`` overrides)."""

    name = "window-exact"
    parameters = ("top",)
    family = "sliding window"

    def __init__(self, settings, facts=NO_FACTS, counting=PACKETS):
        super().__init__(settings, facts, counting)
        self.window = check_positive_int("window", self.window_of(settings), minimum=1)
        if settings.gamma is not None and not 0.0 < float(settings.gamma) < 1.0:
            raise ValueError(f"gamma ({settings.gamma!r}) must be in (0, 1)")
        self.reset()

    @staticmethod
    def window_of(settings) -> int:
        return DEFAULT_WINDOW if settings.window is None else settings.window

    @classmethod
    def footprint(cls, settings, facts=NO_FACTS, counting=PACKETS):
        return Footprint(ExactWindow.nbytes(cls.window_of(settings)), f"window = {cls.window_of(settings)}")

    def reset(self):
        self.exact = ExactWindow(self.window)
        self.packets = 0

    def update(self, keys):
        self.exact.add(keys)

    def span(self) -> Span:
        return Span(max(0, self.exact.seen - self.window), self.exact.seen, kind="window")

    def release(self) -> Release:
        keys, counts = self.exact.items()
        if self.settings.gamma is not None:
            thr = float(self.settings.gamma) * self.window
            keep = counts >= thr
            items = sorted_items(keys[keep, 0], keys[keep, 1], counts[keep])
        else:
            thr = None
            limit = int(self.settings.extra.get("top", self.settings.k))
            items = sorted_items(keys[:, 0], keys[:, 1], counts, limit=limit)
        return Release(self.name, self.span(), items, threshold=thr,
                       status=WindowFigures(distinct=len(counts), window=self.window))
