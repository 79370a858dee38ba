"""The main window: source bar, one panel per algorithm, and docks for parameters, budget,
throughput, utility and tuning. ``run_gui(path)`` is what ``dptop gui`` / ``dptop demo`` call.

Threads: the ``Session`` runs capture, algorithms and the truth on their own threads; this window
only polls immutable snapshots from a ``QTimer`` (20 Hz) and redraws what changed.
"""
from __future__ import annotations

import json
import sys
import time
from collections import deque
from dataclasses import asdict
from pathlib import Path

from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence, QShortcut
from PySide6.QtWidgets import (QApplication, QDockWidget, QFileDialog, QGridLayout, QLabel, QMainWindow,
                               QScrollArea, QToolBar, QWidget)

from dptop.gui.budget import BudgetPanel
from dptop.gui.drilldown import open_drilldown
from dptop.gui.export import export_csv, export_json, save_png
from dptop.gui.help import TIPS, HelpOverlay
from dptop.gui.panel import AlgorithmPanel
from dptop.gui.params import ParametersPanel
from dptop.gui.plots import ThroughputPlot, UtilityPlot
from dptop.monitor.config import Counting, RunConfig, SourceSpec
from dptop.monitor.ledger import Ledger
from dptop.monitor.session import Session
from dptop.gui.source_panel import SourcePanel
from dptop.gui.tuning import TuningPanel
from dptop.gui.theme import apply_plot_theme, watch_color_scheme
from dptop.engine.core import registry
from dptop.engine.core.settings import Settings
from dptop.resources import DEMO_CAPTURE

SWITCH_INTERVAL = 0.001
"""GIL switch interval (s) while the window is open: every Qt callback into Python (timer, paint
of a plot item) needs the GIL, and with busy worker threads the default 5 ms wait per
acquisition would cut the redraw rate; 1 ms keeps it >= 10 Hz with every algorithm on."""
REFRESH_MS = 50  # 20 redraws per second when the machine keeps up (>= 10 required)
LANES_PER_TICK = 4  # runner snapshots taken per tick (each lane is refreshed every few ticks)
REDRAWS_PER_TICK = 1  # panels whose table and chart are redrawn per tick (bounded work per tick)
PANEL_PERIOD = 0.5  # a panel's table and chart change at most this often (s): rows a person can read
TEXT_PERIOD = 0.5  # status lines (rates, thresholds) are rewritten at most this often (s)
THROUGHPUT_EVERY = 1.0  # seconds between throughput samples
PREFERRED = ("dpss", "lazyhh", "dpsw", "exact", "spacesaving")


DEMO_SPEED = 10.0
"""The bundled demo capture replays at this multiple of real time (no loop)."""


def default_config() -> RunConfig:
    """First start (no saved settings): the preferred algorithms and epochs of 5 s of packet
    time; everything else is the algorithms' own default (a replay's horizon is its length)."""
    names = tuple(n for n in PREFERRED if n in registry.names())
    return RunConfig(names, Settings(k=8, epsilon=0.5, delta=1e-6, epoch_seconds=5.0))


def demo_config() -> RunConfig:
    """``dptop demo``: settings under which the three private panels release several sources on
    the bundled capture (resources/SOURCES.md) within its first minute of packet time (6 s at
    10x). k = 16, epochs of 10 s: DPSS releases the 3-7 sources above ~n/16 of each epoch.
    k~ = 1024: LazyHH's suppression threshold stays near 14.5k packets over the horizon (the
    file's 152,629 packets), which the attack waves' three sources pass after ~55 s of packet
    time. DPSW: the last 20,000 packets, γ = 0.04 (800 packets). The exact baseline beside them:
    four panels, so each shows several rows at 1600x1000."""
    return RunConfig(("dpss", "lazyhh", "dpsw", "exact"), Settings(k=16, k_tilde=1024, epsilon=0.5, delta=1e-6,
                                                                  epoch_seconds=10.0, window=20_000, gamma=0.04))


def preview_ledger(guarantees: dict) -> dict | None:
    """What the configured algorithms would spend, as a ledger of one release each (no session yet)."""
    ledger = Ledger()
    for name, g in guarantees.items():
        ledger.record(name, 0, g, 1)
    return ledger.to_json()


