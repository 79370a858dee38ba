"""What an operator does after a replay: tune, Apply, export, drill down; and what a sweep says
when nothing was released. One window for the module (pytest-qt, offscreen) on the small real
capture tests/data/amp.dns.RRSIG.fragmented.pcap (4,412 packets; tests/data/SOURCES.md)."""
import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"

import csv
import json
import math

import numpy as np
import pytest
from PySide6.QtCore import QSettings

from dptop.engine.core.settings import Settings
from dptop.gui.main import MainWindow
from dptop.monitor.config import RunConfig
from dptop.monitor.sweep import Sweep, SweepPoint
from tests.conftest import DNS_CAPTURE
from tests.test_gui_labels import legend_entries, plotted_names

WARM = 180_000  # ms: the first run on a clean clone compiles every kernel
NAMES = ("dpss", "lazyhh", "exact")


@pytest.fixture(scope="module")
def window(tmp_path_factory):
    from PySide6.QtWidgets import QApplication

    QApplication.instance() or QApplication([])
    store = QSettings(str(tmp_path_factory.mktemp("flow") / "dptop.ini"), QSettings.Format.IniFormat)
    w = MainWindow(RunConfig(NAMES, Settings(k=8, epsilon=0.5, delta=1e-6, epoch_seconds=5.0)), settings=store)
    w.resize(1366, 768)
    w.show()
    yield w
    w.close()


