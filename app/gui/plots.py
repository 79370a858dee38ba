"""Time plots redrawn with ``setData`` on preallocated ring buffers (pyqtgraph's pattern):
throughput (rate while busy per algorithm, with its packets/s and busy share beside the plot;
capture packets/s; drops) and utility over time (recall / precision / ARE of each private
algorithm against the exact answer; gaps where a metric has nothing to measure)."""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFontMetrics, QTextDocument
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from dptop.gui.elide import ElidedLabel
from dptop.gui.help import TIPS
from dptop.gui.models import fmt_rate, utility_values
from dptop.monitor import catalogue
from dptop.monitor.explain import drops_of

HISTORY = 600  # points kept per curve
TABLE_MARGIN = 6  # px beside the throughput table's widest figures
AXIS_TITLES = {"left": ("rate while busy", "busy rate"), "right": ("capture packets/s", "capture pkt/s", "pkt/s")}
"""The throughput plot's side axes' titles, longest first: the plot shows the longest that fits its
height, none when it is shorter still (the tooltip says what the axes are)."""


class RingBuffer:
    """Fixed-size (x, y) history; ``view()`` returns the points in order without reallocating
    on append."""

    def __init__(self, capacity: int = HISTORY):
        self.x = np.zeros(2 * capacity)
        self.y = np.zeros(2 * capacity)
        self.capacity = capacity
        self.n = 0  # points held
        self.start = 0

    def append(self, x: float, y: float) -> None:
        end = self.start + self.n
        if end == len(self.x):  # slide the window back to the front (once every `capacity` appends)
            self.x[:self.n] = self.x[self.start:end]
            self.y[:self.n] = self.y[self.start:end]
            self.start, end = 0, self.n
        self.x[end], self.y[end] = x, y
        if self.n < self.capacity:
            self.n += 1
        else:
            self.start += 1

    def view(self) -> tuple[np.ndarray, np.ndarray]:
        return self.x[self.start:self.start + self.n], self.y[self.start:self.start + self.n]


PALETTE = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75),
           (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207), (57, 59, 121), (99, 121, 57),
           (140, 109, 49), (132, 60, 57), (123, 65, 115)]


def color(name: str):
    """An algorithm's colour, the same in every plot and every run: by its place in the catalogue."""
    names = catalogue.names()
    return PALETTE[(names.index(name) if name in names else len(names)) % len(PALETTE)]


class _Curves:
    """Named curves on one plot, each with its ring buffer."""

    def __init__(self, plot: pg.PlotItem):
        self.plot = plot
        self.curves: dict[str, tuple[pg.PlotDataItem, RingBuffer]] = {}

    def add(self, name: str, x: float, y: float, **pen) -> None:
        if name not in self.curves:
            item = self.plot.plot(name=name, pen=pg.mkPen(pen.pop("color", color(name)), width=2, **pen))
            self.curves[name] = (item, RingBuffer())
        self.curves[name][1].append(x, y)

    def redraw(self) -> None:
        for item, buf in self.curves.values():
            item.setData(*buf.view())

    def clear(self) -> None:
        for item, _ in self.curves.values():
            self.plot.removeItem(item)
        self.curves.clear()


class SparseLogAxis(pg.AxisItem):
    """A log axis that labels only 1, 2 and 5 times a power of ten (the minor 3, 4, 6... labels of
    pyqtgraph's log axis overlap on a plot a few decades tall)."""

    def logTickStrings(self, values, scale, spacing):
        strings = super().logTickStrings(values, scale, spacing)
        keep = [round(10 ** (v % 1), 6) in (1.0, 2.0, 5.0) for v in values]
        return [text if k else "" for text, k in zip(strings, keep)]


EWMA_WEIGHT = 0.3
"""Weight of the newest one-second sample in the smoothed throughput figures (EWMA)."""


