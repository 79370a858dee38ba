"""DP-MG pure mode's universe noise, sampled exactly (docs/dp-misra-gries.md §7.2).

Pure mode adds discrete Laplace noise, Pr[Z = z] = ((1 − α)/(1 + α))·α^|z| with α = exp(−ε'), to
**every** universe element and releases the k largest. Outside the kept set P every value is 0, so
the released part of those m ≈ 2^128 elements is the top of m i.i.d. draws. This module samples that
top exactly, with the same law as drawing all m and sorting, from the integer word stream of a
``NoiseSource`` (the OS CSPRNG unless seeded):

1. at a public level t (about where m·Pr[Z >= t] = 1; only the speed depends on it), the number of
   draws >= t is Binomial(m, α^t/(1 + α)); each of them is t + G with Pr[G >= j] = α^j, a geometric
   counted with the exact Bernoulli(exp(−ε')) of ``NoiseSource.bernoulli_exp``;
2. below t, level by level, the number of the remaining M draws equal to z, given that they are
   <= z, is Binomial(M, r_z) with r_z = Pr[Z = z]/Pr[Z <= z]; stop once k values are known.

A binomial count is drawn by inversion against a uniform whose bits are drawn lazily, compared with
the CDF enclosed in rigorous interval arithmetic (mpmath.iv): the comparison is refined with more
bits and more precision until the enclosure decides it, so no rounding enters the law and no log(0)
or overflow is reachable. Everything here is the discrete law; the privacy argument (integer vector
(K+1)c − Σc of ℓ1 sensitivity <= 2K+1, discrete Laplace at ε/(2K+1)) is docs/dp-misra-gries.md §7.2.
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


def _binomial(noise, trials: int, prob, stop: int | None = None) -> int:
    """Binomial(trials, p) exactly, p given by ``prob(iv)`` as an interval; counts above ``stop``
    are returned as ``stop + 1`` (the caller needs only whether more exist). Inversion: the least j
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
            if verdict or j == trials or (stop is not None and j > stop):
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


def universe_top_noise(noise, count: int, m: int, epsilon) -> list[int]:
    """The ``count`` largest of ``m`` i.i.d. discrete Laplace draws with α = exp(−ε), ε an exact
    rational (a float is its binary value), in decreasing order; exact (module docstring)."""
    e = Fraction(epsilon)
    if e <= 0 or count < 0 or m < count:
        raise ValueError(f"need ε > 0 and 0 <= count <= m, got ε={epsilon}, count={count}, m={m}")
    num, den = e.numerator, e.denominator

    def alpha(iv):
        return iv.exp(-iv.mpf(num) / den)

    # Public start level: m·α^t/(1 + α) about 1 (a float here only affects speed, not the law).
    top = max(0, math.ceil(math.log(m) / float(e)))
    above = _binomial(noise, m, lambda iv: alpha(iv) ** top / (1 + alpha(iv)))
    values = sorted((top + _geometric(noise, num, den) for _ in range(above)), reverse=True)
    remaining, z = m - above, top - 1
    while len(values) < count:
        if z < 0:
            raise ValueError("universe noise reached level 0: m is too small for this sampler")
        level = z  # the law of a draw given <= z: Pr[= z]/Pr[<= z]

        def r(iv, z=level):
            a = alpha(iv)
            return ((1 - a) / (1 + a) * a ** z) / (1 - a ** (z + 1) / (1 + a))
        at = _binomial(noise, remaining, r, stop=count - len(values))
        values.extend([z] * min(at, count - len(values)))
        remaining -= at
        z -= 1
    return values[:count]
