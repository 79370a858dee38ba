"""Budget panel: what each private algorithm spends per packet and, since they all read the same
packets, the sequential-composition total (dptop.engine.privacy.composition), in (ε, δ) and ρ where zCDP."""
from __future__ import annotations

from PySide6.QtWidgets import QHeaderView, QLabel, QTableView, QVBoxLayout, QWidget

from dptop.gui.help import TIPS
from dptop.gui.models import BudgetModel, BudgetRow
from dptop.engine.privacy.composition import Cost, compose_sequential, group_privacy
from dptop.engine.core.release import NEIGHBOUR_ADD_REMOVE, NEIGHBOUR_SUBSTITUTE


def budget_rows(guarantees: dict) -> list[BudgetRow]:
    """``{name: Guarantee}`` of the private algorithms -> one row each plus the total."""
    rows = [BudgetRow(n, g.model, g.measure, g.epsilon, g.delta, g.rho, g.neighbouring, g.scope)
            for n, g in guarantees.items() if g is not None and g.packet_level]  # user-level: another unit
    if not rows:
        return []
    costs = [Cost(r.epsilon, r.delta or 0.0, r.rho) for r in rows]
    relations = {r.neighbouring for r in rows}
    relation = rows[0].neighbouring
    if len(relations) > 1:
        # mixed: state the total for substitution of one packet's source; an add/remove
        # guarantee covers a substitution (one removal + one addition) by group privacy (m = 2)
        costs = [group_privacy(c, 2) if r.neighbouring == NEIGHBOUR_ADD_REMOVE else c for c, r in zip(costs, rows)]
        relation = NEIGHBOUR_SUBSTITUTE
    total = compose_sequential(costs)
    rows.append(BudgetRow(f"Total ({len(rows)} private)", "sequential composition",
                          "approximate DP" if total.delta else "pure DP", total.epsilon, total.delta, total.rho,
                          relation, "the same packets, every algorithm"))
    return rows


def composition_note(rows: list[BudgetRow]) -> str:
    if not rows:
        return "No private algorithm enabled: nothing is private, nothing is spent."
    relations = {r.neighbouring for r in rows[:-1]}
    note = TIPS["composition"]
    if len(relations) > 1:
        note += (" The algorithms protect different neighbouring relations, so the total is stated for "
                 "substitution of one packet's source: an add/remove guarantee (ε, δ) counts there as "
                 "(2ε, 2e^ε·δ) by group privacy (a substitution is one removal plus one addition). "
                 "Packet presence (add/remove) is not protected by the total.")
    return note


class BudgetPanel(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.model = BudgetModel(self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.note = QLabel()
        self.note.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.note)
        self._key = None

    def update_from(self, guarantees: dict) -> None:
        key = tuple((n, g) for n, g in guarantees.items())
        if key == self._key:
            return
        self._key = key
        rows = budget_rows(guarantees)
        self.model.set_rows(rows)
        self.note.setText(composition_note(rows))
