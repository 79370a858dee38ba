"""What the window's labels say and whether they can be read (offscreen): the chart's rank labels
never overlap however short its bars are, nor its value labels run together however narrow it is,
at any window width from 1280 to 2560 px; the Parameters dock says on what epochs a capture that
does not end releases (the session's own settings), not only "whole stream"; the overview's
columns say the span their figures cover, read from each release's span; the throughput plot's
axis titles are whole in the short plot a 1280x720 window gives it."""
import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"

import re
from dataclasses import replace
from itertools import combinations

import pytest
from PySide6.QtCore import QRectF, QSettings, Qt
from PySide6.QtGui import QFont, QFontMetrics, QImage, QPainter, QTextDocument
import pyqtgraph as pg
from PySide6.QtWidgets import QApplication, QGraphicsTextItem, QLabel

from dptop.gui.configs import default_config
from dptop.engine.core.release import ReleasedItem, Release, Span
from dptop.gui.main import MainWindow
from dptop.gui.overview import OverviewPanel
from dptop.gui.models import Row
from dptop.gui.panel import CHART_ROWS, AlgorithmPanel, BarChart
from dptop.gui.plots import ThroughputPlot
from dptop.monitor import catalogue
from dptop.monitor.config import LIVE_EPOCH_SECONDS, SourceSpec

WARM = 180_000  # ms: a clean clone compiles the kernels first


