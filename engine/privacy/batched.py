"""Many exact discrete Laplace draws in one numba kernel (the CKS20 sampler of ``noise.py``, batched).

The kernel runs Canonne–Kamath–Steinke's construction (Bernoulli(exp(−γ)) for rational γ from
uniform integers only, then a geometric and a sign) on a buffer of random 64-bit words that the
caller fills from its generator (the OS CSPRNG, or the seeded test generator), read as a bit
stream. A uniform integer below n takes bit-length(n − 1) bits at a time, by rejection, so every
draw has exactly the stated law; nothing is floating point.

* **No overflow.** A Bernoulli(num/(den·k)) step is drawn as [U(k) = 0] ∧ [U(den) < num] (the
  mixed-radix uniform on [0, den·k) is below num <= den exactly then), so den·k is never formed.
  The value y = ⌊(u + t·v)/s⌋ is finished in Python's integers for the (astronomically rare)
  draws where t·v could leave 63 bits.
* **No bias from the buffer's end.** Each draw is a deterministic function of the bits it reads.
  When the buffer runs dry inside a draw, the kernel stops, and the next call starts that draw
  again on the bits it had read followed by fresh words: a replay, so the draw resumes exactly.
"""
from __future__ import annotations

import numpy as np

from dptop.engine.core.jit import inner, kernel

_WORDS_PER_DRAW = 4
"""Buffer words per requested draw (a draw reads about 100 bits for the scales used here)."""
LIMIT = (1 << 62) - 1
"""t and s must not exceed this (callers fall back to the scalar sampler beyond it)."""


@inner
def _bits(words, pos, b):
    """The next ``b`` (1..63) bits of the word stream at pos = [word, bit], or −1 if it runs out."""
    w, bit = pos[0], pos[1]
    if w >= len(words):
        return -1
    mask = (np.uint64(1) << np.uint64(b)) - np.uint64(1)
    v = words[w] >> np.uint64(bit)
    if bit + b < 64:
        pos[1] = bit + b
        return np.int64(v & mask)
    if bit + b == 64:
        pos[0], pos[1] = w + 1, 0
        return np.int64(v & mask)
    if w + 1 >= len(words):
        return -1
    low = 64 - bit
    v |= words[w + 1] << np.uint64(low)
    pos[0], pos[1] = w + 1, b - low
    return np.int64(v & mask)


@inner
def _below(words, pos, n):
    """Uniform integer in [0, n) (n >= 1) by rejection on bit-length(n − 1) fresh bits, or −1
    when the words run out."""
    if n == 1:
        return 0
    b = 64 - _leading_zeros(np.uint64(n - 1))
    while True:
        v = _bits(words, pos, b)
        if v < n:
            return v


@inner
def _leading_zeros(x):
    n = 0
    for sh in (32, 16, 8, 4, 2, 1):
        if x >> np.uint64(64 - sh) == 0:
            n += sh
            x <<= np.uint64(sh)
    return n


@inner
def _bernoulli_exp_le1(words, pos, num, den):
    """1 with probability exp(−num/den) for 0 <= num <= den (CKS20 Alg. 1), 0 if not, −1 when
    the words run out. Bernoulli(num/(den·k)) = [U(k) = 0] ∧ [U(den) < num]."""
    k = 1
    while True:
        a = _below(words, pos, k)
        if a < 0:
            return -1
        if a == 0:
            b = _below(words, pos, den)
            if b < 0:
                return -1
            if b < num:
                k += 1
                continue
        return k % 2


@kernel
def dlap_kernel(t, s, words, bit0, out, u_out, v_out, start):
    """Fill out[start:] with exact draws of Pr[Z = z] ∝ exp(−|z|·s/t) from the bits of ``words``
    from bit ``bit0`` of the first. Returns (next index to fill, word and bit where that draw began). Where t·v might overflow, the
    draw's u and v are left in u_out/v_out and out holds the sign (±1) for the caller to finish."""
    pos = np.array([0, bit0], np.int64)
    i = start
    while i < len(out):
        first, first_bit = pos[0], pos[1]
        while True:
            u = _below(words, pos, t)
            if u < 0:
                return i, first, first_bit
            ok = _bernoulli_exp_le1(words, pos, u, t)
            if ok < 0:
                return i, first, first_bit
            if ok == 0:
                continue
            v = 0
            while True:  # V = number of Bernoulli(exp(−1)) successes before a failure
                g = _bernoulli_exp_le1(words, pos, 1, 1)
                if g < 0:
                    return i, first, first_bit
                if g == 0:
                    break
                v += 1
            sign = _below(words, pos, 2)
            if sign < 0:
                return i, first, first_bit
            if v > (LIMIT - u) // t:
                u_out[i] = u
                v_out[i] = v
                out[i] = 1 - 2 * sign  # finished in Python; y = 0 with sign −1 cannot occur here
                break
            y = (u + t * v) // s
            if sign == 1 and y == 0:
                continue
            out[i] = -y if sign == 1 else y
            v_out[i] = -1
            break
        i += 1
    return i, pos[0], pos[1]


def dlap_batch(words_of, t: int, s: int, size: int) -> np.ndarray:
    """``size`` exact draws with Pr[Z = z] ∝ exp(−|z|·s/t) (scale t/s, 1 <= t, s <= LIMIT).
    ``words_of(m)`` returns m fresh uniform uint64 words from the caller's generator."""
    if not (1 <= t <= LIMIT and 1 <= s <= LIMIT):
        raise ValueError(f"scale ({t}/{s}) must be a fraction t/s with 1 <= t, s <= 2^62 - 1")
    out = np.zeros(size, np.int64)
    u_out = np.zeros(size, np.int64)
    v_out = np.full(size, -1, np.int64)
    words = words_of(max(64, _WORDS_PER_DRAW * size))
    done, bit = 0, 0
    while done < size:
        done, first, bit = dlap_kernel(t, s, words, bit, out, u_out, v_out, done)
        if done < size:  # replay the unfinished draw's bits, then fresh words
            words = np.concatenate([words[first:], words_of(max(64, _WORDS_PER_DRAW * (size - done)))])
    for i in np.flatnonzero(v_out >= 0).tolist():
        y = (int(u_out[i]) + t * int(v_out[i])) // s
        out[i] = -y if out[i] < 0 else y
    return out
