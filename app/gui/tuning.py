"""Tuning panel: what-if sweeps (recall / precision / ARE versus ε, k~/k or w) on the last N
recorded packets, run by ``dptop.monitor.sweep`` on a background thread with a progress bar; the chosen
value can be applied to the live run. Beside it, the a-priori detection limit (the share of its span
a source needs to be released w.p. >= 0.9) over the same values, from the parameters alone."""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QComboBox, QFrame, QGridLayout, QHBoxLayout, QLabel, QLineEdit, QProgressBar, QPushButton,
                               QScrollArea, QSpinBox, QWidget)

from dptop.engine.core.facts import NO_FACTS, PublicFacts
from dptop.gui.elide import ElidedLabel
from dptop.gui.help import TIPS
from dptop.monitor import catalogue
from dptop.monitor.config import PER_ALGORITHM
from dptop.monitor.states import State
from dptop.monitor.sweep import DEFAULT_VALUES, PARAMETERS, Sweep, detection_limits, parse_values, settings_for


PLOT_MIN_HEIGHT = 150  # px: axes, their labels and a few grid lines readable
HEIGHT = PLOT_MIN_HEIGHT + 140  # the tab's height that shows the plots whole (the window makes room when shown)
METRIC_COLOURS = (("recall", (44, 160, 44)), ("precision", (31, 119, 180)), ("ARE", (214, 39, 40)))
CONTROLS_WIDTH = 330


def facts_of(session) -> PublicFacts:
    """The open session's public facts, or none while it starts: its source's facts are written
    during the start (the time range before its provenance), so the limits wait for a started one."""
    if session is None or session.state is State.STARTING:
        return NO_FACTS
    return session.public_facts()


LIMIT_TIP = ("A-priori detection limit: the smallest share of its epoch, horizon or window a source needs to be "
             "released with probability >= 0.9, from the parameters and public facts alone (no packet is read).")


class WrappedLines(QLabel):
    """A label wrapped in a fixed number of lines that never asks for height-for-width: the dock's
    scroll area would otherwise size the whole tab by the wrapped text (QLabel asks again at every
    setText) and scroll the plots' axes out of sight."""

    def __init__(self, lines: int, text: str = ""):
        super().__init__(text)
        self.setWordWrap(True)
        self.setFixedHeight(lines * self.fontMetrics().lineSpacing() + 4)

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt's name
        return False


