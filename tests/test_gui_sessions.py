"""The window's sessions (pytest-qt, offscreen): Stop keeps the stopped session on screen for the
panels, the budget tab and File > Export; the next Start releases it (threads joined, memory
returned: 20 Start/Stop cycles on a 300,000-packet capture); live sources have no speed; a sweep
is cleared when the source changes; colours are the algorithm's own; every bar chart has a legend."""
import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"

import csv
import gc
import json

import pytest
from PySide6.QtCore import QSettings

from dptop.capture.synth import write_zipf_pcap
from dptop.gui.main import MainWindow
from dptop.gui.plots import color
from dptop.gui.source_panel import KIND_KEYS
from dptop.engine.core import registry
from dptop.engine.core.settings import Settings
from dptop.monitor.config import RunConfig

from tests.conftest import DNS_CAPTURE

WARM = 180_000


def rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.fixture
def window(qtbot, tmp_path):
    config = RunConfig(("dpss", "lazyhh", "exact"), Settings(k=8, epsilon=0.5, delta=1e-6, epoch_seconds=2.0))
    w = MainWindow(config, settings=QSettings(str(tmp_path / "dptop.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.show()
    return w


def test_stop_then_export_writes_what_the_panels_show_and_the_budget_stays(qtbot, window, tmp_path):
    window.open_file(str(DNS_CAPTURE), speed=None)
    qtbot.waitUntil(lambda: window.session.state == "finished", timeout=WARM)
    qtbot.waitUntil(lambda: len(window.panels["dpss"].model.rows()) > 0, timeout=10_000)
    window.stop_source()
    panel, last = window.panels["dpss"], window.session.releases("dpss")[-1]
    qtbot.waitUntil(lambda: [(r.address, r.estimate) for r in panel.model.rows()] ==  # the timer keeps drawing
                    [(it.address, it.estimate) for it in last.items], timeout=10_000)  # the stopped session
    shown = [(r.address, r.estimate) for r in panel.model.rows()]
    csv_path, json_path = window.export_to(tmp_path / "after-stop")
    data = json.loads(json_path.read_text())
    published = window.session.releases("dpss")
    assert len(data["algorithms"]["dpss"]["releases"]) == len(published) > 1
    with open(csv_path) as fh:
        rows = [r for r in csv.DictReader(fh) if r["algorithm"] == "dpss"
                and int(r["release"]) == len(published) - 1]
    assert sorted((r["address"], float(r["estimate"])) for r in rows) == sorted(shown)
    budget = window.budget.model.rows()
    dpss = next(r for r in budget if "dpss" in str(r))
    assert f"{len(published)}" in str(dpss), budget  # the session's releases, not a preview of one


@pytest.mark.parametrize("cycles,packets", [
    (6, 60_000),
    pytest.param(20, 300_000, marks=pytest.mark.slow),  # the soak: 6M packets through the window
])
def test_start_stop_cycles_release_the_stopped_sessions(qtbot, window, tmp_path, cycles, packets):
    path = tmp_path / "zipf.pcap"
    write_zipf_pcap(str(path), 1.1, 1 << 14, packets, 5)
    peaks = []
    for cycle in range(cycles):
        window.open_file(str(path), speed=None)
        qtbot.waitUntil(lambda: window.session.state == "finished", timeout=WARM)
        window.stop_source()
        qtbot.wait(50)
        gc.collect()
        peaks.append(rss_mib())
    window.close_session()
    gc.collect()
    print(f"\nRSS after each Start/Stop cycle (MiB): {[round(p) for p in peaks]}")
    assert window.old_sessions == []
    assert peaks[-1] - peaks[0] <= 20, f"RSS grew {peaks[-1] - peaks[0]:.0f} MiB over {cycles} cycles"


def test_speed_only_for_files_and_sweep_cleared_on_a_new_source(qtbot, window):
    panel = window.source_panel
    panel.kind.setCurrentIndex(KIND_KEYS.index("live"))
    assert not panel.speed.isEnabled()
    panel.kind.setCurrentIndex(KIND_KEYS.index("file"))
    assert panel.speed.isEnabled()
    window.open_file(str(DNS_CAPTURE), speed=None)
    qtbot.waitUntil(lambda: window.session.state == "finished", timeout=WARM)
    window.tuning.algorithm.setCurrentText("dpss")  # the list's first follows the registry's import order
    window.tuning.values.setText("0.5,1")
    window.tuning.reps.setValue(1)
    assert window.tuning.start(), window.tuning.message.text()
    qtbot.waitUntil(lambda: window.tuning.apply.isEnabled(), timeout=WARM)
    window.open_file(str(DNS_CAPTURE), speed=None)  # the same file: the sweep stays
    assert window.tuning.choice.count() == 2
    window.source_panel.kind.setCurrentIndex(KIND_KEYS.index("synth"))
    window.open_source(window.source_panel.spec())  # another source: its packets are not the sweep's
    assert window.tuning.choice.count() == 0 and not window.tuning.apply.isEnabled()
    assert "source changed" in window.tuning.message.text()


def test_colours_belong_to_the_algorithm_and_bar_charts_have_legends(window):
    names = registry.names()
    assert color("dpss") == color("dpss") and color(names[0]) != color(names[1])
    for panel in window.panels.values():  # the legend is beside the chart, never over its bars
        text = panel.legend.text()
        assert "estimate" in text and "exact&nbsp;count" in text
        assert ("τ" in text) == panel.chart.tau.isVisible()  # named when drawn (no release yet: not drawn)
        assert panel.chart.plotItem.legend is None
