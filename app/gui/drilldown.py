"""What the window adds to its panels for an operator's questions: what a packet counts for (key
and weight pickers), a filter over each table, rows one line tall, and a drill-down on one key.

The drill-down (double-click on a row) plots that key's private estimates over the session's
published releases of that algorithm, with the mechanism's a-priori error as the error bar
(``status.detectable.error``: a public figure, the same for every key), the exact count and
share beside it (non-private, for the operator), and the guarantee that covers the releases.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRegularExpression, Signal
from PySide6.QtWidgets import (QComboBox, QDialog, QFormLayout, QHBoxLayout, QHeaderView, QLabel, QLineEdit,
                               QTableView, QVBoxLayout, QWidget)

from dptop.engine.core.keykinds import KeyKind
from dptop.engine.core.status import NO_STATUS, AlgorithmStatus
from dptop.monitor.config import CountingChoice

ESTIMATE_BRUSH, TRUTH_BRUSH = (52, 120, 220), (150, 150, 150, 170)
ROW_PADDING = 6  # px above and below a table row's text, together


class CountingPicker(QWidget):
    """Key kind and weight pickers; ``changed`` carries the new ``CountingChoice``."""

    changed = Signal(object)

    def __init__(self, counting: CountingChoice, parent=None):
        super().__init__(parent)
        self.key, self.weight = QComboBox(), QComboBox()
        for kind in KeyKind:
            self.key.addItem(f"{kind.value} — {kind.label}", kind.value)
        self.weight.addItem("packets", "packets")
        self.weight.addItem("bytes", "bytes")
        for box in (self.key, self.weight):  # the dock stays narrow; the open list shows the whole text
            box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            box.setMinimumContentsLength(12)
        self.key.setToolTip("What a packet counts for: every algorithm counts this key (Apply restarts the run)")
        self.weight.setToolTip("Count packets, or bytes in units of 64 bytes, at most 24 units a packet (its "
                               "guarantee is that of 24 units by group privacy)")
        self.unit, self.cap = counting.unit, counting.cap
        self.set_counting(counting)
        form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Key", self.key)
        form.addRow("Weight", self.weight)
        self.key.currentIndexChanged.connect(self._emit)
        self.weight.currentIndexChanged.connect(self._emit)

    def set_counting(self, counting: CountingChoice) -> None:
        for box, value in ((self.key, counting.key), (self.weight, counting.weight)):
            box.blockSignals(True)
            box.setCurrentIndex(max(0, box.findData(value)))
            box.blockSignals(False)

    def counting(self) -> CountingChoice:
        return CountingChoice(self.key.currentData(), self.weight.currentData(), self.unit, self.cap)

    def _emit(self, *_) -> None:
        self.changed.emit(self.counting())


def compact_rows(table: QTableView, rows: int) -> None:
    """Rows of ``table`` one text line tall (the style's default is about twice that), and the
    table at least tall enough to show ``rows`` of them under its header."""
    height = table.fontMetrics().height() + ROW_PADDING
    lines = table.verticalHeader()
    lines.setMinimumSectionSize(height)
    lines.setDefaultSectionSize(height)
    lines.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
    table.setMinimumHeight(table.horizontalHeader().sizeHint().height() + rows * height + 2 * table.frameWidth())


def filter_box(proxy, column: int = 1) -> QLineEdit:
    """A filter line over ``proxy``'s ``column`` (the key): rows whose label contains the text
    (an address, a prefix such as ``10.1.``, a port), case-insensitive."""
    box = QLineEdit()
    box.setPlaceholderText("filter: address, prefix or port")
    box.setClearButtonEnabled(True)
    proxy.setFilterKeyColumn(column)

    def apply(text: str) -> None:
        pattern = QRegularExpression(QRegularExpression.escape(text.strip()),
                                     QRegularExpression.PatternOption.CaseInsensitiveOption)
        proxy.setFilterRegularExpression(pattern)

    box.textChanged.connect(apply)
    return box


KEY_TITLES = {"src": "Source", "dst": "Destination", "dport": "Port", "proto": "Protocol", "pair": "Source → dest.",
              "src/24": "Source net", "src/16": "Source net", "dst/24": "Dest. net", "dst/16": "Dest. net"}


def key_title(key: str) -> str:
    """The key column's title for a key kind's value ("Source", "Port", ...; the kind's label in
    full is the column's tooltip and in the guarantee)."""
    return KEY_TITLES[KeyKind(key).value]


@dataclass(frozen=True)
class KeyHistory:
    """One key across an algorithm's releases: release index, span end time (s, None if
    unknown) and estimate (NaN where the key was not released)."""

    index: np.ndarray
    t_end: list
    estimate: np.ndarray

    @property
    def released(self) -> int:
        return int(np.count_nonzero(~np.isnan(self.estimate)))


def key_history(releases, label: str) -> KeyHistory:
    """``label``'s estimates in ``releases`` (oldest first); a release without it gives NaN."""
    est = [next((it.estimate for it in r.items if it.address == label), np.nan) for r in releases]
    return KeyHistory(np.arange(len(releases), dtype=float), [r.span.t_end for r in releases],
                      np.asarray(est, dtype=float))


class DrillDown(QDialog):
    """A key's private estimates over the session's releases of one algorithm."""

    def __init__(self, name: str, label: str, releases, status: AlgorithmStatus, guarantee, exact: int | None,
                 exact_total: int | None, kind: KeyKind, parent=None):
        super().__init__(parent)
        self.setWindowTitle(f"{label} — {name}")
        self.setObjectName("drilldown")
        self.history = key_history(releases, label)
        self.error = None if status.detectable is None else status.detectable.error
        self.plot = pg.PlotWidget()
        self.plot.addLegend(offset=(6, 6))
        self.plot.setLabel("bottom", "release (oldest first)")
        self.plot.setLabel("left", "private estimate")
        self.plot.showGrid(x=True, y=True, alpha=0.2)
        h = self.history
        shown = ~np.isnan(h.estimate)
        self.plot.plot(h.index[shown], h.estimate[shown], pen=pg.mkPen(ESTIMATE_BRUSH, width=2), symbol="o",
                       symbolBrush=pg.mkBrush(*ESTIMATE_BRUSH), name=f"{label} (private)")
        if self.error is not None and shown.any():
            bars = pg.ErrorBarItem(x=h.index[shown], y=h.estimate[shown], height=2 * self.error, beam=0.2,
                                   pen=pg.mkPen(ESTIMATE_BRUSH))
            self.plot.addItem(bars)
            self.plot.plot([], [], pen=pg.mkPen(ESTIMATE_BRUSH), name=f"± a-priori error {self.error:,.0f}")
        facts = QFormLayout()
        facts.addRow("Key", QLabel(f"{label} ({kind.label})"))
        facts.addRow("Released in", QLabel(f"{h.released} of {len(h.estimate)} releases"))
        last = h.estimate[shown][-1] if shown.any() else None
        facts.addRow("Latest estimate", QLabel("not in the latest releases" if last is None else f"{last:,.0f}"))
        if exact is not None:
            share = f" ({exact / exact_total:.1%} of the span's packets)" if exact_total else ""
            facts.addRow("Exact count (not private)", QLabel(f"{exact:,}{share}"))
        text = "non-private" if guarantee is None else guarantee.describe()
        g = QLabel(text)
        g.setWordWrap(True)
        facts.addRow("Guarantee", g)
        layout = QVBoxLayout(self)
        layout.addWidget(self.plot, 1)
        row = QHBoxLayout()
        row.addLayout(facts)
        layout.addLayout(row)
        self.resize(720, 480)


def open_drilldown(window, name: str, label: str, exact: int | None):
    """The drill-down of ``label`` in ``name``'s panel of ``window`` (a MainWindow); None without a session."""
    session = window.session
    if session is None or name not in session.lanes:
        return None
    lane = session.lanes[name]
    snap = lane.snapshot()
    truth = session.truth.result(name)
    total = truth.packets if truth is not None and exact is not None else None
    dialog = DrillDown(name, label, session.releases(name), NO_STATUS if snap is None else snap.status,
                       None if snap is None else snap.guarantee, exact, total, session.config.counting.kind, window)
    dialog.show()
    window.drilldowns.append(dialog)
    return dialog
