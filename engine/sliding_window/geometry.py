"""DPSW-Sketch's privacy map and geometry (docs/dpsw-sketch.md §3, §4.1), as pure functions of public
parameters: (ε, δ) -> ρ, the checkpoint list I, the per-sketch budgets ρ_j and widths, and the query
plans that say which frozen sketches answer a window. The sketch itself is ``dpsw.DPSWSketch``."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from dptop.engine.core.settings import check_delta, check_epsilon, check_positive_int
from dptop.engine.privacy.measures import zcdp_rho

WHOLE, PREFIX, SUFFIX = 0, 1, 2
MIN_WIDTH = 64
PLANS = ("004", "noise-aware")
ESTIMATORS = ("min", "sum-min")


# ---------------------------------------------------------------- privacy maps (pure functions)

def rho_from_epsilon_delta(epsilon: float, delta: float) -> float:
    """The largest ρ whose ρ-zCDP implies (ε, δ)-DP by the tight conversion of Canonne, Kamath and
    Steinke 2020 (``measures.zcdp_rho``; §1.2 states the looser ρ + 2√(ρ ln(1/δ)) = ε, which at
    (ε = 1, δ = 1e-6) allows ρ = 0.0175 instead of 0.0244)."""
    return zcdp_rho(check_epsilon(epsilon), check_delta(delta))


def as_alpha(alpha) -> Fraction:
    """α as an exact rational in (0, 1): floats go through their shortest decimal (0.95 -> 19/20)."""
    try:
        value = Fraction(str(alpha)) if isinstance(alpha, float) else Fraction(alpha)
    except (ValueError, TypeError, ZeroDivisionError):
        raise ValueError(f"alpha ({alpha!r}) must be a number in (0, 1), e.g. 0.75 or '3/4'") from None
    if not 0 < value < 1:
        raise ValueError(f"alpha ({alpha!r}) must be in (0, 1)")
    return value


def checkpoints(length: int, alpha) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(I, I')`` of §3.2 (closed form, exact arithmetic): ``I[0] = L``, ``I[k+1] = ⌈(1−α)I[k]⌉``
    (or ``I[k] − 1``) down to 1; ``I'[j] = L − I[j] + 1`` is the 1-based start of suffix ``j``."""
    length = check_positive_int("substream length L", length)
    alpha = as_alpha(alpha)
    keep_num, den = alpha.denominator - alpha.numerator, alpha.denominator
    out = [length]
    while out[-1] > 1:
        x = out[-1]
        y = -((-x * keep_num) // den)
        out.append(min(y, x - 1))
    return tuple(out), tuple(length - v + 1 for v in out)


def budgets(rho: float, alpha, m: int) -> tuple[float, ...]:
    """Per-PCMS budgets of §3.4: ``ρ_1 = ρα(2−α)``, ``ρ_j = ρα^(j−2)(1−α)³/2`` (index 0 is ``ρ_1``)."""
    a = float(as_alpha(alpha))
    return (rho * a * (2 - a),) + tuple(rho * a ** (j - 2) * (1 - a) ** 3 / 2 for j in range(2, m + 1))


def position_costs(I, Ip, rhos) -> np.ndarray:
    """``cost(p)`` of §3.4 for p = 1..L: the budget of every PCMS that contains position p."""
    L = I[0]
    p = np.arange(1, L + 1)
    cost = np.full(L, rhos[0])
    for q in range(1, len(I)):
        cost += rhos[q] * (p <= I[q]) + rhos[q] * (p >= Ip[q])
    return cost


def sketch_widths(width: int, I) -> tuple[int, ...]:
    """``b_j``: power of two >= ``b·I[j]/L``, clipped to ``[min(64, b), b]`` (module docstring)."""
    L = I[0]
    out = []
    for n in I:
        need = -(-width * n // L)
        out.append(max(min(MIN_WIDTH, width), min(width, 1 << max(0, need - 1).bit_length())))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def expected_max_normal(a: int) -> float:
    """``c_a = E[max of a iid N(0,1)]`` (so a min over ``a`` noisy cells is biased by ``−c_a·σ``, §4.2)."""
    if a == 1:
        return 0.0
    x = np.linspace(-12.0, 12.0, 48001)
    cdf = np.array([0.5 * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x])
    # E[max] = ∫ (1 − F^a) dx over x > 0 − ∫ F^a dx over x < 0
    integrand = np.where(x >= 0, 1.0 - cdf ** a, -(cdf ** a))
    return float(np.sum((integrand[1:] + integrand[:-1]) * 0.5) * (x[1] - x[0]))


# ---------------------------------------------------------------- geometry and query plans (§4.1)

class PlanEntry(NamedTuple):
    kind: int  # WHOLE, PREFIX or SUFFIX
    k: int  # 1-based substream index
    q: int  # 0-based index into I (q = 0 is the whole substream)


class Plan(NamedTuple):
    t: int
    entries: tuple[PlanEntry, ...]
    covered: tuple[int, int]  # 1-based global positions [start, end] the plan counts (public)


@dataclass(frozen=True)
class Geometry:
    """The public structure (§3): window ``w``, substream length ``L``, ``α``, ``I``, ``I'``, ``K`` slots."""

    w: int
    L: int
    alpha: Fraction
    I: tuple[int, ...]
    Ip: tuple[int, ...]

    @classmethod
    def make(cls, w: int, L: int, alpha) -> "Geometry":
        w = check_positive_int("window", w, minimum=2)
        L = check_positive_int("substream length L", L)
        if L > w:
            raise ValueError(f"substream length L ({L}) must be <= window ({w})")
        I, Ip = checkpoints(L, alpha)
        return cls(w, L, as_alpha(alpha), I, Ip)

    @property
    def m(self) -> int:
        return len(self.I)

    @property
    def K(self) -> int:
        """Ring slots: ``⌈w/L⌉ + 1`` retained substreams (§11)."""
        return -(-self.w // self.L) + 1

    def substream_start(self, k: int) -> int:
        return (k - 1) * self.L + 1

    def entry_range(self, e: PlanEntry) -> tuple[int, int]:
        """Global positions ``[start, end]`` of a PCMS (§3.3)."""
        s = self.substream_start(e.k)
        if e.kind == PREFIX:
            return s, s + self.I[e.q] - 1
        if e.kind == SUFFIX:
            return s + self.Ip[e.q] - 1, s + self.L - 1
        return s, s + self.L - 1

    def plan(self, t: int, rule: str = "004", sigma=None, gamma: float = 0.0) -> Plan:
        """PLAN(t) of §4.1 (``rule="004"``) or the noise-aware choice of §4.4 (i), which for each
        partial substream picks the option minimising ``γ·|misaligned items| + σ_option`` (option
        "nothing" included); both depend only on ``t`` and public parameters."""
        if t <= 0:
            return Plan(t, (), (1, 0))
        w, L, I, Ip = self.w, self.L, self.I, self.Ip
        s = max(t - w + 1, 1)
        l, lo = -(-t // L), -(-s // L)
        c = t - (l - 1) * L
        S_l = self.substream_start(l)
        if rule == "004":
            y = next(q for q in range(self.m) if I[q] <= c)
            new = PlanEntry(WHOLE if y == 0 else PREFIX, l, y)
            end = S_l + I[y] - 1
        else:
            options = [(gamma * c, None, S_l - 1)]
            options += [(gamma * (c - I[q]) + sigma[q], PlanEntry(WHOLE if q == 0 else PREFIX, l, q), S_l + I[q] - 1)
                        for q in range(self.m) if I[q] <= c]
            _, new, end = min(options, key=lambda o: o[0])
        tail = (new,) if new is not None else ()
        if lo == l:
            return Plan(t, tail, (S_l, end))
        qs = s - (lo - 1) * L  # window start inside substream l'
        S_o = self.substream_start(lo)
        if rule == "004":
            x = max(q for q in range(self.m) if Ip[q] <= qs)
            old, start = PlanEntry(WHOLE if x == 0 else SUFFIX, lo, x), S_o + Ip[x] - 1
        else:
            options = [(gamma * (L - qs + 1), None, S_o + L)]
            options += [(gamma * abs(qs - Ip[q]) + sigma[q], PlanEntry(WHOLE if q == 0 else SUFFIX, lo, q),
                         S_o + Ip[q] - 1) for q in range(self.m)]
            _, old, start = min(options, key=lambda o: o[0])
        head = (old,) if old is not None else ()
        middle = tuple(PlanEntry(WHOLE, k, 0) for k in range(lo + 1, l))
        return Plan(t, head + middle + tail, (start, end))
