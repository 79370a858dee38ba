"""The public clocks a session puts packets on when the source cannot be read in canonical order
beforehand (a replay's plan does that, capture/epochorder.py): a live capture's wall clock and a
looping synthetic stream's open-ended grid. Each is a sink in front of the fan-out that tags every
packet with the cell of its own stamp, cells in increasing order, and counts what it drops."""
from __future__ import annotations

import threading
import time

import numpy as np

from dptop.capture.epochorder import OUTSIDE, by_cell
from dptop.engine.core.clock import TimeGrid
from dptop.engine.core.keys import KeyBatch, tick
from dptop.monitor.fanout import Fanout

LATE = "stamped in an epoch the clock had closed"
AHEAD = "stamped ahead of the capture clock"


def joined(pieces: list[KeyBatch], cell: int) -> KeyBatch:
    """The packets of ``pieces`` (all of one cell, in arrival order) as one batch."""
    optional = [None if any(getattr(p, f) is None for p in pieces) else np.concatenate([getattr(p, f) for p in pieces])
                for f in ("dst", "length")]
    return KeyBatch(np.concatenate([p.keys for p in pieces]), np.concatenate([p.ts_ns for p in pieces]),
                    *optional, epoch=cell)


class LoopClock:
    """A looping stream (stamps only grow, pass after pass): each run of one cell tagged with it."""

    def __init__(self, grid: TimeGrid, fanout: Fanout):
        self.grid, self.fanout = grid, fanout
        self.dropped: dict[str, int] = {}

    def __call__(self, batch: KeyBatch) -> bool:
        for cell, piece in by_cell(batch, self.grid):
            if cell < 0:
                self.dropped[OUTSIDE] = self.dropped.get(OUTSIDE, 0) + len(piece)
            elif not self.fanout(piece):
                return False
        return True

    def tick(self, final: bool = False) -> None:
        """Nothing to close: the stream's own stamps move this clock."""


class LiveClock:
    """Live packets on the wall-clock grid, each to the cell of its own stamp. The open cell takes
    its packets at once; packets of a later cell the wall clock has reached wait until the open cell
    closes (``lateness`` seconds after its end); stamps in a closed cell or ahead of the wall clock
    are dropped and counted (truth and lanes alike never see them). The capture thread and the
    session's thread both move it (``__call__`` and ``tick``)."""

    def __init__(self, grid: TimeGrid, lateness: float, fanout: Fanout):
        self.grid, self.lateness, self.fanout = grid, lateness, fanout
        self.dropped: dict[str, int] = {}
        self._pending: dict[int, list[KeyBatch]] = {}  # packets of cells after the open one, held
        self._lock = threading.RLock()

    def __call__(self, batch: KeyBatch) -> bool:
        with self._lock:
            self._close_cells(final=False)
            open_cell = self.fanout.cell
            cells = self.grid.cell_of(batch.ts_ns)
            wall = self._wall_cell(time.time_ns())
            late = cells < open_cell
            ahead = cells > wall
            for reason, mask in ((LATE, late), (AHEAD, ahead)):
                if mask.any():
                    self.dropped[reason] = self.dropped.get(reason, 0) + int(np.count_nonzero(mask))
            later = ~(late | ahead) & (cells > open_cell)
            for cell in np.unique(cells[later]).tolist():
                self._pending.setdefault(cell, []).append(batch.take(np.flatnonzero(cells == cell), cell))
            keep = np.flatnonzero(cells == open_cell)
            return self.fanout(batch.take(keep, open_cell)) if len(keep) else True

    def tick(self, final: bool = False) -> None:
        """Close the cells the wall clock has left ``lateness`` seconds ago (an empty tagged batch),
        then hand over the packets held for the cells that opened; ``final``: the stop is public,
        the cell it falls in is the last one released."""
        with self._lock:
            self._close_cells(final)

    def _wall_cell(self, now_ns: int) -> int:
        cell = int(self.grid.cell_of(np.array([now_ns]))[0])
        return self.grid.cells if cell < 0 and now_ns >= self.grid.start_ns else cell

    def _close_cells(self, final: bool) -> None:
        now = time.time_ns()
        cell = self._wall_cell(now) + 1 if final else self._wall_cell(now - round(self.lateness * 1e9))
        if cell <= self.fanout.cell:
            return
        for held in sorted(c for c in self._pending if c <= cell):
            self.fanout(tick(held))
            self.fanout(joined(self._pending.pop(held), held))  # one batch: the lanes' queues are short
        if cell > self.fanout.cell:
            self.fanout(tick(cell))
