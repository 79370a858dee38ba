"""The recording of the last packets the truth thread saw, and the stream positions each release
covers (the packets its exact comparison counts): dptop.monitor.truth asks, and so do the run
JSON's comparison (dptop.monitor.result) and the sweeps (dptop.monitor.sweep).

* count-based epochs, windows, prefixes: packet positions ``[span.start, span.end)`` shifted by
  the lane's origin (the stream position at which that algorithm joined), around the positions
  the lane did not see (dptop.monitor.unseen.Unseen);
* time-based epochs (``span.t_start`` set, kind ``epoch``): the packets of cell ``span.index`` of
  the public grid (engine/core/clock.py), which are contiguous in canonical order;
* a private whole-stream release: everything seen (its positions are noisy).
"""
from __future__ import annotations

import bisect

import numpy as np

from dptop.engine.core.keys import KEY_DTYPE, KeyBatch
from dptop.engine.core.release import Release
from dptop.monitor.unseen import Unseen


class Recording:
    """The last ``capacity`` keys and time stamps with their time-epoch cell (-1: none), addressed
    by global position. Cells never decrease along the stream, so they are kept as runs (the
    position where each cell's packets start), not one word per packet."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"capacity ({capacity}) must be >= 1")
        self.capacity = int(capacity)
        self.keys = np.empty((self.capacity, 2), dtype=KEY_DTYPE)
        self.ts = np.empty(self.capacity, dtype=np.int64)
        self._run_start: list[int] = []  # global position of each run's first packet, increasing
        self._run_cell: list[int] = []  # its cell, non-decreasing
        self.pos = 0  # packets appended so far
        self.last_cell = -1  # the public clock's latest cell (ticks included)

    @property
    def first(self) -> int:
        """Oldest global position still held."""
        return max(0, self.pos - self.capacity)

    def append(self, batch: KeyBatch) -> None:
        if batch.epoch is not None:
            self.last_cell = max(self.last_cell, batch.epoch)
        keys, ts = batch.keys, batch.ts_ns
        if len(keys) == 0:
            return
        if len(keys) > self.capacity:
            skip = len(keys) - self.capacity
            self.pos += skip
            keys, ts = keys[skip:], ts[skip:]
        cell = -1 if batch.epoch is None else batch.epoch
        if not self._run_cell or self._run_cell[-1] != cell:
            self._run_start.append(self.pos)
            self._run_cell.append(cell)
        i = self.pos % self.capacity
        head = min(len(keys), self.capacity - i)
        rest = len(keys) - head
        for dst, src in ((self.keys, keys), (self.ts, ts)):
            dst[i:i + head] = src[:head]
            dst[:rest] = src[head:]
        self.pos += len(keys)
        gone = bisect.bisect_right(self._run_start, self.first) - 1  # runs wholly older than the recording
        if gone > 0 and 2 * gone >= len(self._run_start):
            del self._run_start[:gone], self._run_cell[:gone]

    def holds(self, a: int, b: int) -> bool:
        return self.first <= a <= b <= self.pos

    def _parts(self, a: int, b: int):
        """Ring index ranges covering global ``[a, b)`` (at most two)."""
        i, j = a % self.capacity, b % self.capacity
        if b - a == 0:
            return []
        if i < j:
            return [(i, j)]
        return [(i, self.capacity), (0, j)] if j else [(i, self.capacity)]

    def slice(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Copies of keys and time stamps at global positions ``[a, b)`` (must be held)."""
        if not self.holds(a, b):
            raise ValueError(f"positions [{a}, {b}) are not in the recording [{self.first}, {self.pos})")
        parts = self._parts(a, b)
        if not parts:
            return np.zeros((0, 2), KEY_DTYPE), np.zeros(0, np.int64)
        keys = np.concatenate([self.keys[p:q] for p, q in parts])
        ts = np.concatenate([self.ts[p:q] for p, q in parts])
        return keys, ts

    def position_of_cell(self, cell: int) -> int:
        """First held global position whose cell is >= ``cell`` (cells never decrease)."""
        r = bisect.bisect_left(self._run_cell, cell)
        return self.pos if r == len(self._run_cell) else min(self.pos, max(self.first, self._run_start[r]))


def seen_keys(rec: Recording, a: int, b: int, unseen: Unseen | None) -> tuple[np.ndarray, int]:
    """The keys at global positions ``[a, b)`` a lane saw (its ``unseen`` ranges left out), and how
    many of them it did not see. Raises ``LookupError`` as ``Unseen.within`` does."""
    return keys_between(rec, a, b, () if unseen is None else unseen.within(a, b))


def keys_between(rec: Recording, a: int, b: int, gaps: tuple) -> tuple[np.ndarray, int]:
    """The keys at ``[a, b)`` outside ``gaps`` (ranges inside it), and how many the gaps hold."""
    if not gaps:
        return rec.slice(a, b)[0], 0
    bounds = [a, *(x for gap in gaps for x in gap), b]
    parts = [rec.slice(p, q)[0] for p, q in zip(bounds[::2], bounds[1::2])]
    return np.concatenate(parts), sum(q - p for p, q in gaps)


def resolve_span(release: Release, origin: int, rec: Recording, finished: bool,
                 unseen: Unseen | None = None) -> tuple[int, int] | None:
    """Global positions ``[a, b)`` of the packets ``release`` covers, or ``None`` while the truth
    has not seen them all yet. Raises ``LookupError`` if they are older than the recording.
    ``unseen``: the lane's refused positions, which its own count-based positions skip."""
    span = release.span
    if span.kind == "epoch" and span.t_start is not None:
        if rec.last_cell <= span.index and not finished:
            return None
        a, b = rec.position_of_cell(span.index), rec.position_of_cell(span.index + 1)
        a, b = max(a, origin), max(b, origin)
    elif span.kind == "stream" and release.private:
        # whole-stream single release: its span positions are noisy; it covers everything seen
        a, b = origin, rec.pos
        if not finished:
            return None
    else:
        a, b = origin + span.start, origin + span.end
        if unseen is not None:
            b = unseen.position(span.end, origin, end=True)
            a = min(b, unseen.position(span.start, origin))
        if b > rec.pos:
            return None
    if a < rec.first:
        raise LookupError(f"span [{a}, {b}) is older than the recording (last {rec.capacity} packets)")
    return a, b
