"""The monitor window (pytest-qt, offscreen) on a small real capture, tests/data/amp.dns.RRSIG.fragmented.pcap
(4,412 packets; provenance in tests/data/SOURCES.md)."""
import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"

import csv
import json
import threading
import time
from collections import Counter

import pytest
from PySide6.QtCore import QSettings, Qt

from dptop.gui.main import MainWindow, config_from_json, default_config
from dptop.monitor.config import RunConfig
from dptop.capture.pcap import read_keys
from dptop.engine.core import registry
from dptop.engine.core.keys import decode_key
from dptop.engine.core.settings import Settings

from tests.conftest import DNS_CAPTURE as DEMO
WARM = 180_000  # ms: the first run on a clean clone compiles every kernel


@pytest.fixture
def make_window(qtbot, tmp_path):
    def make(names=None, store=None, **changes):
        settings = Settings(k=8, epsilon=0.5, delta=1e-6, epoch_seconds=2.0, restart=True).with_(**changes)
        config = RunConfig(tuple(names or default_config().names), settings)
        store = store or QSettings(str(tmp_path / "dptop.ini"), QSettings.Format.IniFormat)
        window = MainWindow(config, settings=store)
        qtbot.addWidget(window)
        window.show()
        window.activateWindow()
        qtbot.waitUntil(window.isActiveWindow, timeout=5000)  # shortcuts act on the active window
        return window
    return make


def replay(qtbot, window, running=False):
    """Replay the demo capture: to its end as fast as possible, or (``running``) paced at 1x so the
    session keeps running for the test (a real capture is never looped)."""
    window.open_file(str(DEMO), speed=1.0 if running else None)
    if not running:
        qtbot.waitUntil(lambda: window.session.state == "finished", timeout=WARM)


def all_running(window) -> bool:
    """Every enabled algorithm has compiled and processed packets."""
    snap = window.session.snapshot()
    return bool(snap.lanes) and all(lane.error is not None or (lane.algorithm is not None and lane.algorithm.ready
                                                                and lane.algorithm.packets > 0) for lane in snap.lanes)


def lanes(window):
    return {lane.name: lane for lane in window.session.snapshot().lanes}


def test_replay_fills_every_panel_or_says_why(qtbot, make_window):
    window = make_window()
    replay(qtbot, window)
    keys, _, _ = read_keys(DEMO)
    counts = Counter(map(tuple, keys.tolist()))  # ties ordered by key, as dptop.engine.core.release.sorted_items
    top8 = [(decode_key(h, l), c) for (h, l), c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:8]]

    def settled():
        for name, panel in window.panels.items():
            lane = lanes(window)[name]
            rel = lane.algorithm.latest
            rows = panel.model.rows()
            if rel is None or [(r.address, r.estimate) for r in rows] != [(it.address, it.estimate) for it in rel.items]:
                return False
            if rows and any(r.true is None for r in rows):
                return False
            if not rows and not panel.reason.full_text():
                return False
        return True

    qtbot.waitUntil(settled, timeout=30_000)
    exact = window.panels["exact"].model.rows()
    assert [(r.address, int(r.estimate)) for r in exact] == top8
    assert all(r.true == r.estimate for r in exact)  # the truth thread agrees with the exact baseline
    for name, panel in window.panels.items():
        rel = lanes(window)[name].algorithm.latest
        # a panel shows exactly the release's items, never another label
        assert {r.address for r in panel.model.rows()} == {it.address for it in rel.items}
        if rel.guarantee is not None:
            assert f"ε = {rel.guarantee.epsilon:g}" in panel.guarantee.full_text()
            assert ("τ = " in panel.status.full_text()) or panel.reason.full_text()
    # the budget lists every private algorithm that published and the sequential total
    budget = window.budget.model.rows()
    private = [n for n in window.panels if registry.get(n).private]
    assert sorted(r.name for r in budget[:-1]) == sorted(private)
    assert budget[-1].name.startswith("Total")


def test_models_pass_qtmodeltester(qtbot, qtmodeltester, make_window):
    window = make_window(names=("dpss", "exact", "spacesaving"))
    replay(qtbot, window)
    qtbot.waitUntil(lambda: window.panels["exact"].model.rowCount() == 8, timeout=30_000)
    for panel in window.panels.values():
        qtmodeltester.check(panel.model)
        qtmodeltester.check(panel.proxy)
    qtmodeltester.check(window.budget.model)


