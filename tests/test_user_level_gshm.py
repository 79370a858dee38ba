"""GSHM privacy map and release (engine/user_level/gshm.py; 002 Thm 5, Lemma 6, Thm 12).

* Thm 5 (continuous) against an independent scipy evaluation of the paper's formula;
* the discrete form against a brute-force evaluation with exact pmfs (convolutions of N_Z);
* Lemma 6's closed form satisfies Thm 5 for ε < 1, and the numerical τ is never above it;
* the chosen (σ², τ) pass both conditions and τ − 1 fails one (minimality), pinned by exact values;
* Thm 12's bound over repeated releases of a real sketch (slow).
"""
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import norm

from dptop.engine.core.settings import Settings
from dptop.engine.core.workload import ipv4_of_rank, keys_of_ipv4
from dptop.engine.privacy import discrete_gaussian as dg
from dptop.engine.privacy.discrete_gaussian import DiscreteGaussian
from dptop.engine.user_level.hostdp import HostDPDst
from dptop.engine.user_level.gshm import (gshm_parameters, gshm_release, lemma6_parameters, thm5_delta,
                                          thm5_delta_discrete, thm12_error)
from tests.naive_user_level import client_server_stream


def thm5_scipy(eps, sigma, tau, l):
    """002 Thm 5 transcribed with scipy's normal CDF (P^n as exp(n·ln P), ln P = log1p(−sf), so
    that 1 − P^n keeps its digits when P is within 1e-9 of 1)."""
    log_p = math.log1p(-norm.sf(tau / sigma))
    terms = [-math.expm1(l * log_p)]
    for j in range(1, l + 1):
        g = (l - j) * log_p
        a = math.sqrt(j) / (2 * sigma)

        def d(e):
            b = e * sigma / math.sqrt(j)
            return norm.cdf(a - b) - math.exp(e) * norm.cdf(-a - b)

        terms += [-math.expm1(g) + math.exp(g) * d(eps - g), d(eps + g)]
    return max(terms)


def thm5_brute_discrete(eps, sigma2, tau, l):
    """The discrete three-term condition with exact pmfs: W_j by convolution of N_Z(0, σ²)."""
    bound = int(60 * math.sqrt(sigma2)) + 10
    p1 = dg.pmf(np.arange(-bound, bound + 1), sigma2)
    p = 1 - dg.upper_tail(tau, sigma2)
    worst, pw = 1 - p ** l, np.array([1.0])
    for j in range(1, l + 1):
        pw = np.convolve(pw, p1)
        px, pxp = np.concatenate([np.zeros(j), pw]), np.concatenate([pw, np.zeros(j)])  # outputs s − j·bound

        def d(e):
            return float(np.sum(np.maximum(px - math.exp(e) * pxp, 0.0)))

        g = (l - j) * math.log(p)
        worst = max(worst, 1 - p ** (l - j) + p ** (l - j) * d(eps - g), d(eps + g))
    return worst


@pytest.mark.parametrize("eps,sigma,tau,l", [(1.0, 30.0, 150.0, 64), (0.5, 20.0, 60.0, 8), (2.0, 5.0, 20.0, 3),
                                             (0.1, 200.0, 900.0, 16), (1.0, 135.5, 814.0, 1024)])
