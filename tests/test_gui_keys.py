"""The window's key and weight pickers, table filter and drill-down (pytest-qt, offscreen), on the
DNS amplification capture (tests/data, 4,412 packets)."""
import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"

from collections import Counter  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PySide6.QtCore import QSettings  # noqa: E402

from dptop.capture.pcap import read_capture  # noqa: E402
from dptop.engine.core.keykinds import KeyKind  # noqa: E402
from dptop.engine.core.keys import decode_key  # noqa: E402
from dptop.engine.core.release import Release, ReleasedItem, Span  # noqa: E402
from dptop.engine.core.settings import Settings  # noqa: E402
from dptop.gui.drilldown import DrillDown, key_history  # noqa: E402
from dptop.gui.main import MainWindow  # noqa: E402
from dptop.monitor.config import RunConfig  # noqa: E402
from tests.conftest import DNS_CAPTURE  # noqa: E402

WARM = 180_000


def exact_ports(unit: int | None = None) -> Counter:
    """Packets per destination port, or (``unit``) ⌈length/unit⌉ units capped at 24 per packet."""
    batch, _ = read_capture(DNS_CAPTURE)
    keys, has = KeyKind.DPORT.keys(batch)
    weights = np.ones(len(keys), int) if unit is None else np.clip(-(-batch.length.astype(int) // unit), 1, 24)
    out = Counter()
    for (h, lo), w in zip(keys[has].tolist(), weights[has].tolist()):
        out[decode_key(h, lo)] += w
    return out


@pytest.fixture
def window(qtbot, tmp_path):
    config = RunConfig(("dpss", "exact"), Settings(k=8, epsilon=1.0, delta=1e-6))
    w = MainWindow(config, settings=QSettings(str(tmp_path / "dptop.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.show()
    return w


def finished(qtbot, window):
    qtbot.waitUntil(lambda: window.session is not None and window.session.state == "finished", timeout=WARM)
    qtbot.waitUntil(lambda: all(p.model.rows() and all(r.true is not None for r in p.model.rows())
                                for p in window.panels.values()), timeout=30_000)


def test_switching_key_and_weight_recounts_and_the_drilldown_opens(qtbot, window):
    window.open_file(str(DNS_CAPTURE))
    finished(qtbot, window)
    assert window.panels["exact"].model.rows()[0].address == "24.132.150.54"

    picker = window.params.counting
    picker.key.setCurrentIndex(picker.key.findData("dport"))
    assert window.params.apply()
    assert window.session.config.counting.key == "dport"
    ports = exact_ports()
    want = [(p, float(c)) for p, c in ports.most_common(8)]
    qtbot.waitUntil(lambda: [(r.address, r.estimate) for r in window.panels["exact"].model.rows()] == want,
                    timeout=WARM)
    finished(qtbot, window)
    rows = window.panels["exact"].model.rows()
    top_port = rows[0].address
    qtbot.waitUntil(lambda: window.panels["dpss"].model.rows()[0].address == top_port, timeout=30_000)
    assert "destination port" in window.session.config.counting.describe()

    picker.weight.setCurrentIndex(picker.weight.findData("bytes"))
    assert window.params.apply()
    assert window.session.config.counting.weight == "bytes"
    units = [(p, float(c)) for p, c in exact_ports(64).most_common(8)]
    assert units[0][0] != top_port  # in bytes another port leads
    qtbot.waitUntil(lambda: [(r.address, r.estimate) for r in window.panels["exact"].model.rows()] == units,
                    timeout=WARM)
    finished(qtbot, window)
    top_port = units[0][0]
    qtbot.waitUntil(lambda: window.panels["dpss"].model.rows()[0].address == top_port, timeout=30_000)

    panel = window.panels["dpss"]
    panel.filter.setText(top_port)
    assert panel.proxy.rowCount() >= 1
    assert all(top_port in panel.proxy.index(i, 1).data() for i in range(panel.proxy.rowCount()))
    panel.filter.setText("no such key")
    assert panel.proxy.rowCount() == 0
    panel.filter.setText(top_port)

    panel.table.doubleClicked.emit(panel.proxy.index(0, 1))
    assert window.drilldowns, "double-click opened no drill-down"
    dialog = window.drilldowns[-1]
    assert isinstance(dialog, DrillDown) and top_port in dialog.windowTitle()
    assert dialog.history.released == len(window.session.releases("dpss")) >= 1
    assert dialog.error is not None and dialog.error > 0  # the a-priori error bar


def test_key_history_follows_one_label_across_releases():
    def rel(i, items):
        return Release("dpss", Span(0, 1, "epoch", i, t_end=float(i)), tuple(ReleasedItem(0, 0, e) for _, e in items))

    releases = [rel(0, [("a", 5.0)]), rel(1, []), rel(2, [("a", 7.0)])]
    h = key_history(releases, "::")
    assert np.array_equal(np.isnan(h.estimate), [False, True, False]) and h.estimate[2] == 7.0
    assert h.released == 2 and h.t_end == [0.0, 1.0, 2.0]
