"""The public clocks a session puts packets on when the source cannot simply be read in canonical
order as fast as it goes (a replay's plan does that, capture/epochorder.py): a live capture's wall
clock, a paced replay's clock and a looping synthetic stream's open-ended grid. Each is a sink in
front of the fan-out that tags every packet with the cell of its own stamp, cells in increasing
order, and counts what it drops.

On the live and the paced clock a time epoch closes when the public clock passes its end plus
the lateness, never when a packet shows up: a packet of a later cell waits (live) or its replay
waits (paced) until the open cell closes, and the closes themselves come from ``tick``, called by
the session's thread at the moments ``due`` names: a release whose instant
depends on a packet publishes that packet's presence (the timing channel of Haeberlen, Pierce and
Narayan 2011, "Differential privacy under fire")."""
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
IDLE_TICK = 0.1
"""Longest wait (s) of the session's thread between two looks at its clock."""


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

    def due(self) -> float:
        return IDLE_TICK


class LiveClock:
    """Live packets on the wall-clock grid, each to the cell of its own stamp. The open cell takes
    its packets at once; packets of a later cell the wall clock has reached wait until the open cell
    closes (``lateness`` seconds after its end, at the session's ``tick``); stamps in a cell whose
    close is due or ahead of the wall clock are dropped and counted (truth and lanes alike never
    see them). The capture thread and the session's thread both move it (``__call__`` and
    ``tick``); ``now_ns`` is the wall clock (injected by tests)."""

    def __init__(self, grid: TimeGrid, lateness: float, fanout: Fanout, now_ns=None):
        self.grid, self.lateness, self.fanout = grid, lateness, fanout
        self.now_ns = now_ns or (lambda: time.time_ns())
        self.dropped: dict[str, int] = {}
        self._pending: dict[int, list[KeyBatch]] = {}  # packets of cells after the open one, held
        self._lock = threading.RLock()

    def __call__(self, batch: KeyBatch) -> bool:
        with self._lock:
            now = self.now_ns()
            open_cell = max(self.fanout.cell, self._closed_by(now))  # a close that is due counts as done
            cells = self.grid.cell_of(batch.ts_ns)
            wall = self._wall_cell(now)
            late = cells < open_cell
            ahead = cells > wall
            for reason, mask in ((LATE, late), (AHEAD, ahead)):
                if mask.any():
                    self.dropped[reason] = self.dropped.get(reason, 0) + int(np.count_nonzero(mask))
            later = ~(late | ahead) & (cells > self.fanout.cell)
            for cell in np.unique(cells[later]).tolist():
                self._pending.setdefault(cell, []).append(batch.take(np.flatnonzero(cells == cell), cell))
            keep = np.flatnonzero(~(late | ahead) & (cells == self.fanout.cell))
            return self.fanout(batch.take(keep, self.fanout.cell)) if len(keep) else True

    def tick(self, final: bool = False) -> None:
        """Close the cells the wall clock has left ``lateness`` seconds ago (an empty tagged batch),
        then hand over the packets held for the cells that opened; ``final``: the stop is public,
        the cell it falls in is the last one released."""
        with self._lock:
            now = self.now_ns()
            cell = self._wall_cell(now) + 1 if final else self._closed_by(now)
            if cell <= self.fanout.cell:
                return
            for held in sorted(c for c in self._pending if c <= cell):
                self.fanout(tick(held))
                self.fanout(joined(self._pending.pop(held), held))  # one batch: the lanes' queues are short
            if cell > self.fanout.cell:
                self.fanout(tick(cell))

    def due(self) -> float:
        """Seconds until the open cell's close is due (at most ``IDLE_TICK``)."""
        close = self.grid.start_ns + (self.fanout.cell + 1) * self.grid.epoch_ns + round(self.lateness * 1e9)
        return min(IDLE_TICK, max(0.0, (close - self.now_ns()) / 1e9))

    def _wall_cell(self, now_ns: int) -> int:
        cell = int(self.grid.cell_of(np.array([now_ns]))[0])
        return self.grid.cells if cell < 0 and now_ns >= self.grid.start_ns else cell

    def _closed_by(self, now_ns: int) -> int:
        """The open cell once every close due at ``now_ns`` is done."""
        return self._wall_cell(now_ns - round(self.lateness * 1e9))


