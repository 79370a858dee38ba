"""The window's geometry, looked at (offscreen, one window for the module): it fits 1280x720 and
grows to 1920x1080 without two visible widgets overlapping, a label elided where its text fits or a
table column out of sight; every panel's table shows five rows; the throughput table and the
status lines are whole; legends beside the bars; tuning plots tall enough to read; the
packets/s line at 0 once a file has ended; no empty -0.2..0.2 axes; "1 release" in the singular.
The replay is tests/data/amp.dns.RRSIG.fragmented.pcap (4,412 packets; tests/data/SOURCES.md)."""
import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"

import re
from contextlib import suppress
from itertools import combinations

import pytest
from PySide6.QtCore import QPoint, QRect, QSettings, Qt
from PySide6.QtWidgets import QApplication, QLabel, QWidget

from PySide6.QtGui import QTextDocument

from dptop.gui.configs import default_config, demo_config
from dptop.gui.elide import ElidedLabel
from dptop.gui.main import MainWindow
from dptop.gui.overview import OVERVIEW_ROWS
from dptop.gui.panel import TABLE_ROWS, AlgorithmPanel, status_text
from dptop.gui.source_panel import WIDEST_DROPS
from tests.conftest import DNS_CAPTURE
from tests.test_gui_labels import titles_out_of

WARM = 180_000
SIZES = ((1280, 720), (1366, 768), (1920, 1080))
PLOT_MIN_HEIGHT = 150  # px: a plot with its axes, their labels and a few grid lines


def shown_window(tmp_path_factory, config, size) -> MainWindow:
    """A window on ``config`` with fresh preferences, shown at ``size``."""
    QApplication.instance() or QApplication([])
    store = QSettings(str(tmp_path_factory.mktemp("layout") / "dptop.ini"), QSettings.Format.IniFormat)
    w = MainWindow(config, settings=store)
    w.resize(*size)
    w.show()
    return w


@pytest.fixture(scope="module")
def window(tmp_path_factory):
    w = shown_window(tmp_path_factory, default_config(), (1280, 720))
    w.open_file(str(DNS_CAPTURE), speed=None)
    QApplication.processEvents()
    yield w
    w.close()


def finished(qtbot, w) -> None:
    qtbot.waitUntil(lambda: w.session.state == "finished", timeout=WARM)
    qtbot.waitUntil(lambda: all(p.model.rows() or p.reason.full_text() for p in w.panels.values()), timeout=30_000)


def settle(qtbot, w, size) -> None:
    w.resize(*size)
    qtbot.waitUntil(lambda: (w.width(), w.height()) == size, timeout=5000)
    for _ in range(3):  # layouts settle over a few event loop turns
        QApplication.processEvents()
        qtbot.wait(10)


def rect_in(w: MainWindow, widget: QWidget) -> QRect:
    return QRect(widget.mapTo(w, QPoint(0, 0)), widget.size())


def shown(w, widget) -> QRect:
    """The part of ``widget`` one can see: its rectangle clipped by every ancestor's."""
    r = rect_in(w, widget)
    parent = widget.parentWidget()
    while parent is not None and parent is not w:
        r = r.intersected(rect_in(w, parent))
        parent = parent.parentWidget()
    return r


def assert_labels_whole(w, root: QWidget, size) -> None:
    """Every visible label under ``root``: an elided one's text is really wider than the label; a
    plain one shows its whole text (or lies partly out of sight, in a scroll area)."""
    for label in root.findChildren(ElidedLabel):
        if label.isVisible() and label.elided:
            widest = max(label.fontMetrics().horizontalAdvance(line) for line in label.full_text().split("\n"))
            assert widest > label.contentsRect().width() - 8 or label.wrap, (label.full_text(), size)
    for label in root.findChildren(QLabel):
        if label.isVisible() and not isinstance(label, ElidedLabel) and not label.wordWrap() \
                and "<" not in label.text() and shown(w, label).width() == label.width():
            assert label.fontMetrics().horizontalAdvance(label.text()) <= label.width() + 2, (label.text(), size)


