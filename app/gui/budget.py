"""Budget panel: the session's privacy ledger (dptop.monitor.ledger) — what each private algorithm
has spent per packet over the whole session and the sequential-composition total, per unit."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHeaderView, QLabel, QTableView, QVBoxLayout, QWidget

from dptop.gui.help import TIPS
from dptop.gui.models import BudgetModel, BudgetRow


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless one ("1 release", "30 releases")."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def budget_rows(ledger: dict | None) -> list[BudgetRow]:
    """The ledger (``dptop.monitor.ledger.Ledger.to_json``) -> one row per algorithm and unit,
    each unit's total last in its block."""
    if not ledger:
        return []
    rows = []
    for group in [ledger, *ledger.get("other_units", [])]:
        lines = group.get("algorithms", {})
        if not lines:
            continue
        for name, ln in lines.items():
            rows.append(BudgetRow(name, ln["scope"], ln["measure"], ln["epsilon"], ln["delta"], ln["rho"],
                                  ln["neighbouring"], f"{counted(ln['releases'], 'release')}, {counted(ln['segments'], 'run')}"))
        private = "" if group["private"] else " — NOT private (seeded)"
        rows.append(BudgetRow(f"Total per {group['unit']}{private}", "sequential composition",
                              group["measure"], group["epsilon"], group["delta"],
                              group["rho"], group["neighbouring"], "everything published so far"))
        if group.get("session"):
            rows.append(BudgetRow(f"Over the session, per {group['unit']}", group["session"]["composition"],
                                  group["measure"], group["session"]["epsilon"], group["session"]["delta"], None,
                                  group["neighbouring"], "a host present in every epoch released"))
    return rows


def composition_note(ledger: dict | None) -> str:
    if not ledger or not ledger.get("algorithms") and not ledger.get("other_units"):
        return "Nothing private published yet: nothing is spent."
    notes = [TIPS["composition"], *ledger.get("notes", [])]
    if ledger.get("other_units"):
        notes.append("Host-level and local-DP lanes also read the packets: their cost to one packet is in the "
                     "per-packet total; their own units (a host per epoch and over the session, one report) "
                     "are stated on their own lines.")
    return " ".join(notes)


def fitted_widths(wanted: list[int], room: int) -> list[int]:
    """Column widths within ``room`` px: each column its ``wanted`` width when they all fit, else
    the widest ones cut to one equal cap (the narrow columns stay whole); the last column takes what
    is left over."""
    if not wanted:
        return []
    cap, left = room, room
    for i, want in enumerate(sorted(wanted)):
        if want * (len(wanted) - i) > left:
            cap = left // (len(wanted) - i)
            break
        left -= want
    widths = [min(want, cap) for want in wanted]
    widths[-1] += max(0, room - sum(widths))
    return widths


class FittedTable(QTableView):
    """A table whose columns always fit its width (``fitted_widths``): no horizontal scrolling; a
    cut cell ends in "…" and its tooltip has the whole text (the model's)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setWordWrap(False)  # one line per cell: a wrapped line would be cut at the row's bottom
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.horizontalHeader().setStretchLastSection(False)
        self._stale = True  # the columns are to be fitted at the next paint

    def wanted_widths(self) -> list[int]:
        """Each column's width for its title and its widest cell on one line, as the style draws them."""
        header = self.horizontalHeader()
        return [max(self.sizeHintForColumn(c), header.sectionSizeHint(c)) for c in range(header.count())]

    def fit(self) -> None:
        """Columns fitted to the width, only while the table is in sight (a tab behind another is
        "visible" to Qt): out of sight, it is fitted at its next paint."""
        if not self.isVisible() or self.visibleRegion().isEmpty():
            self._stale = True
            return
        self._stale = False
        for c, width in enumerate(fitted_widths(self.wanted_widths(), self.viewport().width())):
            self.horizontalHeader().resizeSection(c, width)

    def resizeEvent(self, event):
        super().resizeEvent(event)
        self.fit()

    def paintEvent(self, event):
        if self._stale:
            self.fit()
        super().paintEvent(event)


class BudgetPanel(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.model = BudgetModel(self)
        self.table = FittedTable()
        self.table.setModel(self.model)
        self.table.verticalHeader().hide()
        self.model.modelReset.connect(self.table.fit)
        self.note = QLabel()
        self.note.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.note)
        self._key = None

    def update_from(self, ledger: dict | None) -> None:
        """Show the session's ledger (the same one the CLI's JSON and the export carry)."""
        if ledger == self._key:
            return
        self._key = ledger
        self.model.set_rows(budget_rows(ledger))
        self.note.setText(composition_note(ledger))
