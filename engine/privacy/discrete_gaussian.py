"""Exact discrete Gaussian noise N_Z(0, σ²) on the OS CSPRNG, batched in numba (Canonne, Kamath and
Steinke 2020, "The Discrete Gaussian for Differential Privacy", Alg. 3; CKS20 below).

Pr[Y = y] ∝ exp(−y²/(2σ²)) over the integers, with σ² = a/b an exact rational. The sampler uses only
uniform integers, so its output law is exactly the stated one (no floating point, no precision
attack; docs/dp-misra-gries.md P8):

1. t = ⌊σ⌋ + 1; U uniform in {0..t−1}; keep on Bernoulli(exp(−U/t)), else restart;
2. V = number of Bernoulli(exp(−1)) successes before the first failure; a fair sign bit B;
   restart when B = 1 and U = V = 0; Y = ±(U + tV) (discrete Laplace with scale t);
3. accept Y with probability exp(−(|Y| − σ²/t)²/(2σ²)) = exp(−(|Y|bt − a)²/(2abt²)), else restart.

Bernoulli(exp(−γ)) for a rational γ is CKS20 Alg. 1 (K odd), with Bernoulli(γ/K) drawn as
Bernoulli(γ)·Bernoulli(1/K) so no product overflows. A uniform integer below n takes the next
⌈log2 n⌉ bits of the word stream, by rejection. The kernel runs over a buffer of ``os.urandom``
words; when the buffer runs out in the middle of an attempt, that attempt is rerun from its first
bit on the buffer's remainder plus fresh words, so every sample is a deterministic function of one unbroken word stream (cutting
the attempt short instead would favour short attempts, i.e. small |Y|). When |Y|·b·t would overflow
64-bit arithmetic (|Y| beyond about 2^31/σ, i.e. probability below e^(−2^31/σ²)), the kernel hands
the candidate to Python, which draws the step-3 coin exactly with Python integers
(``NoiseSource.bernoulli_exp``) from fresh randomness.

``DiscreteGaussian(seed=...)`` switches to a seeded numpy generator (and a seeded coin for the rare
path) so tests are reproducible; its ``label`` then says NOT private.
"""
from __future__ import annotations

import math
import os
from fractions import Fraction

import numpy as np

from dptop.engine.core.jit import inner, kernel
from dptop.engine.privacy.noise import NoiseSource, _as_fraction

CSPRNG_LABEL = "discrete Gaussian, exact CKS20 sampler (numba) on the OS CSPRNG (os.urandom)"
SEEDED_LABEL = "seeded: NOT private (reproducible test generator, numpy PCG64)"

MAX_NUMERATOR = 1 << 30
"""σ² = a/b needs a < 2^30 so that 2abt² (t² ≈ a/b) stays below 2^62."""
OVERFLOW_LIMIT = 1 << 31
"""|Y|·b·t at or above this goes to the exact Python coin (u² must stay below 2^63)."""

WORDS_PER_DRAW = 4
"""64-bit words fetched per requested draw (measured: about 2.5 are used at σ = 100)."""

_DONE, _NEED_WORDS, _CHECK = 0, 1, 2
_ONE = np.uint64(1)


def as_rational_sigma2(sigma2) -> Fraction:
    """σ² as the exact fraction a/b the sampler uses (a float is its exact binary value)."""
    f = _as_fraction(sigma2, "sigma2")
    if f.numerator >= MAX_NUMERATOR or f.denominator >= MAX_NUMERATOR:
        raise ValueError(f"sigma2 ({sigma2!r}) must be a fraction a/b with a, b < 2^30 "
                         f"(round it, e.g. Fraction(math.ceil(16·σ²), 16))")
    return f


@inner
def _below(words, cur, n):
    """Uniform integer in [0, n) for 1 <= n < 2^63 from the next ⌈log2 n⌉ bits of the word stream
    (``cur[0]`` is a bit position), by rejection; −1 when the words run out."""
    nbits = 0
    while (np.int64(1) << nbits) < n:
        nbits += 1
    if nbits == 0:
        return np.int64(0)
    mask = (_ONE << np.uint64(nbits)) - _ONE
    while True:
        p = cur[0]
        i = p >> 6
        off = np.uint64(p & 63)
        if (p + nbits + 63) >> 6 > len(words):
            return -1
        r = words[i] >> off
        if off + np.uint64(nbits) > np.uint64(64):
            r |= words[i + 1] << (np.uint64(64) - off)
        r &= mask
        cur[0] = p + nbits
        if r < np.uint64(n):
            return np.int64(r)


@inner
def _bernoulli_exp_le1(words, cur, num, den):
    """1 with probability exp(−num/den) for 0 <= num <= den (CKS20 Alg. 1); −1 = out of words."""
    k = 1
    while True:
        u = _below(words, cur, den)  # Bernoulli(num/den) ...
        if u < 0:
            return -1
        if u >= num:
            break
        v = _below(words, cur, k)  # ... times Bernoulli(1/k) is Bernoulli(num/(den·k))
        if v < 0:
            return -1
        if v != 0:
            break
        k += 1
    return k % 2


@inner
def _bernoulli_exp(words, cur, num, den):
    """1 with probability exp(−num/den) for num >= 0, den >= 1; −1 = out of words."""
    whole = num // den
    for _ in range(whole):
        c = _bernoulli_exp_le1(words, cur, 1, 1)
        if c != 1:
            return c
    return _bernoulli_exp_le1(words, cur, num - whole * den, den)


