"""Local-DP mechanisms: privacy maps by exact values, L1 transition-matrix ratios with their
negative controls, L2 sampler goodness of fit, L4 BERN_EXP (docs/local-dp.md §11)."""
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dptop.engine.local_dp import transitions as tr
from dptop.engine.local_dp.accounting import report_epsilon, window_epsilon
from dptop.engine.local_dp.bdr import BDRAgent, bdr_epsilons
from dptop.engine.local_dp.dsr import DSRAgent
from dptop.engine.local_dp.entropy import CSPRNG_LABEL, SEEDED_LABEL, Entropy, WordBuffer, drive
from dptop.engine.local_dp.grr import grr_batch, grr_pq, rr_weights, weights_epsilon
from dptop.engine.local_dp.olh_hr import hr_batch, hr_order, olh_g
from dptop.engine.local_dp.protocol import TAG_COLD, TAG_GRR, TAG_HOT, TAG_SHRUNK, Snapshot
from tests.ldp_samplers import BERN_EXP, count_hits

ALPHA = 1e-3  # goodness-of-fit tests reject below this p-value
NONE = np.zeros(0, np.int64)


# --- privacy maps ---------------------------------------------------------------------------
def test_rr_weights_exact_values():
    assert rr_weights(math.log(3), 2) == (3 << 40, 1 << 40)  # e^ε = 3 exactly representable
    A, B = rr_weights(2.0, 1001)
    assert (A, B) == (8124353099063, 1 << 40)
    assert Fraction(A, B) < Fraction(math.exp(2.0)) + Fraction(1, 10**12)
    assert 2.0 - 1e-12 < weights_epsilon(A, B) <= 2.0
    assert grr_pq(A, B, 1001) == (A / (A + 1000 * B), B / (A + 1000 * B))
    A, B = rr_weights(1.0, (1 << 48) + 1)  # IPv6 /48 prefixes: still exact int64 weights
    assert A + (1 << 48) * B < 1 << 62 and weights_epsilon(A, B) <= 1.0


@pytest.mark.parametrize("eps, d, match", [(0.0, 5, "epsilon"), (-1, 5, "epsilon"), (float("nan"), 5, "epsilon"),
                                           (1.0, 1, "domain size"), (50.0, 5, "too large"), (1e-12, 1 << 48, "too small")])
def test_rr_weights_refuses(eps, d, match):
    with pytest.raises(ValueError, match=match):
        rr_weights(eps, d)


def test_budget_maps_exact_values():
    assert bdr_epsilons(2.0, 0.25) == (0.5, 1.5)
    with pytest.raises(ValueError, match="split"):
        bdr_epsilons(2.0, 1.0)
    assert report_epsilon(2.0, None) == 2.0 and report_epsilon(2.0, 8) == 0.25
    assert window_epsilon(0.25, 8) == 2.0 and window_epsilon(2.0, None) == math.inf
    assert olh_g(2.0) == 8 and olh_g(0.01) == 2 and hr_order(7) == 8 and hr_order(8) == 16


def test_entropy_labels_and_seeding():
    assert Entropy().label == CSPRNG_LABEL and Entropy(3).label == SEEDED_LABEL and "NOT private" in SEEDED_LABEL
    assert np.array_equal(Entropy(3).words(5), Entropy(3).words(5))
    assert not np.array_equal(Entropy().words(4), Entropy().words(4))


# --- L1: transition matrices ------------------------------------------------------------------
def test_l1_grr_and_binary_rr_within_e_eps():
    for eps in (0.1, 1.0, 3.0):
        assert tr.within(tr.grr_matrix(eps, 6), eps) and tr.within(tr.grr_matrix(eps, 2), eps)


def test_l1_negative_control_weights_rounded_up_fail():
    """A/B rounded up past e^ε by 1/1000: the exact check must catch it."""
    assert not tr.within(tr.grr_matrix(1.0, 6, round_up=True), 1.0)
    assert not tr.within(tr.grr_matrix(1.0, 2, round_up=True), 1.0)


def test_l1_dsr_both_phases():
    eps = 1.0
    assert tr.within(tr.grr_matrix(eps, 6), eps)  # entire phase: GRR over the bucket's d_b = 6
    for hot in ([1, 4], [0, 2, 5]):
        assert tr.within(tr.dsr_shrunk_matrix(eps, 6, hot), eps)
    assert tr.max_ratio(tr.dsr_shrunk_matrix(eps, 6, [1, 4], leak_cold=True)) == math.inf


def test_l1_bdr_client_within_e_eps1_plus_eps2():
    for eps1, eps2, hot in ((0.5, 0.5, [1, 4]), (0.3, 1.7, [0, 2, 5]), (1.0, 0.2, [3, 4])):
        m = tr.bdr_matrix(eps1, eps2, 6, hot)
        assert tr.within(m, eps1 + eps2)
        assert not tr.within(m, 0.9 * min(eps1, eps2))  # the check is not vacuous


def test_l1_negative_control_grr_for_cold_items_in_m_hot_fails():
    """Spec L1: non-hot items in M_hot get GRR (which keeps the input) instead of a uniform hot
    element: the check must fail."""
    m = tr.bdr_matrix(0.5, 0.5, 6, [1, 4], grr_for_cold=True)
    assert not tr.within(m, 1.0)
    assert tr.max_ratio(m) == math.inf


