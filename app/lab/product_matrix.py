"""The product conformance matrix (``dptop audit --product``): every surface a private figure
leaves by × every private algorithm × key kind × weight × neighbour kind × range path. For each
cell both neighbouring captures go through the product several times (the ``x`` side and the
``y`` side, fresh noise each run) and every field a user can read is compared: a field that is
constant within each side and different between the sides tells the two captures apart in
every run (infinite privacy loss), unless the private view names it as a public fact (the
record count, the file's span: then the cell says which fact, never "private").

Surfaces: ``publish`` (``replay --publish``, the ``/releases`` JSON and the window's export
all build ``publish.publish_json``), ``metrics`` (``/metrics``: ``feed.metric_families`` of the
same view), ``capture`` (``capture --publish``: a live capture's path, clocks.LiveClock on an
injected wall clock, without a socket), ``lines`` (the lines ``capture`` prints while it runs,
dptop.releaselines, on the same path), ``timing`` (a paced replay's release instants as a scraper
sees them, on a quantum of half an epoch's wall time), ``top`` (a key switch in ``dptop top``: the
budget after a second session over the same file) and ``seeded`` (a ``--seed`` run must say NOT
private on every surface).

Each finding of the review that made this matrix is a broken variant (``BROKEN``,
dptop.lab.matrix_broken) the matrix must report: the release on a later packet's arrival (``arrival-release``), the data-chosen stop
(``count-stop``), a new ledger per key switch (``ledger-per-session``), seeded metrics without
their marker (``seeded-metrics``), spans with the exact count (``exact-spans``), ``capture``'s
running log with them (``exact-lines``), a live continual algorithm whose output steps follow
the packet count instead of the public clock (``count-steps``) and ``--epoch-packets`` accepted on
a live capture (``count-epochs``; path ``count-epochs``: on the paced surfaces the product refuses
it, the same line on both sides).
"""
from __future__ import annotations

import fnmatch
import itertools
import multiprocessing
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from dptop.lab.matrix_broken import BROKEN
from dptop.lab.matrix_captures import NEIGHBOURS, neighbour_pair
from dptop.lab.matrix_cells import (COUNT_EPOCHS, KEYS, PACED, PATHS, STATEMENTS, SURFACES, WEIGHTS, Cell, Verdict,
                                    private_algorithms)
from dptop.lab.matrix_features import named_facts, split_fields
from dptop.lab.matrix_product import Product


CONFIRM = 3
"""A split seen in ``runs`` runs per side is checked again over ``CONFIRM`` times as many: a field
the capture decides stays constant within each side and different between them; a noisy one that
happened to agree within each side (an epoch's label set, three runs of a coin that lands the
same way 0.9 of the time) does not."""


def run_cell(cell: Cell, runs: int = 3, product: Product | None = None, seed: int | None = None,
             confirm: int = CONFIRM) -> Verdict:
    """``cell``'s verdict over ``runs`` runs per side (``confirm`` times as many where it splits)."""
    product = product or Product()
    t0 = time.perf_counter()
    seeded = cell.surface == "seeded"
    with tempfile.TemporaryDirectory(prefix="dptop-matrix-") as folder:
        x, y = neighbour_pair(Path(folder), cell.neighbour)
        xs: list[dict] = []
        ys: list[dict] = []
        try:
            for more in (runs, (confirm - 1) * runs):
                xs += [product.features(cell, x, 7 if seeded else seed) for _ in range(more)]
                ys += [product.features(cell, y, 7 if seeded else seed) for _ in range(more)]
                if cell.surface in STATEMENTS or not more or not split_fields(xs, ys) or named_facts(xs, ys):
                    break
        except Exception as exc:  # noqa: BLE001 - a cell that cannot run is reported, not hidden
            return Verdict(cell, runs, (), (), time.perf_counter() - t0, f"{type(exc).__name__}: {exc}")
    if cell.surface in STATEMENTS:  # what every run must state, whatever the neighbour
        fields = tuple(sorted({k for r in xs + ys for k, v in r.items() if v}))
        return Verdict(cell, len(xs), fields, (), time.perf_counter() - t0)
    return Verdict(cell, len(xs), split_fields(xs, ys), named_facts(xs, ys), time.perf_counter() - t0)


def cells(quick: bool = False):
    """The whole matrix, or the quick slice the default suite runs."""
    if quick:
        yield from dict.fromkeys([Cell("publish", "dpss"), Cell("metrics", "dpmg", neighbour="substituted"),
                                  Cell("timing", "lazyhh", neighbour="removed-start", path=COUNT_EPOCHS),
                                  *(cell for _, cell in BROKEN.values())])
        return
    for surface, algorithm, key, weight, neighbour, path in itertools.product(
            SURFACES, private_algorithms(), KEYS, WEIGHTS, NEIGHBOURS, PATHS):
        if algorithm.startswith("ldp-") and (key != "src" or weight != "packets"):
            continue  # local DP reports source addresses, one report per packet
        yield Cell(surface, algorithm, key, weight, neighbour, path)
    for surface, algorithm, neighbour in itertools.product(PACED, private_algorithms(), NEIGHBOURS):
        yield Cell(surface, algorithm, neighbour=neighbour, path=COUNT_EPOCHS)  # --epoch-packets: refused


def run_matrix(selected, runs: int = 3, product: Product | None = None, progress=print, jobs: int = 1) -> list[Verdict]:
    """Each cell's verdict, in order; ``jobs`` > 1: that many cells at once, each in a fresh process
    (a cell's sessions run threads, which a forked process would not own)."""
    selected = list(selected)
    if jobs > 1 and len(selected) > 1:
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            verdicts = pool.map(run_cell, selected, itertools.repeat(runs), itertools.repeat(product))
            return [_shown(v, progress) for v in verdicts]
    return [_shown(run_cell(cell, runs, product), progress) for cell in selected]


def _shown(verdict: Verdict, progress) -> Verdict:
    if progress:
        progress(verdict.row())
    return verdict


def picked(cell: Cell, only: str | None) -> bool:
    """``cell`` is selected by ``only``: its label contains it or matches it as a shell pattern."""
    return only is None or only in cell.label() or fnmatch.fnmatchcase(cell.label(), only)


def audit_product(quick: bool, runs: int = 3, only: str | None = None, jobs: int = 1) -> int:
    """``dptop audit --product``: the matrix's table (one row per cell), then each broken variant
    on its cell; exit 1 when a real cell shows a violation or a broken variant goes unreported.
    ``only``: the cells it picks (``picked``), and the broken variants on such a cell."""
    t0 = time.perf_counter()
    selected = [cell for cell in cells(quick) if picked(cell, only)]
    verdicts = run_matrix(selected, runs, progress=lambda row: print(row, flush=True), jobs=jobs)
    broken = {name: (variant, cell) for name, (variant, cell) in BROKEN.items() if picked(cell, only)}
    print("broken variants:")
    missed = []
    for name, (variant, cell) in broken.items():
        v = run_cell(cell, runs, variant())
        print(f"  {name:20s} {v.row()}  {'caught' if v.violation else 'NOT CAUGHT'}", flush=True)
        if not v.violation:
            missed.append(name)
    bad = [v for v in verdicts if v.violation]
    print(f"{len(verdicts)} cells x {runs} runs per side: {len(bad)} violation(s); broken variants caught "
          f"{len(broken) - len(missed)}/{len(broken)}; {time.perf_counter() - t0:.0f} s")
    return 1 if bad or missed else 0
