"""Random words for the local-DP kernels: OS entropy, consumed by exact integer samplers.

docs/local-dp.md §10.1 step 4: the randomizers draw from the OS CSPRNG, not from numba's
PRNG. ``Entropy`` hands out ``uint64`` words from ``os.urandom`` (or, with a seed, from a seeded
PCG64 generator whose label says NOT private); a ``WordBuffer`` holds a block of them with a
cursor that the kernels advance. Every sampler below uses integers only:

* ``below(m)``: uniform in ``[0, m)`` by rejection of the top ``2^64 mod m`` words (exact);
* ``bern_exp(num, den)``: Bernoulli(exp(−num/den)) for integers, Canonne–Kamath–Steinke
  (003 ref [15], docs/local-dp.md §2.3 BERN_EXP), the exact ED decay test.

A kernel processes one report at a time after checking that ``RESERVE`` words remain; the
samplers never read past the block (they set the overflow flag ``pos[1]`` and the kernel raises),
so a report is never drawn from reused or missing randomness.
"""
from __future__ import annotations

import os

import numpy as np

from dptop.engine.core.jit import inner

CSPRNG_LABEL = "exact integer samplers on the OS CSPRNG (os.urandom)"
SEEDED_LABEL = "seeded: NOT private (reproducible test generator, numpy PCG64)"
RESERVE = 512
"""Words a kernel keeps in hand per report: more than one report can use except with probability
far below 2^-100 (each extra word needs a rejection or an ED round that continues)."""
BLOCK = 1 << 16
_ALL_ONES = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


class Entropy:
    """Source of random ``uint64`` words: ``os.urandom`` unless ``seed`` is given (NOT private)."""

    def __init__(self, seed: int | None = None):
        self.seeded = seed is not None
        self._gen = np.random.Generator(np.random.PCG64(seed)) if self.seeded else None

    @property
    def label(self) -> str:
        return SEEDED_LABEL if self.seeded else CSPRNG_LABEL

    def words(self, n: int) -> np.ndarray:
        if self.seeded:
            return self._gen.bit_generator.random_raw(n).astype(np.uint64)
        return np.frombuffer(os.urandom(8 * n), dtype=np.uint64).copy()


class WordBuffer:
    """A block of words and the kernels' cursor ``pos = [next index, overflow flag]``."""

    def __init__(self, entropy: Entropy, block: int = BLOCK):
        self.entropy = entropy
        self.block = block
        self.words = entropy.words(block)
        self.pos = np.zeros(2, dtype=np.int64)

    def ensure(self, n: int) -> None:
        """At least ``n`` unread words in the block (unread words are kept, never redrawn)."""
        left = len(self.words) - int(self.pos[0])
        if left >= n:
            return
        fresh = self.entropy.words(max(self.block, n - left))
        self.words = np.concatenate((self.words[int(self.pos[0]):], fresh))
        self.pos[0] = 0

    def refill(self) -> None:
        """Before a kernel call: a full block, or more than ``RESERVE`` words."""
        self.ensure(max(self.block // 2, 2 * RESERVE))


def check_overflow(pos: np.ndarray) -> None:
    if pos[1]:
        raise RuntimeError("entropy block exhausted inside one report (probability < 2^-100): "
                           "the report was not completed")


@inner
def next_word(words, pos):
    """The next unread word; past the block it sets the overflow flag and returns 0."""
    i = pos[0]
    if i >= len(words):
        pos[1] = 1
        return np.uint64(0)
    pos[0] = i + 1
    return words[i]


@inner
def below(words, pos, m):
    """Uniform integer in ``[0, m)`` for ``1 <= m < 2^63`` (int64 in, int64 out), exactly."""
    mu = np.uint64(m)
    limit = (_ALL_ONES // mu) * mu
    while True:
        x = next_word(words, pos)
        if x < limit or pos[1]:
            return np.int64(x % mu)


@inner
def bernoulli(words, pos, num, den):
    """True with probability exactly ``num/den`` (0 <= num <= den, den >= 1)."""
    return below(words, pos, den) < num


@inner
def _bern_exp_le1(words, pos, num, den):
    k = 1
    while below(words, pos, den * k) < num:  # Bernoulli(γ/K), γ = num/den <= 1
        k += 1
        if pos[1]:
            return False
    return k % 2 == 1


@inner
def bern_exp(words, pos, num, den):
    """True with probability exactly exp(−num/den) (integers, num >= 0, den >= 1; docs/local-dp.md §2.3)."""
    while num > den:
        if not _bern_exp_le1(words, pos, 1, 1):
            return False
        num -= den
    return _bern_exp_le1(words, pos, num, den)


def drive(buffer: WordBuffer, n: int, call) -> None:
    """Run ``call(words, pos, start) -> reached`` until all ``n`` items are done, refilling the
    block between calls (the kernels stop on their own when the block runs low)."""
    start = 0
    while start < n:
        buffer.refill()
        start = call(buffer.words, buffer.pos, start)
        check_overflow(buffer.pos)