def test_thm5_matches_the_paper_formula(eps, sigma, tau, l):
    assert thm5_delta(eps, sigma, tau, l) == pytest.approx(thm5_scipy(eps, sigma, tau, l), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("eps,sigma2,tau,l", [(1.0, 16, 12, 3), (0.5, 25, 20, 4), (2.0, Fraction(81, 4), 10, 2),
                                              (1.0, 100, 40, 6), (0.3, 400, 60, 5)])
def test_discrete_form_is_a_tight_upper_bound(eps, sigma2, tau, l):
    exact = thm5_brute_discrete(eps, sigma2, tau, l)
    bound = thm5_delta_discrete(eps, sigma2, tau, l)
    assert exact * (1 - 1e-9) <= bound <= exact * (1 + 1e-3), (exact, bound)


def test_discrete_and_continuous_differ_where_the_threshold_is_an_integer():
    """Pr[N_Z(0, σ²) >= τ] is about Pr[N(0, σ²) > τ − 1/2]: the continuous Thm 5 understates δ for
    the noise actually drawn by ~exp(τ/(2σ²)) in the threshold term (here about 45 %)."""
    cont, disc = thm5_delta(1.0, 4.0, 12, 3), thm5_delta_discrete(1.0, 16, 12, 3)
    assert disc / cont == pytest.approx(1.46, abs=0.01)


@pytest.mark.parametrize("eps,delta,l", [(0.1, 1e-6, 16), (0.5, 1e-6, 16), (0.9, 1e-6, 64), (0.5, 1e-9, 256),
                                         (0.99, 1e-5, 1024)])
def test_lemma6_closed_form_satisfies_thm5_and_is_looser(eps, delta, l):
    sigma, tau = lemma6_parameters(eps, delta, l)
    assert thm5_delta(eps, sigma, tau, l) <= delta
    p = gshm_parameters(eps, delta, l)
    assert p.tau <= tau and p.lemma6_tau == pytest.approx(tau)
    assert sigma == pytest.approx(math.sqrt(2 * l * math.log(2.5 / delta)) / eps)
    assert tau == pytest.approx(math.sqrt(2 * math.log(2 * l / delta)) * sigma)


def test_far_from_feasible_is_delta_one_never_nan():
    for eps in (1.0, 50.0):
        assert thm5_delta_discrete(eps, 16, 1, 1024) == pytest.approx(1.0)
        assert 0.99 < thm5_delta(eps, 4.0, 0.5, 1024) <= 1.0


def test_lemma6_needs_epsilon_below_one():
    with pytest.raises(ValueError, match=r"epsilon \(1\) must be < 1"):
        lemma6_parameters(1.0, 1e-6, 4)


# Exact values of the map (σ² on the 1/16 grid, smallest integer τ): a change to the map or to the
# search shows up here first.
PINNED = [((1.0, 1e-6, 1024), (Fraction(292479, 16), 812)), ((1.0, 1e-6, 128), (Fraction(2285), 271)),
          ((0.5, 1e-6, 16), (Fraction(16625, 16), 171)), ((1.0, 1e-6, 64), (Fraction(2285, 2), 188))]


@pytest.mark.parametrize("args,want", PINNED)
def test_chosen_parameters_pass_and_are_minimal(args, want):
    eps, delta, l = args
    p = gshm_parameters(eps, delta, l)
    if want is not None:
        assert (p.sigma2, p.tau) == want
    assert p.sigma2.denominator in (1, 2, 4, 8, 16)
    assert thm5_delta(eps, p.sigma, p.tau, l) == p.delta_continuous <= delta
    assert thm5_delta_discrete(eps, p.sigma2, p.tau, l) == p.delta_discrete <= delta
    assert max(thm5_delta(eps, p.sigma, p.tau - 1, l), thm5_delta_discrete(eps, p.sigma2, p.tau - 1, l)) > delta
    assert p.threshold == p.tau + 1


def test_parameters_need_valid_input():
    with pytest.raises(ValueError, match=r"epsilon \(0\) must be > 0"):
        gshm_parameters(0.0, 1e-6, 4)
    with pytest.raises(ValueError, match=r"delta \(2\) must be in \(0, 1\)"):
        gshm_parameters(1.0, 2.0, 4)
    with pytest.raises(ValueError, match=r"l \(0\) must be >= 1"):
        gshm_parameters(1.0, 1e-6, 0)


def test_thm12_numbers():
    # k = 1024, τ = 812, M = 10^6 pairs: below = 10^6/1025 + 2·812 + 1, above = 812.
    below, above = thm12_error(1_000_000, 1024, 812)
    assert below == pytest.approx(1_000_000 / 1025 + 1625) and above == 812.0


def test_release_keeps_only_counts_at_the_threshold():
    p = gshm_parameters(1.0, 1e-6, 16)
    keys = np.array([[0, i] for i in range(1, 6)], dtype=np.uint64)
    counts = np.array([1, p.threshold - 200, p.threshold, p.threshold + 200, 10 * p.threshold], dtype=np.int64)
    seen = set()
    for _ in range(200):
        kept, noisy = gshm_release(keys, counts, p, DiscreteGaussian(seed=None))
        assert np.all(noisy >= p.threshold)
        seen.update(int(k) for k in kept[:, 1])
    assert 5 in seen and 1 not in seen  # 10τ always kept; a count of 1 never (Pr < δ)


@pytest.mark.slow
def test_thm12_bound_over_repeated_releases():
    """Thm 12 over repeated releases of one PAMG sketch (k = 256, m = 20, ε = 1, δ = 1e-3 so that the
    2δ failure rate is measurable) of 4000 clients × 20 servers (Zipf 1.1 over 5000 servers): every
    release is checked on every server, f − M/(k+1) − 2τ − 1 <= f̂ <= f + τ (f̂ = 0 if not released).
    The share of releases with some server outside must stay below 2δ plus a 99.9 % binomial margin."""
    clients, per = 4000, 20
    batch, sets = client_server_stream(clients, per, 5000, 1.1, 100_000, seed=9)
    f = np.bincount(sets.ravel())
    ranks = np.flatnonzero(f)
    truth = {(0, int(k)): int(c) for k, c in zip(keys_of_ipv4(ipv4_of_rank(ranks))[:, 1], f[ranks])}
    alg = HostDPDst(Settings(k=256, epsilon=1.0, delta=1e-3, seed=31, extra={"m": per}))
    alg.update(batch)
    sketch = alg.sketch(alg._epoch.state)
    below, above = alg.error_bound(clients * per)
    runs, bad, worst = 2000, 0, (0.0, 0.0)
    for _ in range(runs):
        est = {(it.hi, it.lo): it.estimate for it in alg.release_sketch(*sketch)[0]}
        diff = [est.get(x, 0.0) - c for x, c in truth.items()]
        worst = (max(worst[0], -min(diff)), max(worst[1], max(diff)))
        bad += -min(diff) > below or max(diff) > above
    limit = 2 * 1e-3 * runs + 3.1 * math.sqrt(2 * 1e-3 * runs) + 1
    assert bad <= limit, f"{bad} of {runs} releases left the Thm 12 interval (limit {limit:.1f}); worst {worst}"
    print(f"\nThm 12: bound (under, over) = ({below:.1f}, {above:.0f}); worst seen over {runs} releases {worst}; "
          f"{bad} releases outside")
