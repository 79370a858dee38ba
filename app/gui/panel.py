"""One algorithm's panel: its guarantee in words and numbers, its threshold, a sortable table of
the released items next to the true counts, and a bar chart with the threshold drawn on it.

Everything shown comes from the lane's snapshot (the latest ``Release`` and the public
``status``) and from the truth thread's answer for that release; the panel never labels a
source that is not in the release.
"""
from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import (QAbstractItemView, QFrame, QHeaderView, QLabel, QSizePolicy, QSplitter, QTableView,
                               QVBoxLayout, QWidget)

from dptop.gui.drilldown import ESTIMATE_BRUSH, TRUTH_BRUSH, compact_rows, filter_box, key_title
from dptop.gui.elide import ElidedLabel
from dptop.gui.help import TIPS
from dptop.monitor.explain import detectable_text, reason_text, threshold_of
from dptop.gui.models import ReleaseTableModel, fmt_rate, rows_of, sorting_proxy, utility_values

CHART_ROWS = 12  # bars drawn (the table has every released item)
CHART_MIN_WIDTH = 130
COLUMN_SAMPLES = ("#99", None, "99,999,999", "99,999,999", "-9,999,999")
"""The widest text each table column shows in practice (the key column stretches and elides)."""
TABLE_ROWS = 5  # rows a panel's table always has room for (its minimum height: the header lines and these)
KEY_MIN_WIDTH = 104  # "255.255.255.255" in the default font; longer keys elide, the tooltip has them


TAU_PEN = (220, 60, 60)  # the threshold line's colour


def legend_html(entries) -> str:
    """The chart's legend for ``entries`` (``BarChart.drawn``: the name of each item drawn and
    whether it is a bar or the dashed line), beside the chart (never over a bar). A narrow chart
    wraps it between its entries only: a break inside one ("exact" / "count") drew the next
    swatch over the text."""
    def entry(name, rgb, bar):
        text = name.replace(" ", "&nbsp;")
        if bar:
            return f"<span style='background-color: rgb{rgb[:3]}'>&nbsp;&nbsp;&nbsp;</span>&nbsp;{text}"
        return f"<span style='color: rgb{rgb[:3]}'><b>┆</b>&nbsp;{text}</span>"
    return "&nbsp; ".join(entry(*e) for e in entries)


def guarantee_lines(g) -> list:
    """Three short lines of ``(text, bold)`` segments: the numbers, the relation and unit, the
    scope (each elided to the panel's width; the full text and the details in the tooltip)."""
    first = [(", ".join(g.numbers(" = ")), True), (f" · {g.measure} · {g.model}", False)]
    if g.seeded:
        first += [(" · ", False), ("seeded: NOT private", True)]
    return [first, [(f"protects: {g.neighbouring} (unit: {g.unit.label()})", False)], [(g.scope, False)]]


def status_text(view, truth) -> str:
    a = view.algorithm
    if a is None:
        return ""
    parts = []
    thr = threshold_of(view)
    if thr is not None:
        parts.append(f"τ = {thr:,.1f}")
    detectable = detectable_text(view.status.detectable)
    if detectable:
        parts.append(detectable)
    rel = a.latest
    if rel is not None:
        sp = rel.span
        where = f"{sp.kind} {sp.index}" if sp.kind in ("epoch", "horizon") else sp.kind
        parts.append(f"{where}: {max(0, sp.end - sp.start):,} pkts")
    count = max(a.releases, int(rel is not None))  # a window's live query is a release too
    parts.append(f"{count:,} release{'' if count == 1 else 's'}")
    parts.append(f"{fmt_rate(a.updates_per_second)} while busy")
    if a.drops:
        parts.append(f"{a.drops:,} dropped")
    line = "  ·  ".join(parts)
    if truth is not None and a.private and truth.release is rel:
        if truth.note:
            return f"{line}\nexact answer: {truth.note}"
        return f"{line}\n{utility_text(truth)}"
    return line