def config_to_json(config: RunConfig) -> str:
    return json.dumps({"names": list(config.names), "settings": asdict(config.settings), "extras": config.extras,
                       "counting": asdict(config.counting)})


def config_from_json(text: str) -> RunConfig:
    d = json.loads(text)
    known = set(registry.names())
    settings = Settings(**{k: v for k, v in d["settings"].items() if k in Settings.__dataclass_fields__})
    return RunConfig(tuple(n for n in d["names"] if n in known), settings.with_(stream_length=None), d.get("extras", {}),
                     Counting(**d.get("counting", {})))


class MainWindow(QMainWindow):
    def __init__(self, config: RunConfig | None = None, settings: QSettings | None = None,
                 record_packets: int = 1 << 20):
        super().__init__()
        self._switch_interval = sys.getswitchinterval()  # restored by shutdown()
        sys.setswitchinterval(SWITCH_INTERVAL)
        self.setWindowTitle("dptop — private top talkers")
        self.setAcceptDrops(True)
        self.store = settings if settings is not None else QSettings("dptop", "dptop")
        self.record_packets = record_packets
        self.config = config or self._saved_config() or default_config()
        self.session: Session | None = None
        self.old_sessions: list[Session] = []
        self.frozen = False
        self.redraws: deque = deque(maxlen=400)
        self.drilldowns: list = []
        self._last_throughput = 0.0
        apply_plot_theme(self)

        self.source_panel = SourcePanel()
        bar = QToolBar("Source")
        bar.setObjectName("sourceBar")
        bar.addWidget(self.source_panel)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, bar)

        self.panels: dict[str, AlgorithmPanel] = {}
        self.grid = QGridLayout()
        holder = QWidget()
        holder.setLayout(self.grid)
        self.scroll_area = QScrollArea()
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setWidget(holder)
        self.setCentralWidget(self.scroll_area)
        self.overlay = HelpOverlay(self.scroll_area)

        self.params = ParametersPanel(self.config)
        self.budget = BudgetPanel()
        self.throughput = ThroughputPlot()
        self.utility = UtilityPlot()
        self.tuning = TuningPanel(self)
        self.docks = {}
        for key, title, widget, area in (
                ("params", "Parameters", self.params, Qt.DockWidgetArea.LeftDockWidgetArea),
                ("throughput", "Throughput", self.throughput, Qt.DockWidgetArea.BottomDockWidgetArea),
                ("budget", "Privacy budget", self.budget, Qt.DockWidgetArea.BottomDockWidgetArea),
                ("utility", "Utility over time", self.utility, Qt.DockWidgetArea.BottomDockWidgetArea),
                ("tuning", "Tuning (what-if sweeps)", self.tuning, Qt.DockWidgetArea.BottomDockWidgetArea)):
            dock = QDockWidget(title, self)
            dock.setObjectName(f"dock-{key}")
            dock.setWidget(widget)
            self.addDockWidget(area, dock)
            self.docks[key] = dock
        self.tabifyDockWidget(self.docks["throughput"], self.docks["budget"])
        self.tabifyDockWidget(self.docks["budget"], self.docks["utility"])
        self.tabifyDockWidget(self.docks["utility"], self.docks["tuning"])
        self.docks["throughput"].raise_()
        self.resizeDocks([self.docks["params"]], [290], Qt.Orientation.Horizontal)
        self.resizeDocks([self.docks["throughput"]], [260], Qt.Orientation.Vertical)

        self.fps = QLabel()
        self.freeze_label = QLabel()
        self.statusBar().addPermanentWidget(self.freeze_label)
        self.statusBar().addPermanentWidget(self.fps)
        self._menus()
        self._shortcuts()

        self.params.applied.connect(self.apply_config)
        self.source_panel.start_requested.connect(self.open_source)
        self.source_panel.pause_toggled.connect(self.toggle_pause)
        self.source_panel.stop_requested.connect(self.stop_source)
        self._layout_panels(self.config.names)
        self._restore()
        watch_color_scheme(self)

        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.refresh)
        self.timer.start()

    # ----- menus and keys ----------------------------------------------------------------
    def _menus(self) -> None:
        file = self.menuBar().addMenu("&File")
        self.act_open = file.addAction("Open capture…", self.source_panel.choose_file, QKeySequence.StandardKey.Open)
        self.act_export = file.addAction("Export private releases…", self.export_dialog, QKeySequence("Ctrl+E"))
        file.addAction("Save throughput plot as PNG…", lambda: self.save_plot_dialog(self.throughput.widget),
                       QKeySequence("Ctrl+Shift+E"))
        file.addAction("Save utility plot as PNG…", lambda: self.save_plot_dialog(self.utility.widget))
        file.addSeparator()
        file.addAction("Quit", self.close, QKeySequence.StandardKey.Quit)
        run = self.menuBar().addMenu("&Run")
        run.addAction("Start", lambda: self.open_source(self.source_panel.spec()), QKeySequence("Ctrl+R"))
        run.addAction("Pause / resume", self.toggle_pause, QKeySequence("P"))
        run.addAction("Stop", self.stop_source, QKeySequence("Ctrl+."))
        run.addAction("Apply parameters", self.params.apply, QKeySequence("Ctrl+Return"))
        view = self.menuBar().addMenu("&View")
        self.act_freeze = QAction("Freeze tables", self, checkable=True)
        self.act_freeze.setToolTip(TIPS["freeze"])
        self.act_freeze.toggled.connect(self.set_frozen)
        view.addAction(self.act_freeze)
        for dock in self.docks.values():
            view.addAction(dock.toggleViewAction())
        help_menu = self.menuBar().addMenu("&Help")
        help_menu.addAction("Shortcuts and terms", self.overlay.toggle, QKeySequence("F1"))
        for menu in (file, run, view, help_menu):  # shortcuts work wherever the focus is in the window
            self.addActions(menu.actions())

    def _shortcuts(self) -> None:
        for keys, slot in (("Space", lambda: self.act_freeze.toggle()), ("?", self.overlay.toggle),
                           ("Esc", self.overlay.hide)):
            sc = QShortcut(QKeySequence(keys), self)
            sc.setContext(Qt.ShortcutContext.WindowShortcut)
            sc.activated.connect(slot)

    # ----- panels ------------------------------------------------------------------------
    def _layout_panels(self, names) -> None:
        """One panel per name, two per row in ``names`` order (the parameters panel keeps that
        order across Apply: a restarted algorithm keeps its panel and its place)."""
        for panel in self.panels.values():
            self.grid.removeWidget(panel)
        for name in [n for n in self.panels if n not in names]:
            self.panels.pop(name).deleteLater()
        for name in names:
            if name not in self.panels:
                self.panels[name] = AlgorithmPanel(name, registry.get(name).private)
                self.panels[name].drill_requested.connect(lambda n, key, exact: open_drilldown(self, n, key, exact))
                self.panels[name].set_frozen(self.frozen)
        for i, name in enumerate(names):
            self.grid.addWidget(self.panels[name], i // 2, i % 2)

    def set_frozen(self, frozen: bool) -> None:
        self.frozen = frozen
        for panel in self.panels.values():
            panel.set_frozen(frozen)
        self.freeze_label.setText("FROZEN (Space to resume)" if frozen else "")

    # ----- session -----------------------------------------------------------------------
    def open_source(self, spec: SourceSpec) -> None:
        if spec.kind == "file" and not spec.path:
            self.statusBar().showMessage("Choose a capture file first (Ctrl+O)", 5000)
            return
        if spec.kind == "live" and not spec.iface:
            self.statusBar().showMessage("No network interface to capture from", 5000)
            return
        self.stop_source()
        self.throughput.reset()
        self.utility.reset()
        self.source_panel.reset_rate()
        self.session = Session(self.config, record_packets=self.record_packets)
        self.session.open(spec)
        self.statusBar().showMessage(f"Reading {spec.label()}", 3000)

    def open_file(self, path: str, speed: float | None = None) -> None:
        self.source_panel.set_file(str(path))
        self.source_panel.set_speed(speed)
        self.open_source(self.source_panel.spec())

    def stop_source(self) -> None:
        if self.session is not None:
            self.session.stop()
            self.old_sessions.append(self.session)
            self.session = None

    def toggle_pause(self) -> None:
        if self.session is None:
            return
        if self.session.state == "paused":
            self.session.resume()
        else:
            self.session.pause()

    def apply_config(self, config: RunConfig) -> None:
        recount = self.session is not None and config.counting != self.session.config.counting
        self.config = config
        self._layout_panels(config.names)
        restarted = []
        if recount:  # another key or weight: every count starts again, from the source's start
            self.open_source(self.source_panel.spec())
            restarted = list(config.names)
        elif self.session is not None:
            restarted = self.session.apply(config)
        self.tuning.show_limits()
        self.statusBar().showMessage(f"Applied; restarted: {', '.join(restarted) or 'none'}", 5000)

    # ----- the timer ---------------------------------------------------------------------
    def refresh(self) -> None:
        now = time.monotonic()
        session = self.session
        snap = None if session is None else session.snapshot(lanes=LANES_PER_TICK)
        self.source_panel.show_state(snap)
        if snap is not None:
            if snap.state == "starting":  # no lanes yet, or kernels compiling: say so in every panel
                for name in self.panels.keys() - {lane.name for lane in snap.lanes}:
                    self.panels[name].show_phase(snap.phase)
            stale = []
            for lane in snap.lanes:
                panel = self.panels.get(lane.name)
                a, truth = lane.algorithm, lane.truth
                if a is not None and a.private:
                    self.utility.add(now, lane.name, truth)
                if panel is not None:
                    if now - panel.texted_at >= TEXT_PERIOD or panel.generation != lane.generation:
                        panel.texted_at = now
                        panel.update_text(lane, truth)
                    if panel.needs_redraw(lane, truth) and (now - panel.redrawn_at >= PANEL_PERIOD
                                                            or panel.only_truth_arrived(lane, truth)):
                        stale.append((panel.redrawn_at, panel, lane, truth))
            # tables and charts: a bounded number per tick, the longest-waiting first
            for _, panel, lane, truth in sorted(stale, key=lambda x: x[0])[:REDRAWS_PER_TICK]:
                panel.redraw(lane, truth)
            if now - self._last_throughput >= THROUGHPUT_EVERY:
                self._last_throughput = now
                self.throughput.sample(snap)
                self.utility.redraw()
        self.budget.update_from(snap.budget if snap is not None else preview_ledger(self.params.preview))
        self.tuning.poll()
        self.redraws.append(now)
        self.fps.setText(f"{self.redraw_rate():.0f} redraws/s")

    def redraw_rate(self, seconds: float = 2.0) -> float:
        """Timer redraws per second over the last ``seconds``."""
        if len(self.redraws) < 2:
            return 0.0
        end = self.redraws[-1]
        recent = [t for t in self.redraws if t >= end - seconds]
        span = recent[-1] - recent[0]
        return (len(recent) - 1) / span if span > 0 else 0.0

    # ----- export ------------------------------------------------------------------------
    def private_releases(self) -> dict:
        """Every private release published so far, per algorithm (what export writes)."""
        if self.session is None:
            return {}
        return {n: self.session.releases(n) for n in self.session.lanes if registry.get(n).private}

    def export_to(self, base: Path) -> tuple[Path, Path]:
        csv_path, json_path = base.with_suffix(".csv"), base.with_suffix(".json")
        export_csv(csv_path, self.private_releases())
        if self.session is not None:
            export_json(json_path, self.session)
        return csv_path, json_path

    def export_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export private releases (CSV + JSON)", "dptop-releases.csv",
                                              "CSV (*.csv)")
        if path:
            csv_path, json_path = self.export_to(Path(path))
            self.statusBar().showMessage(f"Wrote {csv_path} and {json_path}", 5000)

    def save_plot_dialog(self, widget) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save plot as PNG", "dptop-plot.png", "PNG (*.png)")
        if path:
            save_png(widget, path)

    # ----- drag and drop -----------------------------------------------------------------
    def dragEnterEvent(self, event):
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event):
        urls = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if urls:
            self.source_panel.set_file(urls[0])
            self.open_source(self.source_panel.spec())

    # ----- persistence and shutdown ------------------------------------------------------
    def _saved_config(self) -> RunConfig | None:
        text = self.store.value("config")
        if not text:
            return None
        try:
            return config_from_json(str(text))
        except (ValueError, KeyError, TypeError):
            return None

    def _restore(self) -> None:
        geometry, state = self.store.value("geometry"), self.store.value("windowState")
        if geometry is not None:
            self.restoreGeometry(geometry)
        else:  # first start: 1600x1000, the size the layout is checked at, or the screen if smaller
            screen = self.screen().availableGeometry()
            self.resize(min(1600, screen.width()), min(1000, screen.height()))
        if state is not None:
            self.restoreState(state)
        self.source_panel.restore(self.store)

    def _save(self) -> None:
        self.store.setValue("geometry", self.saveGeometry())
        self.store.setValue("windowState", self.saveState())
        self.store.setValue("config", config_to_json(self.params.current))
        self.source_panel.save(self.store)
        self.store.sync()

    def shutdown(self, timeout: float = 1.0) -> list[str]:
        """Stop every thread (sessions, sweeps) within ``timeout``; returns threads still alive."""
        self.timer.stop()
        self.stop_source()
        self.tuning.cancel()
        deadline = time.monotonic() + timeout
        alive = []
        for session in self.old_sessions:
            alive += session.close(max(0.0, deadline - time.monotonic()))
        alive += self.tuning.join(max(0.0, deadline - time.monotonic()))
        self.old_sessions = []
        sys.setswitchinterval(self._switch_interval)
        return alive

    def closeEvent(self, event):
        self._save()
        self.shutdown()
        super().closeEvent(event)


