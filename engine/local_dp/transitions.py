"""Exact transition matrices of the agents' mechanisms (test L1) and the max-ratio check.

Each matrix is built with ``Fraction``s from the **same integer weights** the samplers use
(``rr_weights``), so a check of max_y max_{v,v'} P[y|v]/P[y|v'] <= e^ε is a check of what the
agents actually do (L2 then tests the samplers against these rows). Rows are inputs, columns
outputs. Outputs of the split mechanism are (hot, j) for j < h, then (cold, c) for each cold c.

Broken variants, which the check must reject (L1's negative controls):

* ``grr_matrix(..., round_up=True)``: weights with A/B rounded *up* past e^ε;
* ``dsr_shrunk_matrix(..., leak_cold=True)``: a non-hot item reported as itself instead of ⊥;
* ``bdr_matrix(..., grr_for_cold=True)``: M_hot applies GRR to a non-hot input (keeping it
  with GRR's p over H ∪ {v}) instead of drawing a uniform hot element;
* ``bucketed_matrix``: w > 1 buckets with per-bucket domains, so a report reveals the bucket.
"""
from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

from dptop.engine.local_dp.grr import rr_weights


def weights(epsilon: float, d: int, round_up: bool = False) -> tuple[int, int]:
    A, B = rr_weights(epsilon, d)
    return (A + max(1, B // 1000), B) if round_up else (A, B)


def grr_rows(A: int, B: int, d: int) -> list[list[Fraction]]:
    m = A + (d - 1) * B
    return [[Fraction(A if y == v else B, m) for y in range(d)] for v in range(d)]


def grr_matrix(epsilon: float, d: int, round_up: bool = False) -> list[list[Fraction]]:
    return grr_rows(*weights(epsilon, d, round_up), d)


def dsr_shrunk_matrix(epsilon: float, d: int, hot: list[int], leak_cold: bool = False) -> list[list[Fraction]]:
    """Inputs Ω = [0, d); outputs: hot index j < λ, ⊥ = λ, and (leak_cold) cold items λ+1+v."""
    lam = len(hot)
    inner = grr_matrix(epsilon, lam + 1)
    rows = []
    for v in range(d):
        s = hot.index(v) if v in hot else lam
        row = list(inner[s]) + [Fraction(0)] * (d if leak_cold else 0)
        if leak_cold and v not in hot:
            row = [Fraction(0)] * (lam + 1) + [Fraction(int(c == v)) for c in range(d)]
        rows.append(row)
    return rows


def bdr_matrix(eps1: float, eps2: float, d: int, hot: list[int], grr_for_cold: bool = False) -> list[list[Fraction]]:
    """003 Thm 4.1's client over Ω = [0, d) with hot set ``hot`` (h >= 2, d − h >= 2)."""
    h = len(hot)
    cold = [c for c in range(d) if c not in hot]
    judge = grr_matrix(eps1, 2)
    m_hot, m_cold = grr_matrix(eps2, h), grr_matrix(eps2, len(cold))
    leak = grr_matrix(eps2, h + 1)  # broken: GRR over H ∪ {v} for a cold v
    rows = []
    for v in range(d):
        is_hot = v in hot
        p_hot = judge[0][0] if is_hot else judge[0][1]  # flag "hot" with p1 if v is hot, q1 otherwise
        hot_part = [p_hot * (m_hot[hot.index(v)][j] if is_hot else Fraction(1, h)) for j in range(h)]
        cold_part = [(1 - p_hot) * (Fraction(1, len(cold)) if is_hot else m_cold[cold.index(v)][i])
                     for i in range(len(cold))]
        extra = [Fraction(0)] * (len(cold) if grr_for_cold else 0)
        if grr_for_cold and not is_hot:
            hot_part = [p_hot * leak[h][j] for j in range(h)]
            extra[cold.index(v)] = p_hot * leak[h][h]
        rows.append(hot_part + cold_part + extra)
    return rows


def bucketed_matrix(blocks: list[list[list[Fraction]]]) -> list[list[Fraction]]:
    """w buckets, each randomizing within its own domain: the output names the bucket, so the
    matrix is block diagonal over (bucket, output)."""
    width = sum(len(b[0]) for b in blocks)
    rows, offset = [], 0
    for b in blocks:
        for row in b:
            rows.append([Fraction(0)] * offset + list(row) + [Fraction(0)] * (width - offset - len(row)))
        offset += len(b[0])
    return rows


def max_ratio(rows: list[list[Fraction]]) -> Fraction | float:
    """max over outputs y and inputs v, v' of P[y|v]/P[y|v'] (inf when an output some input can
    produce is impossible for another); rows must each sum to 1."""
    for r in rows:
        if sum(r) != 1:
            raise ValueError("a row of the transition matrix does not sum to 1")
    worst: Fraction | float = Fraction(1)
    for y in range(len(rows[0])):
        col = [r[y] for r in rows]
        hi, lo = max(col), min(col)
        if hi == 0:
            continue
        if lo == 0:
            return math.inf
        worst = max(worst, hi / lo)
    return worst


def within(rows: list[list[Fraction]], epsilon: float) -> bool:
    """The ε-LDP check of L1: max ratio <= e^ε, compared in 40-digit decimal arithmetic."""
    ratio = max_ratio(rows)
    if ratio == math.inf:
        return False
    with localcontext() as ctx:
        ctx.prec = 40
        return Decimal(ratio.numerator) / Decimal(ratio.denominator) <= Decimal(epsilon).exp()