def test_l1_guard_buckets_leak():
    """w > 1 with per-bucket domains: inputs in different buckets have disjoint outputs, the
    ratio is infinite; this is why the local-DP collectors have one bucket only."""
    blocks = [tr.dsr_shrunk_matrix(1.0, 3, [0]), tr.dsr_shrunk_matrix(1.0, 3, [2])]
    assert tr.max_ratio(tr.bucketed_matrix(blocks)) == math.inf
    assert tr.max_ratio(tr.bucketed_matrix([tr.grr_matrix(1.0, 3), tr.grr_matrix(1.0, 3)])) == math.inf


# --- L2: samplers against the matrices ----------------------------------------------------------
def _fit(observed: np.ndarray, row) -> float:
    expected = np.array([float(p) for p in row]) * observed.sum()
    keep = expected > 0
    assert observed[~keep].sum() == 0, "an output the matrix says is impossible was drawn"
    return stats.chisquare(observed[keep], expected[keep]).pvalue


@pytest.fixture(params=[pytest.param(False, id="default"), pytest.param(True, id="spec-1e6", marks=pytest.mark.slow)])
def draws(request):
    return 1_000_000 if request.param else 200_000


def test_l2_grr_and_rr_sampler(draws):
    for d, v in ((6, 0), (6, 3), (2, 1)):
        A, B = rr_weights(1.0, d)
        buf, out = WordBuffer(Entropy(d * 10 + v)), np.empty(draws, np.int64)
        values = np.full(draws, v, np.int64)
        drive(buf, draws, lambda w, p, s: grr_batch(values, d, A, B, w, p, out, s))
        assert _fit(np.bincount(out, minlength=d), tr.grr_matrix(1.0, d)[v]) > ALPHA


def test_l2_dsr_agent_both_phases(draws):
    hot = [1, 4]
    agent = DSRAgent(1.0, 6, 2, Entropy(21))
    for v in (0, 1, 4, 5):
        items = np.full(draws, v, np.int64)
        shrunk = agent.randomize(items, Snapshot(0, TAG_SHRUNK, np.array(hot), NONE))
        assert (shrunk.tag == TAG_SHRUNK).all()
        assert _fit(np.bincount(shrunk.symbol, minlength=3), tr.dsr_shrunk_matrix(1.0, 6, hot)[v]) > ALPHA
        entire = agent.randomize(items, Snapshot(1, TAG_GRR, NONE, NONE))
        assert _fit(np.bincount(entire.symbol, minlength=6), tr.grr_matrix(1.0, 6)[v]) > ALPHA


def test_l2_bdr_agent(draws):
    hot, eps1, eps2 = [0, 2, 5], 0.3, 1.7
    cold = [c for c in range(6) if c not in hot]
    agent = BDRAgent(eps1 + eps2, eps1 / (eps1 + eps2), 6, Entropy(22))
    m = tr.bdr_matrix(eps1, eps2, 6, hot)
    for v in range(6):
        rep = agent.randomize(np.full(draws, v, np.int64), Snapshot(0, TAG_HOT, np.array(hot), NONE))
        assert set(np.unique(rep.tag)) <= {TAG_HOT, TAG_COLD}
        col = np.where(rep.tag == TAG_HOT, rep.symbol, len(hot) + np.searchsorted(cold, rep.symbol))
        assert _fit(np.bincount(col, minlength=6), m[v]) > ALPHA


def test_l2_hr_sampler(draws):
    d, eps = 7, 1.0
    K = hr_order(d)
    A, B = rr_weights(eps, 2)
    p = Fraction(A, A + B)
    for v in (0, 6):
        values, out = np.full(draws, v, np.int64), np.empty(draws, np.int64)
        drive(WordBuffer(Entropy(30 + v)), draws, lambda w, q, s: hr_batch(values, K, A, B, w, q, out, s))
        plus = [bin((v + 1) & c).count("1") % 2 == 0 for c in range(K)]
        row = [p / (K // 2) if s else (1 - p) / (K // 2) for s in plus]
        assert _fit(np.bincount(out, minlength=K), row) > ALPHA


def test_l2_negative_control_detects_a_wrong_row():
    """The same draws against a matrix for ε + 0.1 must be rejected: the test has power."""
    n, d = 200_000, 6
    A, B = rr_weights(1.0, d)
    values, out = np.zeros(n, np.int64), np.empty(n, np.int64)
    drive(WordBuffer(Entropy(5)), n, lambda w, p, s: grr_batch(values, d, A, B, w, p, out, s))
    assert _fit(np.bincount(out, minlength=d), tr.grr_matrix(1.1, d)[0]) < ALPHA


# --- L4: BERN_EXP -------------------------------------------------------------------------------
@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(3, 10), Fraction(1), Fraction(5, 2), Fraction(7)])
def test_l4_bern_exp_binomial(gamma):
    n, hits = 1_000_000, 0
    buf = WordBuffer(Entropy(int(gamma * 10) + 1), block=1 << 22)
    for _ in range(4):
        buf.ensure(1 << 21)
        hits += count_hits(BERN_EXP, gamma.numerator, gamma.denominator, n // 4, buf.words, buf.pos)
    assert not buf.pos[1]
    p = math.exp(-gamma)
    if gamma == 0:
        assert hits == n
    else:
        assert stats.binomtest(hits, n, p).pvalue > ALPHA, (hits / n, p)