def test_the_minimum_size_is_at_most_1280x720(window):
    """Finding 5: the minimum was 1512x814."""
    hint = window.minimumSizeHint()
    assert hint.width() <= 1280 and hint.height() <= 720, hint


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_nothing_overlaps_nothing_is_cut(qtbot, window, size):
    """Finding 5 and 6 at each size: the docks, the source bar, the central area and the status bar
    tile the window; panels do not overlap and are never cut sideways (they reflow into columns);
    every table shows every column without a horizontal scroll bar; an elided label's text is
    really wider than the label; the tuning plots are tall enough to read."""
    w = window
    finished(qtbot, w)
    settle(qtbot, w, size)
    assert (w.width(), w.height()) == size
    blocks = [w.centralWidget(), w.findChild(QWidget, "sourceBar"), w.statusBar(), w.menuBar()]
    blocks += [d for d in w.docks.values() if d.isVisible() and not d.visibleRegion().isEmpty()]
    for a, b in combinations(blocks, 2):
        assert not rect_in(w, a).intersects(rect_in(w, b)), (a.objectName(), b.objectName(), size)
    for a in blocks:
        assert QRect(0, 0, *size).contains(rect_in(w, a)), (a.objectName(), rect_in(w, a), size)

    panels = list(w.panels.values())
    viewport = rect_in(w, w.scroll_area.viewport())
    for a, b in combinations(panels, 2):
        assert not rect_in(w, a).intersects(rect_in(w, b))
    for p in panels:
        r = rect_in(w, p)
        assert viewport.left() <= r.left() and r.right() <= viewport.right(), (p.name, r, viewport, w.columns)
    assert w.columns == (1 if size[0] < 1500 else 2)

    qtbot.waitUntil(lambda: bool(w.overview.model.rows()), timeout=5000)
    for table in [p.table for p in panels] + [w.overview.table]:
        header = table.horizontalHeader()
        assert header.length() <= table.viewport().width() + 1, (table.parent().objectName(), size)
        assert all(header.sectionSize(c) >= 16 for c in range(header.count()))
    assert_labels_whole(w, w, size)

    w.docks["tuning"].raise_()
    plots = (w.tuning.plot, w.tuning.limits)
    note = w.tuning.limit_note  # its lines were clipped at the top and bottom when it wrapped to three

    def whole() -> bool:  # tall enough, and whole in the tab (axes in sight), the note below them too
        return all(p.height() >= PLOT_MIN_HEIGHT for p in plots) and \
            all(shown(w, x) == rect_in(w, x) for x in (*plots, note))

    with suppress(qtbot.TimeoutError):  # the tab is given its height, then its scroll area lays it out
        qtbot.waitUntil(whole, timeout=3000)
    assert whole(), ([(p.height(), shown(w, p), rect_in(w, p)) for p in plots], size)
    assert note.full_text() and not note.elided, (note.full_text(), size)
    w.docks["throughput"].raise_()


def visible_rows(w, table) -> tuple[int, int]:
    """(rows of ``table`` one sees whole on screen, rows its visible viewport has room for)."""
    view = shown(w, table.viewport())
    top = table.viewport().mapTo(w, QPoint(0, 0)).y()
    whole = sum(1 for r in range(table.model().rowCount())
                if view.top() <= top + table.rowViewportPosition(r)
                and top + table.rowViewportPosition(r) + table.rowHeight(r) - 1 <= view.bottom())
    return whole, view.height() // table.verticalHeader().defaultSectionSize()


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_panel_shows_five_table_rows(qtbot, window, size):
    """At 1280x720 the panels' area was 222 px for 330 px panels: scrolled to a panel, its table
    showed one row. Now, scrolled to any panel, its table shows TABLE_ROWS rows (or every row
    released), with the throughput tab in front."""
    w = window
    finished(qtbot, w)
    w.docks["throughput"].raise_()
    settle(qtbot, w, size)
    for p in w.panels.values():
        w.scroll_area.ensureWidgetVisible(p, 0, 0)
        QApplication.processEvents()
        whole, room = visible_rows(w, p.table)
        assert room >= TABLE_ROWS, (p.name, room, size)
        assert whole >= min(TABLE_ROWS, p.model.rowCount()), (p.name, whole, p.model.rowCount(), size)
    assert any(p.model.rowCount() >= TABLE_ROWS for p in w.panels.values())  # the rows were there to see


