"""Error-envelope heavy hitters over DP CountMin / CountSketch (docs/dpss-eehh.md §6; T12, T14, T17)."""
import json
import math

import numpy as np
import pytest

from dptop.engine.core.facts import Provenance, PublicFacts
from dptop.engine.single_release.eehh import DEFAULT_T_MAX, CountMinEEHH, CountSketchEEHH
from dptop.engine.single_release.eehh_kernels import EEState, query_batch, tracked, update_batch
from dptop.engine.core import hashtable as ht
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.settings import Settings

BASE = 0xFFFF_0000_0000
M64 = (1 << 64) - 1


def _keys(stream):
    keys = np.zeros((len(stream), 2), dtype=np.uint64)
    keys[:, 1] = BASE + np.asarray(stream, dtype=np.uint64)
    return keys


def _settings(**kw):
    base = dict(k=4, epsilon=1.0, delta=1e-6, seed=3, extra={"t_max": 100_000})
    base.update(kw)
    return Settings(**base)


def _clone(st: EEState, zero_noise=False) -> EEState:
    """Same hash seeds (and noise unless zeroed), fresh tracking table."""
    cells = np.zeros_like(st.cells) if zero_noise else st.cells.copy()
    kt = len(st.slot_val)
    return st._replace(cells=cells, slot_hi=st.slot_hi.copy(), slot_lo=st.slot_lo.copy(),
                       slot_val=st.slot_val.copy(), meta=st.meta.copy(), scratch=st.scratch.copy(),
                       tab=ht.make_table(4 * kt))


