"""L3: estimator bias and variance of GRR, OLH, HR and BDR (docs/local-dp.md §11).

For fixed true counts, R independent runs of n reports each (drawn by the real samplers): every
estimate's mean lies within 4.5 standard errors of the truth, and its empirical variance within a
tolerance of the formula (±15 % with R = 2000 by default, docs/local-dp.md §11 L3's ±5 % with R = 20000 in the
slow run; both are > 4σ of the sampling error of a variance). HR is checked against the derived
variance of §1.3; 003's eq. (7) is 4× larger and must *not* match (if someone "fixes" the test to
eq. (7), this assertion fails).
"""
import math

import numpy as np
import pytest

from dptop.engine.local_dp.bdr import BDRAgent, bdr_estimate, bdr_variance, split_mechanisms
from dptop.engine.local_dp.entropy import Entropy, WordBuffer, drive
from dptop.engine.local_dp.grr import grr_batch, grr_estimate, grr_pq, grr_variance, rr_weights
from dptop.engine.local_dp.olh_hr import (hr_batch, hr_estimate, hr_order, hr_variance, hr_variance_eq7, olh_batch,
                                          olh_estimate, olh_g, olh_support, olh_variance)
from dptop.engine.local_dp.protocol import TAG_HOT, Snapshot

COUNTS = np.array([900, 500, 300, 200, 100, 0, 0, 0], np.int64)  # n = 2000 over d = 8


@pytest.fixture(params=[pytest.param((2000, 0.15), id="default"),
                        pytest.param((20000, 0.05), id="spec", marks=pytest.mark.slow)])
def runs(request):
    return request.param


def stream(runs: int) -> np.ndarray:
    return np.tile(np.repeat(np.arange(len(COUNTS)), COUNTS), runs)


def check(estimates: np.ndarray, truth, variance, tolerance: float) -> None:
    """``estimates`` (runs, items) against true counts and the predicted variance per item."""
    runs = len(estimates)
    mean, var = estimates.mean(axis=0), estimates.var(axis=0, ddof=1)
    assert np.all(np.abs(mean - truth) <= 4.5 * np.sqrt(variance / runs)), (mean, truth)
    assert np.all(np.abs(var / variance - 1) <= tolerance), var / variance


def per_run_counts(symbols: np.ndarray, runs: int, width: int) -> np.ndarray:
    n = len(symbols) // runs
    idx = np.repeat(np.arange(runs), n) * width + symbols
    return np.bincount(idx, minlength=runs * width).reshape(runs, width)


def test_l3_grr(runs):
    R, tol = runs
    d, eps, n = len(COUNTS), 1.0, int(COUNTS.sum())
    A, B = rr_weights(eps, d)
    p, q = grr_pq(A, B, d)
    values = stream(R)
    out = np.empty_like(values)
    drive(WordBuffer(Entropy(1)), len(values), lambda w, s_, st: grr_batch(values, d, A, B, w, s_, out, st))
    est = grr_estimate(per_run_counts(out, R, d), n, p, q)
    check(est, COUNTS, grr_variance(n, COUNTS, p, q), tol)


def test_l3_olh(runs):
    R, tol = runs
    d, eps, n = len(COUNTS), 2.0, int(COUNTS.sum())
    g = olh_g(eps)
    A, B = rr_weights(eps, g)
    p = A / (A + (g - 1) * B)
    values = stream(R)
    a, b, y = np.empty_like(values), np.empty_like(values), np.empty_like(values)
    drive(WordBuffer(Entropy(2)), len(values), lambda w, s_, st: olh_batch(values, g, A, B, w, s_, a, b, y, st))
    cand = np.arange(d)
    support = np.array([olh_support(cand, a[r * n:(r + 1) * n], b[r * n:(r + 1) * n], y[r * n:(r + 1) * n], g)
                        for r in range(R)])
    check(olh_estimate(support, n, p, g), COUNTS, olh_variance(n, COUNTS, p, g), tol)


def test_l3_hr_derived_variance_not_eq7(runs):
    R, tol = runs
    d, eps, n = len(COUNTS) - 1, 1.0, int(COUNTS.sum())  # 7 items: K = 8
    counts = COUNTS[:d].copy()
    counts[0] += COUNTS[d]
    K = hr_order(d)
    A, B = rr_weights(eps, 2)
    p = A / (A + B)
    values = np.tile(np.repeat(np.arange(d), counts), R)
    out = np.empty_like(values)
    drive(WordBuffer(Entropy(3)), len(values), lambda w, s_, st: hr_batch(values, K, A, B, w, s_, out, st))
    columns = per_run_counts(out, R, K)
    plus = np.array([[bin((i + 1) & c).count("1") % 2 == 0 for c in range(K)] for i in range(d)])
    support = columns @ plus.T.astype(np.int64)
    est = hr_estimate(support, n, p)
    check(est, counts, hr_variance(n, counts, p), tol)
    assert est.var(axis=0, ddof=1)[0] < 0.5 * hr_variance_eq7(n, math.log(A / B))


def test_l3_bdr_with_true_n_hot(runs):
    R, tol = runs
    d, eps, split, n = len(COUNTS), 2.0, 0.5, int(COUNTS.sum())
    hot = np.array([0, 2, 5])
    agent = BDRAgent(eps, split, d, Entropy(4))
    rep = agent.randomize(stream(R), Snapshot(0, TAG_HOT, hot, np.zeros(0, np.int64)))
    sym = np.where(rep.tag == TAG_HOT, rep.symbol, len(hot))  # hot index, or "not a hot output"
    support = per_run_counts(sym, R, len(hot) + 1)[:, :len(hot)]
    sp = split_mechanisms(agent.eps1, agent.eps2, d, len(hot))
    n_hot = int(COUNTS[hot].sum())
    est = bdr_estimate(support, n, n_hot, sp, len(hot))
    check(est, COUNTS[hot], bdr_variance(COUNTS[hot], n, n_hot, sp, len(hot)), tol)
