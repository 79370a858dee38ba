"""The engine's status as the views read it (dptop.engine.core.status): what a DPSS lane states
about the epoch length it needs reaches the panel's words (it once went under a name no engine
wrote), every attribute the views read is a field some engine states (live status and a release's
status alike), and the JSON keeps its keys."""
import ast
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from dataclasses import fields, replace

from dptop.engine.core import registry
from dptop.engine.core.release import Release, Span
from dptop.engine.core.settings import Settings
from dptop.engine.core.status import NO_FIGURES, NO_STATUS, AlgorithmStatus, Covered, DetectionLimit, EpochStatus, ReleaseStatus
from dptop.engine.single_release.dpmg import DPMGFigures
from dptop.engine.single_release.dpss import dpss_min_packets
from dptop.engine.single_release.eehh import EEHHFigures
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


def _viewed(base) -> set[str]:
    """The attributes ``base`` answers a default for (what the views read), not its own fields."""
    return {name for name, value in vars(base).items()
            if not name.startswith("_") and not callable(value) and name not in {f.name for f in fields(base)}}


def test_every_attribute_the_views_read_is_a_field_some_engine_states():
    """``AlgorithmStatus`` answers a default for what the views read (``threshold``, ``min_packets``,
    ...); a family states it as a field. A field renamed in one family and not in the base would
    leave the panel reading the default, silently: each such name is a field of some registered
    algorithm's status class."""
    registry.names()  # every algorithm module imported, so every status class is defined
    viewed = _viewed(AlgorithmStatus)
    assert viewed >= {"threshold", "min_packets", "horizon_reached", "packets_after_horizon", "note", "epoch_mode"}
    stated = {f.name for cls in _status_classes() for f in fields(cls)}
    assert sorted(viewed - stated) == [], "read by the views, stated by no engine"


def test_every_attribute_read_of_a_release_status_is_a_field_some_release_states():
    """The same for ``Release.status`` (``ReleaseStatus``): ``noisy_length``, ``suppressed`` and a
    merged release's ``agents`` are read by the views and the report; each is a field of some
    family's release status (the mechanisms' and the cluster's ``Covered``), so a rename in one
    family alone cannot leave a view reading the base's default."""
    registry.names()
    import dptop.cluster.merger  # noqa: F401  (the cluster's releases: Covered)

    viewed = _viewed(ReleaseStatus)
    assert viewed >= {"noisy_length", "suppressed", "agents", "agents_partial", "agents_missing"}
    stated = {f.name for cls in _status_classes(ReleaseStatus) for f in fields(cls)}
    assert sorted(viewed - stated) == [], "read by the views, stated by no release"


VIEWS = ("gui", "top.py", "monitor/explain.py", "monitor/lanes.py", "report.py", "runresult.py", "cluster/cli.py")
"""The modules that render a status (the window, the terminal view, the explanations, the report, the
cluster's lines), under app/."""


def _status_reads(root: Path):
    """``(file, attribute)`` for every ``<x>.status.<attribute>`` and ``st.<attribute>`` a view module
    reads (``self.status`` is a widget there, not a status)."""
    for rel in VIEWS:
        paths = sorted((root / rel).rglob("*.py")) if (root / rel).is_dir() else [root / rel]
        for path in paths:
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Attribute):
                    continue
                v = node.value
                if (isinstance(v, ast.Attribute) and v.attr == "status"
                        and not (isinstance(v.value, ast.Name) and v.value.id == "self")) \
                        or (isinstance(v, ast.Name) and v.id == "st"):
                    yield path.name, node.attr


def test_every_status_attribute_a_view_reads_is_declared_by_the_typed_status():
    """A view that reads a status attribute the typed status does not declare (a name no class
    states, or a key of the old dicts) fails here before it fails on a screen."""
    import dptop

    declared = (_viewed(AlgorithmStatus) | _viewed(ReleaseStatus) | {f.name for f in fields(AlgorithmStatus)}
                | {f.name for f in fields(Covered)} | {"to_json"})
    reads = set(_status_reads(Path(dptop.__file__).parent))
    assert {name for _, name in reads} >= {"detectable", "threshold", "agents_missing"}, reads
    assert sorted(r for r in reads if r[1] not in declared) == [], "read by a view, declared by no status"


def test_the_status_read_check_catches_a_misspelt_read(tmp_path):
    """Negative control: a view reading a name no status declares is found."""
    for rel in VIEWS:
        target = tmp_path / (f"{rel}/view.py" if not rel.endswith(".py") else rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("def show(rel, st, self):\n    return rel.status.noisy_lenght, st.threshold, self.status.set_plain\n")
    reads = {name for _, name in _status_reads(tmp_path)}
    assert "noisy_lenght" in reads and "threshold" in reads and "set_plain" not in reads


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
    suppressed = EEHHFigures(noisy_length=5, t_max=4, depth=3, width=64, psi=1.0, k=2, k_tilde=4,
                             suppressed="epoch too long")
    assert Release("eehh-cms", Span(0, 1), (), status=suppressed).suppressed == "epoch too long"
    assert list(suppressed.to_json())[-1] == "suppressed"
    assert "suppressed" not in replace(suppressed, suppressed="").to_json()
    assert Release("eehh-cms", Span(0, 1), ()).suppressed == ""
    assert Release("eehh-cms", Span(0, 1), ()).status is NO_FIGURES and NO_FIGURES.to_json() == {}


def test_release_status_json_keeps_the_dicts_keys_and_order():
    """The release's JSON is what the dicts wrote: optional figures only when set, a merged epoch's
    coverage after the mechanism's figures, a whole-stream baseline's before them."""
    pure = DPMGFigures(mode="pure", k=2, k_tilde=4)
    assert pure.to_json() == {"mode": "pure", "k": 2, "k_tilde": 4} and pure.noisy_length is None
    merged = DPMGFigures(noisy_length=9, mode="merged", tau=3, k=2, k_tilde=4)
    assert list(merged.to_json()) == ["noisy_length", "mode", "tau", "k", "k_tilde"]
    epoch = Covered(figures=merged, agents=("a",), agents_missing=("b",))
    assert list(epoch.to_json()) == ["noisy_length", "mode", "tau", "k", "k_tilde", "agents", "agents_missing"]
    assert epoch.to_json()["agents"] == ["a"] and epoch.noisy_length == 9 and epoch.suppressed == ""
    whole = replace(epoch, figures=NO_FIGURES, agents_partial=(), coverage_first=True)
    assert list(whole.to_json()) == ["agents", "agents_partial", "agents_missing"]
