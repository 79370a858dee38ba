"""GRR and binary randomized response: privacy map, exact sampler, estimator (docs/local-dp.md §1.1, §1.4).

Privacy map (pure functions of public parameters): ``rr_weights(ε, d)`` gives integers A, B with
A/B <= e^ε (checked in 40-digit decimal arithmetic, rounded down) so that the sampler's
probabilities are exactly p = A/(A + (d−1)B) and q = B/(A + (d−1)B); the report is then
ln(A/B)-LDP, at most the configured ε (``weights_epsilon``). B is the largest power of two with
A + (d−1)B < 2^62, so huge domains (IPv6 /48 prefixes) stay in exact int64 arithmetic.

Sampler (§1.1 [D]): u uniform in [0, A + (d−1)B); u < A keeps v, otherwise j = (u − A) div B
names the j-th element of Ω \\ {v}. Binary RR is GRR with d = 2.
"""
from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numpy as np

from dptop.engine.core.jit import inner, kernel
from dptop.engine.local_dp.entropy import RESERVE, below

WORD_LIMIT = 1 << 62


def rr_weights(epsilon: float, d: int) -> tuple[int, int]:
    """Integers (A, B), A > B >= 1, A/B <= e^ε, A + (d−1)·B < 2^62: GRR over ``d`` values."""
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon ({epsilon!r}) must be > 0 and finite")
    if not 2 <= d < 1 << 61:
        raise ValueError(f"domain size ({d}) must be in [2, 2^61)")
    with localcontext() as ctx:
        ctx.prec = 40
        ratio = Decimal(epsilon).exp()
        if ratio + d >= WORD_LIMIT:
            raise ValueError(f"epsilon ({epsilon:g}) is too large for exact weights over {d} values "
                             "(e^epsilon + d must stay below 2^62)")
        b = 0
        while (ratio + d) * (1 << (b + 1)) < WORD_LIMIT and b < 40:
            b += 1
        B = 1 << b
        A = int((ratio * B).to_integral_value(rounding="ROUND_FLOOR"))
    if A <= B:
        raise ValueError(f"epsilon ({epsilon:g}) is too small to randomize over {d} values exactly "
                         f"(e^epsilon rounds to 1 at weight 2^{b})")
    return A, B


def weights_epsilon(A: int, B: int) -> float:
    """The ε a report with weights (A, B) actually has: ln(A/B)."""
    return math.log(A / B)


def grr_pq(A: int, B: int, d: int) -> tuple[float, float]:
    """(p, q): probability of keeping v, and of each other value."""
    m = A + (d - 1) * B
    return A / m, B / m


def grr_estimate(support, n: int, p: float, q: float):
    """Unbiased counts c~ = (ĉ − n·q)/(p − q) from support counts ĉ over n reports (§1.1)."""
    return (np.asarray(support, dtype=np.float64) - n * q) / (p - q)


def grr_variance(n: int, f, p: float, q: float):
    """Var[c~_i] = (n − f)·q(1−q)/(p−q)² + f·p(1−p)/(p−q)² for an item of true count f (§1.1)."""
    f = np.asarray(f, dtype=np.float64)
    return ((n - f) * q * (1 - q) + f * p * (1 - p)) / (p - q) ** 2


@inner
def grr_draw(words, pos, v, d, A, B):
    """One GRR report of ``v`` in [0, d) with weights (A, B)."""
    u = below(words, pos, A + (d - 1) * B)
    if u < A:
        return v
    j = (u - A) // B
    return j if j < v else j + 1


@kernel
def grr_batch(values, d, A, B, words, pos, out, start):
    """GRR reports of ``values[start:]`` into ``out``; returns the index reached (stops when
    fewer than RESERVE words remain; the caller refills and calls again)."""
    i = start
    n = len(values)
    while i < n and len(words) - pos[0] >= RESERVE:
        out[i] = grr_draw(words, pos, values[i], d, A, B)
        if pos[1]:
            break
        i += 1
    return i