def test_parameters_validate_as_you_type_and_apply_restarts(qtbot, make_window, tmp_path):
    window = make_window(names=("dpss", "spacesaving"))
    params = window.params
    params.epsilon.setText("-1")
    qtbot.waitUntil(lambda: "epsilon (-1.0) must be in [1e-06, 64.0]" in params.error.text(), timeout=5000)
    assert not params.apply_button.isEnabled() and params.apply() is False
    params.epsilon.setText("abc")
    qtbot.waitUntil(lambda: "epsilon ('abc') must be a number" in params.error.text(), timeout=5000)
    params.epsilon.setText("0.5")
    params.k_tilde.setText("4")  # k~ must exceed k = 8 for DPSS: the algorithm's own message
    qtbot.waitUntil(lambda: "dpss: k~ (4) must be > k (8)" in params.error.text(), timeout=5000)
    params.k_tilde.setText("")
    qtbot.waitUntil(lambda: params.apply_button.isEnabled(), timeout=5000)

    replay(qtbot, window, running=True)
    qtbot.waitUntil(lambda: all_running(window), timeout=WARM)
    before = {n: l for n, l in window.session.lanes.items()}
    params.epsilon.setText("0.25")
    qtbot.waitUntil(lambda: params.apply_button.isEnabled(), timeout=5000)
    assert params.apply() is True
    after = window.session.lanes
    assert after["dpss"] is not before["dpss"] and after["dpss"].generation > before["dpss"].generation
    assert after["spacesaving"] is before["spacesaving"]  # non-private: epsilon does not concern it
    qtbot.waitUntil(lambda: not before["dpss"].worker.thread.is_alive(), timeout=2000)
    qtbot.waitUntil(lambda: "ε = 0.25" in window.panels["dpss"].guarantee.full_text(), timeout=10_000)
    qtbot.waitUntil(lambda: lanes(window)["dpss"].algorithm.packets > 0, timeout=WARM)
    # the applied settings are remembered
    window.close()
    store = QSettings(str(tmp_path / "dptop.ini"), QSettings.Format.IniFormat)
    assert config_from_json(store.value("config")).settings.epsilon == 0.25


def test_freeze_stops_rows_moving_but_sorting_works(qtbot, make_window):
    window = make_window(names=("exact", "spacesaving"))
    replay(qtbot, window, running=True)
    panel = window.panels["spacesaving"]
    qtbot.waitUntil(lambda: panel.model.rowCount() == 8, timeout=WARM)
    qtbot.keyClick(window, Qt.Key.Key_Space)
    assert window.frozen and panel.model.frozen
    frozen_rows = panel.model.rows()
    seen = lanes(window)["spacesaving"].algorithm.latest
    qtbot.waitUntil(lambda: lanes(window)["spacesaving"].algorithm.latest is not seen, timeout=10_000)
    qtbot.wait(300)
    assert panel.model.rows() == frozen_rows
    panel.table.sortByColumn(2, Qt.SortOrder.AscendingOrder)  # sorting still works while frozen
    first = panel.proxy.index(0, 2).data(Qt.ItemDataRole.UserRole + 1)
    assert first == min(r.estimate for r in frozen_rows)
    assert panel.model.rows() == frozen_rows
    qtbot.keyClick(window, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: panel.model.rows() != frozen_rows, timeout=10_000)


def test_export_writes_the_private_releases_only(qtbot, make_window, tmp_path):
    window = make_window(names=("dpss", "exact"))
    replay(qtbot, window)
    csv_path, json_path = window.export_to(tmp_path / "releases")
    data = json.loads(json_path.read_text())
    assert set(data["algorithms"]) == {"dpss"}  # non-private baselines are never exported
    releases = window.session.releases("dpss")
    last = releases[-1]
    assert last is lanes(window)["dpss"].algorithm.latest
    exported = data["algorithms"]["dpss"]
    published = exported["releases"][-1]
    assert published["items"] == [it.to_json() for it in last.items] and published["span"]["index"] == last.span.index
    assert published["guarantee"]["text"] == last.guarantee.describe()
    assert exported["guarantee"]["epsilon"] == last.guarantee.epsilon
    assert data["schema_version"] == 1 and "packets" not in exported and "status" not in published
    with open(csv_path) as fh:
        rows = [r for r in csv.DictReader(fh) if int(r["release"]) == len(releases) - 1]
    want = [(it.address, it.estimate) for it in last.items] or [("", "")]
    assert [(r["address"], float(r["estimate"]) if r["estimate"] else "") for r in rows] == want
    assert all(float(r["epsilon"]) == last.guarantee.epsilon for r in rows)
    png = tmp_path / "throughput.png"
    from dptop.gui.export import save_png

    assert save_png(window.throughput.widget, png) and png.stat().st_size > 1000


