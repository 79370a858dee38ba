"""Release-time noise: exact discrete samplers on a CSPRNG (dp-misra-gries.md §5.3, dpss-eehh.md §4.3).

Counts are integers, so released counts get **discrete Laplace** (two-sided geometric) noise,
Pr[Z = z] = ((1 − α)/(1 + α))·α^|z| with α = exp(−1/scale). The sampler is the exact construction
of Canonne, Kamath and Steinke (CKS20), the model for OpenDP's samplers: Bernoulli(exp(−γ)) for a
rational γ from uniform integers only, then a geometric and a sign. No floating point is involved,
so the output distribution is exactly the stated one (no precision attacks, pitfall P8/P13).

The scale is taken as an exact rational: a float ``epsilon`` is used as the exact binary fraction
it denotes (``Fraction(epsilon)``), so the noise is ε-DP for precisely the ε the guarantee shows.

Randomness comes from ``secrets.SystemRandom`` (the OS CSPRNG). ``NoiseSource(seed=...)`` switches
to a seeded ``random.Random`` so tests are reproducible; its ``label`` then says "seeded: NOT
private", and every guarantee built from it repeats that. A release draws at most k~ + 1 values,
so Python ints are fast enough here. ``discrete_laplace_array`` is the same construction
vectorised over int64 arrays for the d·w cells of a DP sketch (EEHH), drawn once per instance.
Per-update bulk noise lives in ``dptop.engine.privacy.bulknoise``.
"""
from __future__ import annotations

import os
import random
import secrets
from fractions import Fraction

import numpy as np

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

    # --- bulk form: the same CKS20 construction vectorised over int64 arrays -------------------
    def _words(self, m: int) -> np.ndarray:
        raw = self._rng.randbytes(8 * m) if self.seeded else os.urandom(8 * m)
        return np.frombuffer(raw, dtype=np.uint64).copy()

    def _below_array(self, n: np.ndarray) -> np.ndarray:
        """Uniform integers in [0, n_i) per element (n_i >= 1, < 2^63), by masked rejection."""
        n = np.asarray(n, dtype=np.uint64)
        mask = n - np.uint64(1)
        for sh in (1, 2, 4, 8, 16, 32):
            mask |= mask >> np.uint64(sh)
        out = np.empty(n.shape, dtype=np.uint64)
        todo = np.arange(n.size)
        while todo.size:
            r = self._words(todo.size) & mask[todo]
            ok = r < n[todo]
            out[todo[ok]] = r[ok]
            todo = todo[~ok]
        return out.astype(np.int64)

    def _bernoulli_exp_array(self, num: np.ndarray, den: int) -> np.ndarray:
        """Per element True with probability exp(−num_i/den), for 0 <= num_i <= den."""
        k = np.ones(num.shape, dtype=np.int64)
        active = np.arange(num.size)
        while active.size:
            go_on = self._below_array(den * k[active]) < num[active]
            k[active[go_on]] += 1
            active = active[go_on]
        return k % 2 == 1

    def discrete_laplace_array(self, scale: Fraction, size: int) -> np.ndarray:
        """``size`` independent exact draws with Pr[Z = z] ∝ exp(−|z|/scale), scale = t/s with
        t, s < 2^40 (callers round the scale up to such a fraction: more noise, never less)."""
        t, s = scale.numerator, scale.denominator
        if not (0 < t < 1 << 40 and 0 < s < 1 << 40):
            raise ValueError(f"scale ({scale}) must be a fraction t/s with 0 < t, s < 2^40")
        out = np.empty(size, dtype=np.int64)
        todo = np.arange(size)
        while todo.size:
            m = todo.size
            u = self._below_array(np.full(m, t, dtype=np.int64))
            ok = self._bernoulli_exp_array(u, t)
            v = np.zeros(m, dtype=np.int64)
            active = np.flatnonzero(ok)
            while active.size:  # V = number of Bernoulli(exp(−1)) successes before a failure
                hit = self._bernoulli_exp_array(np.ones(active.size, dtype=np.int64), 1)
                v[active[hit]] += 1
                active = active[hit]
            y = (u + t * v) // s
            negative = (self._words(m) & np.uint64(1)).astype(bool)
            valid = ok & ~(negative & (y == 0))
            out[todo[valid]] = np.where(negative, -y, y)[valid]
            todo = todo[~valid]
        return out

    def uniform_int(self, n: int) -> int:
        """Uniform in ``[0, n)`` (labels for pure-DP universe noise)."""
        return self._below(n)

    def exponential(self) -> float:
        """A standard exponential draw (pure-DP order statistics, dp-misra-gries.md §7.2)."""
        return self._rng.expovariate(1.0)


def dlap_pmf(z: int, alpha: float) -> float:
    """Pr[Z = z] of the discrete Laplace law with parameter α (for tests and tails)."""
    return (1 - alpha) / (1 + alpha) * alpha ** abs(z)


def dlap_upper_tail(t: int, alpha: float) -> float:
    """Pr[Z >= t] for integer t >= 0: α^t/(1 + α) (dpss-eehh.md §4.3)."""
    if t < 0:
        raise ValueError(f"t ({t}) must be >= 0")
    return alpha ** t / (1 + alpha)