@kernel
def _fill(out, done, words, pos, a, b, t):
    """Draw into ``out[done:]`` from the bits of ``words`` from bit ``pos`` on. Returns ``(done,
    pos, status, y)``: status ``_DONE`` (out is full), ``_NEED_WORDS`` (pos = first bit of the
    unfinished attempt) or ``_CHECK`` (candidate y whose acceptance coin needs exact big-integer
    arithmetic; pos is past its bits)."""
    cur = np.zeros(1, dtype=np.int64)
    cur[0] = pos
    den = 2 * a * b * t * t
    while done < len(out):
        start = cur[0]
        u = _below(words, cur, t)
        if u < 0:
            return done, start, _NEED_WORDS, 0
        d = _bernoulli_exp_le1(words, cur, u, t)
        if d < 0:
            return done, start, _NEED_WORDS, 0
        if d == 0:
            continue
        v = 0
        while True:
            g = _bernoulli_exp_le1(words, cur, 1, 1)
            if g < 0:
                return done, start, _NEED_WORDS, 0
            if g == 0:
                break
            v += 1
        sign = _below(words, cur, 2)
        if sign < 0:
            return done, start, _NEED_WORDS, 0
        magnitude = u + t * v
        if sign == 1 and magnitude == 0:
            continue
        y = -magnitude if sign == 1 else magnitude
        if magnitude >= OVERFLOW_LIMIT // (b * t):
            return done, cur[0], _CHECK, y
        w = magnitude * b * t - a
        c = _bernoulli_exp(words, cur, w * w, den)
        if c < 0:
            return done, start, _NEED_WORDS, 0
        if c == 1:
            out[done] = y
            done += 1
    return done, cur[0], _DONE, 0


class DiscreteGaussian:
    """Batches of exact N_Z(0, σ²) draws from the OS CSPRNG (or a seeded generator: NOT private)."""

    def __init__(self, seed: int | None = None):
        self.seeded = seed is not None
        self._gen = np.random.Generator(np.random.PCG64(seed)) if self.seeded else None
        self._coin = NoiseSource(seed)  # exact big-integer coin of the rare overflow path

    @property
    def label(self) -> str:
        """The ``noise`` text of a ``Guarantee`` built on this source."""
        return SEEDED_LABEL if self.seeded else CSPRNG_LABEL

    def _words(self, m: int) -> np.ndarray:
        if self.seeded:
            return self._gen.integers(0, 1 << 64, size=m, dtype=np.uint64, endpoint=False)
        return np.frombuffer(os.urandom(8 * m), dtype=np.uint64).copy()

    def sample(self, sigma2, size: int) -> np.ndarray:
        """``size`` independent draws (``int64``) with Pr[Y = y] ∝ exp(−y²/(2σ²))."""
        s2 = as_rational_sigma2(sigma2)
        a, b = s2.numerator, s2.denominator
        t = math.isqrt(a // b) + 1  # ⌊σ⌋ + 1 (isqrt of ⌊σ²⌋ is ⌊σ⌋)
        out = np.empty(int(size), dtype=np.int64)
        words = self._words(64 + WORDS_PER_DRAW * len(out))
        done, pos = 0, 0
        while done < len(out):
            done, pos, status, y = _fill(out, done, words, pos, a, b, t)
            if status == _NEED_WORDS:  # keep the unfinished attempt's bits, append fresh words
                fresh = self._words(64 + WORDS_PER_DRAW * (len(out) - done))
                words, pos = np.concatenate((words[pos >> 6:], fresh)), pos & 63
            elif status == _CHECK:
                w = abs(int(y)) * b * t - a
                if self._coin.bernoulli_exp(w * w, 2 * a * b * t * t):
                    out[done] = y
                    done += 1
        return out


# --- the law itself (tests, tails of the privacy map) ---------------------------------------------

def _support_bound(sigma2: float) -> int:
    """|y| beyond this carries mass below e^(−700) relative to the mode."""
    return int(40.0 * math.sqrt(sigma2)) + 40


def normaliser(sigma2) -> float:
    """Σ_y exp(−y²/(2σ²)) over the integers."""
    s2 = float(sigma2)
    ys = np.arange(1, _support_bound(s2) + 1, dtype=np.float64)
    return 1.0 + 2.0 * float(np.sum(np.exp(-ys * ys / (2.0 * s2))[::-1]))


def pmf(y, sigma2) -> np.ndarray:
    """Pr[Y = y] for integer ``y`` (array-like)."""
    s2 = float(sigma2)
    y = np.asarray(y, dtype=np.float64)
    return np.exp(-y * y / (2.0 * s2)) / normaliser(s2)


def upper_tail(t: int, sigma2) -> float:
    """Pr[Y >= t] for an integer t (summed from the far end, so small tails keep their digits)."""
    s2 = float(sigma2)
    t = int(t)
    if t <= 0:
        return 1.0 - upper_tail(1 - t, s2)  # symmetric: Pr[Y >= t] = 1 − Pr[Y >= 1 − t]
    ys = np.arange(t, t + _support_bound(s2) + 1, dtype=np.float64)
    return float(np.sum(np.exp(-ys * ys / (2.0 * s2))[::-1])) / normaliser(s2)


def variance(sigma2) -> float:
    """Var[Y] (slightly below σ² for small σ, CKS20 Prop. 5)."""
    s2 = float(sigma2)
    ys = np.arange(1, _support_bound(s2) + 1, dtype=np.float64)
    return 2.0 * float(np.sum((ys * ys * np.exp(-ys * ys / (2.0 * s2)))[::-1])) / normaliser(s2)
