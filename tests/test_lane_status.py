"""The engine's status as the views read it (app/monitor/status.py): what a DPSS lane states about
the epoch length it needs reaches the panel's words (it once went under a name no engine wrote),
and every name the mapping reads is one some engine writes."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import re
from pathlib import Path

from dptop.engine.core.settings import Settings
from dptop.engine.single_release.dpss import dpss_min_packets
from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.explain import reason_text, threshold_of
from dptop.monitor.session import Session
from dptop.monitor.states import State
from dptop.monitor.status import LaneStatus, ReleaseStatus
from tests.conftest import DNS_CAPTURE

ROOT = Path(__file__).resolve().parents[1]


def test_dpss_minimum_epoch_length_reaches_the_panel():
    session = Session(RunConfig(("dpss",), Settings(k=4, k_tilde=8, epsilon=0.5, delta=1e-6, epoch_seconds=1.0)))
    try:
        session.open(SourceSpec("file", str(DNS_CAPTURE)))
        assert session.wait(120) is State.FINISHED, session.error
        (view,) = session.snapshot().lanes
        alg = session.lanes["dpss"].worker.algorithm
        assert view.status.min_packets == dpss_min_packets(alg.k, alg.k_tilde, alg.gamma, alg.slack) > 0
        assert view.status.epoch_mode and view.status.detectable is not None
        empty = next(r for r in session.releases("dpss") if not r.items)  # 1 s epochs: most are empty
        quiet = type(view)(view.name, view.generation, view.origin, view.settings,
                           _with_latest(view.algorithm, empty), None)
        text = reason_text(quiet)
        assert f"at least {view.status.min_packets:,} packets" in text, text
        assert threshold_of(quiet) == empty.threshold
    finally:
        assert session.close(5.0) == []


def _with_latest(snap, release):
    from dataclasses import replace

    return replace(snap, latest=release)


def test_the_mapping_reads_names_the_engine_writes():
    """Each status name ``LaneStatus.of`` reads is written by some engine module (a renamed key
    would otherwise turn a panel silent)."""
    source = (ROOT / "app" / "monitor" / "status.py").read_text()
    read = set(re.findall(r'\.get\("([a-z_]+)"', source))
    engine = "\n".join(p.read_text() for p in (ROOT / "engine").rglob("*.py"))
    assert read >= {"min_packets", "threshold", "tau", "horizon_reached", "detectable", "suppressed"}
    missing = sorted(k for k in read if f'"{k}"' not in engine and f"'{k}'" not in engine)
    assert missing == [], f"read by the views, written by no engine: {missing}"


def test_typed_status_defaults_and_release_status():
    st = LaneStatus.of(None)
    assert (st.threshold, st.min_packets, st.detectable, st.horizon_reached, st.note) == (None, None, None, False, "")
    assert LaneStatus.of({"tau": 3}).threshold == 3.0 and LaneStatus.of({"threshold": 2, "tau": 3}).threshold == 2.0
    assert ReleaseStatus.of({"suppressed": "epoch too long"}).suppressed == "epoch too long"
    assert ReleaseStatus.of(None).suppressed == ""
