"""Exact discrete samplers (engine/privacy/noise.py) against their analytic laws (docs/dpss-eehh.md T8,
docs/dp-misra-gries.md T9). Chi-square tests at significance ALPHA with fixed seeds; the power test
shows the harness rejects a sampler with the wrong scale (2/ε instead of 1/ε)."""
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dptop.engine.privacy.batched import dlap_batch
from dptop.engine.privacy.noise import CSPRNG_LABEL, SEEDED_LABEL, NoiseSource, dlap_pmf, dlap_upper_tail

ALPHA = 1e-3  # significance of every goodness-of-fit test here


def chi_square_p(draws, alpha_param: float, z_max: int = 20) -> float:
    """p-value of draws against discrete Laplace(α) on bins z in [−z_max, z_max] plus two tails."""
    draws = np.asarray(draws)
    zs = np.arange(-z_max, z_max + 1)
    observed = [np.sum(draws < -z_max)] + [np.sum(draws == z) for z in zs] + [np.sum(draws > z_max)]
    tail = dlap_upper_tail(z_max + 1, alpha_param)
    expected_p = [tail] + [dlap_pmf(int(z), alpha_param) for z in zs] + [tail]
    expected = np.array(expected_p) * len(draws)
    keep = expected > 5  # the usual validity rule; pool what is left into one bin
    obs = np.array(observed, dtype=float)
    obs_k = np.append(obs[keep], obs[~keep].sum())
    exp_k = np.append(expected[keep], expected[~keep].sum())
    if exp_k[-1] == 0:
        obs_k, exp_k = obs_k[:-1], exp_k[:-1]
    return stats.chisquare(obs_k, exp_k * obs_k.sum() / exp_k.sum()).pvalue


def _draws(eps, n, seed, sensitivity=1):
    src = NoiseSource(seed=seed)
    return [src.dlap(eps, sensitivity) for _ in range(n)]


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_dlap_chi_square(eps):
    draws = _draws(eps, 20_000, seed=11)
    p = chi_square_p(draws, math.exp(-eps))
    assert p > ALPHA, f"chi-square p = {p:.3g} <= {ALPHA} for ε = {eps}"


@pytest.mark.slow
@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_dlap_chi_square_million(eps):
    # T8/T9 (docs/dpss-eehh.md §12, docs/dp-misra-gries.md §13): 10^6 draws, |z| <= 20.
    draws = np.array(_draws(eps, 1_000_000, seed=12))
    p = chi_square_p(draws, math.exp(-eps))
    assert p > ALPHA, f"chi-square p = {p:.3g} <= {ALPHA} for ε = {eps}"
    a = math.exp(-eps)
    var = 2 * a / (1 - a) ** 2
    assert abs(draws.mean()) < 5 * math.sqrt(var / len(draws))
    assert draws.var() == pytest.approx(var, rel=0.02)


@pytest.mark.parametrize("eps", [0.1, 1.0])
def test_wrong_scale_is_rejected(eps):
    # Power check: draws at scale 2/ε must fail the test for scale 1/ε.
    draws = _draws(eps / 2, 20_000, seed=13)
    assert chi_square_p(draws, math.exp(-eps)) < ALPHA


def test_sensitivity_scales_the_noise():
    draws = np.array(_draws(1.0, 20_000, seed=14, sensitivity=4))
    a = math.exp(-0.25)
    assert chi_square_p(draws, a, z_max=30) > ALPHA
    assert draws.var() == pytest.approx(2 * a / (1 - a) ** 2, rel=0.06)


@pytest.mark.parametrize("num,den", [(0, 1), (3, 10), (1, 1), (5, 2), (7, 3)])
def test_bernoulli_exp_frequency(num, den):
    src = NoiseSource(seed=15)
    n = 20_000
    hits = sum(src.bernoulli_exp(num, den) for _ in range(n))
    p = math.exp(-num / den)
    assert stats.binomtest(hits, n, p).pvalue > ALPHA, (hits / n, p)


def test_seeded_is_reproducible_and_labelled_not_private():
    a, b = NoiseSource(seed=5), NoiseSource(seed=5)
    assert [a.dlap(0.5) for _ in range(50)] == [b.dlap(0.5) for _ in range(50)]
    assert a.label == SEEDED_LABEL and "NOT private" in a.label
    c = NoiseSource()
    assert not c.seeded and c.label == CSPRNG_LABEL
    assert isinstance(c.dlap(1.0), int)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "x"])
