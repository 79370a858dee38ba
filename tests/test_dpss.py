"""DP SpaceSaving release and the epoch machinery (docs/dpss-eehh.md §4, §9; tests T7, T8, T11, T17).

Statistical tests use fixed seeds (the seeded, NOT private noise mode) and state their
significance; the threshold is recomputed here from the formulas of docs/dpss-eehh.md, not from engine code.
"""
import math

import numpy as np
import pytest

from dptop.engine.core.facts import PublicFacts
from dptop.engine.core.workload import zipf_keys
from dptop.engine.single_release.dpss import DPSpaceSaving
from dptop.engine.baselines.exact import ExactCounter
from dptop.engine.core.keys import KeyBatch
from dptop.engine.privacy.units import Relation
from dptop.engine.core.settings import Settings
from dptop.engine.baselines.spacesaving import make_state, update_batch
from tests.test_noise import ALPHA, chi_square_p

BASE = 0xFFFF_0000_0000


def _keys(stream):
    keys = np.zeros((len(stream), 2), dtype=np.uint64)
    keys[:, 1] = BASE + np.asarray(stream, dtype=np.uint64)
    return keys


def _settings(**kw):
    base = dict(k=8, k_tilde=16, epsilon=1.0, delta=1e-6, seed=5)
    base.update(kw)
    return Settings(**base)


def spec_threshold(n_noisy, k, k_tilde, eps, delta):
    """docs/dpss-eehh.md §4.5–§4.6 with the default split, written out independently."""
    eps_n, delta_n = 0.1 * eps, 0.1 * delta
    eps_a, delta_a = 0.9 * eps, (delta - delta_n) / math.exp(eps_n)
    gamma = 1 + math.log(2 / delta_a) / eps_a
    s_n = math.ceil(math.log(1 / ((1 + math.exp(-eps_n)) * delta_n)) / eps_n)
    # recall margin at β = 0.05: ⌈ln(2k/(β(1+α_A)))/ε_A⌉ + ln(2/(β(1+α_n)))/(ε_n·k), at most γ
    margin = min(gamma, math.ceil(math.log(40 * k / (1 + math.exp(-eps_a))) / eps_a)
                 + math.log(40 / (1 + math.exp(-eps_n))) / (eps_n * k))
    return max(n_noisy / k - margin, (n_noisy + s_n + 1) / k_tilde + 1 + gamma)


