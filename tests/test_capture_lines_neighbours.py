"""``dptop capture``'s running log (dptop.releaselines) on neighbouring captures: the live path
without a socket (app/lab/matrix_product.py: clocks.LiveClock on an injected wall clock, every
epoch's close on time), two captures that differ by one packet. Every line a continual or
sliding-window algorithm prints must be the same on both sides but for its labels and private
estimates: the clock, the epoch, what the release covers and a public threshold; the packets seen
so far, their stamps or a threshold computed from that count would tell the captures apart."""
from __future__ import annotations

import io

import pytest

from dptop.lab.matrix_broken import BROKEN
from dptop.lab.matrix_captures import EPOCHS, neighbour_pair
from dptop.lab.matrix_cells import Cell
from dptop.lab.matrix_features import parse_line
from dptop.lab.matrix_product import Product


def printed(cell: Cell, path) -> list[tuple]:
    out = io.StringIO()
    Product().capture(cell, path, None, out)
    lines = [parse_line(line) for line in out.getvalue().splitlines()]
    assert lines and None not in lines, out.getvalue()
    return lines


@pytest.mark.parametrize("algorithm,neighbour", [("lazyhh", "removed-middle"), ("dpsw", "removed-middle"),
                                                 ("lazyhh", "added-start")])
def test_neighbouring_captures_print_the_same_lines_but_for_labels_and_estimates(tmp_path, algorithm, neighbour):
    cell = Cell("lines", algorithm, neighbour=neighbour)
    x, y = neighbour_pair(tmp_path, neighbour)
    xs, ys = printed(cell, x), printed(cell, y)
    public = [line[:4] for line in xs]  # clock, name, span, threshold: everything but the items
    assert public == [line[:4] for line in ys], (xs, ys)
    assert [line[1] for line in xs] == [algorithm] * EPOCHS  # one line per close of the 4 s range
    for i, (clock, name, where, threshold, _) in enumerate(xs):
        assert where.startswith(f"after epoch {i}, ")
        if algorithm == "dpsw":  # the declared window and its threshold (γ − 1/b)·w: parameters only
            assert where.endswith("the last 400 packets") and threshold is not None
        else:  # τ(t) follows the exact count: not printed
            assert "segment of at most" in where or "horizon" in where
            assert threshold is None


def test_the_old_lines_with_the_engines_spans_differ_between_the_captures(tmp_path):
    """The check can fail: lines with the engine's span (the exact count of packets seen, the
    variant ``exact-lines``) tell one packet removed in the middle apart."""
    variant, cell = BROKEN["exact-lines"]
    x, y = neighbour_pair(tmp_path, cell.neighbour)
    spans = []
    for path in (x, y):
        out = io.StringIO()
        variant().capture(cell, path, None, out)
        spans.append([parse_line(line)[2] for line in out.getvalue().splitlines()])
    assert spans[0] != spans[1], spans
