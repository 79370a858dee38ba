"""The engine's status as the views read it (dptop.engine.core.status): what a DPSS lane states
about the epoch length it needs reaches the panel's words (it once went under a name no engine
wrote), every attribute the views read is a field some engine states, and the JSON keeps its keys."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from dataclasses import fields, replace

from dptop.engine.core import registry
from dptop.engine.core.release import Release, Span
from dptop.engine.core.settings import Settings
from dptop.engine.core.status import NO_STATUS, AlgorithmStatus, DetectionLimit, EpochStatus
from dptop.engine.single_release.dpss import dpss_min_packets
from dptop.monitor.config import RunConfig, SourceSpec
from dptop.monitor.explain import reason_text, threshold_of
from dptop.monitor.session import Session
from dptop.monitor.states import State
from tests.conftest import DNS_CAPTURE


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


def _status_classes(cls=AlgorithmStatus):
    for sub in cls.__subclasses__():
        yield sub
        yield from _status_classes(sub)


def test_every_attribute_the_views_read_is_a_field_some_engine_states():
    """``AlgorithmStatus`` answers a default for what the views read (``threshold``, ``min_packets``,
    ...); a family states it as a field. A field renamed in one family and not in the base would
    leave the panel reading the default, silently: each such name is a field of some registered
    algorithm's status class."""
    registry.names()  # every algorithm module imported, so every status class is defined
    viewed = {name for name, value in vars(AlgorithmStatus).items()
              if not name.startswith("_") and not callable(value) and name not in {f.name for f in fields(AlgorithmStatus)}}
    assert viewed >= {"threshold", "min_packets", "horizon_reached", "packets_after_horizon", "note", "epoch_mode"}
    stated = {f.name for cls in _status_classes() for f in fields(cls)}
    assert sorted(viewed - stated) == [], "read by the views, stated by no engine"


def test_status_json_states_fields_in_order_optional_ones_when_set_and_the_limit_last():
    st = EpochStatus(epoch=2, epoch_mode="seconds", packets_in_epoch=10)
    assert list(st.to_json()) == ["epoch", "epoch_mode", "packets_in_epoch"]
    timed = replace(st, packets_dropped=0, detectable=DetectionLimit(5, 0.5, 1.5, "an epoch"))
    assert timed.to_json() == {"epoch": 2, "epoch_mode": "seconds", "packets_in_epoch": 10, "packets_dropped": 0,
                               "detectable": {"count": 5, "share": 0.5, "error": 1.5, "over": "an epoch"}}
    assert (timed.threshold, timed.min_packets, timed.horizon_reached) == (None, None, False)
    limit = DetectionLimit(300, 3.0, None, "the 100 packets", after=((0.1, 400), (0.3, None)))
    assert limit.explained().note == "nothing can be released here: a source would need 300 packets, more than the 100 packets holds"
    assert list(limit.explained().to_json()) == ["count", "share", "error", "over", "after", "note"]
    assert limit.to_json()["after"] == {"0.1": 400, "0.3": None}
    assert DetectionLimit(3, 0.5, None, "x", note="kept").explained().note == "kept"


def test_typed_status_defaults_and_release_suppressed():
    st = NO_STATUS
    assert (st.threshold, st.min_packets, st.detectable, st.horizon_reached, st.note) == (None, None, None, False, "")
    assert st.to_json() == {}
    assert Release("eehh-cms", Span(0, 1), (), status={"suppressed": "epoch too long"}).suppressed == "epoch too long"
    assert Release("eehh-cms", Span(0, 1), ()).suppressed == ""
