"""L9 (protocol) and L10 (no clear-text path), docs/local-dp.md §11, and the halves'
interface: only (version, tag, symbol) reports and public snapshots cross between them."""
import pickle

import numpy as np
import pytest

from dptop.engine.core import registry
from dptop.engine.core.settings import Settings
from dptop.engine.core.workload import keys_of_ipv4
from dptop.engine.core.keys import KeyBatch
from dptop.engine.local_dp.bdr import BDRCollector
from dptop.engine.local_dp.dsr import DSRCollector, grr_mechanism
from dptop.engine.local_dp.entropy import Entropy
from dptop.engine.local_dp.pipeline import SCHEMES, Pipeline, make_halves
from dptop.engine.local_dp.protocol import (TAG_COLD, TAG_GRR, TAG_HOT, TAG_SHRUNK, CollectorBase, Reports,
                                            Snapshot, int_bytes, report_bytes)

NONE = np.zeros(0, np.int64)


def reports(version, tag, symbols) -> Reports:
    symbols = np.asarray(symbols, np.int64)
    return Reports(np.full(len(symbols), version, np.int64), np.full(len(symbols), tag, np.uint8), symbols)


# --- L9 ----------------------------------------------------------------------------------------
def test_l9_unknown_and_expired_versions_are_rejected():
    agent, col = make_halves("dsr", 2.0, 101, 10, seed=1)
    old = agent.randomize(np.arange(50), col.snapshot())
    for _ in range(16):
        col.snapshot()  # the book keeps the last 16 versions
    col.insert(old)
    col.insert(reports(999, TAG_GRR, [1, 2]))
    assert col.rejected == {"version": 52, "tag": 0, "symbol": 0} and col.reports == 0
    col.insert(agent.randomize(np.arange(5), col.snapshot()))
    assert col.reports == 5


@pytest.mark.parametrize("scheme, tag, symbol, reason", [
    ("bgr", TAG_SHRUNK, 0, "tag"), ("dsr", TAG_HOT, 0, "tag"), ("bdr", TAG_SHRUNK, 0, "tag"),
    ("bgr", TAG_GRR, 101, "symbol"), ("dsr", TAG_GRR, -1, "symbol"), ("dsr", TAG_SHRUNK, 11, "symbol"),
])
def test_l9_bad_tags_and_symbols_are_rejected(scheme, tag, symbol, reason):
    _, col = make_halves(scheme, 2.0, 101, 10, seed=2)
    col.insert(reports(col.snapshot().version, tag, [symbol]))
    assert col.rejected[reason] == 1 and col.reports == 0


def test_l9_bdr_versions_fix_the_allowed_tags_and_symbols():
    col = BDRCollector(2.0, 0.5, 101, 4, Entropy(3))
    warm = col.snapshot()
    assert warm.phase == TAG_GRR and len(warm.hot) == 0
    col.insert(reports(warm.version, TAG_HOT, [0]))
    assert col.rejected["tag"] == 1
    col.insert(reports(warm.version, TAG_GRR, [3, 9, 27, 81]))
    snap = col.snapshot()
    assert snap.phase == TAG_HOT and list(snap.hot) == [3, 9, 27, 81]
    col.insert(reports(snap.version, TAG_GRR, [5]))  # warm-up reports are not valid any more
    col.insert(reports(snap.version, TAG_COLD, [9]))  # a cold output is never a hot item
    col.insert(reports(snap.version, TAG_HOT, [4]))  # hot index out of range
    assert col.rejected == {"version": 0, "tag": 2, "symbol": 2}


def shrunk_collector():
    """A DSR collector in its shrunk phase with cells ⟨5, 300⟩, ⟨6, 400⟩, ⟨7, 500⟩ (shrunk units; ED
    decays such counts with probability < e^-23)."""
    col = DSRCollector(2.0, 101, 3, Entropy(4))
    st = col.state
    st.ids[:], st.cnt[:], st.meta[0], st.scale[0] = [5, 6, 7], [300.0, 400.0, 500.0], TAG_SHRUNK, col.shrunk.scale
    return col


def test_l9_debias_follows_the_tag_not_the_collector_phase():
    """A stale entire-phase report reaching a shrunk collector is debiased with GRR over Ω's
    (p_e, q_e), converted to the shrunk units; a shrunk report with (p_s, q_s)."""
    col = shrunk_collector()
    snap = col.snapshot()
    assert snap.phase == TAG_SHRUNK and list(snap.hot) == [5, 6, 7]
    e, s = grr_mechanism(2.0, 101), col.shrunk
    r = s.scale / e.scale
    col.insert(reports(snap.version, TAG_GRR, [6]))
    assert col.state.cnt == pytest.approx([300 - e.q * r, 400 - e.q * r + r, 500 - e.q * r])
    before = col.state.cnt.copy()
    col.insert(reports(snap.version, TAG_SHRUNK, [2]))
    assert col.state.cnt == pytest.approx(before + [-s.q, -s.q, 1 - s.q])
    assert col.state.meta[0] == TAG_SHRUNK and col.accepted[TAG_GRR] == col.accepted[TAG_SHRUNK] == 1