def test_recall_margin_releases_every_heavy_hitter_at_rate_beta():
    """Items exactly at n/k (the worst case: C = f = n/k) are all released in >= 95 % of releases;
    a margin of half the size fails that (so the margin is not loose by 2x)."""
    k, eps = 16, 0.1
    alg = DPSpaceSaving(_settings(k=k, k_tilde=4 * k, epsilon=eps, delta=1e-6, seed=None))
    n = 16 * 4000
    heavy = [i for i in range(1, k + 1) for _ in range(n // k)]
    state = alg._new_state()
    update_batch(state, _keys(heavy))
    runs = 400
    full = sum(len(alg._publish(state)[0]) == k for _ in range(runs))
    assert full / runs >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / runs)
    assert alg.margin < alg.gamma
    alg.margin /= 2
    half = sum(len(alg._publish(state)[0]) == k for _ in range(runs))
    assert half / runs < 0.9


@pytest.mark.parametrize("k,kt,eps,delta", [(8, 16, 1.0, 1e-6), (128, 256, 0.1, 1e-3), (2, 3, 4.0, 0.2)])
def test_threshold_equals_spec_formula(k, kt, eps, delta):
    alg = DPSpaceSaving(_settings(k=k, k_tilde=kt, epsilon=eps, delta=delta))
    alg.update(zipf_keys(1.2, 500, 20_000, seed=1))
    rel = alg.finish()[0]
    # Equal up to float rounding (0.9ε vs ε − 0.1ε): 1e-12 relative.
    assert rel.threshold == pytest.approx(spec_threshold(rel.status.noisy_length, k, kt, eps, delta), rel=1e-12)
    assert all(it.estimate > rel.threshold for it in rel.items)
    g = rel.guarantee
    assert (g.epsilon, g.delta, g.relation) == (pytest.approx(eps), pytest.approx(delta), Relation.ADD_REMOVE)


def test_released_minus_true_counts_follow_the_noise():
    """Every counter exact (fewer distinct items than k~); 4,000 releases of one snapshot through
    the test hook ``_publish``: released − true ~ DLap(α = e^(−ε_A)), and ñ − n ~ DLap(e^(−ε_n));
    chi-square at significance ALPHA."""
    alg = DPSpaceSaving(_settings())
    counts = {1: 3000, 2: 2500, 3: 2000, 4: 1500}
    st = make_state(16)
    update_batch(st, _keys([x for x, c in counts.items() for _ in range(c)]))
    diffs, len_diffs = [], []
    for _ in range(4000):
        items, _, n_noisy, _ = alg._publish(st)
        assert {it.lo - BASE for it in items} == set(counts)
        diffs += [it.estimate - counts[it.lo - BASE] for it in items]
        len_diffs.append(n_noisy - 9000)
    assert chi_square_p(diffs, math.exp(-alg.eps_a)) > ALPHA
    assert chi_square_p(len_diffs, math.exp(-alg.eps_n), z_max=40) > ALPHA
    # Power: the same draws are not consistent with noise at twice the scale.
    assert chi_square_p(diffs, math.exp(-alg.eps_a / 2)) < ALPHA


def test_release_hygiene_and_order():
    alg = DPSpaceSaving(_settings(seed=8))
    alg.update(_keys([1] * 900 + [2] * 700 + [3] * 650 + list(range(100, 140)) * 3))
    rel = alg.finish()[0]
    est = [it.estimate for it in rel.items]
    assert est == sorted(est, reverse=True)
    assert {it.lo - BASE for it in rel.items} == {1, 2, 3}
    assert all(it.hi == 0 for it in rel.items)


def test_same_summary_same_release():
    """T11: identical (T, C) reached in different orders (and tables with different hash seeds)
    give byte-identical releases under the same test seed."""
    outs = []
    for stream in ([1] * 500 + [2] * 400 + [3] * 5, [3] * 5 + [2] * 400 + [1] * 500):
        alg = DPSpaceSaving(_settings(k=2, k_tilde=4, seed=77))
        alg.update(_keys(stream))
        outs.append(alg.finish()[0].to_json())
    assert outs[0] == outs[1]


def test_flat_traffic_releases_nothing():
    alg = DPSpaceSaving(Settings(k=8, epsilon=1.0, delta=1e-6))  # OS CSPRNG
    alg.consume(KeyBatch(_keys(list(range(40_000)))))
    rel = alg.finish()[0]
    assert rel.items == () and "CSPRNG" in rel.guarantee.noise


def test_count_epochs():
    alg = DPSpaceSaving(_settings(epoch_packets=1000))
    out = alg.consume(KeyBatch(_keys([1] * 1500)))
    out += alg.consume(KeyBatch(_keys([2] * 1200)))
    assert [(r.span.start, r.span.end, r.span.index) for r in out] == [(0, 1000, 0), (1000, 2000, 1)]
    last = alg.finish()
    assert [(r.span.start, r.span.end) for r in last] == [(2000, 2700)]
    # Fresh instance per epoch: epoch 1 saw 500 of key 1 and 500 of key 2, epoch 2 only key 2.
    assert {it.lo - BASE for it in out[0].items} == {1}
    assert {it.lo - BASE for it in last[0].items} == {2}
    g = out[1].guarantee
    assert g.relation is Relation.SUBSTITUTE and g.epsilon == pytest.approx(2.0)
    assert g.delta == pytest.approx((1 + math.e) * 1e-6)  # group of 2: δ(1 + e^ε)
    assert any("P16" in n for n in g.notes) and g.scope.startswith("epoch 1: packets 1000–1999")
    assert alg.live() is last[0]
    assert alg.finish() == []  # nothing left open


def test_time_epochs_release_empty_cells_and_use_the_grid():
    t0 = 1_700_000_000 * 10**9
    alg = DPSpaceSaving(_settings(epoch_seconds=1.0), PublicFacts.of(time_range=(t0, t0 + 3 * 10**9)))
    ts = np.array([t0 + 100_000_000] * 600 + [t0 + 900_000_000] * 600 + [t0 + 2_500_000_000] * 10)
    batch = KeyBatch(_keys([1] * 1200 + [2] * 10), ts)
    out = alg.consume(batch)
    assert [r.span.index for r in out] == [0, 1]
    assert out[0].span.t_start == pytest.approx(1_700_000_000.0) and out[0].span.t_end == pytest.approx(1_700_000_001.0)
    assert out[1].items == () and out[1].span.t_start == pytest.approx(1_700_000_001.0)
    assert {it.lo - BASE for it in out[0].items} == {1}
    assert out[0].span.end - out[0].span.start == max(out[0].status.noisy_length, 0)
    assert "epoch 0: packet time [1700000000.000, 1700000001.000) s" in out[0].guarantee.scope
    assert "public grid" in out[0].guarantee.scope
    assert out[0].guarantee.relation is Relation.ADD_REMOVE
    status = alg.status()
    assert (status.epoch, status.packets_in_epoch, status.epoch_mode) == (2, 10, "seconds")
    assert status.min_packets == alg.min_packets
    assert [r.span.index for r in alg.finish()] == [2]


def test_time_epochs_drop_stamps_outside_the_range_or_in_closed_cells():
    """A packet a year ahead, or stamped into a closed cell, is dropped and counted; nothing aborts
    and the number of releases stays the number of cells."""
    t0 = 1_700_000_000 * 10**9
    alg = DPSpaceSaving(_settings(epoch_seconds=0.5), PublicFacts.of(time_range=(t0, t0 + 2 * 10**9)))
    ts = np.array([t0 + 10**8, t0 + 365 * 86400 * 10**9, t0 + 6 * 10**8, t0 + 10**8, t0 - 1])
    out = alg.consume(KeyBatch(_keys([1, 2, 3, 4, 5]), ts))
    assert [r.span.index for r in out] == [0] and alg.dropped == 3
    assert [r.span.index for r in alg.finish()] == [1, 2, 3]


def test_time_epochs_need_a_public_range():
    with pytest.raises(ValueError, match="public time range"):
        DPSpaceSaving(_settings(epoch_seconds=1.0))


def test_whole_stream_and_budget_per_epoch():
    alg = DPSpaceSaving(_settings())
    assert alg.consume(KeyBatch(_keys([1] * 100))) == []
    epoch = alg._epoch
    rel = alg.finish()
    assert len(rel) == 1 and rel[0].span.kind == "stream"
    with pytest.raises(RuntimeError, match="privacy budget exceeded"):
        epoch.budget.spend(alg.cost())  # that epoch's instance cannot release again (P4)
    assert DPSpaceSaving(_settings()).finish()[0].items == ()  # an empty stream releases once


@pytest.mark.parametrize("kw,match", [
    (dict(k_tilde=8), r"k~ \(8\) must be > k \(8\)"),
    (dict(k=0), r"k \(0\) must be >= 1"),
    (dict(epsilon=0.0), r"epsilon \(0\) must be > 0"),
    (dict(delta=1.0), r"delta \(1\) must be in \(0, 1\)"),
    (dict(epoch_packets=0), r"epoch_packets \(0\) must be >= 1"),
    (dict(epoch_seconds=-1.0), r"epoch_seconds \(-1.0\) must be > 0"),
    (dict(epoch_seconds=1.0, epoch_packets=5), "are exclusive"),
])
def test_invalid_parameters(kw, match):
    with pytest.raises(ValueError, match=match):
        DPSpaceSaving(_settings(**kw))


# --- utility on Zipf (slow) --------------------------------------------------------------------

def _utility(alg_cls, keys, k, kt, eps, extra=None):
    alg = alg_cls(Settings(k=k, k_tilde=kt, epsilon=eps, delta=1e-3, extra=extra or {}))
    alg.update(keys)
    rel = alg.finish()[0]
    exact = ExactCounter()
    exact.add(keys)
    ks, cs = exact.items()
    truth = {(int(h), int(l)) for (h, l), c in zip(ks.tolist(), cs.tolist()) if c > len(keys) / k}
    got = {(it.hi, it.lo) for it in rel.items}
    recall = len(got & truth) / len(truth) if truth else 1.0
    precision = len(got & truth) / len(got) if got else 1.0
    errs = [abs(it.estimate - exact.count_of(it.hi, it.lo)) / exact.count_of(it.hi, it.lo) for it in rel.items]
    return recall, precision, float(np.mean(errs)) if errs else 0.0


@pytest.mark.slow
@pytest.mark.parametrize("skew", [1.1, 1.5])
@pytest.mark.parametrize("eps", [0.1, 1.0])
def test_utility_zipf(skew, eps):
    """Issue 4 acceptance: 2^20 updates, k = 128, k~ = 2k, δ = 1e-3, 5 runs: DPSS recall >= 0.95,
    precision = 1.0 against count > n/k, and DPSS ARE below DP-MG's (same streams)."""
    from dptop.engine.single_release.dpmg import DPMisraGries

    k, runs = 128, 5
    ss, mg = [], []
    for run in range(runs):
        keys = zipf_keys(skew, 100_000, 1 << 20, seed=100 + run)
        ss.append(_utility(DPSpaceSaving, keys, k, 2 * k, eps))
        mg.append(_utility(DPMisraGries, keys, k, 2 * k, eps))
    r, p, are = np.mean(ss, axis=0)
    mr, mp, mare = np.mean(mg, axis=0)
    print(f"skew {skew} eps {eps}: DPSS recall {r:.3f} precision {p:.3f} ARE {are:.5f}; "
          f"DP-MG recall {mr:.3f} precision {mp:.3f} ARE {mare:.5f}")
    assert r >= 0.95, f"DPSS recall {r:.3f} < 0.95"
    assert p == 1.0, f"DPSS precision {p:.3f} != 1.0"
    assert are < mare, f"DPSS ARE {are:.5f} not below DP-MG ARE {mare:.5f}"