def utility_text(truth) -> str:
    """Recall, precision and ARE against the exact answer, "—" where a metric has nothing to
    measure (no true heavy hitter; nothing released; no released source that sent a packet)."""
    v = utility_values(truth)
    recall, precision, are = (("—" if np.isnan(v[m]) else fmt.format(v[m]))
                              for m, fmt in (("recall", "{:.2f}"), ("precision", "{:.2f}"), ("are", "{:.1%}")))
    why = []
    if truth.utility.reported == 0:
        why.append("nothing released")
    elif np.isnan(v["are"]):
        why.append("no released source sent a packet")
    if np.isnan(v["recall"]):
        why.append(f"no true heavy hitter: none > {truth.heavy_threshold:,.0f}")
    tail = f" ({'; '.join(why)})" if why else ""
    over = (f"the {truth.packets:,} packets it saw (its queue refused {truth.unseen:,})" if truth.unseen
            else f"the same {truth.packets:,} packets")
    return f"vs exact over {over}: recall {recall} · precision {precision} · ARE {are}{tail}"


class Legend(QLabel):
    """The chart's legend below it (``legend_html``), wrapped between entries and as tall as its
    lines at its width: a wrapped label asks its layout for one line only, and under a narrow chart
    at its minimum height the second line was drawn over the value axis's labels (1600 px, two
    panels a row)."""

    def __init__(self):
        super().__init__()
        self.setWordWrap(True)

    def show_entries(self, entries) -> None:
        text = legend_html(entries)
        if text != self.text():
            self.setText(text)
            self._fit()

    def resizeEvent(self, event):  # noqa: N802 - Qt's names
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        need = self.heightForWidth(self.width())
        if need > 0 and need != self.minimumHeight():
            self.setMinimumHeight(need)


class RankAxis(pg.AxisItem):
    """The chart's left axis: the bars' ranks "#1".."#n", wide enough for the widest. When bars are
    shorter than a line of text, every ``step``-th rank is labelled (#1, #3, #5...), so labels never
    overlap; ``step`` follows the axis's height at every paint."""

    def __init__(self):
        super().__init__("left")
        self.ranks = 0
        metrics = QFontMetrics(self.style["tickFont"] or QFont())
        self.line = metrics.height()  # px a label needs (pyqtgraph draws it 0.8 of this tall)
        self.setStyle(tickTextWidth=metrics.horizontalAdvance(f"#{CHART_ROWS}") + 4, autoExpandTextSpace=False)
        self.setWidth(self.style["tickTextWidth"] + max(0, self.style["tickLength"]) + self.style["tickTextOffset"][0] + 2)

    def set_ranks(self, ranks: int) -> None:
        if ranks != self.ranks:
            self.ranks = ranks
            self.picture = None  # pyqtgraph's cached drawing
            self.update()

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 - pyqtgraph's names
        extent = abs(maxVal - minVal)  # the bars run downwards: the range comes inverted
        if self.ranks == 0 or size <= 0 or extent == 0:
            return []
        step = max(1, math.ceil(self.line / (size / extent)))  # ranks one label's height spans
        return [(step, [float(r) for r in range(1, self.ranks + 1, step)])]

    def tickStrings(self, values, scale, spacing):  # noqa: N802
        return [f"#{round(v)}" for v in values]


def compact_count(value: float, spacing: float) -> str:
    """A count as a value axis labels it: thousands as k, millions as M ("5k", "1.5M", "250"), with
    the decimals the tick ``spacing`` needs and no trailing zeros."""
    unit, suffix = next(((u, s) for u, s in ((1e9, "G"), (1e6, "M"), (1e3, "k")) if abs(value) >= u), (1.0, ""))
    places = max(0, math.ceil(-math.log10(spacing / unit) - 1e-9)) if spacing > 0 else 0
    text = f"{value / unit:.{places}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return ("0" if text == "-0" else text) + suffix