def test_help_overlay_toggles(qtbot, make_window):
    window = make_window(names=("exact",))
    qtbot.keyClick(window, Qt.Key.Key_F1)
    assert window.overlay.isVisible() and "Space" in window.overlay.findChild(type(window.fps)).text()
    qtbot.keyClick(window, Qt.Key.Key_Escape)
    assert not window.overlay.isVisible()


def test_redraw_rate_and_close_latency_with_every_algorithm(qtbot, make_window, record_property):
    """Replay as fast as possible with every registered algorithm: the timer keeps at least half the
    redraw rate it has with the window idle (20/s on a quiet machine, so >= 10), and closing the
    window stops every thread within twenty idle redraw periods (a second on a quiet machine).
    Both are ratios to the same window's idle rate, so a loaded machine slows both sides."""
    window = make_window(names=tuple(registry.names()))
    start, count = time.monotonic(), len(window.redraws)
    qtbot.wait(1500)
    idle = (len(window.redraws) - count) / (time.monotonic() - start)
    replay(qtbot, window, running=True)
    qtbot.waitUntil(lambda: all_running(window), timeout=WARM)
    start, count = time.monotonic(), len(window.redraws)
    qtbot.wait(3000)
    rate = (len(window.redraws) - count) / (time.monotonic() - start)
    fed = window.session.snapshot().truth_packets
    record_property("redraws_per_second", rate)
    print(f"\nredraws/s with {len(window.panels)} algorithms replaying at max speed: {rate:.1f}, idle {idle:.1f} "
          f"(packets so far {fed:,}; load average {os.getloadavg()[0]:.1f})")
    assert idle > 0 and rate >= 0.5 * idle, f"redraw rate {rate:.1f}/s under replay < half the idle {idle:.1f}/s"
    threads = window.session.threads()
    t0 = time.monotonic()
    window.close()
    latency = time.monotonic() - t0
    record_property("close_seconds", latency)
    print(f"close latency: {latency:.3f} s; threads still alive: {[t.name for t in threads if t.is_alive()]}")
    assert not [t.name for t in threads if t.is_alive()]
    assert latency < 20 / idle, f"close took {latency:.2f} s, over 20 idle redraw periods ({20 / idle:.2f} s)"
    assert not [t.name for t in threading.enumerate() if t.name.startswith("dptop")]


def test_tuning_sweep_runs_in_the_background_and_applies(qtbot, make_window):
    window = make_window(names=("dpss", "exact"))
    replay(qtbot, window, running=True)
    qtbot.waitUntil(lambda: window.session.snapshot().truth_packets > 500, timeout=WARM)
    tuning = window.tuning
    tuning.algorithm.setCurrentText("dpss")
    tuning.parameter.setCurrentIndex(0)  # epsilon
    tuning.values.setText("0.3, 1.5")
    tuning.reps.setValue(1)
    assert tuning.start()
    assert tuning.sweep.thread.is_alive() or tuning.sweep.done  # the work is on its own thread
    qtbot.waitUntil(lambda: tuning.apply.isEnabled(), timeout=60_000)
    assert [tuning.choice.itemData(i) for i in range(tuning.choice.count())] == [0.3, 1.5]
    assert tuning.progress.value() == 1000
    tuning.choice.setCurrentIndex(1)
    before = window.session.lanes["dpss"]
    tuning.apply_choice()
    assert window.params.current.settings.epsilon == 1.5
    assert window.session.lanes["dpss"] is not before  # applied to the live run: dpss restarted
    tuning.values.setText("0.3, x")
    assert not tuning.start() and "numbers" in tuning.message.text()