class TuningPanel(QWidget):
    def __init__(self, window, parent=None):
        super().__init__(parent)
        self.main = window
        self.sweep: Sweep | None = None
        self.old: list[Sweep] = []
        self.algorithm = QComboBox()
        self.algorithm.addItems([e.name for e in catalogue.entries() if e.private])
        self.parameter = QComboBox()
        for key, label in PARAMETERS.items():
            self.parameter.addItem(label, key)
        self.values = QLineEdit(DEFAULT_VALUES["epsilon"])
        self.parameter.currentIndexChanged.connect(
            lambda i: self.values.setText(DEFAULT_VALUES[self.parameter.itemData(i)]))
        self.reps = QSpinBox()
        self.reps.setRange(1, 50)
        self.reps.setValue(3)
        self.reps.setPrefix("runs ")
        self.record = QSpinBox()
        self.record.setRange(1000, 1 << 24)
        self.record.setSingleStep(100_000)
        self.record.setValue(window.record_packets)
        self.record.setPrefix("last ")
        self.record.setSuffix(" packets")
        self.record.setToolTip(TIPS["record"] + " A larger recording takes effect at the next start.")
        self.record.valueChanged.connect(lambda v: setattr(window, "record_packets", v))
        self.run = QPushButton("Run sweep")
        self.stop = QPushButton("Cancel")
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.message = WrappedLines(3, "Sweeps compare fresh runs on the recorded packets with their exact counts; "
                                       "their results are for tuning and are not private.")
        self.choice = QComboBox()
        self.choice.setMinimumContentsLength(40)
        self.apply = QPushButton("Apply to live run")
        self.apply.setEnabled(False)

        self.plot = pg.PlotWidget()
        self.plot.showGrid(x=True, y=True, alpha=0.2)
        self.plot.setLabel("left", "recall · precision · ARE")
        self.plot.getAxis("bottom").enableAutoSIPrefix(False)  # ε values as typed, not "(x0.001)"
        self.curves = {m: self.plot.plot(name=m, pen=pg.mkPen(c, width=2), symbol="o", symbolBrush=c, connect="finite")
                       for m, c in METRIC_COLOURS}
        self.limits = pg.PlotWidget()
        self.limits.showGrid(x=True, y=True, alpha=0.2)
        self.limits.setLabel("left", "share needed (%)")
        self.limits.getAxis("bottom").enableAutoSIPrefix(False)
        self.limit_curve = self.limits.plot(pen=pg.mkPen((148, 103, 189), width=2), symbol="s",
                                            symbolBrush=(148, 103, 189))
        self.limit_note = ElidedLabel(3, wrap=True)  # wrapped; elided only where it cannot fit, whole in its tooltip

        # the controls in a column at the left, the two plots beside them: the plots keep the dock's height
        controls = QGridLayout()
        controls.setContentsMargins(0, 0, 0, 0)
        for r, cells in enumerate(((QLabel("Algorithm"), self.algorithm), (QLabel("Vary"), self.parameter),
                                   (QLabel("Values"), self.values), (self.reps, self.record), (self.run, self.stop),
                                   (self.progress,), (self.message,), (QLabel("Chosen value"),), (self.choice,),
                                   (self.apply,))):
            for c, w in enumerate(cells):
                controls.addWidget(w, r, c, 1, 2 if len(cells) == 1 else 1)
        controls.setRowStretch(10, 1)
        self.message.setMaximumWidth(CONTROLS_WIDTH)
        self.choice.setMinimumContentsLength(20)
        self.choice.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        for plot, what in ((self.plot, "recall / precision / ARE of fresh runs on the recorded packets"),
                           (self.limits, "a-priori detection limit")):
            plot.setMinimumHeight(PLOT_MIN_HEIGHT)
            plot.setToolTip(what)
            plot.setXRange(0, 1)
            plot.setYRange(0, 1)
            plot.enableAutoRange()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        left = QWidget()
        left.setLayout(controls)
        column = QScrollArea()  # the controls scroll in a short tab; the plots keep their height
        column.setWidgetResizable(True)
        column.setFrameShape(QFrame.Shape.NoFrame)
        column.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        column.setWidget(left)
        bar = column.verticalScrollBar().sizeHint().width()  # a short tab shows it: the controls keep their width beside it
        column.setMinimumWidth(left.minimumSizeHint().width() + bar)
        column.setMaximumWidth(max(CONTROLS_WIDTH, left.minimumSizeHint().width()) + bar)
        layout.addWidget(column)
        plots = QGridLayout()
        legend = QLabel("&nbsp;&nbsp;".join(f"<span style='color: rgb{c}'>■</span>&nbsp;{m}" for m, c in METRIC_COLOURS)
                        + " — fresh runs on the recorded packets (not private)")
        plots.addWidget(legend, 0, 0)  # beside the plot, never over its points
        plots.addWidget(self.plot, 1, 0)
        plots.addWidget(self.limits, 1, 1)
        plots.addWidget(self.limit_note, 2, 0, 1, 2)
        plots.setColumnStretch(0, 3)
        plots.setColumnStretch(1, 2)
        plots.setRowStretch(1, 1)
        layout.addLayout(plots, 1)
        self.run.clicked.connect(self.start)
        self.stop.clicked.connect(self.cancel)
        self.apply.clicked.connect(self.apply_choice)
        self.algorithm.currentIndexChanged.connect(self.show_limits)
        self.parameter.currentIndexChanged.connect(self.show_limits)
        self.values.editingFinished.connect(self.show_limits)
        self._shown = None
        self._facts = ()  # (session, public facts) the limits were last drawn for; () = never drawn

    def show_limits(self) -> None:
        """Plot the a-priori detection limit over the values typed, for the configured settings and
        the open source's public facts (a replay's packet count)."""
        name, parameter = self.algorithm.currentText(), self.parameter.currentData()
        session = self.main.session
        try:
            facts = facts_of(session)
            base = self.main.config.settings_for(name, facts)
            points = detection_limits(name, base, parameter, parse_values(self.values.text()), facts,
                                      self.main.config.counting.counted())
        except ValueError as exc:
            self.limit_curve.setData([], [])
            self.limit_note.set_plain(f"{name}: no a-priori limit yet — {exc}", LIMIT_TIP)
            return
        shown = [(v, 100 * lim.share) for v, lim in points if lim and lim.share is not None]
        self.limit_curve.setData([v for v, _ in shown], [y for _, y in shown])
        self.limits.setLabel("bottom", self.parameter.currentText())
        limits = [lim for _, lim in points if lim]
        if not limits:
            self.limit_note.set_plain(f"{name}: no a-priori limit is worked out for this algorithm", LIMIT_TIP)
            return
        over = next((lim.over for lim in limits if lim.over), "its span")
        text = f"{name}: a-priori detection limit, share of {over} (reads no packet: costs no privacy)"
        notes = [f"{v:g}: {lim.note}" for v, lim in sorted(points, key=lambda p: p[1] is None or
                                                            p[1].count is not None)
                 if lim and lim.note]  # a refused value's reason first
        rising = len(shown) > 1 and shown[-1][1] > shown[0][1] + 1e-9
        why = next((lim.why for lim in limits if lim.why), None) if rising else None
        self.limit_note.set_plain(text + (f" — {notes[0]}" if notes else "")
                                  + (f". It rises with {self.parameter.currentText()}: {why}" if why else ""), LIMIT_TIP)

    def start(self) -> bool:
        """Start a sweep on the recorded packets (the copy is taken here; the work runs on a thread)."""
        self.cancel()
        session = self.main.session
        try:
            if session is None:
                raise ValueError("no recorded packets yet: start a source first")
            values = parse_values(self.values.text())
            keys, ts = session.truth.recording(self.record.value())
            base = self.main.config.settings_for(self.algorithm.currentText())
            self.sweep = Sweep(self.algorithm.currentText(), base, self.parameter.currentData(), values, keys, ts,
                               self.reps.value(), self.main.config.counting.counted()).start()
        except ValueError as exc:
            self.message.setText(str(exc))
            return False
        self.message.setText(f"sweeping {len(values)} values × {self.reps.value()} runs on {len(keys):,} packets…")
        self.progress.setValue(0)
        self.choice.clear()  # the previous sweep's values are not this one's
        self.apply.setEnabled(False)
        return True

    def cancel(self) -> None:
        if self.sweep is not None:
            self.sweep.cancel()
            self.old.append(self.sweep)
            self.sweep = None

    def clear(self, why: str) -> None:
        """Forget the sweep and its curves (e.g. the source changed: its packets are gone)."""
        self.cancel()
        self._shown = None
        for curve in self.curves.values():
            curve.setData([], [])
        self.choice.clear()
        self.apply.setEnabled(False)
        self.progress.setValue(0)
        self.message.setText(why)

    def join(self, timeout: float) -> list[str]:
        import time

        deadline = time.monotonic() + timeout
        for sweep in self.old:
            sweep.thread.join(max(0.0, deadline - time.monotonic()))
        alive = [s.thread.name for s in self.old if s.thread.is_alive()]
        self.old = [s for s in self.old if s.thread.is_alive()]
        return alive

    def poll(self) -> None:
        """Called by the window's timer: show progress and the points computed so far, and the
        detection limits again once the open source's public facts are known."""
        session = self.main.session
        public = getattr(session, "public", None) or {}
        facts = None if session is None else (id(session), session.state is State.STARTING, tuple(sorted(public)))
        if facts != self._facts:
            self._facts = facts
            self.show_limits()
        if self.sweep is None:
            return
        points, progress, done, error = self.sweep.result()
        self.progress.setValue(int(1000 * progress))
        key = (len(points), done, error)
        if key == self._shown:
            return
        self._shown = key
        xs = [p.value for p in points]
        self.curves["recall"].setData(xs, [p.recall for p in points])
        self.curves["precision"].setData(xs, [p.precision for p in points])
        self.curves["ARE"].setData(xs, [p.are for p in points])
        self.plot.setLabel("bottom", self.parameter.currentText())
        if error:
            self.message.setText(f"sweep failed: {error}")
        elif done:
            self.message.setText(f"done: {len(points)} values; pick one and apply it to the live run")
            self.choice.clear()
            for p in points:
                self.choice.addItem(p.label(), p.value)
            self.apply.setEnabled(bool(points))

    def apply_choice(self) -> None:
        """Put the chosen value in the parameters and apply them: k~ and w for the swept
        algorithm alone (its options), ε for all; the ledger names the value the run uses."""
        if self.sweep is None or self.choice.currentIndex() < 0:
            return
        value, parameter, name = self.choice.currentData(), self.sweep.parameter, self.sweep.name
        applied = getattr(settings_for(self.sweep.base, parameter, value), parameter)
        # the choice read the recorded packets: the ledger of the run that uses it says so
        session = self.main.session
        if session is not None and session.state.active:
            session.tuned(name, parameter, applied)
        else:  # the source has ended: the value is for the next start on the same source
            self.main.pending_tuned.append((name, parameter, applied))
        params = self.main.params
        if parameter in PER_ALGORITHM:
            params.set_option(name, parameter, applied)
        else:
            params.set_value(parameter, applied)
        params.apply()