class CountAxis(pg.AxisItem):
    """The chart's value axis: compact counts (``compact_count``) one step of 1, 2 or 5 times a power
    of ten apart, the smallest step at which the labels drawn (pyqtgraph leaves out one that would
    cross the axis's ends) stand apart by the widest one's width, and two digits' at least, at the
    axis's width in pixels (its own spacing ran "5000 10000 15000" together in a chart 200 px wide);
    finer ticks draw the grid alone."""

    def __init__(self):
        super().__init__("bottom")
        font = self.style["tickFont"] or QFont()
        self.setStyle(tickFont=font, maxTextLevel=0)
        self.enableAutoSIPrefix(False)
        self.metrics = QFontMetrics(font)
        self.gap = 2 * self.metrics.horizontalAdvance("0")  # px between two labels, at least

    def drawn(self, values, step: float, lo: float, px: float, size: float) -> list[tuple[float, float]]:
        """(left, right) in pixels of each label of ``values`` that lies within the axis's ``size``."""
        spans = []
        for v, text in zip(values, self.tickStrings(values, 1.0, step)):
            half = self.metrics.horizontalAdvance(text) / 2 + 1
            x = (v - lo) * px
            if x - half >= 0 and x + half <= size:
                spans.append((x - half, x + half))
        return spans

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 - pyqtgraph's names
        lo, hi = sorted((minVal, maxVal))
        if size <= 0 or not hi > lo:
            return []
        px = size / (hi - lo)  # pixels per count
        decade = math.floor(math.log10(hi - lo))
        for step in (m * 10.0 ** e for e in range(decade - 3, decade + 2) for m in (1, 2, 5)):
            values = [k * step for k in range(math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9) + 1)]
            spans = self.drawn(values, step, lo, px, size)
            blank = max([self.gap, *(right - left for left, right in spans)])
            if spans and all(right + blank <= left for (_, right), (left, _) in zip(spans, spans[1:])):
                break
        minor = step / (4 if round(step / 10.0 ** math.floor(math.log10(step))) == 2 else 5)
        grid = [k * minor for k in range(math.ceil(lo / minor - 1e-9), math.floor(hi / minor + 1e-9) + 1)]
        return [(step, values), (minor, grid)] if minor * px >= 4 else [(step, values)]

    def tickStrings(self, values, scale, spacing):  # noqa: N802
        return [compact_count(v * scale, spacing * scale) for v in values]


class BarChart(pg.PlotWidget):
    """Horizontal bars: private estimate (colour) and true count (grey) per released item; the
    threshold τ as a dashed vertical line when the panel's algorithm has one (the exact and other
    non-private baselines have none). ``legend``: the legend of what is drawn, for the panel to
    place below the chart."""

    def __init__(self, private: bool = True, parent=None):
        super().__init__(parent, axisItems={"left": RankAxis(), "bottom": CountAxis()})
        left, _, right, bottom = self.getPlotItem().layout.getContentsMargins()  # room above the plot for half of #1's label
        self.getPlotItem().layout.setContentsMargins(left, self.getAxis("left").line // 2 + 1, right, bottom)
        self.setMinimumHeight(120)
        self.setMenuEnabled(False)
        self.hideButtons()
        self.setMouseEnabled(x=False, y=False)
        self.getViewBox().invertY(True)
        self.showGrid(x=True, y=False, alpha=0.2)
        self.estimates = pg.BarGraphItem(x0=[0], y=[0], height=[0.38], width=[0], brush=pg.mkBrush(*ESTIMATE_BRUSH))
        self.truth = pg.BarGraphItem(x0=[0], y=[0], height=[0.38], width=[0], brush=pg.mkBrush(*TRUTH_BRUSH))
        self.addItem(self.truth)
        self.addItem(self.estimates)
        # named by the legend below the chart: a "τ" on the line lay over the first bar or, above it, was clipped
        self.tau = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(TAU_PEN, width=2, style=Qt.PenStyle.DashLine))
        self.addItem(self.tau)
        self.tau.hide()
        # the value axis carries no title: the legend below names the bars, and a title under a short
        # chart was drawn over the legend's first line (1600x1000, two panels a row)
        self._tau, self._view = None, None
        self.names = {self.estimates: "private estimate" if private else "estimate", self.truth: "exact count",
                      self.tau: "threshold τ"}
        self.legend = Legend()
        self.setMinimumWidth(CHART_MIN_WIDTH)
        self.show_rows([], None)  # the empty chart's range: ranks 1-3, counts 0-1 (not pyqtgraph's -0.2..0.2)
        self.setToolTip("Rows #1.. as in the table. Blue: estimate as released. Grey: true count over the same "
                        "span. Red dashed (when the algorithm has one): threshold τ.")
        self.legend.setToolTip(self.toolTip())

    def drawn(self) -> list[tuple[str, tuple, bool]]:
        """(name, colour, is a bar) of each item the chart draws now (the legend's entries)."""
        colours = {self.estimates: ESTIMATE_BRUSH, self.truth: TRUTH_BRUSH, self.tau: TAU_PEN}
        return [(name, colours[item], item is not self.tau) for item, name in self.names.items() if item.isVisible()]

    def show_rows(self, rows, threshold: float | None) -> None:
        rows = rows[:CHART_ROWS]
        n = len(rows)
        ranks = np.arange(1, n + 1, dtype=float)
        est = np.array([r.estimate for r in rows], dtype=float)
        true = np.array([r.true if r.true is not None else 0 for r in rows], dtype=float)
        self.estimates.setOpts(x0=np.zeros(n), y=ranks - 0.2, height=0.38, width=est)
        self.truth.setOpts(x0=np.zeros(n), y=ranks + 0.2, height=0.38, width=true)
        self.getAxis("left").set_ranks(n)
        top = max([1.0, *est.tolist(), *true.tolist()])
        if threshold is not None and threshold > 0:
            if threshold != self._tau:
                self.tau.setValue(threshold)
            self.tau.show()
            top = max(top, threshold)
        else:
            self.tau.hide()
        self._tau = threshold
        self.legend.show_entries(self.drawn())
        view = (top * 1.08, max(n, 3) + 0.6)
        if self._view is None or not (0.75 * self._view[0] <= view[0] <= self._view[0]) or view[1] != self._view[1]:
            self._view = (top * 1.2, view[1])  # headroom, so a growing count does not rescale every time
            self.setXRange(0, self._view[0], padding=0)
            self.setYRange(0.4, view[1], padding=0)