def ref_query(st: EEState, hi: int, lo: int, signed: bool) -> int:
    """Plain-Python final estimate: vector multiply-shift hashes, min (CMS) or median (CS)."""
    shift = int(st.shift[0])
    chunks = (hi >> 32, hi & 0xFFFF_FFFF, lo >> 32, lo & 0xFFFF_FFFF)

    def h(seed):
        return (sum(int(a) * c for a, c in zip(seed[:4], chunks)) + int(seed[4])) & M64

    vals = []
    for r in range(st.cells.shape[0]):
        g = -1 if signed and h(st.sseed[r]) >> 63 else 1
        vals.append(g * int(st.cells[r, h(st.hseed[r]) >> shift]))
    return sorted(vals)[len(vals) // 2] if signed else min(vals)


@pytest.mark.parametrize("cls", [CountMinEEHH, CountSketchEEHH])
def test_query_matches_reference(cls):
    alg = cls(_settings())
    st = alg._new_state()
    stream = [1] * 300 + [2] * 100 + list(range(10, 200))
    update_batch(st, _keys(stream), cls.signed)
    probe = _keys([1, 2, 15, 999])
    got = query_batch(st, probe, cls.signed)
    want = [ref_query(st, int(h), int(l), cls.signed) for h, l in probe.tolist()]
    assert got.tolist() == want


@pytest.mark.parametrize("cls", [CountMinEEHH, CountSketchEEHH])
def test_add_remove_changes_exactly_d_cells_by_one(cls):
    """T12: noise-free tables of neighbouring streams differ in exactly d cells, each by 1 (±1)."""
    alg = cls(_settings())
    a = _clone(alg._new_state(), zero_noise=True)
    b = _clone(a)
    rng = np.random.default_rng(4)
    stream = rng.integers(0, 50, 2000).tolist()
    update_batch(a, _keys(stream), cls.signed)
    update_batch(b, _keys(stream[:700] + stream[701:]), cls.signed)
    diff = a.cells - b.cells
    assert np.count_nonzero(diff) == alg.depth
    assert set(np.abs(diff[diff != 0]).tolist()) == {1}
    if cls is CountMinEEHH:
        assert (diff >= 0).all()


@pytest.mark.parametrize("cls", [CountMinEEHH, CountSketchEEHH])
def test_tracking_invariants(cls):
    """After every batch: the heap is a min-heap over the tracked slots whose keys are their recorded
    values (CountSketch) or lower bounds of them (CountMin, refreshed lazily), the table maps each
    tracked label to its slot, and each recorded value is the label's estimate at its last arrival
    (checked against a replay of the sketch, the reference of §6.1)."""
    alg = cls(_settings())
    st = alg._new_state()
    shadow = _clone(st)  # same hashes and noise: replays the estimates
    rng = np.random.default_rng(5)
    stream = (rng.zipf(1.3, 3000) % 500).tolist()
    keys = _keys(stream)
    for start in range(0, len(stream), 300):
        update_batch(st, keys[start:start + 300], cls.signed)
        size = int(st.meta[0])
        assert size == min(alg.k_tilde, len(set(stream[:start + 300])))
        heap, hkey = st.heap[:size], st.hkey[:size]
        assert sorted(heap.tolist()) == list(range(size)) and (st.hpos[heap] == np.arange(size)).all()
        assert all(hkey[(i - 1) // 2] <= hkey[i] for i in range(1, size))
        recorded = st.slot_val[heap]
        assert (hkey == recorded).all() if cls.signed else (hkey <= recorded).all()
        for s, (h, l) in enumerate(tracked(st).tolist()):
            p = ht.probe(st.tab.hi, st.tab.lo, st.tab.hashing, np.uint64(h), np.uint64(l))
            assert st.tab.val[p] == s
    last = {}
    for t, x in enumerate(stream):  # the estimate right after each arrival, by a separate query
        update_batch(shadow, keys[t:t + 1], cls.signed)
        last[x] = int(query_batch(shadow, keys[t:t + 1], cls.signed)[0])
    for s, (_, l) in enumerate(tracked(st).tolist()):
        assert st.slot_val[s] == last[int(l) - BASE]


def test_release_decides_on_final_values():
    """T14: stale heap values neither admit nor block a label; only the final query counts."""
    alg = CountMinEEHH(_settings(k=2))
    st = _clone(alg._new_state(), zero_noise=True)
    update_batch(st, _keys([1] * 40_000 + [2] * 30 + list(range(100, 140))), False)
    slot = {int(l) - BASE: s for s, (_, l) in enumerate(tracked(st).tolist())}
    st.slot_val[slot[1]] = 0  # stale value says "light"
    st.slot_val[slot[2]] = 10**9  # stale value says "heavy"
    items, tau, _, _ = alg._publish(st)
    assert {it.lo - BASE for it in items} == {1}
    assert items[0].estimate == 40_000 and tau < 40_000


@pytest.mark.parametrize("cls,k", [(CountMinEEHH, 4), (CountSketchEEHH, 64)])
def test_heavy_released_flat_suppressed(cls, k):
    # CountSketch: F2_up >= 2·f_max², so 3·E_cs >= 12·sqrt(2/w)·f_max and nothing can pass
    # unless w > 288 (k~ >= 128): the envelope of §6.4 is that conservative.
    alg = cls(Settings(k=k, epsilon=1.0, delta=1e-6))  # OS CSPRNG, default t_max
    heavy = alg.consume(KeyBatch(_keys([7] * 60_000 + list(range(1000, 21_000)))))
    rel = alg.finish()[0]
    assert heavy == [] and rel.items and rel.items[0].lo - BASE == 7
    assert all(it.estimate > rel.threshold for it in rel.items)
    flat = cls(Settings(k=k, epsilon=1.0, delta=1e-6))
    flat.consume(KeyBatch(_keys(list(range(50_000)))))
    assert flat.finish()[0].items == ()


def test_epoch_too_long_releases_nothing():
    alg = CountMinEEHH(_settings(extra={"t_max": 1000}))
    alg.update(_keys([1] * 5000))
    rel = alg.finish()[0]
    assert rel.items == () and "epoch too long" in rel.status.suppressed


def test_sizes_guarantees_and_fresh_seeds():
    cms, cs = CountMinEEHH(_settings()), CountSketchEEHH(_settings())
    assert cms.k_tilde == 16 and cms.width == 1024 and cs.width == 64 and cs.depth % 2 == 1
    assert not any("EXPERIMENTAL" in n for n in cms.guarantee().notes)
    assert any("EXPERIMENTAL" in n for n in cs.guarantee().notes)
    g = cms.guarantee()
    assert (g.epsilon, g.delta) == (pytest.approx(1.0), pytest.approx(1e-6))
    a, b = cms._new_state(), cms._new_state()
    assert not np.array_equal(a.hseed, b.hseed) and not np.array_equal(a.cells, b.cells)
    # --param width: rounded up to a power of two; a narrower sketch needs more rows
    narrow = CountMinEEHH(_settings(extra={"t_max": 100_000, "width": 100}))
    assert narrow.width == 128 and narrow.depth > cms.depth
    # Epoch default T_max covers the epoch plus the noisy-length slack.
    ep = CountMinEEHH(Settings(k=4, epoch_packets=500))
    assert ep.t_max >= 500 + ep.slack + 1


def _declared(n):
    return PublicFacts.of(n, length_provenance=Provenance.DECLARED)


@pytest.mark.parametrize("cls", [CountMinEEHH, CountSketchEEHH])
def test_t_max_defaults_from_the_public_length_and_small_ones_are_refused(cls):
    n = 8000
    alg = cls(Settings(k=4, epsilon=0.5), _declared(n))
    assert alg.t_max == n + 2 * alg.slack + 2
    with pytest.raises(ValueError, match=r"t_max \(8000\) is too small for the whole stream of 8000 packets.*"
                                         r"use --param t_max=(\d+) or more") as info:
        cls(Settings(k=4, epsilon=0.5, extra={"t_max": n}), _declared(n))
    need = int(info.value.args[0].rsplit("t_max=", 1)[1].split()[0])
    ok = cls(Settings(k=4, epsilon=0.5, extra={"t_max": need}), _declared(n))
    with pytest.raises(ValueError):
        cls(Settings(k=4, epsilon=0.5, extra={"t_max": need - 1}), _declared(n))
    ok.update(_keys([7] * n))
    rel = ok.finish()[0]
    assert rel.suppressed == "" and "suppressed" not in rel.status.to_json()
    if cls is CountMinEEHH:  # (CountSketch's §6.4 envelope is too wide to release at k~ = 16)
        assert [it.lo - BASE for it in rel.items] == [7]
    # time epochs: the file's length only bounds each epoch, so a smaller t_max is the user's call
    cls(Settings(k=4, epsilon=0.5, epoch_seconds=1.0, extra={"t_max": n}), PublicFacts.of(n, (0, 10**10)))


@pytest.mark.parametrize("cls", [CountMinEEHH, CountSketchEEHH])
def test_a_packet_count_read_from_the_file_is_named_where_it_sizes_the_release(cls):
    """A replay's packet count read from its packets sizes T_max, the depth and the budget split: a
    neighbour one packet shorter prints another T_max, so every release names the count as an
    assumed public fact (it was printed under add/remove with no fact listed)."""
    a, b = (cls(Settings(k=4, epsilon=0.5), PublicFacts.of(n)) for n in (4412, 4411))
    assert a.t_max != b.t_max
    for alg, n in ((a, 4412), (b, 4411)):
        (fact,) = alg.guarantee().facts
        assert (fact.name, fact.value, fact.provenance) == ("stream_length", n, Provenance.ASSUMED)
        assert "T_max" in fact.why
    assert cls(Settings(k=4, epsilon=0.5), _declared(4412)).guarantee().facts == ()  # declared: covered
    timed = cls(Settings(k=4, epsilon=0.5, epoch_seconds=1.0), PublicFacts.of(4412, (0, 10**10)))
    assert timed.guarantee().facts == () and timed.t_max == DEFAULT_T_MAX  # time epochs: not sized by it


def test_cli_refuses_a_t_max_below_the_file_and_names_the_one_that_works(capsys):
    from dptop.cli import main
    from tests.conftest import DNS_CAPTURE

    assert main(["replay", str(DNS_CAPTURE), "--algorithms", "eehh-cms", "--param", "t_max=4412"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "eehh-cms: t_max (4412) is too small" in err[0]
    need = int(err[0].rsplit("t_max=", 1)[1].split()[0])
    assert main(["replay", str(DNS_CAPTURE), "--algorithms", "eehh-cms", "--param", f"t_max={need}",
                 "--k", "4", "--json", "-"]) == 0
    release = json.loads(capsys.readouterr().out)["algorithms"]["eehh-cms"]["releases"][-1]
    assert "24.132.150.54" in [it["address"] for it in release["items"]]  # 1994 of 4412 packets: released
    assert [f["name"] for f in release["guarantee"]["public_facts"]] == ["stream_length"]


def test_detection_limit_says_when_no_release_is_possible():
    ok = CountMinEEHH(Settings(k=4, epsilon=1.0), PublicFacts.of(100_000)).detectable()
    assert ok.count < 100_000 and ok.note == "" and "note" not in ok.to_json()
    tiny = CountMinEEHH(Settings(k=4, epsilon=0.01), PublicFacts.of(8000)).detectable()
    assert tiny.count > 8000 and "no release is possible" in tiny.note


@pytest.mark.parametrize("kw,match", [
    (dict(k_tilde=4), r"k~ \(4\) must be > k \(4\)"),
    (dict(extra={"t_max": 0}), r"t_max \(0\) must be >= 1"),
    (dict(epsilon=-1.0), r"epsilon \(-1\) must be > 0"),
    (dict(epsilon=0.1, extra={"t_max": 500}), r"t_max \(500\) is too small for any epoch.*use --param t_max="),
])
def test_invalid_parameters(kw, match):
    with pytest.raises(ValueError, match=match):
        CountMinEEHH(_settings(**kw))


def test_cell_noise_scale():
    """Cell noise of a fresh sketch is DLap with scale 2d/ε_S (variance 2α/(1−α)²)."""
    alg = CountMinEEHH(_settings(k=8))
    cells = alg._new_state().cells.ravel()
    a = math.exp(-1 / alg.scale)
    sd = math.sqrt(2 * a) / (1 - a)
    assert abs(cells.mean()) < 5 * sd / math.sqrt(cells.size)
    assert cells.std() == pytest.approx(sd, rel=0.1)


def test_select_is_the_median():
    """The in-place quickselect behind the CountSketch median, against np.sort (ties included)."""
    from dptop.engine.core.topk import select as _select
    from dptop.engine.core.jit import kernel

    select = kernel(lambda a, k: _select(a, k))
    rng = np.random.default_rng(0)
    for _ in range(3000):
        n = int(rng.integers(0, 30)) * 2 + 1
        a = rng.integers(-3, 3, n) if rng.random() < 0.5 else rng.integers(-10**6, 10**6, n)
        assert select(a.copy(), n // 2) == np.sort(a)[n // 2]
