"""A capture file read in the order of a public ``TimeGrid``: cell by cell, file order within a cell.

Time epochs must not depend on any one packet (engine/core/clock.py). A file is read in the
*canonical order*: every packet goes to the cell of its own stamp, cells in increasing order,
and inside a cell the packets keep their file order. That order is a function of each packet's
own stamp and position only, so adding, removing or re-stamping one packet changes where that
packet goes and nothing else. Packets outside the grid are dropped and counted.

Most captures are already in canonical order and are streamed as they are. Otherwise the few
packets out of place are found before the replay (the complement of a longest non-decreasing
subsequence of cells, which keeps the set small), read into memory in a second pass, and merged
back by file position into their cell's run while streaming. Memory: 8 bytes per packet for the
stamps while planning, plus the out-of-place packets themselves.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np

from dptop.capture.pcap import open_capture
from dptop.engine.core.clock import TimeGrid
from dptop.engine.core.jit import kernel
from dptop.engine.core.keys import KeyBatch, concat

OUTSIDE = "outside the public time range"
"""Skip reason for packets stamped outside the grid."""


def time_range(path, batch_size: int = 1 << 18) -> tuple[int, int] | None:
    """``(first, last)`` packet stamp (ns) over the file's IP packets, or ``None`` without any."""
    lo = hi = None
    with open_capture(path) as reader:
        for batch in reader.batches(batch_size):
            a, b = int(batch.ts_ns.min()), int(batch.ts_ns.max())
            lo, hi = (a, b) if lo is None else (min(lo, a), max(hi, b))
    return None if lo is None else (lo, hi)


def read_stamps(path, batch_size: int = 1 << 18) -> tuple[int, np.ndarray]:
    """One read of the file: its record count and every IP packet's stamp (ns) in file order
    (8 bytes per packet, held only while the facts of the file are worked out)."""
    with open_capture(path) as reader:
        stamps = [batch.ts_ns.copy() for batch in reader.batches(batch_size) if len(batch)]
        records = reader.stats.packets
    return records, np.concatenate(stamps) if stamps else np.zeros(0, np.int64)