class AlgorithmPanel(QFrame):
    drill_requested = Signal(str, str, object)  # algorithm, key label, exact count (or None)

    def __init__(self, name: str, private: bool, parent=None):
        super().__init__(parent)
        self.name = name
        self.private = private
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setObjectName(f"panel-{name}")
        self.title = QLabel(f"<b>{name}</b>")
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.title.setMinimumWidth(1)
        self.guarantee = ElidedLabel(3)  # three fixed lines, elided; the tooltip has it all
        self.status = ElidedLabel(2)
        self.reason = ElidedLabel(2, wrap=True)
        self.reason.setStyleSheet("color: #d07a00;")
        self.model = ReleaseTableModel(private)
        self.proxy = sorting_proxy(self.model, self)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().hide()
        compact_rows(self.table, TABLE_ROWS)
        # fixed widths from the font (ResizeToContents re-measures every cell per update); the key
        # column takes what is left, so every column shows without a horizontal scroll bar
        header = self.table.horizontalHeader()
        header.setMinimumSectionSize(16)
        metrics, cells = header.fontMetrics(), self.table.fontMetrics()
        for col, sample in enumerate(COLUMN_SAMPLES):
            if sample is None:
                header.setSectionResizeMode(col, QHeaderView.ResizeMode.Stretch)
                continue
            title = self.model.headerData(col, Qt.Orientation.Horizontal) or ""
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Fixed)
            header.resizeSection(col, max(cells.horizontalAdvance(sample) + 12,
                                          metrics.horizontalAdvance(title) + 22))  # room for the sort arrow
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        fixed = sum(header.sectionSize(c) for c, sample in enumerate(COLUMN_SAMPLES) if sample is not None)
        self.table.setMinimumWidth(fixed + KEY_MIN_WIDTH + 2 * self.table.frameWidth()
                                   + self.table.verticalScrollBar().sizeHint().width())
        self.table.doubleClicked.connect(self._drill)
        self.filter = filter_box(self.proxy)
        self.chart = BarChart(private)
        self.legend = self.chart.legend
        chart = QWidget()
        column = QVBoxLayout(chart)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addWidget(self.chart, 1)
        column.addWidget(self.legend)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.table)
        split.addWidget(chart)
        split.setChildrenCollapsible(False)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.setSpacing(2)
        for w in (self.title, self.guarantee, self.status, self.reason, self.filter):
            layout.addWidget(w)
        layout.addWidget(split, 1)
        self._shown = None  # (release, truth counts, generation) last drawn
        self._truth = None  # the exact answer for the drawn release (its utility line)
        self.redrawn_at = 0.0
        self.texted_at = 0.0
        self.generation = None
        self._g = None  # the guarantee shown in the header

    def _drill(self, index) -> None:
        row = self.model.rows()[self.proxy.mapToSource(index).row()]
        self.drill_requested.emit(self.name, row.address, row.true)

    def set_frozen(self, frozen: bool) -> None:
        self.model.set_frozen(frozen)
        if not frozen:
            self._shown = None  # redraw the chart with the latest data

    def update_text(self, view, truth, loss: str = "") -> None:
        """The cheap part, every tick: header, status line and reason, all about the release the
        table shows (a newer live query waiting for its exact counts is described once drawn);
        ``loss``: what the lane did not see (dptop.monitor.explain.Drops.lane_text)."""
        self._header(view)
        shown = self.shown_view(view)
        latest = None if shown.algorithm is None else shown.algorithm.latest
        if truth is None or truth.release is not latest:  # the exact answer for the drawn release
            truth = self._truth if self._truth is not None and self._truth.release is latest else None
        self.status.set_plain(status_text(shown, truth), TIPS["threshold"])
        self.reason.set_plain("\n".join(x for x in (reason_text(shown), loss) if x))  # always laid out: showing/hiding would re-layout every chart

    def drawn(self) -> tuple:
        """(the release the table shows, its exact counts or None); (None, None) before any."""
        return (None, None) if self._shown is None else self._shown[:2]

    def shown_view(self, view):
        """``view`` with the release the table shows as its latest (itself if none is drawn)."""
        a = view.algorithm
        drawn = None if self._shown is None else self._shown[0]
        if a is None or drawn is None or drawn is a.latest:
            return view
        return replace(view, algorithm=replace(a, latest=drawn))

    def show_phase(self, phase: str) -> None:
        """A starting session that has no lane for this panel yet: what it is doing."""
        self.reason.set_plain(f"Starting: {phase or 'opening the source'}")

    def data_key(self, view, truth):
        """(release to draw, its true counts or None, generation). Live re-releases arrive faster
        than their exact counts; the newest release whose counts are known is drawn then, so the
        table never stays at "…" (every release shown was published)."""
        a = view.algorithm
        release = None if a is None else a.latest
        if truth is not None and not truth.note and release is not None and truth.release is not release:
            release = truth.release
        counts = truth.counts if truth is not None and truth.release is release else None
        if release is None and self._shown is not None and self._shown[0] is not None:
            return self._shown  # restarted by an Apply: what was published before stays until the next release
        return release, counts, view.generation

    def needs_redraw(self, view, truth) -> bool:
        return not self.model.frozen and self.data_key(view, truth) != self._shown

    def only_truth_arrived(self, view, truth) -> bool:
        """Same release as drawn, its true counts just arrived (worth drawing at once)."""
        key = self.data_key(view, truth)
        return self._shown is not None and key[0] is self._shown[0] and key[2] == self._shown[2]

    def redraw(self, view, truth, kind: str = "src") -> None:
        """The costly part (table rows, bars): the window spreads these over its ticks; ``kind``: the
        key kind counted (its column's title)."""
        if self.model.frozen:
            return
        key = self.data_key(view, truth)
        if key is not self._shown:
            self._truth = truth if truth is not None and truth.release is key[0] else None
        self._shown = key
        self.redrawn_at = time.monotonic()
        rows = rows_of(key[0], key[1])
        self.model.set_key_title(key_title(kind))
        self.model.set_rows(rows)
        threshold = key[0].threshold if key[0] is not None and key[0].threshold is not None else threshold_of(view)
        self.chart.show_rows(rows, threshold)

    def _header(self, view) -> None:
        a = view.algorithm
        if self.generation == view.generation and a is not None and self._g is a.guarantee:
            return
        self.generation = view.generation
        self._g = None if a is None else a.guarantee
        kind = "private" if self.private else "non-private"
        family = "" if a is None else f" · {a.family}"
        self.title.setText(f"<b>{self.name}</b> <span style='color:gray'>({kind}{family})</span>")
        g = self._g
        if g is None:
            self.guarantee.set_plain("No privacy guarantee: exact or approximate counts, shown for comparison only.")
        else:
            self.guarantee.set_lines(guarantee_lines(g), "\n".join((g.describe(), f"noise: {g.noise}", *g.notes)))
