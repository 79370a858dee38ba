"""The public clock: a fixed grid of time epochs that no packet can move.

A ``TimeGrid`` is ``cells`` epochs of ``epoch_ns`` starting at ``start_ns`` (ns since the Unix
epoch). It is public: a live capture takes it from the wall clock at session start, a replay from
a declared ``--time-range`` (or the file's own time range, which the guarantee then states as
public, like the replay horizon). Each packet belongs to the cell of its **own** stamp; a packet
outside the range belongs to none and is dropped and counted by whoever feeds the engine. Every
cell is released, empty ones included, so neither the number of releases nor their time bounds
depend on any packet (the alternative, a grid anchored at the first packet or packets assigned by
the running maximum of stamps, gives neighbouring streams different releases: infinite loss).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

MAX_CELLS = 1 << 20
"""At most this many epochs in one range (a range is public, but a typo should not allocate a
million releases per second of range)."""


@dataclass(frozen=True)
class TimeGrid:
    start_ns: int
    epoch_ns: int
    cells: int

    def __post_init__(self):
        if self.epoch_ns < 1:
            raise ValueError(f"epoch length ({self.epoch_ns} ns) must be >= 1 ns")
        if not 1 <= self.cells <= MAX_CELLS:
            raise ValueError(f"the time range holds {self.cells} epochs; it must hold 1 to {MAX_CELLS} "
                             f"(use a longer --epoch-seconds or a shorter --time-range)")

    @classmethod
    def over(cls, start_ns: int, end_ns: int, epoch_seconds: float) -> "TimeGrid":
        """The grid of ``epoch_seconds`` epochs covering ``[start_ns, end_ns)`` (at least one cell)."""
        epoch_ns = round(epoch_seconds * 1e9)
        if end_ns < start_ns:
            raise ValueError(f"time range end ({end_ns / 1e9:.3f}) is before its start ({start_ns / 1e9:.3f})")
        if epoch_ns < 1:
            raise ValueError(f"epoch_seconds ({epoch_seconds!r}) must be at least 1 ns")
        return cls(int(start_ns), epoch_ns, max(1, -(-(int(end_ns) - int(start_ns)) // epoch_ns)))

    @classmethod
    def covering(cls, first_ns: int, last_ns: int, epoch_ns: int) -> "TimeGrid":
        """The smallest grid aligned on multiples of ``epoch_ns`` (the cells every capture point of
        a cluster computes alike) that holds packet times ``first_ns``..``last_ns``."""
        start = first_ns // epoch_ns * epoch_ns
        return cls(start, epoch_ns, (last_ns - start) // epoch_ns + 1)

    @property
    def first_cell(self) -> int:
        """Absolute index (packet time // epoch) of cell 0 on an aligned grid."""
        return self.start_ns // self.epoch_ns

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.cells * self.epoch_ns

    def cell_of(self, ts_ns: np.ndarray) -> np.ndarray:
        """Cell index of each stamp; -1 outside the range."""
        cells = (np.asarray(ts_ns, dtype=np.int64) - self.start_ns) // self.epoch_ns
        cells[(cells < 0) | (cells >= self.cells)] = -1
        return cells

    def runs(self, ts_ns: np.ndarray) -> list[tuple[int, int, int]]:
        """``(cell, start, end)`` for each run of consecutive stamps in the same cell (-1 outside)."""
        cells = self.cell_of(ts_ns)
        if len(cells) == 0:
            return []
        cuts = (np.flatnonzero(np.diff(cells)) + 1).tolist()
        return [(int(cells[a]), a, b) for a, b in zip([0, *cuts], [*cuts, len(cells)])]

    def bounds(self, cell: int) -> tuple[float, float]:
        """``[t_start, t_end)`` of ``cell`` in Unix seconds."""
        t0 = self.start_ns + cell * self.epoch_ns
        return t0 / 1e9, (t0 + self.epoch_ns) / 1e9


def parse_instant(text: str) -> int:
    """Unix seconds (``1700000000.5``) or ISO 8601 (``2026-11-22T10:00:00Z``; naive = UTC) -> ns."""
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"time {text!r} is neither Unix seconds nor ISO 8601") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        seconds = moment.timestamp()
    if not math.isfinite(seconds) or abs(seconds) > 1e11:
        raise ValueError(f"time {text!r} is out of range")
    return round(seconds * 1e9)


def parse_time_range(text: str) -> tuple[int, int]:
    """``START:END`` (see ``parse_instant``; ISO times contain colons, so split at ' ' or '/' too)."""
    for sep in ("/", " ", ","):
        if sep in text:
            a, _, b = text.partition(sep)
            break
    else:
        parts = text.split(":")
        if len(parts) != 2:
            raise ValueError(f"--time-range wants START:END in Unix seconds, or START/END in ISO 8601; got {text!r}")
        a, b = parts
    start, end = parse_instant(a), parse_instant(b)
    if end <= start:
        raise ValueError(f"--time-range end ({b.strip()}) must be after its start ({a.strip()})")
    return start, end


class CellOrdered:
    """Mixin of a consumer of a public grid fed in cell order (single-release epochs, local-DP
    windows): ``grid``, the open cell ``_index``, ``_joined`` (has the session's clock named a cell)
    and ``dropped`` (packets of closed cells or outside the range). Subclasses provide ``_close()``
    (publish the open cell and move ``_index`` on) and ``_fill(keys)`` (add keys to it)."""

    def _consume_timed(self, batch, out: list) -> None:
        """A tagged batch is one cell (an empty one a tick); an untagged one is cut into runs of
        equal cell by the packets' own stamps."""
        if batch.epoch is not None:
            if not self._joined:  # an instance started mid-session (Apply) joins at the clock's cell
                self._index, self._joined = max(0, batch.epoch), True
            self._to_cell(batch.epoch, batch.keys, out)
            return
        self._joined = True
        for cell, a, b in self.grid.runs(batch.ts_ns):
            self._to_cell(cell, batch.keys[a:b], out)

    def _to_cell(self, cell: int, keys, out: list) -> None:
        if cell < self._index or cell >= self.grid.cells:  # closed, or outside the range (-1)
            self.dropped += len(keys)
            return
        while self._index < cell:
            out.append(self._close())  # the open cell, then any empty ones before ``cell``
        if len(keys):
            self._fill(keys)