def test_invalid_scale(bad):
    with pytest.raises(ValueError, match="must be"):
        NoiseSource(seed=1).dlap(bad)


def test_bernoulli_exp_rejects_negative():
    with pytest.raises(ValueError, match="num >= 0 and den >= 1"):
        NoiseSource(seed=1).bernoulli_exp(-1, 2)


@pytest.mark.parametrize("scale", [Fraction(1), Fraction(10, 3), Fraction(740)])
def test_bulk_sampler_chi_square(scale):
    """The vectorised CKS20 sampler (EEHH cells) against the same pmf."""
    draws = NoiseSource(seed=21).discrete_laplace_array(scale, 50_000)
    a = math.exp(-1 / scale)
    assert chi_square_p(draws, a, z_max=40 if scale < 100 else 2000) > ALPHA
    assert draws.var() == pytest.approx(2 * a / (1 - a) ** 2, rel=0.05)


def test_bulk_sampler_wrong_scale_rejected_and_limits():
    draws = NoiseSource(seed=22).discrete_laplace_array(Fraction(2), 50_000)
    assert chi_square_p(draws, math.exp(-1.0)) < ALPHA
    with pytest.raises(ValueError, match="must be a fraction t/s"):
        NoiseSource(seed=1).discrete_laplace_array(Fraction(1 << 41), 3)


# --- the batched kernel (engine/privacy/batched.py): the same law, the same tests ------------------

@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_dlap_array_chi_square(eps):
    draws = NoiseSource(seed=31).dlap_array(eps, 20_000)
    assert chi_square_p(draws, math.exp(-eps)) > ALPHA


@pytest.mark.slow
@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_dlap_array_chi_square_million(eps):
    draws = NoiseSource(seed=32).dlap_array(eps, 1_000_000)
    p = chi_square_p(draws, math.exp(-eps))
    assert p > ALPHA, f"chi-square p = {p:.3g} <= {ALPHA} for ε = {eps}"
    a = math.exp(-eps)
    var = 2 * a / (1 - a) ** 2
    assert abs(draws.mean()) < 5 * math.sqrt(var / len(draws))
    assert draws.var() == pytest.approx(var, rel=0.02)


@pytest.mark.parametrize("eps", [0.1, 1.0])
def test_dlap_array_wrong_scale_is_rejected(eps):
    assert chi_square_p(NoiseSource(seed=33).dlap_array(eps / 2, 20_000), math.exp(-eps)) < ALPHA


def test_dlap_array_sensitivity_and_labels():
    draws = NoiseSource(seed=34).dlap_array(1.0, 20_000, sensitivity=4)
    a = math.exp(-0.25)
    assert chi_square_p(draws, a, z_max=30) > ALPHA
    assert (NoiseSource(seed=5).dlap_array(0.5, 50) == NoiseSource(seed=5).dlap_array(0.5, 50)).all()
    live = NoiseSource().dlap_array(0.5, 1000)  # the OS CSPRNG path
    assert live.dtype == np.int64 and len(np.unique(live)) > 10


def _word_stream(seed):
    """A fixed word sequence handed out in whatever chunk sizes the caller asks for (or forces)."""
    rng = np.random.default_rng(seed)
    words = rng.integers(0, 2**64, size=1 << 20, dtype=np.uint64)
    pos = [0]

    def take(m, chunk=None):
        m = chunk or m
        out = words[pos[0]:pos[0] + m]
        pos[0] += m
        return out.copy()
    return take


@pytest.mark.parametrize("t,s", [(9, 4), (18014398509481984, 8106479329266893), (740, 1)])
def test_dlap_batch_resumes_exactly_when_the_buffer_runs_dry(t, s):
    """Draws are a function of the bit stream alone: a buffer handed out 3 words at a time (many
    replays of unfinished draws) gives exactly the draws of one large buffer."""
    whole = dlap_batch(_word_stream(40), t, s, 3000)
    small = _word_stream(40)
    pieces = dlap_batch(lambda m: small(m, chunk=3), t, s, 3000)
    assert (whole == pieces).all()


def test_dlap_batch_overflow_path_keeps_the_law():
    """t near 2^61: t·v leaves 63 bits for most v >= 2, so those draws are finished in Python."""
    t = (1 << 61) + 1
    s = (1 << 61) - 1
    draws = dlap_batch(_word_stream(41), t, s, 20_000)
    assert chi_square_p(draws, math.exp(-s / t)) > ALPHA
    with pytest.raises(ValueError, match="scale"):
        dlap_batch(_word_stream(41), 1 << 62, 1, 3)