def drawn_labels(chart: pg.PlotWidget, side: str = "left") -> list:
    """(rectangle, text) of every label the chart's axis on ``side`` (the rank axis by default) draws now."""
    axis = chart.getAxis(side)
    image = QImage(10, 10, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [(rect, text) for rect, _, text in specs[2]]


@pytest.mark.parametrize("height", [130, 180, 260, 600])
def test_rank_labels_never_overlap(qtbot, height):
    """Twelve bars (the exact panel's full chart) in a chart from its minimum height up: no two
    rank labels intersect; the first rank is always labelled, and a tall chart labels every rank."""
    QApplication.instance() or QApplication([])
    chart = BarChart(private=False)
    qtbot.addWidget(chart)
    chart.resize(320, height)
    chart.show()
    qtbot.waitExposed(chart)
    chart.show_rows([Row(i + 1, f"10.0.0.{i}", 1000.0 - 50 * i, 990 - 50 * i) for i in range(CHART_ROWS)], None)
    QApplication.processEvents()
    labels = drawn_labels(chart)
    texts = [t for _, t in labels]
    assert "#1" in texts, texts
    for (a, ta), (b, tb) in combinations(labels, 2):
        assert not a.intersects(b), (height, ta, a, tb, b)
    axis, whole = chart.getAxis("left"), QRectF(chart.rect())
    for rect, text in labels:  # none hangs over the chart's edge (a label is a line of text tall)
        line = QRectF(rect.left(), rect.center().y() - axis.line / 2, rect.width(), axis.line)
        assert whole.contains(axis.mapRectToScene(line)), (height, text, axis.mapRectToScene(line), whole)
    if height >= 600:
        assert texts == [f"#{i}" for i in range(1, CHART_ROWS + 1)]


def crowded(labels, gap: float) -> list:
    """Pairs of value-axis labels that overlap or stand closer than ``gap`` px side by side."""
    return [(ta, tb) for (a, ta), (b, tb) in combinations(labels, 2) if a.adjusted(-gap, 0, gap, 0).intersects(b)]


def apart(chart: pg.PlotWidget) -> int:
    """The blank two labels need between them, in the font of the chart's value axis: two digits'
    width (with a word space or less between them, "5000 10000 15000" reads as one line of text)."""
    return 2 * QFontMetrics(chart.getAxis("bottom").style["tickFont"] or QFont()).horizontalAdvance("0")


LAZYHH_ROWS = [Row(i + 1, f"10.0.0.{i}", 12_000.0 - 900 * i, 11_964 - 900 * i) for i in range(5)]
"""A LazyHH release of the demo capture's size: counts to 12,000 beside its threshold τ = 14,424
(an axis to about 17,000)."""


@pytest.mark.parametrize("top", [0.9, 15_000.0, 152_629.0, 1_234_567.0, 98_765_432.0])
@pytest.mark.parametrize("width", [130, 180, 220, 300, 450, 700, 1000])
def test_value_labels_never_run_together(qtbot, width, top):
    """The value axis of a chart from its minimum width up, over counts of every size: no two tick
    labels overlap or stand closer than two digits' width, and one at least is drawn."""
    QApplication.instance() or QApplication([])
    chart = BarChart(private=True)
    qtbot.addWidget(chart)
    chart.resize(width, 200)
    chart.show()
    qtbot.waitExposed(chart)
    chart.show_rows([Row(i + 1, f"10.0.0.{i}", top * (1 - i / 10), top * (1 - i / 9)) for i in range(5)], 0.95 * top)
    QApplication.processEvents()
    labels = drawn_labels(chart, "bottom")
    assert crowded(labels, apart(chart)) == [], (width, [t for _, t in labels])
    assert labels, (width, top)  # one at least (a chart at its narrowest has room for one beside the edges)


@pytest.mark.parametrize("width", [1280, 1440, 1600, 1920, 2560])
def test_lazyhh_value_labels_apart_at_every_window_width(qtbot, tmp_path, width):
    """The window from 1280 to 2560 px wide (one to three panels a row), every panel showing a
    LazyHH release of the demo capture (``LAZYHH_ROWS``): its value axis's labels stand apart
    ("5000 10000 15000" ran together at 1600 px), and the legend, wrapped on two lines there, lies
    below the chart (its first line was drawn over the labels)."""
    QApplication.instance() or QApplication([])
    config = default_config()
    w = MainWindow(replace(config, names=("dpss", "lazyhh", "dpsw", "exact")),
                   settings=QSettings(str(tmp_path / "dptop.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.resize(width, 1000)
    w.show()
    qtbot.waitExposed(w)
    try:
        for panel in w.panels.values():
            panel.chart.show_rows(LAZYHH_ROWS, 14_424.1)
        QApplication.processEvents()
        for name, panel in w.panels.items():
            labels = drawn_labels(panel.chart, "bottom")
            assert crowded(labels, apart(panel.chart)) == [], (width, name, panel.chart.width(), [t for _, t in labels])
            assert len(labels) >= 2, (width, name, panel.chart.width(), labels)
            # the legend below the chart is laid out below it, not over its labels
            assert not panel.chart.geometry().intersects(panel.legend.geometry()), (width, name)
    finally:
        w.close()


def dock_text(w: MainWindow) -> str:
    """Every label the Parameters dock shows, with the epoch choice."""
    labels = [lb.text() for lb in w.params.findChildren(QLabel) if lb.isVisibleTo(w.params) and lb.text()]
    return "\n".join([w.params.epoch_mode.currentText(), *labels])


@pytest.mark.parametrize("spec", [SourceSpec("synth", loop=True, rate=2_000, length=1 << 14),
                                  SourceSpec("live", iface="lo")], ids=["looped", "live"])
def test_the_parameters_dock_says_the_epochs_a_run_without_end_uses(qtbot, tmp_path, spec):
    """The applied settings have no epochs ("whole stream"); a looped stream and a live capture run
    on epochs of the public clock: the dock says so, with the session's epoch length."""
    if spec.kind == "live" and os.geteuid() != 0:
        pytest.skip("a live capture on the loopback interface needs root")
    QApplication.instance() or QApplication([])
    config = default_config()
    assert config.settings.epoch_seconds is None and config.settings.epoch_packets is None
    w = MainWindow(config, settings=QSettings(str(tmp_path / "dptop.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.show()
    try:
        assert "whole stream" in dock_text(w) and "public clock" not in dock_text(w)
        w.open_source(spec)
        qtbot.waitUntil(lambda: w.session.config.settings.epoch_seconds is not None, timeout=WARM)
        seconds = w.session.config.settings.epoch_seconds
        assert seconds == LIVE_EPOCH_SECONDS
        qtbot.waitUntil(lambda: f"epochs of {seconds:g} s of the public clock" in dock_text(w), timeout=WARM)
        w.stop_source()
        qtbot.waitUntil(lambda: not w.session.state.active, timeout=10_000)
        assert f"epochs of {seconds:g} s of the public clock" in dock_text(w)  # the run on screen still is
    finally:
        w.close()


def release(name: str, span: Span) -> Release:
    return Release(name, span, (ReleasedItem(0, (0xFFFF << 32) | 0x7F000002, 900.0),))


def headers(panel: OverviewPanel, role=Qt.ItemDataRole.DisplayRole) -> list[str]:
    model = panel.table.model()
    return [model.headerData(c, Qt.Orientation.Horizontal, role) for c in range(model.columnCount())]


def test_overview_columns_say_the_span_of_their_figures(qtbot):
    """An epoch of the public clock, a sliding window and a continual prefix side by side: each
    column's header says what its figures cover and its tooltip the span itself, both read from
    the release shown (another span, another header)."""
    QApplication.instance() or QApplication([])
    panel = OverviewPanel()
    qtbot.addWidget(panel)
    epoch = Span(30_000, 41_000, "epoch", 3, t_start=1_700_000_030.0, t_end=1_700_000_040.0)
    shown = {"dpss": (release("dpss", epoch), None, 12.0),
             "dpsw": (release("dpsw", Span(21_000, 41_000, "window")), None, 30.0),
             "lazyhh": (release("lazyhh", Span(0, 41_000, "prefix")), None, None)}
    panel.show_rows(shown, {}, "Source")
    assert headers(panel)[1:4] == ["dpss: one epoch of 10 s", "dpsw: the last 20,000 packets",
                                   "lazyhh: the stream so far"]
    tips = headers(panel, Qt.ItemDataRole.ToolTipRole)
    assert "epoch 3, 22:13:50-22:14:00 UTC" in tips[1]
    assert "the last 20,000 packets (packets 21,000-41,000 of the stream)" in tips[2]
    assert "packets 0-41,000 since the start" in tips[3]
    shown["dpss"] = (release("dpss", Span(0, 4_000, "epoch", 0)), None, 12.0)  # epochs of packets
    shown["dpsw"] = (release("dpsw", Span(0, 20_000, "window")), None, 30.0)
    panel.show_rows(shown, {}, "Source", units="64-byte units")
    assert headers(panel)[1:3] == ["dpss: one epoch of 4,000 64-byte units", "dpsw: the last 20,000 64-byte units"]
    shown["dpsw"] = (None, None, 30.0)  # nothing released yet: the name alone
    panel.show_rows(shown, {}, "Source")
    assert headers(panel)[2] == "dpsw"


@pytest.mark.parametrize("height", [130, 300])
def test_no_text_inside_the_plot_over_the_bars_or_clipped(qtbot, height):
    """A "τ" on the threshold line lay over the first bar, or above the plot where the plot clips
    it: the plot holds no text; the legend beside the chart names the dashed line."""
    QApplication.instance() or QApplication([])
    panel = AlgorithmPanel("dpss", True)
    qtbot.addWidget(panel)
    chart = panel.chart
    chart.resize(320, height)
    chart.show()
    qtbot.waitExposed(chart)
    chart.show_rows([Row(i + 1, f"10.0.0.{i}", 100.0 - 5 * i, 95 - 5 * i) for i in range(5)], 80.0)
    QApplication.processEvents()
    assert chart.tau.isVisible()
    texts = [it for it in chart.getViewBox().allChildren() if isinstance(it, (pg.TextItem, QGraphicsTextItem))]
    assert texts == [], texts
    assert "threshold&nbsp;τ" in panel.legend.text()  # one entry, never broken across lines


def legend_entries(panel: AlgorithmPanel) -> list[str]:
    """The names the panel's legend shows, in order, read from its rendered text."""
    doc = QTextDocument()
    doc.setHtml(panel.legend.text())
    return [t.strip() for t in re.split(r"\s{2,}|┆", doc.toPlainText().replace("\xa0", " ")) if t.strip()]


def plotted_names(chart: BarChart) -> list[str]:
    """The names of the items the chart draws now."""
    return [chart.names[item] for item in chart.getPlotItem().items if item.isVisible()]


def snapshot_view(name: str, private: bool, threshold: float | None):
    """A lane's view with one release of five sources and ``threshold`` (None: the algorithm has
    none, as the exact and other non-private baselines)."""
    from dptop.engine.core.keys import encode_address
    from dptop.engine.core.status import NO_STATUS
    from dptop.engine.core.worker import AlgorithmSnapshot
    from dptop.monitor.lanes import LaneView

    items = tuple(ReleasedItem(*encode_address(f"10.0.0.{i}"), 100.0 - 5 * i) for i in range(5))
    latest = Release(name, Span(0, 1000, "prefix"), items, threshold=threshold)
    snap = AlgorithmSnapshot(name, private, "", 1000, 1e6, 0, 0, 1, latest, None, NO_STATUS, None, False, True)
    return LaneView(name, 1, 0, None, snap, None)


@pytest.mark.parametrize("name", catalogue.names())
def test_the_legend_names_exactly_what_the_chart_draws(qtbot, name):
    """Every panel kind (each algorithm, private or not), with a threshold and without one (the
    exact panel's legend named a τ line it never draws): the legend lists the items plotted, each
    once, and names τ exactly when the dashed line is drawn."""
    QApplication.instance() or QApplication([])
    private = catalogue.entry(name).private
    panel = AlgorithmPanel(name, private)
    qtbot.addWidget(panel)
    thresholds = (None, 80.0) if private else (None,)
    for threshold in (*thresholds, None):  # and back: a restarted lane's view may have none yet
        panel.redraw(snapshot_view(name, private, threshold), None)
        entries = legend_entries(panel)
        assert ("threshold τ" in entries) == panel.chart.tau.isVisible() == (threshold is not None), (threshold, entries)
        assert sorted(entries) == sorted(plotted_names(panel.chart)), threshold
        assert entries[0] == ("private estimate" if private else "estimate") and "exact count" in entries


def titles_out_of(plot: pg.PlotWidget) -> list:
    """(side, text rectangle) of each axis title of ``plot`` not wholly inside it."""
    out = []
    for side in ("left", "right", "bottom"):
        title = plot.getAxis(side).label
        m = title.document().documentMargin()  # blank around the text
        text = title.mapRectToScene(title.boundingRect().adjusted(m, m, -m, -m))
        if title.isVisible() and not QRectF(plot.rect()).contains(text):
            out.append((side, text))
    return out


@pytest.mark.parametrize("height", [140, 300])
def test_throughput_axis_titles_are_whole(qtbot, height):
    """The throughput plot as short as at 1280x720 on a real display: its axes' titles lie inside
    it (the right one, "capture packets/s", ran past the top)."""
    QApplication.instance() or QApplication([])
    th = ThroughputPlot()
    qtbot.addWidget(th)
    th.resize(900, height)
    th.show()
    qtbot.waitExposed(th)
    QApplication.processEvents()
    assert titles_out_of(th.widget) == []
