"""Exact discrete Gaussian sampler (engine/privacy/discrete_gaussian.py, CKS20 Alg. 3) against the
law N_Z(0, σ²) it claims. Chi-square goodness-of-fit tests at significance ALPHA with fixed seeds
(bins with expected count >= 5, the rest pooled); the power test shows the harness rejects a sampler
whose σ is 10 % off. The rare big-integer path and the buffer refill are checked on their own."""
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dptop.engine.privacy import discrete_gaussian as dg
from dptop.engine.privacy.discrete_gaussian import CSPRNG_LABEL, SEEDED_LABEL, DiscreteGaussian

ALPHA = 1e-3  # significance of every goodness-of-fit test here


def chi_square_p(draws: np.ndarray, sigma2) -> float:
    """p-value of integer draws against N_Z(0, σ²): one bin per value with expected count >= 5,
    the two tails pooled."""
    draws = np.asarray(draws)
    s = float(sigma2) ** 0.5
    zs = np.arange(-int(8 * s) - 2, int(8 * s) + 3)
    expected = dg.pmf(zs, sigma2) * len(draws)
    keep = expected >= 5
    lo, hi = zs[keep].min(), zs[keep].max()
    inner = np.arange(lo, hi + 1)
    observed = np.concatenate([[np.sum(draws < lo)], np.bincount(draws[(draws >= lo) & (draws <= hi)] - lo,
                                                                minlength=len(inner)), [np.sum(draws > hi)]])
    tail = dg.upper_tail(hi + 1, sigma2)
    exp = np.concatenate([[tail], dg.pmf(inner, sigma2), [tail]]) * len(draws)
    return stats.chisquare(observed, exp * observed.sum() / exp.sum()).pvalue


@pytest.mark.parametrize("sigma2", [Fraction(1, 3), Fraction(5, 2), 9, Fraction(36699, 2)])
def test_chi_square(sigma2):
    draws = DiscreteGaussian(seed=21).sample(sigma2, 100_000)
    p = chi_square_p(draws, sigma2)
    assert p > ALPHA, f"chi-square p = {p:.3g} <= {ALPHA} for σ² = {sigma2}"
    assert abs(draws.mean()) < 5 * np.sqrt(dg.variance(sigma2) / len(draws))


@pytest.mark.slow
@pytest.mark.parametrize("sigma2", [Fraction(1, 3), 9, 10_000])
def test_chi_square_million(sigma2):
    draws = DiscreteGaussian(seed=22).sample(sigma2, 1_000_000)
    p = chi_square_p(draws, sigma2)
    assert p > ALPHA, f"chi-square p = {p:.3g} <= {ALPHA} for σ² = {sigma2}"
    assert draws.var() == pytest.approx(dg.variance(sigma2), rel=0.01)


def test_wrong_sigma_is_rejected():
    # Power: draws at 1.1σ must fail the test for σ.
    draws = DiscreteGaussian(seed=23).sample(Fraction(121, 100) * 100, 100_000)
    p = chi_square_p(draws, 100)
    assert p < ALPHA, f"a 10 % too wide sampler passed (p = {p:.3g})"


def test_big_integer_coin_path():
    """σ² = 2^30 − 1: candidates with |Y| >= 2^31/(bt) ≈ 2σ go to the exact Python coin (about 5 % of
    draws). The law must still be N_Z(0, σ²): chi-square over 40 equiprobable-ish bins of Y/σ."""
    s2 = (1 << 30) - 1
    draws = DiscreteGaussian(seed=24).sample(s2, 50_000)
    sigma = s2 ** 0.5
    assert np.mean(np.abs(draws) >= (1 << 31) // (1 * (int(sigma) + 1))) > 0.03  # the path is exercised
    edges = np.unique(np.round(stats.norm.ppf(np.linspace(0, 1, 41)[1:-1]) * sigma).astype(np.int64))
    observed = np.bincount(np.searchsorted(edges, draws, side="right"), minlength=len(edges) + 1)
    cdf = np.array([1.0 - dg.upper_tail(int(e), s2) for e in edges])  # Pr[Y < e]
    expected = np.diff(np.concatenate([[0.0], cdf, [1.0]])) * len(draws)
    p = stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue
    assert p > ALPHA, f"chi-square p = {p:.3g} <= {ALPHA} on the big-integer path"


def test_refill_reruns_the_unfinished_attempt():
    """Draws fed one 64-bit word at a time equal draws from one long buffer of the same words: an
    attempt cut by the end of a buffer is rerun from its first bit, never shortened."""
    words = np.random.default_rng(5).integers(0, 1 << 64, size=200_000, dtype=np.uint64, endpoint=False)
    a, b, t = 2500, 1, 51
    whole = np.empty(2000, np.int64)
    done, _, status, _ = dg._fill(whole, 0, words, 0, a, b, t)
    assert (done, status) == (2000, dg._DONE)

    class Trickle(DiscreteGaussian):
        def __init__(self):
            super().__init__(seed=0)
            self.at = 0

        def _words(self, m):
            self.at += 1
            return words[self.at - 1:self.at].copy()

    assert np.array_equal(Trickle().sample(a, 2000), whole)


def test_seeded_is_reproducible_and_labelled_not_private():
    a = DiscreteGaussian(seed=3).sample(Fraction(9), 50)
    assert np.array_equal(a, DiscreteGaussian(seed=3).sample(9, 50))
    assert DiscreteGaussian(seed=3).label == SEEDED_LABEL and "NOT private" in SEEDED_LABEL
    assert DiscreteGaussian().label == CSPRNG_LABEL
    b, c = DiscreteGaussian().sample(9, 50), DiscreteGaussian().sample(9, 50)
    assert not np.array_equal(b, c)  # the OS CSPRNG: two sources never agree on 50 draws


def test_law_helpers_are_consistent():
    for s2 in (Fraction(1, 3), 9, 1000):
        zs = np.arange(-400, 401)
        assert dg.pmf(zs, s2).sum() == pytest.approx(1.0, abs=1e-12)
        assert dg.upper_tail(0, s2) == pytest.approx(0.5 + 0.5 * float(dg.pmf([0], s2)[0]), rel=1e-12)
        assert dg.upper_tail(3, s2) == pytest.approx(dg.pmf(zs[zs >= 3], s2).sum(), rel=1e-10)
    assert dg.variance(10_000) == pytest.approx(10_000, rel=1e-12)  # CKS20: Var = σ² up to e^(−2π²σ²)


@pytest.mark.parametrize("bad,match", [(0, r"sigma2 \(0\) must be > 0"), (-1.5, "must be > 0"),
                                       ("x", r"sigma2 \('x'\) must be a finite real number"),
                                       (1 << 31, "a, b < 2\\^30"), (0.1, "a, b < 2\\^30")])
def test_bad_sigma2_is_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        DiscreteGaussian().sample(bad, 3)