def screenshot(out: str, path: str = str(DEMO_CAPTURE), seconds: float = 8.0, size=(1600, 1000)) -> int:
    """Open the window on ``path`` (demo settings, fresh preferences), replay for ``seconds`` and
    save ``QWidget.grab()`` of the window to ``out`` (the README screenshot and its test)."""
    import tempfile

    app = QApplication.instance() or QApplication(sys.argv[:1])
    with tempfile.TemporaryDirectory() as tmp:
        window = MainWindow(config=demo_config(), settings=QSettings(str(Path(tmp) / "dptop.ini"),
                                                                         QSettings.Format.IniFormat))
        window.resize(*size)
        window.show()
        window.open_file(path, speed=DEMO_SPEED)

        def grab():
            window.grab().save(out, "PNG")
            window.close()

        QTimer.singleShot(int(seconds * 1000), grab)
        return app.exec()


def run_gui(path: str | None = None, serve: str | None = None) -> int:
    """Open the window; replay ``path`` if given (the bundled demo capture at 10x); ``serve``:
    the private feed of the window's current session (dptop.feed) at ``[HOST:]PORT``."""
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("dptop")
    app.setOrganizationName("dptop")
    demo = path is not None and Path(path).resolve() == DEMO_CAPTURE
    window = MainWindow(config=demo_config() if demo else None)
    import signal

    signal.signal(signal.SIGINT, lambda *_: window.close())  # Ctrl+C in the terminal closes cleanly
    if serve is not None:
        from dptop.feed import serve_current
        window.feed = serve_current(lambda: window.session, serve)
    window.show()
    if path:
        window.open_file(path, speed=DEMO_SPEED if demo else None)
    return app.exec()