def text_width(label: QLabel) -> float:
    doc = QTextDocument()
    doc.setDefaultFont(label.font())
    doc.setHtml(label.text())
    return doc.idealWidth()


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_the_throughput_table_and_legends_are_whole(qtbot, window, size):
    """At 1280x720 the throughput line above the plot (ending in the drops) was wider than the
    dock: it pushed the table beside the plot past the right edge ("busy" cut), and the right axis's
    title ran past the plot's top. Now the plot, its line, its axes' titles and its table lie inside
    the dock's view, the table with room for its text; the utility legend too."""
    w = window
    finished(qtbot, w)
    w.docks["throughput"].raise_()
    settle(qtbot, w, size)
    th = w.throughput
    qtbot.waitUntil(lambda: th.capture.n >= 1, timeout=5000)  # its line and table carry the capture's figures
    for widget in (th.table, th.info, th.widget):
        assert shown(w, widget) == rect_in(w, widget), (widget, shown(w, widget), rect_in(w, widget), size)
    assert text_width(th.table) <= th.table.contentsRect().width(), size
    assert titles_out_of(th.widget) == [], size  # the right one overran a short plot
    w.docks["utility"].raise_()
    QApplication.processEvents()
    legend = w.utility.legend
    qtbot.waitUntil(lambda: bool(legend.text()), timeout=5000)
    assert shown(w, legend) == rect_in(w, legend) and text_width(legend) <= legend.contentsRect().width() + 1
    w.docks["throughput"].raise_()
    QApplication.processEvents()


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_status_lines_are_whole(qtbot, window, size):
    """The source bar's drops line elided from about 60 characters at 1280x720 (a wrapping label,
    which the overlap test lets elide) and the throughput line was cut. Now both are whole, the
    source bar's also with drops in the millions."""
    w = window
    finished(qtbot, w)
    settle(qtbot, w, size)
    w.timer.stop()  # the texts below are not overwritten while they are looked at
    try:
        stats = w.source_panel.stats
        stats.set_plain(f"running · 9,999,999 pkts · 999,999 pkts/s\n{WIDEST_DROPS.text()}")  # rendered at once
        assert shown(w, stats) == rect_in(w, stats)
        assert not stats.elided, (stats.full_text(), stats.width(), size)
        w.throughput.info.set_plain(f"Capture: 9,999,999 IP packets · {WIDEST_DROPS.text()}")
        assert not w.throughput.info.elided, size
    finally:
        w.timer.start()
        w.refresh()


def test_legends_beside_the_bars_and_sensible_idle_ranges(window):
    """Finding 6: the legend covered bars 3-5; an idle chart showed -0.2..0.2."""
    for p in window.panels.values():
        assert p.chart.plotItem.legend is None and "exact&nbsp;count" in p.legend.text()
        assert rect_in(window, p.legend).top() >= rect_in(window, p.chart).bottom()
    idle = AlgorithmPanel("dpss", True)
    (x0, x1), (y0, y1) = idle.chart.viewRange()
    assert x0 == 0 and x1 >= 1 and y0 > 0 and y1 >= 3
    for plot in (window.utility.widget, window.tuning.plot):
        assert plot.plotItem.legend is None or plot is window.tuning.plot
    idle.deleteLater()


def test_packets_per_second_reach_0_after_the_file_ends(qtbot, window):
    """Finding 6: the capture's packets/s decayed towards 1 on a log axis after the file ended."""
    finished(qtbot, window)
    before = window.throughput.capture.n
    qtbot.waitUntil(lambda: window.throughput.capture.n >= before + 2, timeout=10_000)
    _, y = window.throughput.capture.view()
    assert y[-1] == 0.0 and not window.throughput.widget.getPlotItem().getAxis("right").logMode


def test_one_release_is_singular(qtbot, window):
    """The window is the module's: it waits for its replay's end itself (run alone, or first, the
    replay had not started its lanes yet when it looked)."""
    finished(qtbot, window)
    qtbot.waitUntil(lambda: any(row.name == "dpsw" for row in window.budget.model.rows()), timeout=5000)
    view = next(lane for lane in window.session.snapshot().lanes if lane.name == "dpsw")
    assert view.algorithm.releases <= 1 and re.search(r"\b1 release\b(?!s)", status_text(view, None))
    scope = next(row.scope for row in window.budget.model.rows() if row.name == "dpsw")  # it said "1 releases"
    assert re.fullmatch(r"1 release, 1 run", scope), scope


LARGE = ((1920, 1080), (2560, 1440))


@pytest.fixture(scope="module")
def demo_window(tmp_path_factory):
    """The window ``dptop demo`` opens (its four panels), with no source: its geometry alone."""
    w = shown_window(tmp_path_factory, demo_config(), (1920, 1080))
    QApplication.processEvents()
    yield w
    w.close()


@pytest.mark.parametrize("size", LARGE, ids=[f"{w}x{h}" for w, h in LARGE])
def test_every_demo_panel_is_whole_on_a_large_screen(qtbot, demo_window, size):
    """At 1920x1080 the demo's second row of panels (dpsw, exact) was cut below an overview that
    kept empty rows: the panels had to be scrolled to. Now every panel shows whole at once."""
    w = demo_window
    settle(qtbot, w, size)
    viewport = rect_in(w, w.scroll_area.viewport())
    for p in w.panels.values():
        assert viewport.contains(rect_in(w, p)), (p.name, rect_in(w, p), viewport, size)
    assert w.scroll_area.verticalScrollBar().maximum() == 0, size