def rows_of(path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


def sweep_to_the_end(qtbot, w, name: str, parameter: str, values: str) -> None:
    t = w.tuning
    t.algorithm.setCurrentText(name)
    t.parameter.setCurrentIndex(t.parameter.findData(parameter))
    t.values.setText(values)
    t.reps.setValue(1)
    assert t.start(), t.message.text()
    qtbot.waitUntil(lambda: t.sweep.result()[2] and t.choice.count() > 0, timeout=60_000)


def test_tune_apply_export_drill_down_after_a_finished_replay(qtbot, window, tmp_path):
    """Finding 1: Apply on a finished replay loses nothing (panels, ledger, export, drill-down);
    finding 2: a k~ point applies to its algorithm alone and the ledger names k~, not k~/k."""
    w = window
    w.open_file(str(DNS_CAPTURE), speed=None)
    qtbot.waitUntil(lambda: w.session.state == "finished", timeout=WARM)
    qtbot.waitUntil(lambda: bool(w.panels["dpss"].model.rows()), timeout=30_000)
    csv_before, json_before = w.export_to(tmp_path / "before")
    before = rows_of(csv_before)  # LazyHH releases no source of this short capture: its rows are empty releases
    assert len(before) > 10 and {r["algorithm"] for r in before} == {"dpss", "lazyhh"}

    sweep_to_the_end(qtbot, w, "lazyhh", "k_tilde", "2, 8")
    w.tuning.choice.setCurrentIndex(w.tuning.choice.findData(8.0))
    qtbot.waitUntil(lambda: all(not w.panels[lane.name].needs_redraw(lane, lane.truth)
                                for lane in w.session.snapshot().lanes), timeout=10_000)  # panels drawn
    shown = {n: w.panels[n].model.rows() for n in NAMES}
    w.tuning.apply_choice()

    csv_after, json_after = w.export_to(tmp_path / "after")
    assert rows_of(csv_after) == before  # nothing published is lost, nothing re-dated
    view = json.loads(json_after.read_text())
    assert view["parameters"]["epsilon"] == 0.5 and view["parameters"]["k_tilde"] is None  # what the run used
    assert set(view["algorithms"]) == {"dpss", "lazyhh"}
    assert view["budget"] == json.loads(json_before.read_text())["budget"]  # the ledger of the run as it was
    assert "next Start" in w.statusBar().currentMessage()
    k_tilde = 8 * 8  # k~ = 8 x k
    assert w.params.current.extras["lazyhh"]["k_tilde"] == k_tilde
    assert w.params.current.settings.k_tilde is None  # the shared field is untouched
    assert w.pending_tuned == [("lazyhh", "k_tilde", k_tilde)]  # named in the next run's ledger on this source
    qtbot.wait(3 * 50)  # a few timer ticks: the panels keep what they showed
    assert {n: w.panels[n].model.rows() for n in NAMES} == shown

    key = next(r["address"] for r in before if r["algorithm"] == "dpss" and r["address"])
    qtbot.waitUntil(lambda: any(r.address == key for r in w.overview.model.rows()), timeout=5000)
    opened = len(w.drilldowns)
    w.overview.drill_requested.emit("dpss", key, None)
    assert len(w.drilldowns) == opened + 1 and w.drilldowns[-1].history.released >= 1
    row = next(i for i, r in enumerate(w.overview.model.rows()) if r.address == key)
    opened = len(w.drilldowns)
    w.overview.drill(w.overview.proxy.mapFromSource(w.overview.model.index(row, 0)))
    assert len(w.drilldowns) == opened + 1 and w.drilldowns[-1].windowTitle().startswith(key)


def test_every_legend_names_what_its_chart_draws_after_a_replay(qtbot, window):
    """The exact panel's legend named a threshold τ it never draws: after a replay, each panel's
    legend lists the items its chart plots; DPSS draws its τ and names it, the exact panel neither."""
    w = window
    w.open_file(str(DNS_CAPTURE), speed=None)
    qtbot.waitUntil(lambda: w.session.state == "finished", timeout=WARM)
    qtbot.waitUntil(lambda: all(w.panels[n].model.rows() for n in ("dpss", "exact")), timeout=30_000)
    assert "threshold τ" in legend_entries(w.panels["dpss"]) and w.panels["dpss"].chart.tau.isVisible()
    assert "threshold τ" not in legend_entries(w.panels["exact"]) and not w.panels["exact"].chart.tau.isVisible()
    for name, panel in w.panels.items():
        assert sorted(legend_entries(panel)) == sorted(plotted_names(panel.chart)), name


def test_apply_while_running_restarts_only_the_tuned_algorithm(qtbot, window):
    """Finding 2: a LazyHH k~ applied during a run restarts LazyHH alone; the other panels keep
    their lanes, and the one restarted keeps its earlier releases in the export."""
    w = window
    w.open_file(str(DNS_CAPTURE), speed=1.0)  # 30 s of packet time: still running during the test
    qtbot.waitUntil(lambda: w.session.state == "running" and w.session.truth.fed > 2000, timeout=WARM)
    qtbot.waitUntil(lambda: bool(w.session.releases("lazyhh")), timeout=30_000)
    lanes = dict(w.session.lanes)
    published = list(w.session.releases("lazyhh"))
    sweep_to_the_end(qtbot, w, "lazyhh", "k_tilde", "4")
    w.tuning.apply_choice()
    assert w.statusBar().currentMessage() == "Applied; restarted: lazyhh"
    assert w.session.lanes["dpss"] is lanes["dpss"] and w.session.lanes["exact"] is lanes["exact"]
    assert w.session.lanes["lazyhh"] is not lanes["lazyhh"]
    assert w.session.lanes["lazyhh"].settings.k_tilde == 32 and w.session.lanes["dpss"].settings.k_tilde != 32
    assert w.session.releases("lazyhh")[:len(published)] == published
    tuning = w.session.snapshot().budget["tuning"]["lazyhh"]
    # k~ as applied, not k~/k: 64 tuned after the last run on these packets (this run uses it), then 32
    assert [(f["name"], f["value"]) for f in tuning] == [("k_tilde", 64), ("k_tilde", 32)]
    w.stop_source()


def test_apply_refuses_packet_epochs_on_a_paced_replay_and_the_run_goes_on(qtbot, window):
    """Epochs of packets applied to a paced replay (releases on its public clock, as a live
    capture's): refused in one line, in the status bar and under the fields, as ``--epoch-packets``
    is on the command line; the session on screen keeps its configuration, lanes and panels, and
    Revert returns the fields to what runs. With another key too (which restarts the whole run),
    the refusal comes before the session on screen is replaced."""
    w = window
    w.open_file(str(DNS_CAPTURE), speed=1.0)  # 30 s of packet time: still running during the test
    qtbot.waitUntil(lambda: w.session.state == "running" and w.session.truth.fed > 0, timeout=WARM)
    session, running, lanes, panels = w.session, w.session.config, dict(w.session.lanes), dict(w.panels)
    applied = w.params.current
    w.params.epoch_mode.setCurrentIndex(1)  # packets
    w.params.epoch_value.setText("1000")
    assert w.params.apply()  # valid parameters: the window refuses them for this source
    message = w.statusBar().currentMessage()
    assert message.startswith("Not applied") and "--epoch-packets releases on a paced replay" in message
    assert "\n" not in message and w.params.error.isVisibleTo(w.params) and "--epoch-packets" in w.params.error.text()
    assert w.session is session and session.config is running and session.state == "running"
    assert all(session.lanes[n] is lanes[n] for n in lanes) and session.lanes.keys() == lanes.keys()
    assert w.panels == panels and w.config == applied and w.params.current == applied
    w.params.revert_button.click()
    assert w.params.parse() == applied
    # another key restarts every count from the source's start: refused before the run is replaced
    w.params.counting.key.setCurrentIndex(w.params.counting.key.findData("dst"))
    w.params.epoch_mode.setCurrentIndex(1)
    w.params.epoch_value.setText("1000")
    assert w.params.apply() and w.statusBar().currentMessage().startswith("Not applied")
    assert w.session is session and session.state == "running" and session.config is running
    w.params.revert_button.click()
    w.stop_source()


def test_a_sweep_point_with_nothing_released_says_so():
    """Finding 3: no release above the threshold is not recall 0, precision 1, ARE 0."""
    keys = np.zeros((4000, 2), dtype=np.uint64)
    keys[:, 1] = np.arange(4000) % 2000 + 1  # 2,000 sources of 2 packets: nothing passes DPSS's threshold
    ts = np.arange(4000, dtype=np.int64) * 1000
    sweep = Sweep("dpss", Settings(k=8, epsilon=0.5, delta=1e-6), "epsilon", [0.5], keys, ts, repetitions=1)
    sweep._run()
    (point,) = sweep.result()[0]
    assert point.reported == 0 and math.isnan(point.precision) and math.isnan(point.are)
    assert "nothing released" in point.label() and "precision —" in point.label()
    heard = SweepPoint(1.0, 0.5, 1.0, 0.02, 3, reported=4)
    assert heard.label() == "1  (recall 0.50, precision 1.00, ARE 2.0%)"


def test_the_header_describes_the_release_the_table_shows(qtbot):
    """Finding 4: DPSW's header said "0 releases", "nothing released" and "No source above the
    threshold" above a table listing a source: the texts described a newer, empty live query
    whose exact counts were not known yet, the table the release it had drawn."""
    from dptop.engine.core.keys import encode_address
    from dptop.engine.core.metrics import Utility
    from dptop.engine.core.release import ReleasedItem, Release, Span
    from dptop.engine.core.worker import AlgorithmSnapshot
    from dptop.engine.core.status import NO_STATUS
    from dptop.gui.panel import AlgorithmPanel
    from dptop.monitor.lanes import LaneView
    from dptop.monitor.truth import TruthResult

    panel = AlgorithmPanel("dpsw", True)
    qtbot.addWidget(panel)
    drawn = Release("dpsw", Span(0, 20_000, "window"), (ReleasedItem(*encode_address("75.136.225.254"), 909.6),),
                    threshold=795.0)
    newer = Release("dpsw", Span(0, 20_010, "window"), (), threshold=795.0)
    truth = TruthResult(drawn, 0, 20_000, (880,), 800.0, Utility(1.0, 1.0, 0.03, 1, 1))

    def view(latest):
        snap = AlgorithmSnapshot("dpsw", True, "sliding window", 20_010, 1e5, 0, 0, 0, latest, None, NO_STATUS, None,
                                 False, True)
        return LaneView("dpsw", 1, 0, None, snap, None, truth)

    panel.redraw(view(drawn), truth)
    panel.update_text(view(newer), truth)
    assert [r.address for r in panel.model.rows()] == ["75.136.225.254"]
    status, reason = panel.status.full_text(), panel.reason.full_text()
    assert "1 release " in status + " " and "nothing released" not in status and "recall 1.00" in status
    assert "No source above" not in reason
