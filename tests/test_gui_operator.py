"""What an operator used to iftop, Wireshark Endpoints, ntopng or sniffnet relies on (pytest-qt,
offscreen): panels stay where they are across Apply, the source is remembered, the throughput plot
says what it measures, no made-up utility numbers, no clipped text, a visible start-up state and
loop offered only where it is sound."""
import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"

import math
from types import SimpleNamespace

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QTextDocument

from dptop.engine.core import registry
from dptop.engine.core.metrics import Utility
from dptop.engine.core.release import Release, ReleasedItem, Span
from dptop.engine.core.settings import Settings
from dptop.gui.elide import ElidedLabel
from dptop.gui.configs import demo_config
from dptop.gui.main import MainWindow, default_config
from dptop.gui.models import utility_values
from dptop.gui.panel import detectable_text, utility_text
from dptop.gui.plots import ThroughputPlot, UtilityPlot
from dptop.gui.source_panel import LOOP_TIP
from dptop.monitor.config import RunConfig
from dptop.monitor.session import SessionSnapshot
from dptop.monitor.states import State
from dptop.engine.core.status import DetectionLimit
from dptop.monitor.truth import TruthResult
from tests.conftest import DNS_CAPTURE

WARM = 180_000  # ms: the first run on a clean clone compiles every kernel


