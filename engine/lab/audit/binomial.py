"""Exact binomial confidence bounds for the privacy audit (dptop.engine.lab.audit.statistics):
one-sided Clopper-Pearson bounds, the privacy-loss bounds built from them, and the approximate
Wilson bounds that only rank events.

Clopper-Pearson bounds are computed here without scipy: the binomial tail is the regularized
incomplete beta function I_x(a, b), evaluated by its continued fraction (modified Lentz) and
inverted by bisection (tests compare with scipy.stats).
"""
from __future__ import annotations

import math

import numpy as np

_TINY = 1e-300


def _beta_cf(a: float, b: float, x: float) -> float:
    """Continued fraction of I_x(a, b) (modified Lentz), for x < (a + 1)/(a + b + 2)."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 100_000):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + num / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) for a, b > 0 and x in [0, 1]."""
    if not (a > 0 and b > 0):
        raise ValueError(f"betainc needs a, b > 0, got a={a}, b={b}")
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_cf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_cf(b, a, 1.0 - x) / b


def binom_sf(k: int, n: int, p: float) -> float:
    """P[Bin(n, p) >= k] = I_p(k, n − k + 1)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return betainc(k, n - k + 1, p)


def _bisect(f, target: float) -> float:
    """The p in [0, 1] with f(p) = target for an increasing f (60 halvings)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def cp_lower(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper-Pearson lower bound: P[p < bound] <= alpha for k successes in n."""
    _check_counts(k, n, alpha)
    if k == 0:
        return 0.0
    return _bisect(lambda p: binom_sf(k, n, p), alpha)


def cp_upper(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper-Pearson upper bound: P[p > bound] <= alpha for k successes in n."""
    _check_counts(k, n, alpha)
    if k == n:
        return 1.0
    # P[Bin(n, p) <= k] = 1 − sf(k + 1) decreases in p; solve sf(k + 1) = 1 − alpha.
    return _bisect(lambda p: binom_sf(k + 1, n, p), 1.0 - alpha)


def _check_counts(k: int, n: int, alpha: float) -> None:
    if not 0 <= k <= n or n < 1:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha ({alpha!r}) must be in (0, 1)")


def wilson_bounds(k: np.ndarray, n: int, z: float) -> tuple[np.ndarray, np.ndarray]:
    """Approximate (lower, upper) bounds, vectorized: only used to *rank* events on the selection
    half, never for the reported statement."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 1e-12, 1.0)


def normal_quantile(alpha: float) -> float:
    """Standard normal quantile 1 − alpha by bisection on erfc (no scipy)."""
    lo, hi = 0.0, 40.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if 0.5 * math.erfc(mid / math.sqrt(2.0)) > alpha:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def loss_lower_bound(p_lo: float, q_hi: float, delta: float) -> float:
    """ε_lb = ln((p_lo − δ)/q_hi): the smallest ε consistent with the bounds (−inf if none)."""
    if p_lo - delta <= 0.0:
        return -math.inf
    return math.log((p_lo - delta) / q_hi)


def loss_interval(k1: int, k2: int, n: int, confidence: float) -> tuple[float, float]:
    """Two-sided interval for ln(p/q) of one *fixed* event with k1/n hits on X and k2/n on X'
    (four one-sided Clopper-Pearson bounds at (1 − confidence)/4 each)."""
    a = (1.0 - confidence) / 4.0
    p_lo, p_hi = cp_lower(k1, n, a), cp_upper(k1, n, a)
    q_lo, q_hi = cp_lower(k2, n, a), cp_upper(k2, n, a)
    lo = math.log(p_lo / q_hi) if p_lo > 0 else -math.inf
    hi = math.log(p_hi / q_lo) if q_lo > 0 else math.inf
    return lo, hi
