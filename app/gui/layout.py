"""The central area's geometry: which panels it holds and in how many columns (as many as its width
holds, so no panel is cut sideways), how tall the panels' area is (the tallest panel whole at least;
every panel whole when the window has the height, the bottom tabs giving way first) and how tall the
overview above the panels is (as tall as its rows, no taller). The functions take the main window
(dptop.gui.main), whose ``grid``, ``scroll_area``, ``central`` and ``overview`` they arrange."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGridLayout, QScrollArea, QVBoxLayout, QWidget

from dptop.gui.docks import BOTTOM, BOTTOM_MIN, TABS_HEIGHT, room_for_tuning
from dptop.gui.drilldown import open_drilldown
from dptop.gui.overview import OVERVIEW_ROWS
from dptop.gui.panel import AlgorithmPanel
from dptop.monitor import catalogue

PANEL_WIDTH = 520  # px a panel needs beside another (its table's columns and a chart); one column below
MAX_COLUMNS = 3


class ReflowArea(QScrollArea):
    """A scroll area that reports its viewport's width (the panels reflow to it)."""

    def __init__(self, on_width):
        super().__init__()
        self._on_width = on_width

    def resizeEvent(self, event):
        super().resizeEvent(event)
        self._on_width(self.viewport().width())


class CentralArea(QWidget):
    """The overview above the panels' scroll area; reports its resizes (the overview's height follows)."""

    def __init__(self, on_resize):
        super().__init__()
        self._on_resize = on_resize

    def resizeEvent(self, event):
        super().resizeEvent(event)
        self._on_resize()


def build_central(window) -> None:
    """The central area of ``window``: its ``overview`` above the panels' grid in a scroll area
    (``window.grid``, ``window.scroll_area``, ``window.central``), no panel in it yet."""
    window.columns = 0  # panel columns now (reflowed with the width)
    window.every_panel = 0  # px the panels' area needs to show every panel whole (``room_for_panels``)
    window.tuning_in_front = False
    window.grid = QGridLayout()
    window.grid.setContentsMargins(0, 0, 0, 0)  # the panels have their own frames
    holder = QWidget()
    holder.setLayout(window.grid)
    window.scroll_area = ReflowArea(lambda width: reflow(window, width))
    window.scroll_area.setWidgetResizable(True)
    window.scroll_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    window.scroll_area.setWidget(holder)
    central = CentralArea(lambda: fit_overview(window))
    central.setObjectName("central")
    column = QVBoxLayout(central)
    column.setContentsMargins(0, 0, 0, 0)
    column.addWidget(window.overview)
    column.addWidget(window.scroll_area, 1)
    window.central = central
    window.setCentralWidget(central)
    for signal in ("modelReset", "rowsInserted", "rowsRemoved", "layoutChanged"):  # its rows, as filtered
        getattr(window.overview.proxy, signal).connect(lambda *_: fit_overview(window))


def layout_panels(window, names) -> None:
    """One panel per name in ``names`` order, row by row in as many columns as fit (the
    parameters panel keeps that order across Apply: a restarted algorithm keeps its panel and
    its place)."""
    for panel in window.panels.values():
        window.grid.removeWidget(panel)
    for name in [n for n in window.panels if n not in names]:
        window.panels.pop(name).deleteLater()
    window.panels = {n: window.panels[n] for n in names if n in window.panels}  # names' order, kept by Apply
    for name in names:
        if name not in window.panels:
            window.panels[name] = AlgorithmPanel(name, catalogue.entry(name).private)
            window.panels[name].drill_requested.connect(lambda n, key, exact: open_drilldown(window, n, key, exact))
            window.panels[name].set_frozen(window.frozen)
    window.columns = 0
    reflow(window, window.scroll_area.viewport().width())  # and the room for the panels' rows


def reflow(window, width: int) -> None:
    """Place the panels in as many columns as ``width`` holds (each at least ``PANEL_WIDTH`` and
    its own minimum, so no panel is cut; one at least)."""
    grid = window.grid
    spacing = max(0, grid.horizontalSpacing())
    need = max([PANEL_WIDTH, *(p.minimumSizeHint().width() for p in window.panels.values())]) + spacing
    margins = grid.contentsMargins()
    columns = max(1, min(MAX_COLUMNS, (width - margins.left() - margins.right() + spacing) // need))
    if columns == window.columns:
        return
    window.columns = columns
    for panel in window.panels.values():
        grid.removeWidget(panel)
    for i, name in enumerate(window.panels):
        grid.addWidget(window.panels[name], i // columns, i % columns)
    for c in range(MAX_COLUMNS):
        grid.setColumnStretch(c, 1 if c < columns else 0)
    room_for_panels(window)


def panels_height(window, rows: int) -> int:
    """The panels' area's height that shows ``rows`` rows of panels whole (each as tall as the tallest)."""
    tallest = max((p.minimumSizeHint().height() for p in window.panels.values()), default=0)
    margins = window.grid.contentsMargins()
    return (rows * tallest + max(0, rows - 1) * max(0, window.grid.verticalSpacing())
            + margins.top() + margins.bottom() + 2 * window.scroll_area.frameWidth())


def panel_rows(window) -> int:
    return -(-len(window.panels) // max(1, window.columns))


def fit_overview(window) -> None:
    """The overview as tall as its rows, no taller (one empty row when it has none): the room
    for every panel whole comes first; then the overview keeps room for ``OVERVIEW_ROWS`` rows
    (or as many as it has) and its other rows scroll."""
    overview = window.overview
    rows = overview.proxy.rowCount()
    line = overview.table.verticalHeader().defaultSectionSize()
    room = window.central.height() - window.central.layout().spacing() - window.every_panel - overview.height_for(0)
    shown = max(min(rows, OVERVIEW_ROWS), min(rows, room // line), 1)
    overview.setFixedHeight(overview.height_for(shown))


def tuning_shown(window, visible: bool) -> None:
    """The tuning tab in front gets the height its plots need (the panels scroll meanwhile);
    behind the other tabs again, it gives the panels back the room for one whole panel."""
    window.tuning_in_front = visible
    room_for_panels(window)
    room_for_tuning(window, visible)


def room_for_panels(window) -> None:
    """The panels' area is at least as tall as the tallest panel (its header lines and
    ``panel.TABLE_ROWS`` table rows): the bottom tabs give way first, except the tuning tab.
    When the window has the height, the bottom tabs give way further (down to ``BOTTOM_MIN``)
    so that every panel shows whole and the overview keeps ``OVERVIEW_ROWS`` rows."""
    window.scroll_area.setMinimumHeight(0 if window.tuning_in_front else panels_height(window, 1))
    window.every_panel = panels_height(window, panel_rows(window))  # measured here, not at every overview update
    fit_overview(window)
    central = window.central
    central.updateGeometry()  # the window's layout reads the new minimum now, before docks are resized
    if window.tuning_in_front or not window.isVisible():
        return
    need = window.overview.height_for(OVERVIEW_ROWS) + central.layout().spacing() + window.every_panel
    bottom = next((d for d in window.docks.values() if window.dockWidgetArea(d) == BOTTOM and d.isVisible()
                   and not d.visibleRegion().isEmpty()), None)
    short = need - central.height()
    if bottom is not None and short > 0 and bottom.height() - short + TABS_HEIGHT >= BOTTOM_MIN:
        window.resizeDocks([bottom], [bottom.height() - short], Qt.Orientation.Vertical)
