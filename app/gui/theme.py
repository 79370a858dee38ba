"""Light/dark: plots follow the application palette, which Qt takes from the system colour
scheme; a scheme change at run time restyles every plot."""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QGuiApplication


def plot_colors():
    pal = QGuiApplication.palette()
    return pal.base().color(), pal.text().color()


def apply_plot_theme(window) -> None:
    """Set pyqtgraph's defaults (for plots created next) and restyle the window's plots."""
    background, foreground = plot_colors()
    pg.setConfigOptions(background=background, foreground=foreground, antialias=True)
    for plot in window.findChildren(pg.PlotWidget):
        plot.setBackground(background)
        for name in ("left", "bottom"):
            axis = plot.getAxis(name)
            axis.setPen(foreground)
            axis.setTextPen(foreground)


def watch_color_scheme(window) -> None:
    hints = QGuiApplication.styleHints()
    signal = getattr(hints, "colorSchemeChanged", None)
    if signal is not None:
        signal.connect(lambda *_: apply_plot_theme(window))
