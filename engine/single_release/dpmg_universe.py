"""DP-MG pure mode's universe noise, sampled exactly (docs/dp-misra-gries.md §7.2).

Pure mode adds discrete Laplace noise, Pr[Z = z] = ((1 − α)/(1 + α))·α^|z| with α = exp(−ε'), to
**every** universe element and releases the k largest. Outside the kept set P every value is 0, so
the released part of those m ≈ 2^128 elements is the top of m i.i.d. draws. This module samples that
top exactly, with the same law as drawing all m and sorting, from the integer word stream of a
``NoiseSource`` (the OS CSPRNG unless seeded):

1. at a public level t (about where m·Pr[Z >= t] = 1; only the speed depends on it), the number of
   draws >= t is Binomial(m, α^t/(1 + α)); each of them is t + G with Pr[G >= j] = α^j, a geometric
   counted with the exact Bernoulli(exp(−ε')) of ``NoiseSource.bernoulli_exp``;
2. below t, block by block (levels l..h, h the level under the last block), the number of the
   remaining M draws in the block, given that they are <= h, is
   Binomial(M, Pr[l <= Z <= h]/Pr[Z <= h]);
   each of them has the law Pr[v] ∝ α^v on l..h, drawn by inversion of its closed-form CDF; stop
   once k values are known (a block is sized to hold about twice the count still needed, so a
   release takes a few blocks).

A binomial count and a value in a block are drawn by inversion against a uniform whose bits are
drawn lazily, compared with the CDF enclosed in rigorous interval arithmetic (mpmath.iv): the
comparison is refined with more bits and more precision until the enclosure decides it, so no
rounding enters the law and no log(0) or overflow is reachable. Everything here is the discrete
law; the privacy argument (integer vector (K+1)c − Σc of ℓ1 sensitivity <= 2K+1, discrete Laplace
at ε/(2K+1)) is docs/dp-misra-gries.md §7.2.
"""
from __future__ import annotations

import math
from fractions import Fraction

START_PRECISION = 192
"""Bits of the interval enclosures at first; doubled when a comparison is undecided."""


class _LazyUniform:
    """A uniform U in [0, 1) known as the interval [u/2^b, (u + 1)/2^b), refined 64 bits at a time."""

    def __init__(self, noise):
        self.noise, self.u, self.bits = noise, 0, 0

    def refine(self):
        self.u = (self.u << 64) | self.noise.uniform_int(1 << 64)
        self.bits += 64

    def below(self, lo, hi) -> bool | None:
        """U < c for c in [lo, hi] (exact fractions): True, False, or None when undecided."""
        scale = 1 << self.bits
        if self.bits and Fraction(self.u + 1, scale) <= lo:
            return True
        if self.bits and Fraction(self.u, scale) >= hi:
            return False
        return None


def _bounds(x) -> tuple[Fraction, Fraction]:
    """The exact endpoints of an mpmath interval."""
    from mpmath.libmp import to_rational

    lo, hi = x._mpi_
    return Fraction(*to_rational(lo)), Fraction(*to_rational(hi))


def _binomial(noise, trials: int, prob) -> int:
    """Binomial(trials, p) exactly, p given by ``prob(iv)`` as an interval. Inversion: the least j
    with U < Pr[B <= j]."""
    from mpmath import iv

    u, prec = _LazyUniform(noise), START_PRECISION
    while True:
        iv.prec = prec
        p = prob(iv)
        pmf = iv.exp(trials * iv.log(1 - p))  # Pr[B = 0]
        cdf, j, undecided = pmf, 0, False
        while True:
            lo, hi = _bounds(cdf)
            verdict = u.below(lo, hi)
            while verdict is None and u.bits < prec:
                u.refine()
                verdict = u.below(lo, hi)
            if verdict is None:
                undecided = True
                break
            if verdict or j == trials:
                return j
            pmf = pmf * (trials - j) / (j + 1) * p / (1 - p)
            cdf, j = cdf + pmf, j + 1
        if undecided:
            prec *= 2


def _geometric(noise, num: int, den: int) -> int:
    """G with Pr[G >= j] = exp(−num/den)^j: successes of Bernoulli(exp(−num/den)) before a failure."""
    g = 0
    while noise.bernoulli_exp(num, den):
        g += 1
    return g


def _uniform_below(u: _LazyUniform, value) -> bool:
    """U < c, with c given by ``value(iv)`` as an interval: refined until the enclosure decides."""
    from mpmath import iv

    prec = START_PRECISION
    while True:
        iv.prec = prec
        lo, hi = _bounds(value(iv))
        verdict = u.below(lo, hi)
        while verdict is None and u.bits < prec:
            u.refine()
            verdict = u.below(lo, hi)
        if verdict is not None:
            return verdict
        prec *= 2


def _block_value(noise, alpha, low: int, high: int) -> int:
    """A draw of the law Pr[v] ∝ α^v on the integers low..high (0 <= low <= high), the discrete
    Laplace law restricted to the block: low + G with Pr[G <= g] = (1 − α^(g+1))/(1 − α^(w+1)),
    w = high − low, by inversion (binary search on one lazily drawn uniform)."""
    u, first, last, w = _LazyUniform(noise), 0, high - low, high - low
    while first < last:
        mid = (first + last) // 2
        if _uniform_below(u, lambda iv, g=mid: (1 - alpha(iv) ** (g + 1)) / (1 - alpha(iv) ** (w + 1))):
            last = mid
        else:
            first = mid + 1
    return low + first


def universe_top_noise(noise, count: int, m: int, epsilon) -> list[int]:
    """The ``count`` largest of ``m`` i.i.d. discrete Laplace draws with α = exp(−ε), ε an exact
    rational (a float is its binary value), in decreasing order; exact (module docstring)."""
    e = Fraction(epsilon)
    if e <= 0 or count < 0 or m < count:
        raise ValueError(f"need ε > 0 and 0 <= count <= m, got ε={epsilon}, count={count}, m={m}")
    num, den, eps = e.numerator, e.denominator, float(e)

    def alpha(iv):
        return iv.exp(-iv.mpf(num) / den)

    # Public levels chosen in floating point: they only set how many draws each step expects
    # (about 1 above ``top``, about the count still needed per block), never the law.
    top = max(0, math.ceil(math.log(m) / eps))
    above = _binomial(noise, m, lambda iv: alpha(iv) ** top / (1 + alpha(iv)))
    values = sorted((top + _geometric(noise, num, den) for _ in range(above)), reverse=True)
    remaining, high = m - above, top - 1
    while len(values) < count:
        if high < 0:
            raise ValueError("universe noise reached level 0: m is too small for this sampler")
        need = count - len(values)
        low = min(high, max(0, math.floor(math.log(remaining / (2.0 * need)) / eps)))

        def share(iv, low=low, high=high):
            """Pr[low <= Z <= high | Z <= high] = (α^low − α^(high+1)) / ((1 + α) − α^(high+1))."""
            a = alpha(iv)
            return (a ** low - a ** (high + 1)) / (1 + a - a ** (high + 1))
        inside = _binomial(noise, remaining, share)
        drawn = sorted((_block_value(noise, alpha, low, high) for _ in range(inside)), reverse=True)
        values.extend(drawn[:need])
        remaining -= inside
        high = low - 1
    return values[:count]