def test_l9_a_replaced_cell_is_not_named_by_an_older_snapshot():
    """Symbol j of a shrunk report names cell j as it was in the snapshot: once the cell's item
    has been replaced, the report counts for nobody and the new item is not debiased by it."""
    col = shrunk_collector()
    snap = col.snapshot()
    col.state.ids[1], col.state.cnt[1], col.state.stamp[1] = 42, 600.0, col.reports + 1
    col.state.meta[1] += 1
    col.insert(reports(snap.version, TAG_SHRUNK, [1]))
    assert col.state.cnt[1] == 600.0
    assert col.state.cnt[0] == pytest.approx(300 - col.shrunk.q)


# --- L10 ---------------------------------------------------------------------------------------
def clear_symbol(tag, v, snap: Snapshot, heavy: int) -> int:
    """The symbol an agent leaking its item in clear would have sent."""
    hot = list(snap.hot)
    if tag in (TAG_GRR, TAG_COLD):
        return v
    if tag == TAG_SHRUNK:
        return hot.index(v) if v in hot else heavy
    return sorted(hot).index(v) if v in hot else -1


@pytest.mark.parametrize("scheme", SCHEMES)
def test_l10_every_agent_path_randomizes(scheme):
    """At ε = 0.01 over 1001 values, on every path (warm-up included, hot and cold items) the
    clear-text symbol appears no more often than the mechanism's own p allows."""
    d, heavy, n = 1001, 10, 20_000
    agent, _ = make_halves(scheme, 0.01, d, heavy, seed=5)
    hot = np.arange(100, 100 + heavy)
    phases = [Snapshot(0, TAG_GRR, NONE, NONE)]
    phases += [Snapshot(1, TAG_SHRUNK, hot, NONE)] if scheme == "dsr" else []
    phases += [Snapshot(2, TAG_HOT, hot, NONE)] if scheme in ("bdr", "cnr") else []
    for snap in phases:
        for v in (7, 103):
            rep = agent.randomize(np.full(n, v, np.int64), snap)
            assert rep.version.tolist() == [snap.version] * n
            for tag in np.unique(rep.tag):
                mine = rep.tag == tag
                clear = clear_symbol(int(tag), v, snap, heavy)
                share = float(np.mean(rep.symbol[mine] == clear))
                assert share < 0.2, (scheme, snap.phase, v, int(tag), share)


def test_l10_the_collector_only_ever_receives_reports(monkeypatch):
    """The product path: whatever reaches a collector is a ``Reports`` of (version, tag, symbol),
    never a key or an item; one source sending every packet is not visible in the symbols."""
    seen = []
    original = CollectorBase.insert

    def spy(self, rep):
        seen.append(rep)
        return original(self, rep)

    monkeypatch.setattr(CollectorBase, "insert", spy)
    keys = keys_of_ipv4(np.full(5000, 0x0A000001, np.uint32))
    for name in ("ldp-bgr", "ldp-dsr", "ldp-bdr", "ldp-cnr", "ldp-dsr-prefix"):
        seen.clear()
        alg = registry.make(name, Settings(k=4, epsilon=0.01, seed=3, extra={"domain": "ipv4/8", "reports": "all"}
                                           if name != "ldp-dsr-prefix" else {"reports": "all"}))
        alg.consume(KeyBatch(keys))
        assert seen and all(type(r) is Reports and r._fields == ("version", "tag", "symbol") for r in seen)
        symbols = np.concatenate([r.symbol for r in seen])
        assert np.mean(symbols == 10) < 0.2, name  # 10.0.0.1 is /8 prefix 10


# --- the interface -----------------------------------------------------------------------------
def test_halves_over_a_pickled_transport():
    """Another engineer can put the halves on different machines: snapshots and reports pickle."""
    agent, col = make_halves("bdr", 2.0, 101, 4, seed=6)
    for chunk in np.array_split(np.repeat(np.arange(20), 200), 8):
        snap = pickle.loads(pickle.dumps(col.snapshot()))
        col.insert(pickle.loads(pickle.dumps(agent.randomize(chunk, snap))))
    assert col.reports == 4000 and sum(col.rejected.values()) == 0
    assert not any(isinstance(v, (DSRCollector, BDRCollector)) for v in vars(agent).values())


def test_wire_sizes():
    assert int_bytes(256) == 1 and int_bytes(257) == 2 and int_bytes(1 << 32) == 4 and int_bytes((1 << 48) + 1) == 7
    assert report_bytes(1001) == 4 + 1 + 2
    p = Pipeline(*make_halves("bgr", 2.0, 1001, 8, seed=1), 100, 1001)
    p.run(np.arange(250))
    assert p.upload == 250 * 7 and p.snapshots == 3
