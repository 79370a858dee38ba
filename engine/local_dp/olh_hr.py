"""OLH and Hadamard Response frequency oracles (docs/local-dp.md §1.2, §1.3; 003 A.1), with exact samplers.

Both are the baselines 003 compares with; the heavy-hitter schemes use GRR. Their privacy maps
are those of GRR/RR over a smaller alphabet (``rr_weights``), so the same integer weights fix the
exact output probabilities.

* **OLH** (003 ref [57]): each report draws a fresh hash H(x) = ((a·x + b) mod P) mod g with
  P = 2^31 − 1 (Carter–Wegman; a, b uniform from the CSPRNG) and sends (a, b, GRR_g(H(v))).
  g = max(2, round(e^ε + 1)). Support ĉ_i = #{H_r(i) = y_r}; c~ = (ĉ − n/g)/(p' − 1/g).
  Domain values must be < P.
* **HR** (003 refs [6, 7]): K = 2^⌈log2(d+1)⌉, item i uses Hadamard row i + 1 (entries
  (−1)^popcount(r & c)); with p = e^ε/(1 + e^ε) the report is a uniform column of the +1 set,
  else of the −1 set. c~ = (ĉ − n/2)/(p − 1/2) = 2(e^ε+1)/(e^ε−1)·(ĉ − n/2) (eq. 6). The
  variance is the derived one of §1.3, 4× smaller than 003's eq. (7), which is kept only as
  ``hr_variance_eq7`` for the record.
"""
from __future__ import annotations

import math

import numpy as np

from dptop.engine.core.jit import inner, kernel
from dptop.engine.local_dp.entropy import RESERVE, below, bernoulli
from dptop.engine.local_dp.grr import grr_draw

OLH_PRIME = (1 << 31) - 1


def olh_g(epsilon: float) -> int:
    """Hash range g = round(e^ε + 1), at least 2 (§1.2)."""
    return max(2, round(math.exp(epsilon) + 1))


def olh_estimate(support, n: int, p: float, g: int):
    return (np.asarray(support, dtype=np.float64) - n / g) / (p - 1.0 / g)


def olh_variance(n: int, f, p: float, g: int):
    """Var[c~_i] = ((n − f)·(1/g)(1 − 1/g) + f·p(1 − p))/(p − 1/g)²; at g = e^ε + 1 and f = 0
    it is 003's eq. (4), n·4e^ε/(e^ε − 1)²."""
    q = 1.0 / g
    f = np.asarray(f, dtype=np.float64)
    return ((n - f) * q * (1 - q) + f * p * (1 - p)) / (p - q) ** 2


@inner
def olh_hash(a, b, x, g):
    return ((a * x + b) % OLH_PRIME) % g


@kernel
def olh_batch(values, g, A, B, words, pos, out_a, out_b, out_y, start):
    """OLH reports (a, b, y) of ``values[start:]``; returns the index reached."""
    i = start
    while i < len(values) and len(words) - pos[0] >= RESERVE:
        a = 1 + below(words, pos, OLH_PRIME - 1)
        b = below(words, pos, OLH_PRIME)
        out_a[i], out_b[i] = a, b
        out_y[i] = grr_draw(words, pos, olh_hash(a, b, values[i], g), g, A, B)
        i += 1
    return i


@kernel
def olh_support(candidates, a, b, y, g):
    """ĉ_i = #{reports r : H_r(candidate i) = y_r} (O(n·candidates), §1.2)."""
    out = np.zeros(len(candidates), dtype=np.int64)
    for r in range(len(y)):
        for i in range(len(candidates)):
            if olh_hash(a[r], b[r], candidates[i], g) == y[r]:
                out[i] += 1
    return out


def hr_order(d: int) -> int:
    """K = 2^⌈log2(d + 1)⌉ (rows 1..d carry the items)."""
    return 1 << max(1, math.ceil(math.log2(d + 1)))


def hr_estimate(support, n: int, p: float):
    return (np.asarray(support, dtype=np.float64) - n / 2) / (p - 0.5)


def hr_variance(n: int, f, p: float):
    """Derived Var[c~_i] = ((n − f)/4 + f·p(1 − p))/(p − ½)² (§1.3); with p = e^ε/(1+e^ε) this
    is (e^ε+1)²/(e^ε−1)²·(n − f) + 4e^ε·f/(e^ε−1)²."""
    f = np.asarray(f, dtype=np.float64)
    return ((n - f) / 4 + f * p * (1 - p)) / (p - 0.5) ** 2


def hr_variance_eq7(n: int, epsilon: float) -> float:
    """003's eq. (7), n·4(e^ε+1)²/(e^ε−1)²: 4× the derived variance (docs/local-dp.md §1.3, [checked])."""
    e = math.exp(epsilon)
    return n * 4 * (e + 1) ** 2 / (e - 1) ** 2


@inner
def _parity(x):
    x ^= x >> 32
    x ^= x >> 16
    x ^= x >> 8
    x ^= x >> 4
    x ^= x >> 2
    x ^= x >> 1
    return x & 1


@inner
def hr_column(row, j, plus):
    """The j-th column (j < K/2) where Hadamard ``row`` (> 0) is +1 (``plus``) or −1: insert a
    bit at the lowest set bit t of ``row`` into j, then set it to fix the parity."""
    t = row & -row
    low = j & (t - 1)
    c0 = ((j - low) << 1) | low
    odd = _parity(row & c0)
    want = 0 if plus else 1
    return c0 | (t if odd != want else 0)


@kernel
def hr_batch(values, K, A, B, words, pos, out, start):
    """HR reports (one column index in [0, K)) of ``values[start:]``; returns the index reached."""
    i = start
    while i < len(values) and len(words) - pos[0] >= RESERVE:
        plus = bernoulli(words, pos, A, A + B)
        out[i] = hr_column(values[i] + 1, below(words, pos, K // 2), plus)
        i += 1
    return i
