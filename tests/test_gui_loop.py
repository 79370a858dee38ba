"""A synthetic stream with loop checked starts and keeps releasing under the window's default
settings (no epochs of their own: an endless stream gets the live capture's cells of
``LIVE_EPOCH_SECONDS``): the loop runs on an open-ended public grid from the stream's first
stamp, each packet in the cell of its own (ever growing) stamp."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings

from dptop.engine.core.clock import MAX_CELLS
from dptop.gui.main import MainWindow, default_config
from dptop.monitor.config import LIVE_EPOCH_SECONDS

pytest.importorskip("pytestqt")


def test_synthetic_loop_runs_with_the_default_settings(qtbot, tmp_path):
    config = default_config()
    assert config.settings.epoch_seconds is None
    window = MainWindow(config, settings=QSettings(str(tmp_path / "dptop.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(window)
    sp = window.source_panel
    sp.kind.setCurrentIndex(2)  # synthetic
    sp.length.setValue(20_000)
    sp.loop.setChecked(True)
    sp.set_speed(None)
    sp.start.click()
    session = window.session
    assert session is not None and session.spec.loop
    qtbot.waitUntil(lambda: session.snapshot().error is not None or (
        session.source_stats() is not None and session.source_stats().packets > 3 * 20_000), timeout=120_000)
    snap = session.snapshot()
    assert snap.error is None and snap.state == "running", (snap.state, snap.error)
    assert session.grid.cells == MAX_CELLS and session.public["time_range"][1] is None
    assert session.grid.epoch_ns == LIVE_EPOCH_SECONDS * 1e9
    qtbot.waitUntil(lambda: bool(r := session.releases("dpss")) and r[-1].span.index >= 2, timeout=60_000)
    window.stop_source()
    window.close()
