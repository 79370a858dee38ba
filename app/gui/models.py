"""Table models (``QAbstractTableModel``) for the released items and the privacy budget.

``ReleaseTableModel`` holds the rows of one release: rank, address, estimate (private or exact)
and the true count over the same span. Sorting goes through a ``QSortFilterProxyModel`` on
``SORT_ROLE`` (numbers, not strings). ``frozen`` keeps the rows as they are while new releases
arrive (Space in the window), so a user can read, sort and scroll without rows jumping.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt

from dptop.gui.help import TIPS

SORT_ROLE = Qt.ItemDataRole.UserRole + 1


@dataclass(frozen=True)
class Row:
    rank: int
    address: str
    estimate: float
    true: int | None  # exact count over the release's span (None: not known yet)

    @property
    def error(self) -> float | None:
        return None if self.true is None else self.estimate - self.true


def rows_of(release, true_counts) -> list[Row]:
    """The rows a panel shows: only the release's own items (never other labels)."""
    if release is None:
        return []
    counts = list(true_counts) if true_counts is not None and len(true_counts) == len(release.items) else None
    return [Row(i + 1, it.address, float(it.estimate), None if counts is None else int(counts[i]))
            for i, it in enumerate(release.items)]


def utility_values(truth) -> dict[str, float]:
    """Recall, precision and ARE of a ``TruthResult``; NaN where the metric has nothing to
    measure: recall without a true heavy hitter, precision without a released source, ARE
    without a released source that sent a packet (shown as "—" and as a gap in the plot)."""
    u = truth.utility
    nan = float("nan")
    return {"recall": u.recall if u.true_heavy else nan,
            "precision": u.precision if u.reported else nan,
            "are": u.are if any(c > 0 for c in truth.counts) else nan}


def fmt_rate(x: float | None) -> str:
    """A packet rate for a label ("—" when unknown)."""
    if x is None:
        return "—"
    return f"{x / 1e6:.2f} M/s" if x >= 1e5 else f"{x / 1e3:.1f} k/s" if x >= 100 else f"{x:.0f} /s"


def _num(value: float | None, integer: bool = False) -> str:
    if value is None:
        return "…"
    if integer or float(value).is_integer():
        return f"{int(round(value)):,}"
    return f"{value:,.1f}"


class RowsModel(QAbstractTableModel):
    """A read-only table of frozen row objects with fixed ``HEADERS`` and ``TOOLTIPS``."""

    HEADERS: tuple[str, ...] = ()
    TOOLTIPS: tuple[str, ...] = ()

    def __init__(self, parent=None):
        super().__init__(parent)
        self._rows: list = []

    def rows(self) -> list:
        return list(self._rows)

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.HEADERS)

    def header(self, section: int) -> str:
        return self.HEADERS[section]

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation != Qt.Orientation.Horizontal or not 0 <= section < len(self.HEADERS):
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return self.header(section)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self.TOOLTIPS[section] or None
        return None


class ReleaseTableModel(RowsModel):
    HEADERS = ("#", "Source", "Estimate", "True count", "Error")
    TOOLTIPS = ("Rank in the release (by estimate, ties by address)",
                "Source address (or network) as released",
                TIPS["estimate"], TIPS["true count"], "Estimate minus true count")

    def __init__(self, private: bool = True, parent=None):
        super().__init__(parent)
        self.private = private
        self.frozen = False
        self._pending: list[Row] | None = None
        self.key_title = "Source"

    def set_key_title(self, title: str) -> None:
        """The key column's title (the key kind: "Source", "Destination port", ...)."""
        if title != self.key_title:
            self.key_title = title
            self.headerDataChanged.emit(Qt.Orientation.Horizontal, 1, 1)

    # ----- feeding -----------------------------------------------------------------------
    def set_rows(self, rows: list[Row]) -> bool:
        """Show ``rows`` (or keep them for later while frozen). Returns True if the view changed."""
        if self.frozen:
            self._pending = rows
            return False
        self._pending = None
        if rows == self._rows:
            return False
        if len(rows) == len(self._rows):
            self._rows = rows
            if rows:
                self.dataChanged.emit(self.index(0, 0), self.index(len(rows) - 1, len(self.HEADERS) - 1))
            return True
        self.beginResetModel()
        self._rows = rows
        self.endResetModel()
        return True

    def set_frozen(self, frozen: bool) -> None:
        self.frozen = frozen
        if not frozen and self._pending is not None:
            self.set_rows(self._pending)

    def header(self, section: int) -> str:
        if section == 2:
            return "DP estimate" if self.private else "Estimate"
        return self.key_title if section == 1 else self.HEADERS[section]

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        row, col = self._rows[index.row()], index.column()
        values = (row.rank, row.address, row.estimate, row.true, row.error)
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return str(row.rank)
            if col == 1:
                return row.address
            return _num(values[col], integer=col == 3)
        if role == SORT_ROLE:
            v = values[col]
            if v is None:
                return -math.inf
            return v
        if role == Qt.ItemDataRole.TextAlignmentRole and col != 1:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole and col == 1:
            return row.address  # the column may elide a long key
        if role == Qt.ItemDataRole.ToolTipRole and col == 4 and row.true:
            return f"relative error {abs(row.error) / row.true:.1%}"
        return None


def sorting_proxy(model, parent=None) -> QSortFilterProxyModel:
    proxy = QSortFilterProxyModel(parent)
    proxy.setSourceModel(model)
    proxy.setSortRole(SORT_ROLE)
    return proxy


@dataclass(frozen=True)
class BudgetRow:
    name: str
    model: str
    measure: str
    epsilon: float
    delta: float | None
    rho: float | None
    neighbouring: str
    scope: str


class BudgetModel(RowsModel):
    """One row per private algorithm plus the sequential-composition total (last row)."""

    HEADERS = ("Algorithm", "Model", "Measure", "ε", "δ", "ρ", "Neighbouring", "Scope")
    TOOLTIPS = ("", TIPS["model"], TIPS["measure"], TIPS["epsilon"], TIPS["delta"], TIPS["rho"],
                TIPS["neighbouring"], TIPS["scope"])

    def set_rows(self, rows: list[BudgetRow]) -> None:
        if rows == self._rows:
            return
        self.beginResetModel()
        self._rows = list(rows)
        self.endResetModel()

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        r = self._rows[index.row()]
        values = (r.name, r.model, r.measure, r.epsilon, r.delta, r.rho, r.neighbouring, r.scope)
        v = values[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            if v is None:
                return "—"
            return f"{v:.4g}" if isinstance(v, float) else str(v)
        if role == Qt.ItemDataRole.FontRole and index.row() == len(self._rows) - 1 and r.name.startswith("Total"):
            from PySide6.QtGui import QFont

            font = QFont()
            font.setBold(True)
            return font
        if role == Qt.ItemDataRole.ToolTipRole and isinstance(v, str):  # the whole text, which a narrow column cuts
            return v
        return None
