"""The overview: one table of the keys some private algorithm releases right now (each panel's
shown release), in the manner of ntopng's top hosts: per algorithm its private estimate with the
mechanism's a-priori error (``status.detectable.error``, a public figure), and beside them the
exact count over the session so far, for the operator only (never exported). Activating a row
(double-click, Enter) opens that key's drill-down in the algorithm of the cell, or the first one
that released it. Each algorithm's column says the span its figures cover (one epoch, the last w
packets, the stream so far...), read from the span of the release it shows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QLabel, QTableView, QVBoxLayout, QWidget

from dptop.engine.core.release import Span
from dptop.gui.drilldown import compact_rows, filter_box
from dptop.gui.models import SORT_ROLE, RowsModel, sorting_proxy
from dptop.report import span_text

OVERVIEW_ROWS = 3  # rows the overview keeps room for when it has that many (the window may give it more)


@dataclass(frozen=True)
class Estimate:
    value: float
    error: float | None  # the a-priori error (None: not worked out for this algorithm)
    exact: int | None  # exact count over the release's own span (None: not known yet)

    def text(self) -> str:
        return f"{self.value:,.0f}" + ("" if self.error is None else f" ±{self.error:,.0f}")


@dataclass(frozen=True)
class OverviewRow:
    address: str
    estimates: tuple[Estimate | None, ...]  # one per algorithm column
    exact: int | None  # exact count over the session so far (not private)

    @property
    def best(self) -> float:
        return max((e.value for e in self.estimates if e is not None), default=0.0)


def span_label(span: Span | None, units: str) -> str:
    """What a column's figures cover, in a few words: ``one epoch of 10 s``, ``one epoch of 30,000
    packets``, ``the last 20,000 packets``, ``the stream so far``, ``horizon 2``, ``the whole stream``
    ('' before a release). The tooltip has the span itself (``report.span_text``)."""
    if span is None:
        return ""
    known = span.start is not None and span.end is not None  # a live lane's positions stay out of the view
    if span.kind == "epoch":
        if span.t_start is not None and span.t_end is not None:
            return f"one epoch of {span.t_end - span.t_start:g} s"
        return f"one epoch of {span.end - span.start:,} {units}" if known else "one epoch"
    if span.kind == "window":
        return f"the last {span.end - span.start:,} {units}" if known else "the current window"
    if span.kind == "prefix":
        return "the stream so far"
    if span.kind == "horizon":
        return f"horizon {span.index}"
    if span.kind == "stream":
        return "the whole stream"
    return span.kind


def overview_rows(shown: dict, exact: dict[str, int]) -> tuple[tuple[str, ...], list[OverviewRow]]:
    """(algorithm columns, rows) from ``shown``: name -> (release, its true counts or None, a-priori
    error or None) of each private panel, and ``exact``: address -> exact count over the session.
    Rows are the keys of any release, heaviest estimate first."""
    names = tuple(shown)
    table: dict[str, list[Estimate | None]] = {}
    for i, name in enumerate(names):
        release, counts, error = shown[name]
        if release is None:
            continue
        for j, item in enumerate(release.items):
            cells = table.setdefault(item.address, [None] * len(names))
            true = None if counts is None or len(counts) != len(release.items) else int(counts[j])
            cells[i] = Estimate(float(item.estimate), error, true)
    rows = [OverviewRow(a, tuple(cells), exact.get(a)) for a, cells in table.items()]
    rows.sort(key=lambda r: (-r.best, r.address))
    return names, rows


class OverviewModel(RowsModel):
    """Key, one column per private algorithm (estimate ± a-priori error), the exact count."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.names: tuple[str, ...] = ()
        self.spans: tuple[Span | None, ...] = ()  # per algorithm column, the span of the release it shows
        self.units = "packets"
        self.key_title = "Source"

    @property
    def HEADERS(self):  # noqa: N802 - the base class's name
        labels = (span_label(s, self.units) for s in self.spans)
        return (self.key_title, *(f"{n}: {label}" if label else n for n, label in zip(self.names, labels)),
                "Exact (not private)")

    @property
    def TOOLTIPS(self):  # noqa: N802
        return ("The key as released by at least one private algorithm",
                *(f"{n}: private estimate over {span_text(s, self.units) if s else 'its span'} ± its a-priori "
                  f"error (the error at its detection limit, from the parameters alone); a cell's tooltip has "
                  f"the exact count over the same span" for n, s in zip(self.names, self.spans)),
                "Exact count over the session so far: NOT private, for the operator; never exported")

    def set_rows(self, names: tuple[str, ...], rows: list[OverviewRow], key_title: str,
                 spans: tuple[Span | None, ...] = (), units: str = "packets") -> None:
        spans = spans or (None,) * len(names)
        if (names, spans, units, key_title) == (self.names, self.spans, self.units, self.key_title) and rows == self._rows:
            return
        self.beginResetModel()
        self.names, self._rows, self.key_title, self.spans, self.units = names, list(rows), key_title, spans, units
        self.endResetModel()

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        row, col = self._rows[index.row()], index.column()
        last = len(self.names) + 1
        est = row.estimates[col - 1] if 0 < col < last else None
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return row.address
            if col == last:
                return "…" if row.exact is None else f"{row.exact:,}"
            return "—" if est is None else est.text()
        if role == SORT_ROLE:
            if col == 0:
                return row.address
            value = row.exact if col == last else None if est is None else est.value
            return -math.inf if value is None else value
        if role == Qt.ItemDataRole.TextAlignmentRole and col != 0:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole and est is not None:
            exact = "not known yet" if est.exact is None else f"{est.exact:,} (not private)"
            return f"{self.names[col - 1]}: {est.value:,.1f}; exact over the same span: {exact}"
        return None


