"""The window's docks: the parameters at the left; throughput, privacy budget, utility and tuning
as tabs at the bottom. A dock smaller than its content scrolls, never overlaps its neighbours; the
first start shares the window out in proportion (``first_proportions``); the tuning tab, when
shown, is given the height its plots need (``room_for_tuning``) and they stretch into it."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QFrame, QScrollArea, QWidget

from dptop.gui.tuning import HEIGHT as TUNING_HEIGHT

PARAMS_WIDTH = 290
BOTTOM_SHARE = 0.3  # of the window's height, for the throughput / budget / utility / tuning tabs
TABS_HEIGHT = 28  # the bottom docks' tab bar
BOTTOM_MIN = 260  # px (with their tab bar) the bottom tabs keep when they give way for every panel whole: a readable plot

LEFT, BOTTOM = Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.BottomDockWidgetArea
DOCKS = (("params", "Parameters", LEFT), ("throughput", "Throughput", BOTTOM), ("budget", "Privacy budget", BOTTOM),
         ("utility", "Utility over time", BOTTOM), ("tuning", "Tuning (what-if sweeps)", BOTTOM))
"""(key, title, area) of each dock, in the View menu's order; the bottom ones are tabbed."""


def scrolled(widget: QWidget) -> QScrollArea:
    """``widget`` in a frameless scroll area (a dock content that may not fit)."""
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setWidget(widget)
    return area


def build_docks(window, widgets: dict[str, QWidget]) -> dict[str, QDockWidget]:
    """One dock per entry of ``DOCKS`` around ``widgets[key]`` on ``window``, the bottom ones
    tabbed with the throughput tab in front."""
    docks = {}
    for key, title, area in DOCKS:
        dock = QDockWidget(title, window)
        dock.setObjectName(f"dock-{key}")
        dock.setWidget(scrolled(widgets[key]))
        window.addDockWidget(area, dock)
        docks[key] = dock
    bottom = [docks[key] for key, _, area in DOCKS if area == BOTTOM]
    for a, b in zip(bottom, bottom[1:]):
        window.tabifyDockWidget(a, b)
    bottom[0].raise_()
    return docks


def first_proportions(window) -> None:
    """First start (no saved window state): the docks in proportion to the window (the central
    area's overview takes the height of its rows, the panels the rest)."""
    window.resizeDocks([window.docks["params"]], [PARAMS_WIDTH], Qt.Orientation.Horizontal)
    window.resizeDocks([window.docks["throughput"]], [int(BOTTOM_SHARE * window.height())], Qt.Orientation.Vertical)


def room_for_tuning(window, visible: bool) -> None:
    """The tuning tab, when shown, gets the height its plots need (up to half the window)."""
    dock = window.docks["tuning"]
    chrome = dock.height() - dock.widget().height()  # its title bar
    want = min(max(TUNING_HEIGHT, window.tuning.minimumSizeHint().height()) + chrome + TABS_HEIGHT,
               window.height() // 2)
    if visible and dock.height() < want:
        window.resizeDocks([dock], [want], Qt.Orientation.Vertical)
