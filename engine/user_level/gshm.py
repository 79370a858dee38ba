"""Gaussian sparse histogram mechanism, GSHM [002 Thm 5, Lemma 6, Thm 12] (docs/host-level.md §5):
the privacy map as pure functions of public parameters, and the release.

GSHM(T, c, l, σ, τ) adds N(0, σ²) to every stored (non-zero) counter and keeps the noisy values
>= 1 + τ. For sketches whose neighbours differ on at most l counters, all by 1 in the same direction
(PAMG: 002 Lemma 9, Cor 10, with l = k), it is (ε, δ)-DP iff δ >= max of [002 Thm 5]

* 1 − P^l,
* max_j 1 − P^(l−j) + P^(l−j)·D_j(ε − γ_j),
* max_j D_j(ε + γ_j),

with P = Pr[noise < τ] (a key counted once on one side only stays hidden), γ_j = (l − j)·ln P and
D_j(e) = Φ(√j/(2σ) − eσ/√j) − e^e·Φ(−√j/(2σ) − eσ/√j), the exact (e, ·) profile of the Gaussian
mechanism on j counters that differ by 1 [Balle and Wang 2018]. ``thm5_delta`` evaluates it.

**Discrete noise** [derived]. The release draws discrete Gaussian noise N_Z(0, σ²) (exact CKS20
sampler), so counts stay integers, the threshold is an integer τ (keep c + Y >= 1 + τ), and the
three terms are re-derived for that noise by the same argument (split the outputs on whether a
one-sided key is released; the rest is the j-coordinate mechanism): P = Pr[Y <= τ − 1] exactly,
and D_j(e) = Σ_s (p_W(s − j) − e^e·p_W(s))_+ where W is the sum of j independent N_Z(0, σ²). By
Poisson summation p_W is the N(0, jσ²) density on the integers up to 4.03·j·e^(−π²σ²/2) per point,
so D_j(e) is bounded above by that lattice sum, evaluated by Euler–Maclaurin to the B_4 term with
its remainder bound (1/720)∫|h''''| added, plus the Poisson error summed over ±40·σ√j. The
lattice sum differs from the continuous D_j by about 1/(30σ³√j) (the kink at the loss boundary),
a few per cent of δ for σ near 100, so ``thm5_delta_discrete`` is what the release relies on.

``gshm_parameters`` picks σ² (a rational: σ² on a 1/16 grid) and the integer τ numerically: the
smallest τ for which both conditions (continuous and discrete) hold, over σ from the smallest σ
that the τ → ∞ limit allows (the Gaussian mechanism with ℓ2 sensitivity √l, and at least 4, where
the Poisson error is below e^(−78)) up to 2.2 times it, on a geometric grid refined around its best
point. The loose
closed form of 002 Lemma 6 (ε < 1 only), σ = √(2l·ln(2.5/δ))/ε and τ = √(2·ln(2l/δ))·σ, is kept
beside it as a check: the numerical τ is never larger.

Error [002 Thm 12]: with probability >= 1 − 2δ, every x has f̂(x) in
[f(x) − M/(k+1) − 2τ − 1, f(x) + τ] (M elements summarised; f̂ = 0 when not released).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from dptop.engine.core.jit import inner, kernel
from dptop.engine.core.settings import check_delta, check_epsilon, check_positive_int
from dptop.engine.privacy import discrete_gaussian as dg

SIGMA2_DENOMINATOR = 16
"""σ² is chosen on the grid a/16 (a/1 from 2^20 on), a rational the exact sampler can use."""
HE4_ABS_MEAN_BOUND = 12.0
"""E|He4(Z)| <= E[Z^4] + 6E[Z^2] + 3 = 12 for a standard normal Z (remainder bound, far tails)."""
HE4_LAST_ROOT = math.sqrt(3.0 + math.sqrt(6.0))


# --- normal tails in floating point (the privacy map only; release noise is exact) ----------------

@inner
def _log_q(x):
    """ln Pr[N(0, 1) > x], accurate in the far right tail (asymptotic series from x = 20)."""
    if x < 20.0:
        return math.log(0.5 * math.erfc(x / math.sqrt(2.0)))
    r = 1.0 / (x * x)
    series = 1.0 - r + 3.0 * r * r - 15.0 * r * r * r + 105.0 * r * r * r * r
    return -0.5 * x * x - math.log(x * math.sqrt(2.0 * math.pi)) + math.log(series)


@inner
def _q(x):
    return 0.5 * math.erfc(x / math.sqrt(2.0))


@inner
def _he4_tail(z):
    """Upper bound of ∫_z^∞ |He4(u)| φ(u) du (= He3(z)φ(z) past He4's last root)."""
    if z >= HE4_LAST_ROOT:
        return (z ** 3 - 3.0 * z) * math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return HE4_ABS_MEAN_BOUND


@inner
def _profile(e, j, sigma, discrete):
    """D_j(e): continuous closed form, or (``discrete``) the upper bound of the module docstring."""
    sj = math.sqrt(j)
    if not discrete:
        a, b = sj / (2.0 * sigma), e * sigma / sj
        return _q(b - a) - math.exp(e + _log_q(a + b))
    big = sigma * sj  # S: W is N(0, S²) on the lattice up to the Poisson error
    s1 = math.floor(e * sigma * sigma + 0.5 * j) + 1.0  # first integer with positive privacy loss
    x1, x0 = s1 / big, (s1 - j) / big
    log_norm = -math.log(math.sqrt(2.0 * math.pi) * big)
    f0 = math.exp(log_norm - 0.5 * x0 * x0)  # density at s1 − j (X side)
    f1 = math.exp(e + log_norm - 0.5 * x1 * x1)  # e^e · density at s1 (X' side)
    integral = _q(x0) - math.exp(e + _log_q(x1))
    d1 = (-x0 * f0 + x1 * f1) / big  # h'(s1)
    d3 = (-(x0 ** 3 - 3.0 * x0) * f0 + (x1 ** 3 - 3.0 * x1) * f1) / big ** 3  # h'''(s1)
    euler_maclaurin = integral + 0.5 * (f0 - f1) - d1 / 12.0 + d3 / 720.0
    remainder = (_he4_tail(x0) + math.exp(e) * _he4_tail(x1)) / (720.0 * big ** 4)
    poisson = (1.0 + math.exp(e)) * (80.0 * big + 1.0) * 4.03 * j * math.exp(-0.5 * math.pi ** 2 * sigma * sigma)
    return euler_maclaurin + remainder + poisson


@kernel
def _thm5(epsilon, sigma, log_p, l, discrete):
    """max of the three terms of Thm 5 (P = e^log_p)."""
    worst = -math.expm1(l * log_p)  # j = 0: all l differing keys one-sided
    for j in range(1, l + 1):
        gamma = (l - j) * log_p
        t2 = -math.expm1(gamma) + math.exp(gamma) * _profile(epsilon - gamma, j, sigma, discrete)
        t3 = _profile(epsilon + gamma, j, sigma, discrete)
        if not (t2 <= 1.0 and t3 <= 1.0):  # an overflow (inf or nan) far from feasibility: δ = 1
            return 1.0
        worst = max(worst, t2, t3)
    return worst


def thm5_delta(epsilon: float, sigma: float, tau: float, l: int) -> float:
    """The smallest δ for which GSHM(·, l, σ, τ) with **continuous** N(0, σ²) noise is (ε, δ)-DP
    [002 Thm 5]."""
    log_p = math.log1p(-math.exp(_log_q(tau / sigma)))
    return float(_thm5(float(epsilon), float(sigma), log_p, int(l), False))


def thm5_delta_discrete(epsilon: float, sigma2, tau: int, l: int) -> float:
    """An upper bound (tight to float precision for σ >= 4) of the smallest δ for which GSHM with
    **discrete** N_Z(0, σ²) noise and integer τ is (ε, δ)-DP (module docstring) [derived]."""
    log_p = math.log1p(-dg.upper_tail(int(tau), sigma2))
    return float(_thm5(float(epsilon), math.sqrt(float(sigma2)), log_p, int(l), True))


def lemma6_parameters(epsilon: float, delta: float, l: int) -> tuple[float, float]:
    """002 Lemma 6 (valid for ε < 1): σ = √(2l·ln(2.5/δ))/ε, τ = √(2·ln(2l/δ))·σ."""
    epsilon, delta = check_epsilon(epsilon, upper=1.0), check_delta(delta)
    sigma = math.sqrt(2.0 * l * math.log(2.5 / delta)) / epsilon
    return sigma, math.sqrt(2.0 * math.log(2.0 * l / delta)) * sigma


def thm12_error(elements: int, k: int, tau: int) -> tuple[float, float]:
    """(below, above) of 002 Thm 12: w.p. >= 1 − 2δ every f̂(x) lies in [f(x) − below, f(x) + above]
    with below = M/(k+1) + 2τ + 1 and above = τ."""
    return elements / (k + 1) + 2 * tau + 1, float(tau)


# --- choosing (σ², τ) ---------------------------------------------------------------------------

@dataclass(frozen=True)
class GSHMParams:
    """The chosen noise and threshold, with the δ both analyses give for them."""

    epsilon: float
    delta: float
    l: int
    sigma2: Fraction
    tau: int
    delta_continuous: float
    delta_discrete: float
    lemma6_sigma: float | None
    lemma6_tau: float | None

    @property
    def sigma(self) -> float:
        return math.sqrt(self.sigma2)

    @property
    def threshold(self) -> int:
        """Keep a noisy count when it is >= this (1 + τ)."""
        return 1 + self.tau


def rational_sigma2(sigma: float) -> Fraction:
    """σ² rounded up to the grid the sampler uses (more noise, never less)."""
    s2 = sigma * sigma
    den = SIGMA2_DENOMINATOR if s2 < (1 << 20) else 1
    return Fraction(math.ceil(s2 * den), den)


def _holds(epsilon, delta, l, sigma2, tau) -> bool:
    return (thm5_delta(epsilon, math.sqrt(sigma2), tau, l) <= delta
            and thm5_delta_discrete(epsilon, sigma2, tau, l) <= delta)


def _smallest_tau(epsilon, delta, l, sigma2, tau_cap: int) -> int | None:
    """The smallest integer τ <= tau_cap passing both conditions at σ² (None if none does)."""
    if not _holds(epsilon, delta, l, sigma2, tau_cap):
        return None
    lo, hi = 0, tau_cap  # invariant: hi holds
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _holds(epsilon, delta, l, sigma2, mid):
            hi = mid
        else:
            lo = mid
    return hi


def _best_on(sigmas, epsilon, delta, l, tau_cap):
    """(σ², smallest τ, index) minimising τ over the σ values (first on ties), or None."""
    best = None
    for i, sigma in enumerate(sigmas):
        s2 = rational_sigma2(sigma)
        if s2.numerator >= dg.MAX_NUMERATOR:
            break
        tau = _smallest_tau(epsilon, delta, l, s2, tau_cap)
        if tau is not None and (best is None or tau < best[1]):
            best = (s2, tau, i)
    return best


@lru_cache(maxsize=64)
def gshm_parameters(epsilon: float, delta: float, l: int) -> GSHMParams:
    """σ² and the smallest integer τ (module docstring) for GSHM with l differing counters."""
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    l = check_positive_int("l", l)
    lo, hi = 1e-3, 1.0  # σ where the τ → ∞ limit, the Gaussian mechanism on l counters, holds
    while thm5_delta(epsilon, hi, 1e9 * hi, l) > delta:
        lo, hi = hi, 2.0 * hi
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if thm5_delta(epsilon, mid, 1e9 * mid, l) <= delta else (mid, hi)
    sigma_min = max(hi, 4.0)
    tau_cap = math.ceil(60.0 * sigma_min)
    grid = [sigma_min * (1.0 + 1e-4 * 1.2 ** i) for i in range(56)]  # up to 2.2·σ_min
    best = _best_on(grid, epsilon, delta, l, tau_cap)
    if best is None:
        raise ValueError(f"no GSHM parameters for epsilon ({epsilon:g}), delta ({delta:g}) and l ({l}) within "
                         f"the sampler's range (σ² < 2^30); raise epsilon or delta, or lower k")
    i = best[2]  # refine between the best grid point's neighbours: τ(σ) is flat near its minimum
    lo_s, hi_s = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    fine = _best_on([lo_s + (hi_s - lo_s) * q / 32 for q in range(33)], epsilon, delta, l, tau_cap)
    if fine[1] < best[1]:
        best = fine
    s2, tau, _ = best
    l6 = lemma6_parameters(epsilon, delta, l) if epsilon < 1.0 else (None, None)
    return GSHMParams(epsilon, delta, l, s2, tau, thm5_delta(epsilon, math.sqrt(s2), tau, l),
                      thm5_delta_discrete(epsilon, s2, tau, l), *l6)


# --- the release ----------------------------------------------------------------------------------

def gshm_release(keys: np.ndarray, counts: np.ndarray, params: GSHMParams, sampler):
    """GSHM on stored (key, counter) pairs in key order (noise drawn in that order, P7): returns
    the kept keys and their noisy counts (integers >= 1 + τ)."""
    noisy = counts.astype(np.int64) + sampler.sample(params.sigma2, len(counts))
    keep = noisy >= params.threshold
    return keys[keep], noisy[keep]