class OverviewPanel(QWidget):
    """The overview table; ``drill_requested`` carries (algorithm, key, exact count over its span)."""

    drill_requested = Signal(str, str, object)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.model = OverviewModel(self)
        self.proxy = sorting_proxy(self.model, self)
        self.proxy.setSortCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.table = QTableView()
        self.table.setObjectName("overview")
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(1, Qt.SortOrder.DescendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().hide()
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        compact_rows(self.table, 1)  # the window sets its height from its rows (``height_for``)
        self.table.activated.connect(self.drill)
        self.title = QLabel("<b>Who is talking</b> — keys released privately now, by any algorithm "
                            "(double-click or Enter: drill down)")
        self.title.setToolTip(__doc__.split("\n\n")[0].replace("\n", " "))
        self.filter = filter_box(self.proxy, 0)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 2)
        layout.setSpacing(2)
        layout.addWidget(self.title)
        layout.addWidget(self.filter)
        layout.addWidget(self.table, 1)

    def height_for(self, rows: int) -> int:
        """The panel's height that shows ``rows`` table rows whole under its title, filter and header."""
        layout, table = self.layout(), self.table
        margins = layout.contentsMargins()
        return (margins.top() + margins.bottom() + 2 * layout.spacing() + self.title.sizeHint().height()
                + self.filter.sizeHint().height() + table.horizontalHeader().sizeHint().height()
                + rows * table.verticalHeader().defaultSectionSize() + 2 * table.frameWidth())

    def show_rows(self, shown: dict, exact: dict[str, int], key_title: str, units: str = "packets") -> None:
        """``shown``: name -> (release or None, its true counts or None, a-priori error or None)."""
        names, rows = overview_rows(shown, exact)
        spans = tuple(None if release is None else release.span for release, _, _ in shown.values())
        self.model.set_rows(names, rows, key_title, spans, units)

    def drill(self, index) -> None:
        """Drill down on the row of ``index`` (a proxy index), in its column's algorithm if it has one."""
        src = self.proxy.mapToSource(index)
        row = self.model.rows()[src.row()]
        col = src.column()
        cells = list(enumerate(row.estimates))
        if 0 < col <= len(row.estimates) and row.estimates[col - 1] is not None:
            cells = [(col - 1, row.estimates[col - 1])]
        i, est = next((c for c in cells if c[1] is not None), (None, None))
        if est is not None:
            self.drill_requested.emit(self.model.names[i], row.address, est.exact)