class Ewma:
    """Exponentially weighted moving average: ``value += weight · (x − value)``."""

    def __init__(self, weight: float = EWMA_WEIGHT):
        self.weight, self.value = weight, None

    def add(self, x: float) -> float:
        self.value = x if self.value is None else self.value + self.weight * (x - self.value)
        return self.value


THROUGHPUT_TIP = ("Rate while busy (left axis, log scale; colours as in the table): packets per CPU-second of the "
                  "algorithm's thread (what it could sustain if it had a core to itself). Capture packets/s: dotted, "
                  "right axis. Packets/s: packets it actually processed per second of wall "
                  "time. Busy: its thread's CPU time per wall second. One-second samples, smoothed (EWMA, "
                  f"newest weight {EWMA_WEIGHT:g}).")


class ThroughputPlot(QWidget):
    """Each algorithm's rate while busy (curves, log scale) and, in the table beside the plot, the
    packet rate it actually processes (wall) and its busy CPU share; the capture's packets/s dotted;
    drops above. Every figure is a one-second sample from the runner snapshots' cumulative counters
    (``packets``, ``updates_per_second``), smoothed with an EWMA so the plot reads."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.widget = pg.PlotWidget(axisItems={"left": SparseLogAxis("left")})
        self.widget.setLogMode(x=False, y=True)
        self.widget.setLabel("left", AXIS_TITLES["left"][0])
        self.widget.getAxis("left").setWidth(70)  # fixed: changing tick text must not re-layout the plot
        self.widget.setLabel("bottom", "time", units="s")
        self.widget.showGrid(x=True, y=True, alpha=0.2)
        self.widget.setToolTip(THROUGHPUT_TIP)
        self.curves = _Curves(self.widget.getPlotItem())
        # the capture's packets/s on its own linear axis at the right: it reaches 0 when the packets stop
        item = self.widget.getPlotItem()
        self.capture_box = pg.ViewBox()
        item.showAxis("right")
        item.scene().addItem(self.capture_box)
        item.getAxis("right").setLogMode(False, False)  # the plot's log y is for the left axis only
        item.getAxis("right").linkToView(self.capture_box)
        item.getAxis("right").setLabel(AXIS_TITLES["right"][0])
        item.getAxis("right").setWidth(60)
        self.capture_box.setXLink(item)
        self.capture_box.setYRange(0, 1)
        self.capture_curve = pg.PlotDataItem(pen=pg.mkPen((120, 120, 120), width=2, style=pg.QtCore.Qt.PenStyle.DotLine))
        self.capture_box.addItem(self.capture_curve)
        item.vb.sigResized.connect(lambda: self.capture_box.setGeometry(item.vb.sceneBoundingRect()))
        item.vb.sigResized.connect(self._fit_titles)
        self.capture = RingBuffer()
        self.widget.setXRange(0, 60)  # idle: a minute of time and 1-1000 packets/CPU-s, not -0.2..0.2
        self.widget.setYRange(0, 3)
        self.widget.enableAutoRange()  # data, once there, decides
        self.widget.getViewBox().setLimits(xMin=0)  # time starts at 0 (one point must not centre the axis on it)
        self.info = ElidedLabel(1)  # the capture's figures and drops: elided only where they cannot fit
        self.table = QLabel()
        self.table.setTextFormat(pg.QtCore.Qt.TextFormat.RichText)
        self.table.setToolTip(THROUGHPUT_TIP)
        self._fitted: tuple[str, ...] | None = None  # the algorithms the table's width was fitted to
        self.table.setAlignment(pg.QtCore.Qt.AlignmentFlag.AlignTop | pg.QtCore.Qt.AlignmentFlag.AlignLeft)
        row = QHBoxLayout()
        row.addWidget(self.widget, 1)
        row.addWidget(self.table, 0)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.info)
        layout.addLayout(row, 1)
        self.reset()

    def _fit_titles(self) -> None:
        """Each side axis titled with the longest of ``AXIS_TITLES`` that its height holds."""
        for side, titles in AXIS_TITLES.items():
            axis = self.widget.getAxis(side)
            label = axis.label
            blank = 2 * label.document().documentMargin()
            metrics = QFontMetrics(label.font())
            title = next((t for t in titles if metrics.horizontalAdvance(t) + blank <= axis.height()), "")
            shown = axis.labelText if label.isVisible() else ""
            if title != shown:
                if title:
                    axis.setLabel(title)
                else:
                    axis.showLabel(False)

    def _smooth(self, key: str, metric: str, x: float) -> float:
        return self._ewma.setdefault((key, metric), Ewma()).add(x)

    def sample(self, snap) -> None:
        """Add one point per curve from a ``SessionSnapshot``."""
        t = snap.time
        if self._t0 is None:
            self._t0 = t
        x = t - self._t0
        rows = []
        for lane in snap.lanes:
            a = lane.algorithm
            if a is None or a.updates_per_second <= 0:
                rows.append((lane.name, None, None, None))
                continue
            key = f"{lane.name}#{lane.generation}"  # a restarted lane starts its averages afresh
            busy = a.packets / a.updates_per_second  # CPU-seconds of its thread so far
            prev = self._last.get(key)
            self._last[key] = (t, a.packets, busy)
            if prev is None or t <= prev[0]:
                rows.append((lane.name, None, None, None))
                continue
            dt, dp, db = t - prev[0], a.packets - prev[1], busy - prev[2]
            wall = self._smooth(key, "wall", dp / dt)
            share = self._smooth(key, "busy", max(0.0, db) / dt)
            rate = self._smooth(key, "rate", dp / db) if db > 1e-6 and dp > 0 else self._rate(key)
            if rate is not None and dp > 0:
                style = {} if a.private else {"style": pg.QtCore.Qt.PenStyle.DashLine}
                self.curves.add(lane.name, x, max(rate, 1.0), **style)
            rows.append((lane.name, rate, wall, share))
        src = snap.source
        if src is not None:
            if self._src is not None and t > self._src[0]:
                fresh = src.ip_packets - self._src[1]
                # no packet in the last second (a file ended, a quiet link): 0, not an average decaying towards it
                pps = self._smooth("capture", "wall", fresh / (t - self._src[0])) if fresh else 0.0
                if not fresh:
                    self._ewma.pop(("capture", "wall"), None)
                self.capture.append(x, pps)
                xs, ys = self.capture.view()
                self.capture_curve.setData(xs, ys)
                self.capture_box.setYRange(0, max(1.0, float(ys.max()) * 1.1), padding=0)  # from 0, always
            self._src = (t, src.ip_packets)
            self.info.set_plain(f"Capture: {src.ip_packets:,} IP packets · {drops_of(snap).text()}", THROUGHPUT_TIP)
        self._fit_table(tuple(name for name, *_ in rows))
        self.table.setText(throughput_table(rows))
        self.curves.redraw()

    def _fit_table(self, names: tuple[str, ...]) -> None:
        """The table as wide as its widest figures for ``names`` (fixed: a changing figure must not
        re-layout the plot, nor a longer one be cut at the edge)."""
        if names == self._fitted:
            return
        self._fitted = names
        widest = throughput_table([(name, 99.99e6, 99.99e6, 1.0) for name in names or ("algorithm",)])
        doc = QTextDocument()
        doc.setDefaultFont(self.table.font())
        doc.setHtml(widest)
        self.table.setMinimumWidth(int(doc.idealWidth()) + 2 * TABLE_MARGIN)

    def _rate(self, key: str) -> float | None:
        e = self._ewma.get((key, "rate"))
        return None if e is None else e.value

    def reset(self) -> None:
        self.curves.clear()
        self.capture = RingBuffer()
        self.capture_curve.setData([], [])
        self._last: dict[str, tuple[float, int, float]] = {}  # key -> (time, packets, busy seconds)
        self._ewma: dict[tuple[str, str], Ewma] = {}
        self._t0 = self._src = None
        self.info.set_plain("Capture: no packets yet", THROUGHPUT_TIP)
        self.table.setText(throughput_table([]))
        self._fit_table(())


def swatch(name: str) -> str:
    """``name`` after a square of its curve's colour (the plots' legend, beside them, never over a curve)."""
    r, g, b = color(name)
    return f"<span style='color: rgb({r},{g},{b})'>■</span>&nbsp;{name}"


def throughput_table(rows) -> str:
    """Rich text: per algorithm, rate while busy, packets/s (wall) and busy share."""
    head = ("<tr><th align='left'>algorithm</th><th align='right'>&nbsp;rate while busy</th>"
            "<th align='right'>&nbsp;packets/s</th><th align='right'>&nbsp;busy</th></tr>")
    body = "".join(f"<tr><td>{swatch(name)}</td><td align='right'>{fmt_rate(rate)}</td><td align='right'>{fmt_rate(wall)}"
                   f"</td><td align='right'>{'—' if share is None else f'{share:.0%}'}</td></tr>"
                   for name, rate, wall, share in rows)
    return f"<table cellspacing='2'>{head}{body}</table>"


class UtilityPlot(QWidget):
    """Recall, precision or ARE of each private algorithm's releases, over time: one curve per
    algorithm, one ring buffer per (algorithm, metric); the combo picks the metric shown."""

    METRICS = ("recall", "precision", "are")

    def __init__(self, parent=None):
        super().__init__(parent)
        self.widget = pg.PlotWidget()
        self.widget.setLabel("bottom", "time", units="s")
        self.widget.showGrid(x=True, y=True, alpha=0.2)
        self.widget.setXRange(0, 60)  # idle: a minute and the metrics' 0..1, not -0.2..0.2
        self.widget.setYRange(0, 1)
        self.widget.enableAutoRange()
        self.metric_box = QComboBox()
        self.metric_box.addItems(["recall", "precision", "ARE"])
        for i, m in enumerate(self.METRICS):
            self.metric_box.setItemData(i, TIPS[m], pg.QtCore.Qt.ItemDataRole.ToolTipRole)
        self.metric_box.currentIndexChanged.connect(self._switch)
        row = QHBoxLayout()
        row.addWidget(QLabel("Private releases vs the exact answer over the same span:"))
        row.addWidget(self.metric_box)
        self.legend = QLabel()
        row.addWidget(self.legend, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(row)
        layout.addWidget(self.widget, 1)
        self.curves: dict[str, pg.PlotDataItem] = {}
        self.buffers: dict[tuple[str, str], RingBuffer] = {}
        self._seen: dict[str, object] = {}
        self._t0 = None
        self._switch(0)

    def _switch(self, index: int) -> None:
        self.widget.setLabel("left", self.metric_box.currentText())
        self.redraw()

    def add(self, t: float, name: str, truth) -> None:
        """One point per new truth result (a new release compared with the exact answer)."""
        if truth is None or truth.note or self._seen.get(name) is truth:
            return
        self._seen[name] = truth
        if self._t0 is None:
            self._t0 = t
        if name not in self.curves:
            self.curves[name] = self.widget.plot(name=name, pen=pg.mkPen(color(name), width=2))
            self.legend.setText("&nbsp;&nbsp;".join(swatch(n) for n in self.curves))
        for m, value in utility_values(truth).items():
            if (name, m) not in self.buffers:
                self.buffers[(name, m)] = RingBuffer()
            self.buffers[(name, m)].append(t - self._t0, value)

    def redraw(self) -> None:
        metric = self.METRICS[self.metric_box.currentIndex()]
        for name, item in self.curves.items():
            item.setData(*self.buffers[(name, metric)].view(), connect="finite")

    def reset(self) -> None:
        for item in self.curves.values():
            self.widget.removeItem(item)
        self.curves.clear()
        self.legend.setText("")
        self.buffers.clear()
        self._seen.clear()
        self._t0 = None