@pytest.fixture
def store(tmp_path):
    return lambda: QSettings(str(tmp_path / "dptop.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def window(qtbot, store):
    def make(config=None):  # None: the remembered configuration, else the first-start default
        w = MainWindow(config, settings=store())
        qtbot.addWidget(w)
        w.show()
        return w
    return make


def grid_order(w) -> list[str]:
    """Panel names in reading order (row by row, left to right)."""
    cells = {}
    for name, panel in w.panels.items():
        row, col, _, _ = w.grid.getItemPosition(w.grid.indexOf(panel))
        cells[(row, col)] = name
    return [cells[rc] for rc in sorted(cells)]


def check(params, name: str, on: bool) -> None:
    for i in range(params.algorithms.count()):
        item = params.algorithms.item(i)
        if item.data(Qt.ItemDataRole.UserRole) == name:
            item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)


def test_apply_never_reshuffles_the_panels(qtbot, window, store):
    w = window()
    first = list(default_config().names)  # the shared defaults' order, not the list's
    assert grid_order(w) == first
    widgets = dict(w.panels)
    check(w.params, "dpsw", False)
    assert w.params.apply()
    assert grid_order(w) == [n for n in first if n != "dpsw"]
    check(w.params, "dpmg", True)
    check(w.params, "dpsw", True)
    assert w.params.apply()  # enabled ones join at the end, the others keep their places
    listed = [w.params.algorithms.item(i).data(Qt.ItemDataRole.UserRole) for i in range(w.params.algorithms.count())]
    assert grid_order(w) == [n for n in first if n != "dpsw"] + sorted(["dpmg", "dpsw"], key=listed.index)  # list order
    before = grid_order(w)
    w.params.epsilon.setText("0.25")  # restarts the private algorithms
    assert w.params.apply()
    assert grid_order(w) == before
    assert all(w.panels[n] is widgets[n] for n in first if n != "dpsw")  # the same panels, not rebuilt
    w.close()
    again = window()  # the order is part of the remembered configuration
    assert grid_order(again) == before


def test_the_source_kind_and_its_fields_survive_a_restart(qtbot, window):
    w = window()
    sp = w.source_panel
    sp.kind.setCurrentIndex(2)  # synthetic
    sp.skew.setValue(1.4)
    sp.domain.setValue(5000)
    sp.length.setValue(70_000)
    sp.seed.setValue(7)
    sp.loop.setChecked(True)
    sp.speed.setCurrentIndex(1)
    sp.path.setText("/captures/office.pcap")
    w.close()
    sp = window().source_panel
    assert sp.kind.currentIndex() == 2 and sp.stack.currentIndex() == 2
    assert (sp.skew.value(), sp.domain.value(), sp.length.value(), sp.seed.value()) == (1.4, 5000, 70_000, 7)
    spec = sp.spec()
    assert (spec.kind, spec.loop, spec.speed, spec.skew, spec.domain, spec.length, spec.seed) == \
           ("synth", True, 2.0, 1.4, 5000, 70_000, 7)
    assert sp.path.text() == "/captures/office.pcap"  # the other kinds' fields are kept too
    sp.kind.setCurrentIndex(0)
    sp.window().close()
    sp = window().source_panel
    assert sp.kind.currentIndex() == 0 and sp.spec().kind == "file" and not sp.loop.isEnabled()


def test_loop_is_offered_for_synthetic_streams_only(qtbot, window):
    sp = window().source_panel
    assert sp.loop.text() == "loop"  # short in the source bar; the tooltip says why synthetic streams only
    assert sp.loop.toolTip() == LOOP_TIP and "synthetic streams only" in LOOP_TIP and "cannot absorb" in LOOP_TIP and "real packet" in LOOP_TIP
    for index, enabled in ((0, False), (1, False), (2, True), (0, False)):
        sp.kind.setCurrentIndex(index)
        assert sp.loop.isEnabled() == enabled
    sp.loop.setChecked(True)  # a remembered tick never loops a real capture
    sp.set_file(str(DNS_CAPTURE))
    assert not sp.loop.isEnabled() and sp.spec().loop is False


def lane(name, generation, packets, busy, private=True):
    a = SimpleNamespace(packets=packets, updates_per_second=packets / busy if busy else 0.0, private=private,
                        drops=0, queued=0)
    return SimpleNamespace(name=name, generation=generation, algorithm=a, origin=0)


def test_throughput_plots_the_rate_while_busy_beside_the_wall_rate_and_busy_share(qtbot):
    plot = ThroughputPlot()
    qtbot.addWidget(plot)
    assert plot.widget.getAxis("left").labelText == "rate while busy"
    assert "packets per CPU-second" in plot.widget.toolTip() and "EWMA" in plot.widget.toolTip()
    src = SimpleNamespace(ip_packets=0, queue_drops=0, kernel_drops=0)
    # 1000 packets per wall second; 0.1 then 0.05 CPU-seconds per second: 10k then 20k per CPU-second
    samples = [(0.0, 1000, 0.1), (1.0, 2000, 0.2), (2.0, 3000, 0.25)]
    for t, packets, busy in samples:
        src.ip_packets = packets
        plot.sample(SimpleNamespace(time=100.0 + t, lanes=(lane("dpss", 1, packets, busy),), source=src, dropped={},
                                    truth_packets=packets, missed=0))
    rate = plot._ewma[("dpss#1", "rate")].value
    assert rate == pytest.approx(10_000 + 0.3 * (20_000 - 10_000))  # EWMA, newest weight 0.3
    assert plot._ewma[("dpss#1", "wall")].value == pytest.approx(1000)
    assert plot._ewma[("dpss#1", "busy")].value == pytest.approx(0.1 + 0.3 * (0.05 - 0.1))
    x, y = plot.curves.curves["dpss"][1].view()
    assert list(y) == pytest.approx([10_000, rate])
    text = plot.table.text()
    for word in ("rate while busy", "packets/s", "busy", "13.0 k/s", "1.0 k/s", f"{0.085:.0%}"):
        assert word in text
    # a restart (new generation) starts its averages afresh, on the same curve
    plot.sample(SimpleNamespace(time=103.0, lanes=(lane("dpss", 2, 500, 0.01),), source=src, dropped={},
                                truth_packets=3500, missed=0))
    plot.sample(SimpleNamespace(time=104.0, lanes=(lane("dpss", 2, 1500, 0.02),), source=src, dropped={},
                                truth_packets=4500, missed=0))
    assert plot._ewma[("dpss#2", "rate")].value == pytest.approx(100_000)
    assert len(plot.curves.curves["dpss"][1].view()[1]) == 3


def truth_of(items, counts, reported, heavy, recall, precision, are):
    release = Release("lazyhh", Span(0, 5000, kind="prefix"), tuple(items), 900.0, None)
    return TruthResult(release, 0, 5000, tuple(counts), 625.0, Utility(recall, precision, are, reported, heavy))


def test_no_utility_number_without_something_to_measure(qtbot):
    item = ReleasedItem(0, 0xFFFF_0A00_0001, 700.0)
    empty = truth_of([], [], 0, 0, 1.0, 1.0, 0.0)  # metrics.py's conventions for empty sets
    text = utility_text(empty)
    assert "recall — · precision — · ARE —" in text and "1.00" not in text
    assert "nothing released" in text and "no true heavy hitter: none > 625" in text
    missed = truth_of([], [], 0, 2, 0.0, 1.0, 0.0)
    assert "recall 0.00 · precision — · ARE —" in utility_text(missed)
    unheard = truth_of([item], [0], 1, 0, 1.0, 0.0, 0.0)  # a noise label that sent nothing
    text = utility_text(unheard)
    assert "recall — · precision 0.00 · ARE —" in text and "no released source sent a packet" in text
    fine = truth_of([item], [650], 1, 1, 1.0, 1.0, 50 / 650)
    assert utility_text(fine).endswith("recall 1.00 · precision 1.00 · ARE 7.7%")
    values = utility_values(empty)
    assert all(math.isnan(v) for v in values.values())
    plot = UtilityPlot()  # undefined metrics are gaps in the utility plot, not 1.0
    qtbot.addWidget(plot)
    plot.add(1.0, "lazyhh", empty)
    plot.add(2.0, "lazyhh", fine)
    _, y = plot.buffers[("lazyhh", "precision")].view()
    assert math.isnan(y[0]) and y[1] == 1.0


def test_an_empty_private_panel_shows_dashes(qtbot, window):
    """LazyHH releases nothing on the 4,412-packet capture (its threshold is ~15k packets)."""
    w = window(RunConfig(("lazyhh",), Settings(k=8, epsilon=0.5, delta=1e-6)))
    w.open_file(str(DNS_CAPTURE))
    panel = w.panels["lazyhh"]
    qtbot.waitUntil(lambda: "vs exact" in panel.status.full_text(), timeout=WARM)
    text = panel.status.full_text()
    assert "precision — · ARE —" in text and "nothing released" in text
    assert "precision 1.00" not in text and panel.model.rowCount() == 0 and panel.reason.full_text()


def fits(label) -> bool:
    """The label's rendered rich text is no wider than the label (nothing cut off at the right)."""
    doc = QTextDocument()
    doc.setDefaultFont(label.font())
    doc.setDocumentMargin(0)
    doc.setHtml(label.text())
    return doc.idealWidth() <= label.contentsRect().width()


def test_elided_label_keeps_its_width_and_the_full_text_in_the_tooltip(qtbot):
    label = ElidedLabel(2)
    qtbot.addWidget(label)
    label.resize(160, label.height())
    long = [[("ε = 0.5, δ = 1e-06", True), (" · approximate DP · continual observation, a long line", False)],
            [("short", False)]]
    label.set_lines(long, "details")
    label.show()
    assert label.elided and "…" in label.text() and fits(label)
    assert label.toolTip().startswith(label.full_text()) and label.toolTip().endswith("details")
    label.resize(2000, label.height())
    assert not label.elided and "…" not in label.text()
    wrapped = ElidedLabel(2, wrap=True)
    qtbot.addWidget(wrapped)
    wrapped.resize(200, wrapped.height())
    wrapped.set_plain("word " * 100)
    wrapped.show()
    assert wrapped.text().count("<br>") == 1 and wrapped.text().endswith("…") and fits(wrapped)


def test_no_guarantee_or_status_line_is_clipped_at_1600x1000(qtbot, window):
    w = window(RunConfig(tuple(registry.names()), demo_config().settings))  # every panel, one run
    w.resize(1600, 1000)
    w.open_file(str(DNS_CAPTURE))
    qtbot.waitUntil(lambda: w.session.state == "finished", timeout=WARM)
    qtbot.waitUntil(lambda: all(p.guarantee.full_text() and p.status.full_text() for p in w.panels.values()),
                    timeout=10_000)
    for panel in w.panels.values():
        for label in (panel.guarantee, panel.status, panel.reason):
            assert fits(label), (panel.name, label.full_text())
            if label.elided:
                assert label.toolTip().startswith(label.full_text())
    shown = [p for p in w.panels.values() if p.guarantee.elided]
    assert len(shown) < len(w.panels)  # most guarantees fit whole at this size


class Starting:
    """A session stuck in its start-up phase (what a first start looks like while numba compiles)."""

    state = State.STARTING
    phase = "compiling kernels (first start after install)..."

    def snapshot(self, lanes=None):
        return SessionSnapshot(0.0, self.state, self.phase, None, None, "demo.pcap.gz", (), 0, {}, None)

    def stop(self, flush=False):
        pass

    def close(self, timeout=1.0):
        return []


def test_a_starting_session_says_it_is_compiling_kernels(qtbot, window):
    w = window()
    w.session = Starting()
    w.refresh()
    assert "compiling kernels" in w.source_panel.stats.full_text()
    assert w.source_panel.progress.maximum() == 0  # busy indicator
    for panel in w.panels.values():
        assert panel.reason.full_text() == "Starting: compiling kernels (first start after install)..."
    w.session = None
    w.refresh()
    assert w.source_panel.progress.maximum() == 1000


def test_the_a_priori_detection_limit_is_shown_when_the_status_has_one():
    def shown(count=None, share=None, after=()):
        return detectable_text(DetectionLimit(count, share, None, "", after=after))

    assert shown(14523.4, 0.095) == "detectable: ≥ 14,523 pkts and ≥ 9.5% of the span"
    assert shown(812) == "detectable: ≥ 812 pkts"
    assert detectable_text(None) == "" and shown() == ""
    assert shown(50, 0.5, ((0.1, 400), (0.05, None))) == (
        "detectable: ≥ 50 pkts and ≥ 50.0% of the span; 10% source after 400 pkts, 5% source never in a segment")
