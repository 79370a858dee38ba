"""The window's menu bar (File, Run, View, Help) and its keys: every menu action and shortcut
works wherever the focus is in the window (the help overlay, F1 or ?, lists them)."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence, QShortcut

from dptop.gui.help import TIPS


def build_menus(window) -> None:
    """File, Run, View and Help on ``window`` (a ``MainWindow``); sets its ``act_open``,
    ``act_export`` and ``act_freeze`` actions."""
    file = window.menuBar().addMenu("&File")
    window.act_open = file.addAction("Open capture…", window.source_panel.choose_file, QKeySequence.StandardKey.Open)
    window.act_export = file.addAction("Export private releases…", window.export_dialog, QKeySequence("Ctrl+E"))
    file.addAction("Save throughput plot as PNG…", lambda: window.save_plot_dialog(window.throughput.widget),
                   QKeySequence("Ctrl+Shift+E"))
    file.addAction("Save utility plot as PNG…", lambda: window.save_plot_dialog(window.utility.widget))
    file.addSeparator()
    file.addAction("Quit", window.close, QKeySequence.StandardKey.Quit)
    run = window.menuBar().addMenu("&Run")
    run.addAction("Start", lambda: window.open_source(window.source_panel.spec()), QKeySequence("Ctrl+R"))
    run.addAction("Pause / resume", window.toggle_pause, QKeySequence("P"))
    run.addAction("Stop", window.stop_source, QKeySequence("Ctrl+."))
    run.addAction("Apply parameters", window.params.apply, QKeySequence("Ctrl+Return"))
    view = window.menuBar().addMenu("&View")
    window.act_freeze = QAction("Freeze tables", window, checkable=True)
    window.act_freeze.setToolTip(TIPS["freeze"])
    window.act_freeze.toggled.connect(window.set_frozen)
    view.addAction(window.act_freeze)
    for dock in window.docks.values():
        view.addAction(dock.toggleViewAction())
    help_menu = window.menuBar().addMenu("&Help")
    help_menu.addAction("Shortcuts and terms", window.overlay.toggle, QKeySequence("F1"))
    for menu in (file, run, view, help_menu):  # shortcuts work wherever the focus is in the window
        window.addActions(menu.actions())


def install_shortcuts(window) -> None:
    """The keys no menu carries: Space freezes the tables, ? and Esc show and hide the help."""
    for keys, slot in (("Space", lambda: window.act_freeze.toggle()), ("?", window.overlay.toggle),
                       ("Esc", window.overlay.hide)):
        sc = QShortcut(QKeySequence(keys), window)
        sc.setContext(Qt.ShortcutContext.WindowShortcut)
        sc.activated.connect(slot)
