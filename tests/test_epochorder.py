"""Capture files read on a public time grid (capture/epochorder.py): the canonical order (cells in
order, file order inside a cell) against a brute-force stable sort, on shuffled, re-stamped and
far-ahead packets, and neighbouring files that differ in one packet."""
import numpy as np
import pytest

from dptop.capture.epochorder import canonical, plan, time_range
from dptop.capture.pcap import open_capture
from dptop.capture.synth import write_pcap
from dptop.engine.core.clock import TimeGrid, parse_time_range
from dptop.engine.core.keys import addresses_from_keys

T0 = 1_700_000_000 * 10**9


def _write(tmp_path, ts_us, name="x.pcap"):
    path = tmp_path / name
    src = (0x0A00_0000 + np.arange(len(ts_us))).astype(np.uint32)  # packet i comes from 10.0.x.y = i
    write_pcap(path, src, T0 + np.asarray(ts_us, dtype=np.int64) * 1000)
    return path


def _read(path, grid, batch_size=7):
    p = plan(path, grid)
    with open_capture(path) as reader:
        out = [(b.epoch, addresses_from_keys(b.keys)) for b in canonical(reader.batches(batch_size), p)]
    return out, p


def _expected(ts_us, grid):
    cells = grid.cell_of(T0 + np.asarray(ts_us, dtype=np.int64) * 1000)
    order = [i for i in np.argsort(cells, kind="stable") if cells[i] >= 0]
    return [(int(cells[i]), f"10.0.{i >> 8}.{i & 255}") for i in order]


def _flatten(out):
    return [(e, a) for e, addrs in out for a in addrs]


@pytest.mark.parametrize("seed", range(6))
def test_canonical_order_is_the_stable_sort_by_cell(tmp_path, seed):
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.integers(0, 10_000_000, 300))  # 10 s of packets, in order
    swap = rng.choice(len(ts), 12, replace=False)
    ts[swap] = rng.integers(-2_000_000, 12_000_000, 12)  # out of order, some outside the range
    grid = TimeGrid.over(T0, T0 + 10 * 10**9, 1.0)
    out, p = _read(_write(tmp_path, ts), grid)
    assert _flatten(out) == _expected(ts, grid)
    assert p.outside == int(np.count_nonzero((ts < 0) | (ts >= 10_000_000)))
    assert all(len(addrs) for _, addrs in out)
    epochs = [e for e, _ in out]
    assert epochs == sorted(epochs), "cells arrive in order"


def test_neighbours_differ_only_in_the_changed_packet(tmp_path):
    """One packet stamped a year ahead, or an hour early, or removed: every other packet keeps its
    cell and its place in the order."""
    ts = np.arange(0, 5_000_000, 10_000)  # 500 packets over 5 s
    grid = TimeGrid.over(T0, T0 + 5 * 10**9, 1.0)
    base = _flatten(_read(_write(tmp_path, ts, "a.pcap"), grid)[0])
    for i, new in ((250, 365 * 86400 * 10**6), (300, -3600 * 10**6), (10, 4_999_999), (400, 0)):
        moved = ts.copy()
        moved[i] = new
        got = _flatten(_read(_write(tmp_path, moved, "b.pcap"), grid)[0])
        who = f"10.0.{i >> 8}.{i & 255}"
        assert [x for x in got if x[1] != who] == [x for x in base if x[1] != who]


def test_time_range_and_parse():
    assert parse_time_range("1700000000:1700000060") == (T0, T0 + 60 * 10**9)
    assert parse_time_range("2023-11-14T22:13:20Z/2023-11-14T22:14:20Z") == (T0, T0 + 60 * 10**9)
    for bad in ("5:3", "x:y", "1:2:3"):
        with pytest.raises(ValueError, match="time|range"):
            parse_time_range(bad)


def test_file_time_range(tmp_path):
    assert time_range(_write(tmp_path, [5, 3, 9_000_000, 7])) == (T0 + 3000, T0 + 9_000_000_000)


def test_a_batch_wholly_outside_the_grid_is_skipped(tmp_path):
    """A run of packets stamped outside the public range fills whole batches: they are dropped and
    counted, the packets after them still come out (found by tests/test_parameter_table.py)."""
    ts_us = [10_000_000 + i for i in range(20)] + list(range(10))  # 20 far ahead, then 10 inside
    path = _write(tmp_path, ts_us)
    grid = TimeGrid(T0, 1_000_000, 4)  # 4 ms: only the last 10 packets
    out, p = _read(path, grid, batch_size=7)
    assert _flatten(out) == _expected(ts_us, grid) and len(_flatten(out)) == 10
