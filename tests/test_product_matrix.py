"""The product conformance matrix (app/lab/product_matrix.py and its matrix_* modules): its quick
slice shows no field that tells two neighbouring captures apart on any surface, except the open
findings named in ``OPEN`` (none now); the broken variants of the review's findings must be
reported on their cells. The whole matrix runs behind ``slow`` and in ``dptop audit --product``."""
from __future__ import annotations

import pytest

from dptop.lab.matrix_broken import BROKEN
from dptop.lab.matrix_cells import Cell
from dptop.lab.matrix_features import named_facts, split_fields
from dptop.lab.matrix_product import Product
from dptop.lab.product_matrix import CONFIRM, cells, run_cell, run_matrix

OPEN: dict = {}


@pytest.mark.parametrize("cell", [c for c in cells(quick=True) if c not in OPEN], ids=Cell.label)
def test_quick_slice_shows_no_violation(cell):
    verdict = run_cell(cell, runs=3)
    assert not verdict.violation, verdict.row()


@pytest.mark.slow
@pytest.mark.parametrize("cell", list(OPEN), ids=Cell.label)
@pytest.mark.xfail(strict=True, reason="open finding of the matrix (see OPEN)")
def test_open_findings_are_still_violations_until_fixed(cell):
    verdict = run_cell(cell, runs=2)
    assert not verdict.violation, verdict.row()


LIVE_LAZYHH = [Cell(surface, "lazyhh", neighbour=n) for surface in ("capture", "lines")
               for n in ("removed-middle", "removed-end", "added-end", "substituted")]
"""A live LazyHH steps on the public clock (docs/lazyhh.md §7.5): its releases, their instants
and their spans do not depend on one packet (removed-start runs in the quick slice, on the cell
of the ``count-steps`` variant)."""


@pytest.mark.slow
@pytest.mark.parametrize("cell", LIVE_LAZYHH, ids=Cell.label)
def test_a_live_lazyhh_releases_on_the_clock_whatever_one_packet(cell):
    verdict = run_cell(cell, runs=3)
    assert not verdict.violation, verdict.row()


CAUGHT = tuple(n for n in BROKEN if n != "count-stop")
"""Every variant is reported on its cell (``count-stop`` by its own test below, which names the
field); the fast ones run by default."""
SLOW = {"exact-spans", "arrival-release"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in CAUGHT])
def test_broken_variants_are_caught(name):
    variant, cell = BROKEN[name]
    verdict = run_cell(cell, runs=3, product=variant(), confirm=1)
    assert verdict.violation, verdict.row()


def test_a_stop_at_the_nth_packet_changes_how_many_releases_exist():
    """``count-stop``, deterministically: the N-th packet is the last of the second cell on one
    side and the first of the third on the other, so every run releases 2 epochs against 3."""
    variant, cell = BROKEN["count-stop"]
    verdict = run_cell(cell, runs=2, product=variant(), confirm=1)
    assert ".algorithms.dpss.releases length" in verdict.fields and verdict.violation, verdict.row()


class Scripted(Product):
    """A product whose ``noisy`` field agrees within each side for the first three runs only, and
    whose ``exact`` field is the side itself."""

    def __init__(self):
        self.calls = 0

    def features(self, cell, path, seed):
        self.calls += 1
        side = float(path.name == "x.pcap")
        return {"noisy": side if self.calls <= 6 else float(self.calls % 2), "exact": side}


def test_a_split_is_confirmed_over_more_runs_before_it_is_reported():
    cell = Cell("publish", "dpss")
    assert run_cell(cell, runs=3, product=Scripted(), confirm=1).fields == ("exact", "noisy")
    verdict = run_cell(cell, runs=3, product=Scripted())
    assert verdict.fields == ("exact",) and verdict.runs == 3 * CONFIRM and verdict.violation


def test_split_fields_and_named_facts():
    x = [{"a": 1.0, "b": 2.0, ".public_facts[0].name=time_range": 1.0, ".public_facts[0].value.start_s": 5.0}] * 2
    y = [{"a": 1.0, "b": 3.0, ".public_facts[0].name=time_range": 1.0, ".public_facts[0].value.start_s": 6.0}] * 2
    assert split_fields(x, y) == (".public_facts[0].value.start_s", "b")
    assert named_facts(x, y) == ("time_range",)
    noisy = [{"b": 2.0}, {"b": 3.0}]
    assert split_fields(noisy, [{"b": 4.0}, {"b": 5.0}]) == ()


@pytest.mark.slow
def test_the_whole_matrix():
    verdicts = run_matrix(cells(), runs=3, progress=None)
    bad = [v.row() for v in verdicts if v.violation and v.cell not in OPEN]
    assert not bad, "\n".join(bad)
