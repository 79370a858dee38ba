"""The main window: source bar, one panel per algorithm, and docks for parameters, budget,
throughput, utility and tuning (dptop.gui.launch starts it; dptop.gui.configs holds its settings;
dptop.gui.layout arranges its overview and panels).

Sessions: ``session`` is the running one or, after Stop, the stopped one: the panels, the budget
tab and File > Export keep showing it until the next Start, which closes it (its threads joined,
its memory released) before the new one opens.

Threads: the ``Session`` runs capture, algorithms and the truth on their own threads; this window
only polls immutable snapshots from a ``QTimer`` (20 Hz) and redraws what changed.
"""
from __future__ import annotations

import sys
import time
from collections import deque
from pathlib import Path

from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtWidgets import QFileDialog, QLabel, QMainWindow, QToolBar

from dptop.gui.budget import BudgetPanel
from dptop.gui.configs import config_from_json, config_to_json, default_config, preview_ledger
from dptop.gui.docks import build_docks, first_proportions
from dptop.gui.drilldown import key_title, open_drilldown
from dptop.gui.export import export_csv, export_json, save_png
from dptop.gui.help import HelpOverlay
from dptop.gui.layout import build_central, layout_panels, room_for_panels, tuning_shown
from dptop.gui.menus import build_menus, install_shortcuts
from dptop.gui.overview import OverviewPanel
from dptop.gui.panel import AlgorithmPanel
from dptop.gui.params import ParametersPanel
from dptop.gui.plots import ThroughputPlot, UtilityPlot
from dptop.monitor.config import LIVE_EPOCH_SECONDS, RunConfig, SourceSpec
from dptop.monitor.explain import drops_of
from dptop.monitor.memory import limit_arenas, release_memory
from dptop.monitor.session import Session, on_public_clock
from dptop.monitor.sources import refuse_data_stop
from dptop.monitor.states import State
from dptop.gui.source_panel import SourcePanel
from dptop.gui.tuning import TuningPanel
from dptop.gui.theme import apply_plot_theme, watch_color_scheme

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
FIRST_SIZE = (1920, 1200)  # the window's size at its first start, at most the screen's
OVERVIEW_EVERY = 1.0  # seconds between overview updates (the exact counts move on)
OVERVIEW_SOON = 0.25  # ... or this soon after a panel drew a new release
EXACT_TOP = 10_000  # exact counts the overview looks keys up in (a key below them shows "…")