def time_to_window(since: float) -> int:
    """Open the window (fresh preferences), and once it is shown print the seconds since the
    Unix time ``since`` (the start-up bench passes the moment it launched this process)."""
    import tempfile

    app = QApplication.instance() or QApplication(sys.argv[:1])
    with tempfile.TemporaryDirectory() as tmp:
        window = MainWindow(settings=QSettings(str(Path(tmp) / "dptop.ini"), QSettings.Format.IniFormat))
        window.show()

        def shown():
            print(f"{time.time() - since:.3f}", flush=True)
            window.close()

        QTimer.singleShot(0, shown)
        return app.exec()


if __name__ == "__main__":  # python -m dptop.gui.main [--screenshot OUT [--seconds S] | --time-to-window T] [PATH]
    import argparse

    parser = argparse.ArgumentParser(prog="python -m dptop.gui.main")
    parser.add_argument("path", nargs="?", default=None)
    parser.add_argument("--screenshot", default=None, metavar="PNG")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--time-to-window", type=float, default=None, metavar="UNIX_TIME")
    args = parser.parse_args()
    if args.time_to_window is not None:
        sys.exit(time_to_window(args.time_to_window))
    if args.screenshot:
        sys.exit(screenshot(args.screenshot, args.path or str(DEMO_CAPTURE), args.seconds))
    sys.exit(run_gui(args.path))
