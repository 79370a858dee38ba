"""Release-time noise: exact discrete samplers on a CSPRNG (docs/dp-misra-gries.md §5.3, docs/dpss-eehh.md §4.3).

Counts are integers, so released counts get **discrete Laplace** (two-sided geometric) noise,
Pr[Z = z] = ((1 − α)/(1 + α))·α^|z| with α = exp(−1/scale). The sampler is the exact construction
of Canonne, Kamath and Steinke (CKS20), the model for OpenDP's samplers: Bernoulli(exp(−γ)) for a
rational γ from uniform integers only, then a geometric and a sign. No floating point is involved,
so the output distribution is exactly the stated one (no precision attacks, pitfall P8/P13).

The scale is taken as an exact rational: a float ``epsilon`` is used as the exact binary fraction
it denotes (``Fraction(epsilon)``), so the noise is ε-DP for precisely the ε the guarantee shows.

Randomness comes from ``secrets.SystemRandom`` (the OS CSPRNG). ``NoiseSource(seed=...)`` switches
to a seeded ``random.Random`` so tests are reproducible; its ``label`` then says "seeded: NOT
private", and every guarantee built from it repeats that. ``dlap_array`` and
``discrete_laplace_array`` run the same construction for many draws at once in a numba kernel
(``dptop.engine.privacy.batched``) over words from the same generator: the k~ counters of a
release, the d·w cells of a DP sketch (EEHH).
Per-update bulk noise lives in ``dptop.engine.privacy.bulknoise``.
"""
from __future__ import annotations

import os
import random
import secrets
from fractions import Fraction

import numpy as np

from dptop.engine.privacy.batched import LIMIT, dlap_batch

CSPRNG_LABEL = "discrete Laplace, exact CKS20 sampler on the OS CSPRNG (secrets)"
SEEDED_LABEL = "seeded: NOT private (reproducible test generator, random.Random)"


def _as_fraction(x, name: str) -> Fraction:
    try:
        f = Fraction(x)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} ({x!r}) must be a finite real number") from exc
    if f <= 0:
        raise ValueError(f"{name} ({x!r}) must be > 0")
    return f


class NoiseSource:
    """Exact discrete samplers over one random generator (CSPRNG unless ``seed`` is given)."""

    def __init__(self, seed: int | None = None):
        self.seeded = seed is not None
        self._rng = random.Random(seed) if self.seeded else secrets.SystemRandom()

    @property
    def label(self) -> str:
        """The ``noise`` text of a ``Guarantee`` built on this source."""
        return SEEDED_LABEL if self.seeded else CSPRNG_LABEL

    def _below(self, n: int) -> int:
        return self._rng.randrange(n)

    def bernoulli_exp(self, num: int, den: int) -> bool:
        """True with probability exactly exp(−num/den), for integers num >= 0, den >= 1."""
        if num < 0 or den < 1:
            raise ValueError(f"bernoulli_exp needs num >= 0 and den >= 1, got {num}/{den}")
        while num > den:  # exp(−γ) = exp(−1)^⌊γ⌋ · exp(−(γ − ⌊γ⌋))
            if not self._bernoulli_exp_le1(1, 1):
                return False
            num -= den
        return self._bernoulli_exp_le1(num, den)

    def _bernoulli_exp_le1(self, num: int, den: int) -> bool:
        """CKS20 Alg. 1 for γ = num/den in [0, 1]: K odd with Pr = exp(−γ)."""
        k = 1
        while self._below(den * k) < num:  # Bernoulli(γ/K)
            k += 1
        return k % 2 == 1

    def discrete_laplace(self, scale) -> int:
        """One draw with Pr[Z = z] ∝ exp(−|z|/scale) (CKS20 Alg. 2, scale = t/s exactly)."""
        f = _as_fraction(scale, "scale")
        t, s = f.numerator, f.denominator
        while True:
            u = self._below(t)
            if not self.bernoulli_exp(u, t):
                continue
            v = 0
            while self.bernoulli_exp(1, 1):
                v += 1
            y = (u + t * v) // s
            negative = self._below(2) == 1
            if negative and y == 0:
                continue
            return -y if negative else y

    def dlap(self, epsilon, sensitivity: int = 1) -> int:
        """Discrete Laplace with α = exp(−ε/sensitivity): ε-DP for an integer query of that ℓ1
        sensitivity."""
        eps = _as_fraction(epsilon, "epsilon")
        return self.discrete_laplace(Fraction(sensitivity) / eps)

    # --- batched form: the same CKS20 construction in one numba kernel (privacy/batched.py) ------
    def _words(self, m: int) -> np.ndarray:
        raw = self._rng.randbytes(8 * m) if self.seeded else os.urandom(8 * m)
        return np.frombuffer(raw, dtype=np.uint64).copy()

    def dlap_array(self, epsilon, size: int, sensitivity: int = 1) -> np.ndarray:
        """``size`` independent ``dlap(epsilon, sensitivity)`` draws (release time: the k~ counters)."""
        if size == 0:
            return np.zeros(0, dtype=np.int64)
        return self.discrete_laplace_batch(Fraction(sensitivity) / _as_fraction(epsilon, "epsilon"), size)

    def discrete_laplace_batch(self, scale: Fraction, size: int) -> np.ndarray:
        """``size`` independent ``discrete_laplace(scale)`` draws, exactly the same law, in one
        kernel (a microsecond or so a draw instead of tens; the scalar sampler past 2^62). No
        draws read no randomness (an empty epoch's k~ counters)."""
        if size == 0:
            return np.zeros(0, dtype=np.int64)
        if scale.numerator > LIMIT or scale.denominator > LIMIT:
            return np.array([self.discrete_laplace(scale) for _ in range(size)], dtype=np.int64)
        return dlap_batch(self._words, scale.numerator, scale.denominator, size)

    def discrete_laplace_array(self, scale: Fraction, size: int) -> np.ndarray:
        """``discrete_laplace_batch`` for scale = t/s with t, s < 2^40 (the d·w cells of a DP
        sketch: callers round the scale up to such a fraction, more noise, never less)."""
        t, s = scale.numerator, scale.denominator
        if not (0 < t < 1 << 40 and 0 < s < 1 << 40):
            raise ValueError(f"scale ({scale}) must be a fraction t/s with 0 < t, s < 2^40")
        return self.discrete_laplace_batch(scale, size)

    def uniform_int(self, n: int) -> int:
        """Uniform in ``[0, n)`` (labels for pure-DP universe noise)."""
        return self._below(n)


def dlap_pmf(z: int, alpha: float) -> float:
    """Pr[Z = z] of the discrete Laplace law with parameter α (for tests and tails)."""
    return (1 - alpha) / (1 + alpha) * alpha ** abs(z)


def dlap_upper_tail(t: int, alpha: float) -> float:
    """Pr[Z >= t] for integer t >= 0: α^t/(1 + α) (docs/dpss-eehh.md §4.3)."""
    if t < 0:
        raise ValueError(f"t ({t}) must be >= 0")
    return alpha ** t / (1 + alpha)