class MainWindow(QMainWindow):
    def __init__(self, config: RunConfig | None = None, settings: QSettings | None = None,
                 record_packets: int = 1 << 20):
        super().__init__()
        limit_arenas()  # sessions come and go: their threads' memory must not stay behind
        self._switch_interval = sys.getswitchinterval()  # restored by shutdown()
        sys.setswitchinterval(SWITCH_INTERVAL)
        self.setWindowTitle("dptop — private top talkers")
        self.setAcceptDrops(True)
        self.store = settings if settings is not None else QSettings("dptop", "dptop")
        self.record_packets = record_packets
        self.config = config or self._saved_config() or default_config()
        self.session: Session | None = None  # running, or the stopped one the panels still show
        self.old_sessions: list[Session] = []  # closed sessions whose threads had not ended in time
        self.frozen = False
        self.source_label: str | None = None  # the source last opened (a sweep belongs to its packets)
        self.pending_tuned: list[tuple] = []  # (algorithm, parameter, value) tuned after the source ended
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
        self.overview = OverviewPanel()
        self.overview.drill_requested.connect(lambda n, key, exact: open_drilldown(self, n, key, exact))
        self._overview_at = 0.0
        self._overview_due = False  # a panel drew new rows since the overview was last updated
        self._tuning_watched = False
        build_central(self)
        self.overlay = HelpOverlay(self.central)

        self.params = ParametersPanel(self.config)
        self.budget = BudgetPanel()
        self.throughput = ThroughputPlot()
        self.utility = UtilityPlot()
        self.tuning = TuningPanel(self)
        self.docks = build_docks(self, {"params": self.params, "throughput": self.throughput,
                                        "budget": self.budget, "utility": self.utility, "tuning": self.tuning})

        self.fps = QLabel()
        self.fps.setMinimumWidth(self.fps.fontMetrics().horizontalAdvance("99 redraws/s") + 4)  # no re-layout as it changes
        self.freeze_label = QLabel()
        self.statusBar().addPermanentWidget(self.freeze_label)
        self.statusBar().addPermanentWidget(self.fps)
        build_menus(self)
        install_shortcuts(self)

        self.params.applied.connect(self.apply_config)
        self.source_panel.start_requested.connect(self.open_source)
        self.source_panel.pause_toggled.connect(self.toggle_pause)
        self.source_panel.stop_requested.connect(self.stop_source)
        layout_panels(self, self.config.names)
        self._restore()
        watch_color_scheme(self)

        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.refresh)
        self.timer.start()

    def showEvent(self, event):
        super().showEvent(event)
        if not self._tuning_watched:  # from the first show on: the start-up's own visibility changes do not count
            self._tuning_watched = True
            self.docks["tuning"].visibilityChanged.connect(lambda visible: tuning_shown(self, visible))

    def resizeEvent(self, event):
        super().resizeEvent(event)
        room_for_panels(self)

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
        same_source = self.source_label == spec.label()
        ledger = self.session.ledger if same_source and self.session is not None else None  # one ledger per source
        self.close_session()
        if self.source_label is not None and not same_source:
            self.tuning.clear("the source changed: sweeps on the previous one's packets were cleared")
        self.source_label = spec.label()
        self.throughput.reset()
        self.utility.reset()
        self.source_panel.reset_rate()
        # an endless stream releases on the wall clock's cells, as the session gives a live capture
        config = on_public_clock(self.config, LIVE_EPOCH_SECONDS) if spec.loop else self.config
        self.session = Session(config, record_packets=self.record_packets, ledger=ledger)
        if same_source:  # values tuned on these packets after the last run ended: this run uses them
            for name, parameter, value in self.pending_tuned:
                self.session.tuned(name, parameter, value)
        self.pending_tuned = []
        self.session.open(spec)
        self.statusBar().showMessage(f"Reading {spec.label()}", 3000)

    def open_file(self, path: str, speed: float | None = None) -> None:
        self.source_panel.set_file(str(path))
        self.source_panel.set_speed(speed)
        self.open_source(self.source_panel.spec())

    def stop_source(self) -> None:
        """Stop the session; it stays on screen (panels, budget, export) until the next Start."""
        if self.session is not None:
            self.session.stop()

    def close_session(self, timeout: float = 1.0) -> None:
        """Stop and close the session on screen: its threads end and nothing holds its packets."""
        if self.session is None:
            return
        session, self.session = self.session, None
        if session.close(timeout):
            self.old_sessions.append(session)  # still winding down: joined again at shutdown
        del session
        release_memory()
        self.old_sessions = [s for s in self.old_sessions if any(t.is_alive() for t in s.threads())]

    def toggle_pause(self) -> None:
        if self.session is None:
            return
        if self.session.state is State.PAUSED:
            self.session.resume()
        else:
            self.session.pause()

    def apply_config(self, config: RunConfig) -> None:
        """Apply ``config`` to the session on screen; what the command line refuses on its source
        (``refuse_data_stop``) is refused in one line, and the run goes on unchanged."""
        recount = self.session is not None and config.counting != self.session.config.counting
        restarted = []
        try:
            if recount:  # checked before the run on screen is replaced
                refuse_data_stop(self.source_panel.spec(), config.names, config.settings)
            elif self.session is not None:
                restarted = self.session.apply(config)
        except ValueError as exc:
            self.params.refused(self.config, str(exc))
            self.statusBar().showMessage(f"Not applied, the run goes on unchanged: {exc}", 15000)
            return
        self.config = config
        layout_panels(self, config.names)
        if recount:  # another key or weight: every count starts again, from the source's start
            self.open_source(self.source_panel.spec())
            restarted = list(config.names)
        self.tuning.show_limits()
        if self.session is not None and not recount and not self.session.state.active:
            text = "Applied for the next Start: the source has ended; its releases, ledger and export stay as published"
        else:
            text = f"Applied; restarted: {', '.join(restarted) or 'none'}"
        self.statusBar().showMessage(text, 8000)

    # ----- the timer ---------------------------------------------------------------------
    def refresh(self) -> None:
        now = time.monotonic()
        session = self.session
        snap = None if session is None else session.snapshot(lanes=LANES_PER_TICK)
        self.source_panel.show_state(snap)
        self.params.show_running(next((lane.settings for lane in snap.lanes), None) if snap is not None else None)
        if snap is not None:
            if snap.state is State.STARTING:  # no lanes yet, or kernels compiling: say so in every panel
                for name in self.panels.keys() - {lane.name for lane in snap.lanes}:
                    self.panels[name].show_phase(snap.phase)
            stale, drops = [], drops_of(snap)
            for lane in snap.lanes:
                panel = self.panels.get(lane.name)
                a, truth = lane.algorithm, lane.truth
                if a is not None and a.private:
                    self.utility.add(now, lane.name, truth)
                if panel is not None:
                    if now - panel.texted_at >= TEXT_PERIOD or panel.generation != lane.generation:
                        panel.texted_at = now
                        panel.update_text(lane, truth, drops.lane_text(lane.name))
                    if panel.needs_redraw(lane, truth) and (now - panel.redrawn_at >= PANEL_PERIOD
                                                            or panel.only_truth_arrived(lane, truth)):
                        stale.append((panel.redrawn_at, panel, lane, truth))
            # tables and charts: a bounded number per tick, the longest-waiting first
            for _, panel, lane, truth in sorted(stale, key=lambda x: x[0])[:REDRAWS_PER_TICK]:
                panel.redraw(lane, truth, self.config.counting.key)
                panel.update_text(lane, truth)  # the header about the rows just drawn, not the ones before
                panel.texted_at = now
                self._overview_due = True
            if now - self._overview_at >= (OVERVIEW_SOON if self._overview_due else OVERVIEW_EVERY):
                self._overview_due = False
                self._overview_at = now
                self.show_overview(snap)
            if now - self._last_throughput >= THROUGHPUT_EVERY:
                self._last_throughput = now
                self.throughput.sample(snap)
                self.utility.redraw()
        self.budget.update_from(snap.budget if snap is not None else preview_ledger(self.params.preview))
        self.tuning.poll()
        self.redraws.append(now)
        self.fps.setText(f"{self.redraw_rate():.0f} redraws/s")

    def show_overview(self, snap) -> None:
        """The overview from what the private panels show (their drawn release and its exact
        counts) and the exact counts over the session (for the operator)."""
        shown = {}
        for lane in snap.lanes:
            panel = self.panels.get(lane.name)
            if panel is None or not panel.private:
                continue
            limit = lane.status.detectable
            shown[lane.name] = (*panel.drawn(), None if limit is None else limit.error)
        wanted = {it.address for release, _, _ in shown.values() if release is not None for it in release.items}
        _, distinct, top = self.session.exact(EXACT_TOP) if wanted else (0, 0, ())
        exact = {it.address: int(it.estimate) for it in top}
        if len(top) == distinct:  # every key is in the list: the others sent nothing
            exact.update({a: 0 for a in wanted - exact.keys()})
        counting = self.config.counting
        units = f"{counting.unit}-byte units" if counting.weight == "bytes" else "packets"  # as dptop.report says them
        self.overview.show_rows(shown, exact, key_title(counting.key), units)

    def redraw_rate(self, seconds: float = 2.0) -> float:
        """Timer redraws per second over the last ``seconds``."""
        if len(self.redraws) < 2:
            return 0.0
        end = self.redraws[-1]
        recent = [t for t in self.redraws if t >= end - seconds]
        span = recent[-1] - recent[0]
        return (len(recent) - 1) / span if span > 0 else 0.0

    # ----- export ------------------------------------------------------------------------
    def export_to(self, base: Path) -> tuple[Path, Path]:
        """The private view (the same as ``--publish``) as JSON and CSV."""
        csv_path, json_path = base.with_suffix(".csv"), base.with_suffix(".json")
        view = export_json(json_path, self.session) if self.session is not None else {"algorithms": {}}
        export_csv(csv_path, view)
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
        else:  # first start: FIRST_SIZE, or the screen if smaller (the layout is checked down to 1280x720)
            screen = self.screen().availableGeometry()
            self.resize(min(FIRST_SIZE[0], screen.width()), min(FIRST_SIZE[1], screen.height()))
        if state is not None:
            self.restoreState(state)
        else:
            first_proportions(self)
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
        deadline = time.monotonic() + timeout
        self.close_session(timeout / 2)
        self.tuning.cancel()
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