def test_tuning_plots_the_a_priori_detection_limit_against_epsilon(qtbot, make_window):
    """Before any packet the curve is there; it falls as ε grows; once a replay's packet count is
    public, LazyHH's limit is a share of that horizon and its curve is redrawn."""
    from dptop.monitor.sweep import detection_limits

    window = make_window(names=("dpss", "lazyhh", "dpsw", "exact"))
    tuning = window.tuning
    tuning.parameter.setCurrentIndex(0)  # epsilon
    tuning.values.setText("0.1, 0.25, 0.5, 0.75, 0.9")
    for name in ("dpss", "lazyhh", "dpsw"):
        tuning.algorithm.setCurrentText(name)
        tuning.show_limits()
        xs, ys = tuning.limit_curve.getData()
        if name == "dpss":  # epochs of 2 s need a source's public time range
            assert xs is None or len(xs) == 0
            assert "public time range" in tuning.limit_note.full_text()
            continue
        assert list(xs) == [0.1, 0.25, 0.5, 0.75, 0.9]
        assert all(a > b for a, b in zip(ys, ys[1:])), (name, ys)  # more budget, smaller sources released
    tuning.algorithm.setCurrentText("lazyhh")
    tuning.values.setText("0.5, 2")  # LazyHH's Gaussian mechanism needs ε < 1: that point says why
    tuning.show_limits()
    assert list(tuning.limit_curve.getData()[0]) == [0.5] and "(0, 1)" in tuning.limit_note.full_text()
    tuning.values.setText("0.1, 0.25, 0.5, 0.75, 0.9")
    replay(qtbot, window)
    qtbot.waitUntil(lambda: "4412" in tuning.limit_note.full_text().replace(",", ""), timeout=10_000)
    facts = window.session.public_facts()
    base = window.config.settings_for("lazyhh", facts)
    expect = [100 * lim.share for _, lim in detection_limits("lazyhh", base, "epsilon", [0.1, 0.25, 0.5, 0.75, 0.9],
                                                                facts)]
    assert list(tuning.limit_curve.getData()[1]) == pytest.approx(expect)


def test_dropping_a_capture_file_replays_it(qtbot, make_window):
    from PySide6.QtCore import QMimeData, QPointF, QUrl
    from PySide6.QtGui import QDropEvent

    window = make_window(names=("exact",))
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(DEMO))])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                       Qt.KeyboardModifier.NoModifier)
    window.dropEvent(event)
    assert window.source_panel.path.text() == str(DEMO)
    qtbot.waitUntil(lambda: window.session.state == "finished", timeout=WARM)
    qtbot.waitUntil(lambda: window.panels["exact"].model.rowCount() == 8, timeout=10_000)


def test_one_ledger_for_the_cli_the_budget_panel_and_the_export(qtbot, make_window, tmp_path, capsys):
    """dpss (add/remove) + lazyhh and dpsw (substitution) at ε = 0.5 each: 2.0 per packet under
    substitution, the same numbers in `dptop replay --json`, the window's budget panel and its export."""
    from dptop.cli import main

    argv = ["replay", str(DEMO), "--algorithms", "dpss,lazyhh,dpsw", "--epsilon", "0.5", "--delta", "1e-6",
            "--json", "-"]
    assert main(argv) == 0
    cli = json.loads(capsys.readouterr().out)["budget"]
    assert cli["epsilon"] == pytest.approx(2.0) and cli["neighbouring"] == "substitution of one packet's source address"

    window = make_window(names=("dpss", "lazyhh", "dpsw"), epoch_seconds=None, restart=False)
    replay(qtbot, window)
    qtbot.waitUntil(lambda: bool(window.budget.model.rows()) and window.budget.model.rows()[-1].epsilon == 2.0,
                    timeout=10_000)
    total = window.budget.model.rows()[-1]
    _, json_path = window.export_to(tmp_path / "releases")
    exported = json.loads(json_path.read_text())["budget"]
    for source in (cli, exported):
        assert source["epsilon"] == pytest.approx(total.epsilon)
        assert source["delta"] == pytest.approx(total.delta)
        assert source["neighbouring"] == total.neighbouring
        assert {n: v["epsilon"] for n, v in source["algorithms"].items()} == \
               {"dpss": pytest.approx(1.0), "lazyhh": pytest.approx(0.5), "dpsw": pytest.approx(0.5)}