def room_rows(w, table) -> int:
    """Rows ``table``'s visible viewport has room for (a partly shown row counts)."""
    height = shown(w, table.viewport()).height()
    return -(-height // table.verticalHeader().defaultSectionSize())


@pytest.mark.parametrize("size", SIZES + LARGE[1:], ids=[f"{w}x{h}" for w, h in SIZES + LARGE[1:]])
def test_the_overview_holds_no_empty_rows(qtbot, window, demo_window, size):
    """The overview took 40 % of the central area whatever it held (at 1920x1080 about ten empty
    rows above cut panels). Now it is as tall as its rows (one empty row when it has none), at least
    ``OVERVIEW_ROWS`` of them when it has that many, the rest scrolling."""
    w = window
    finished(qtbot, w)
    settle(qtbot, w, size)
    qtbot.waitUntil(lambda: bool(w.overview.model.rows()), timeout=5000)
    rows = w.overview.proxy.rowCount()
    room = room_rows(w, w.overview.table)
    assert room <= max(1, rows), (room, rows, size)
    whole, _ = visible_rows(w, w.overview.table)
    assert whole >= min(rows, OVERVIEW_ROWS), (whole, rows, size)
    settle(qtbot, demo_window, size)
    assert demo_window.overview.proxy.rowCount() == 0 and room_rows(demo_window, demo_window.overview.table) <= 1


def cell_text_width(table, index) -> int:
    """Pixels of its column the cell at ``index`` needs to show its text on one line: what the
    table's item delegate asks for it (its font, the style's margins) and the grid line."""
    return table.sizeHintForIndex(index).width() + int(table.showGrid())


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_budget_columns_fit_and_shortened_cells_keep_their_text(qtbot, window, size):
    """At 1280x720 the budget's Scope column wrapped (cut at the row's bottom) and the total row
    ended "everything published s…" with no tooltip; the columns needed a horizontal scroll bar.
    Now every column shows without scrolling, nothing wraps, and a cell whose text is shortened
    has the whole text as its tooltip."""
    w = window
    finished(qtbot, w)
    w.docks["budget"].raise_()
    settle(qtbot, w, size)
    table = w.budget.table
    model = table.model()
    assert model.rowCount() >= 2, size  # dpsw, dpss, lazyhh and the total at least
    header = table.horizontalHeader()
    assert header.length() <= table.viewport().width() + 1, (header.length(), table.viewport().width(), size)
    assert not table.horizontalScrollBar().isVisible(), size
    assert not table.wordWrap()
    for c in range(model.columnCount()):
        assert header.sectionSize(c) >= header.fontMetrics().horizontalAdvance(model.headerData(
            c, Qt.Orientation.Horizontal)[:1] + "…"), (c, size)  # every column shows, at least its title's start
        for r in range(model.rowCount()):
            index = model.index(r, c)
            if cell_text_width(table, index) > header.sectionSize(c):
                assert index.data(Qt.ItemDataRole.ToolTipRole) == index.data(), (r, c, index.data(), size)
    w.docks["throughput"].raise_()


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_tuning_controls_are_whole_sideways(qtbot, window, size):
    """At 1280x720 the tuning tab's controls column was cut at its right edge (the spin boxes and
    the Cancel button ran past it). Now each control lies whole inside the column's width (the
    column scrolls up and down in a short tab, never sideways)."""
    w = window
    finished(qtbot, w)
    w.docks["tuning"].raise_()
    settle(qtbot, w, size)
    t = w.tuning
    controls = (t.algorithm, t.parameter, t.values, t.reps, t.record, t.run, t.stop, t.progress, t.message,
                t.choice, t.apply)
    for x in controls:
        r, s = rect_in(w, x), shown(w, x)
        assert (s.left(), s.right()) == (r.left(), r.right()), (type(x).__name__, s, r, size)
    w.docks["throughput"].raise_()


def overlapping_siblings(root: QWidget) -> list:
    """Pairs of visible sibling widgets under ``root`` whose rectangles intersect (a scroll area's
    own parts and Qt's internal children excepted)."""
    found = []
    for parent in [root, *root.findChildren(QWidget)]:
        if not parent.isVisible():
            continue
        kids = [k for k in parent.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
                if k.isVisible() and not k.isWindow() and not k.objectName().startswith("qt_")]
        for a, b in combinations(kids, 2):
            if a.geometry().intersects(b.geometry()):
                found.append((parent, a, b))
    return found


FRONTS = ("throughput", "budget", "utility", "tuning")


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_tab_nothing_overlaps_no_label_is_cut(qtbot, window, size, front):
    """Each bottom tab in front, at each size: no two visible widgets in it overlap, and its labels
    show their whole text or elide only what does not fit (the overlap test looks at the tab in
    front only, which was the throughput tab)."""
    w = window
    finished(qtbot, w)
    w.docks[front].raise_()
    settle(qtbot, w, size)
    dock = w.docks[front]
    assert not overlapping_siblings(dock.widget()), [(type(p).__name__, type(a).__name__, a.geometry(),
                                                       type(b).__name__, b.geometry())
                                                      for p, a, b in overlapping_siblings(dock.widget())]
    assert_labels_whole(w, dock, size)
    w.docks["throughput"].raise_()