def bulk_span(ts: np.ndarray, cell_ns: int, max_cells: int) -> tuple[int, int]:
    """``(first, last)`` of the stamps ``ts`` (not empty) within ``max_cells // 2`` cells of their
    median: the file's span without stamps so far off that the span would exceed ``max_cells``
    epochs (a corrupt stamp); packets outside it are dropped and counted by the replay."""
    middle = int(np.median(ts))
    half = (max_cells // 2) * int(cell_ns)
    kept = ts[(ts >= middle - half) & (ts < middle + half)]
    return int(kept.min()), int(kept.max())


@kernel
def _longest_nondecreasing(cells):
    """Mask of one longest non-decreasing subsequence of ``cells`` (patience method, O(n log n))."""
    n = len(cells)
    tail_val = np.empty(n, np.int64)
    tail_idx = np.empty(n, np.int32)
    prev = np.empty(n, np.int32)
    length = 0
    for i in range(n):
        v = cells[i]
        lo, hi = 0, length
        while lo < hi:
            mid = (lo + hi) >> 1
            if tail_val[mid] <= v:
                lo = mid + 1
            else:
                hi = mid
        prev[i] = tail_idx[lo - 1] if lo > 0 else -1
        tail_val[lo] = v
        tail_idx[lo] = i
        if lo == length:
            length += 1
    keep = np.zeros(n, np.bool_)
    j = tail_idx[length - 1] if length > 0 else -1
    while j >= 0:
        keep[j] = True
        j = prev[j]
    return keep


@dataclass(frozen=True, eq=False)
class CellPlan:
    """What the replay needs to stream a file in canonical order on ``grid``."""

    grid: TimeGrid
    outside: int  # IP packets stamped outside the grid (dropped)
    held_pos: np.ndarray  # file positions (IP-packet index) of the out-of-place packets, canonical order
    held_cell: np.ndarray  # their cells
    held: KeyBatch | None  # their data, same order
    held_sorted: np.ndarray  # held_pos in increasing order (to skip them while streaming)


def plan(path, grid: TimeGrid, batch_size: int = 1 << 18) -> CellPlan:
    """The plan of ``path`` on ``grid``: one pass for the stamps, and ``plan_stamps``."""
    return plan_stamps(path, grid, read_stamps(path, batch_size)[1], batch_size)


def plan_stamps(path, grid: TimeGrid, ts: np.ndarray, batch_size: int = 1 << 18) -> CellPlan:
    """The plan from every IP packet's stamp in file order: stamps already in order are in
    canonical order (only those outside the grid are counted), others go through ``plan_cells``."""
    if len(ts) < 2 or bool(np.all(ts[1:] >= ts[:-1])):
        first, end = np.searchsorted(ts, [grid.start_ns, grid.end_ns])
        empty = np.zeros(0, np.int64)
        return CellPlan(grid, int(len(ts) - (end - first)), empty, empty, None, empty)
    return plan_cells(path, grid, grid.cell_of(ts), batch_size)


def plan_cells(path, grid: TimeGrid, cells: np.ndarray, batch_size: int = 1 << 18) -> CellPlan:
    """The plan from every IP packet's cell in file order (``grid.cell_of`` of its stamp); the
    file is read again only for the out-of-place packets, if there are any."""
    cells = cells.astype(np.int32, copy=False)
    inside = cells >= 0
    outside = int(len(cells) - np.count_nonzero(inside))
    in_cells = cells[inside]
    if len(in_cells) < 2 or bool(np.all(in_cells[1:] >= in_cells[:-1])):
        empty = np.zeros(0, np.int64)
        return CellPlan(grid, outside, empty, empty, None, empty)
    held_pos = np.flatnonzero(inside)[~_longest_nondecreasing(in_cells)]
    held_cell = cells[held_pos].astype(np.int64)
    order = np.lexsort((held_pos, held_cell))  # by cell, then file position
    held_pos, held_cell = held_pos[order], held_cell[order]
    held_sorted = np.sort(held_pos)
    held = _gather(path, held_sorted, batch_size).take(np.searchsorted(held_sorted, held_pos))
    return CellPlan(grid, outside, held_pos, held_cell, held, held_sorted)


def _gather(path, positions: np.ndarray, batch_size: int) -> KeyBatch:
    """The packets at the increasing file ``positions``."""
    pieces, base = [], 0
    with open_capture(path) as reader:
        for batch in reader.batches(batch_size):
            lo, hi = np.searchsorted(positions, [base, base + len(batch)])
            if hi > lo:
                pieces.append(batch.take(positions[lo:hi] - base))
            base += len(batch)
    return concat(pieces)


def canonical(batches: Iterable[KeyBatch], cell_plan: CellPlan) -> Iterator[KeyBatch]:
    """``batches`` (the whole file in file order) as cell-tagged batches in canonical order."""
    grid, held_pos, held_cell = cell_plan.grid, cell_plan.held_pos, cell_plan.held_cell
    h = 0  # next held packet to emit
    base = 0
    for batch in batches:
        n = len(batch)
        cells = grid.cell_of(batch.ts_ns)
        keep = cells >= 0
        lo, hi = np.searchsorted(cell_plan.held_sorted, [base, base + n])
        keep[cell_plan.held_sorted[lo:hi] - base] = False
        idx = np.flatnonzero(keep)
        if not len(idx):  # every packet of the batch outside the grid (or held back)
            base += n
            continue
        pos, run_cells = idx + base, cells[idx]
        cuts = np.flatnonzero(np.diff(run_cells)) + 1
        for a, b in zip(np.concatenate(([0], cuts)).tolist(), np.concatenate((cuts, [len(idx)])).tolist()):
            c = int(run_cells[a])
            while h < len(held_pos) and held_cell[h] < c:  # cells (or their rests) that were held back
                h, out = _held_cell(cell_plan, h)
                yield out
            j = h  # held packets of this cell that precede the run's end are merged in by position
            while j < len(held_pos) and held_cell[j] == c and held_pos[j] < pos[b - 1]:
                j += 1
            run = batch.take(idx[a:b], c)
            if j > h:
                order = np.argsort(np.concatenate((pos[a:b], held_pos[h:j])), kind="stable")
                run = concat([run, cell_plan.held.slice(h, j)]).take(order, c)
                h = j
            yield run
        base += n
    while h < len(held_pos):
        h, out = _held_cell(cell_plan, h)
        yield out


def by_cell(batch: KeyBatch, grid) -> Iterator[tuple[int, KeyBatch]]:
    """``batch`` (stamps in non-decreasing order) as runs of one cell each, tagged with it
    (``-1``: outside the grid, untagged)."""
    cells = grid.cell_of(batch.ts_ns)
    cuts = (np.flatnonzero(np.diff(cells)) + 1).tolist()
    for a, b in zip([0] + cuts, cuts + [len(cells)]):
        if b > a:
            c = int(cells[a])
            yield c, batch.take(slice(a, b), c if c >= 0 else None)


def _held_cell(cell_plan: CellPlan, h: int) -> tuple[int, KeyBatch]:
    """The held packets of cell ``held_cell[h]`` from ``h`` on, as one batch tagged with it."""
    cell, j = int(cell_plan.held_cell[h]), h
    while j < len(cell_plan.held_pos) and cell_plan.held_cell[j] == cell:
        j += 1
    return j, cell_plan.held.slice(h, j).take(slice(None), cell)