class PacedClock:
    """A paced replay (``--speed S``) on the public grid. Its public clock starts at the grid's
    start when the replay starts (``start``), runs ``S`` seconds of capture per wall second and
    stands still while paused. Cell ``c`` closes once that clock has passed the cell's end and
    ``lateness`` wall seconds more, and every packet of the cell has been handed over (``counts``,
    per cell, read before the replay: a fact of the file, not of the moment; the replay runs ahead
    of this clock, so the count holds a close back only on a machine too slow to keep the pace).
    A batch of a later cell blocks the replay until the open cell closes: nothing is held in
    memory and nothing is dropped. ``now`` is the monotonic clock (injected by tests)."""

    def __init__(self, grid: TimeGrid, speed: float, lateness: float, fanout: Fanout, counts: np.ndarray,
                 now=None):
        self.grid, self.speed, self.lateness, self.fanout = grid, speed, lateness, fanout
        self.counts = np.asarray(counts, np.int64)
        self.delivered = np.zeros(grid.cells, np.int64)
        self.now = now or (lambda: time.monotonic())
        self.dropped: dict[str, int] = {}
        self._cv = threading.Condition(threading.RLock())
        self._started: float | None = None
        self._paused_at: float | None = None
        self._stopped = False

    # ----- the public clock --------------------------------------------------------------------
    def start(self) -> None:
        with self._cv:
            self._started = self.now()

    def pause(self) -> None:
        with self._cv:
            if self._paused_at is None:
                self._paused_at = self.now()

    def resume(self) -> None:
        with self._cv:
            if self._paused_at is not None and self._started is not None:
                self._started += self.now() - self._paused_at
            self._paused_at = None
            self._cv.notify_all()

    def stop(self) -> None:
        """Release a replay blocked on a later cell (its packets are not fed: the session stops)."""
        with self._cv:
            self._stopped = True
            self._cv.notify_all()

    def elapsed(self) -> float:
        """Wall seconds the public clock has run (0 before ``start``)."""
        if self._started is None:
            return 0.0
        return max(0.0, (self._paused_at if self._paused_at is not None else self.now()) - self._started)

    def close_at(self, cell: int) -> float:
        """The public clock's reading (elapsed wall seconds) at which ``cell`` closes."""
        return (cell + 1) * self.grid.epoch_ns / (self.speed * 1e9) + self.lateness

    @property
    def done(self) -> bool:
        """Every cell but the last closed and the last one's close due: the replay may finish."""
        return self.fanout.cell >= self.grid.cells - 1 and self._closable(self.grid.cells - 1)

    def due(self) -> float:
        """Wall seconds until the open cell's close is due (at most ``IDLE_TICK``)."""
        with self._cv:
            return min(IDLE_TICK, max(0.0, self.close_at(self.fanout.cell) - self.elapsed()))

    # ----- the replay's sink and the session's tick ------------------------------------------
    def __call__(self, batch: KeyBatch) -> bool:
        cell = batch.epoch
        with self._cv:
            self.delivered[cell] += len(batch)
            while cell > self.fanout.cell and not self._stopped:
                self.tick()
                if cell > self.fanout.cell:
                    self._cv.wait(min(IDLE_TICK, self.due() + 1e-3))
            if self._stopped:
                return True
            return self.fanout(batch)

    def tick(self, final: bool = False) -> None:
        """Close every cell whose close is due (``final``: the session stops or its replay ended
        and the grid's last close is due; the lanes' finish releases the open cell)."""
        with self._cv:
            while self.fanout.cell < self.grid.cells - 1 and self._closable(self.fanout.cell):
                self.fanout(tick(self.fanout.cell + 1))
            self._cv.notify_all()

    def _closable(self, cell: int) -> bool:
        return self.elapsed() >= self.close_at(cell) and self.delivered[cell] >= self.counts[cell]
