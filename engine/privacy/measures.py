"""Privacy measures as types, with exact conversions and composition (pure functions).

* ``PureDP(ε)``, ``ApproxDP(ε, δ)`` and ``ZCDP(ρ, δ)``: a ρ-zCDP cost keeps the δ at which it is
  stated as (ε, δ); its ε is computed by the tight conversion of Canonne, Kamath and Steinke 2020
  (Prop. 12: δ = inf_{α>1} e^{(α−1)(αρ−ε)}/α · (1−1/α)^{α−1}), not the looser ρ + 2√(ρ ln(1/δ))
  of Bun and Steinke 2016 (Prop. 1.3).
* ``compose``: basic sequential composition (ε and δ add; ρ adds when every term is zCDP).
* ``group``: a cost for neighbours ``m`` steps apart: pure mε; (mε, δ·Σ_{i<m} e^{iε}) for
  (ε, δ) (Vadhan 2017, Lemma 2.2 iterated); m²ρ for zCDP (Bun and Steinke 2016, Prop. 1.9).
* ``calibrate_group``: the per-step (ε', δ') whose group conversion is exactly a target (ε, δ).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

_BISECTIONS = 200


def _check(name: str, value: float, upper: float = math.inf) -> float:
    value = float(value)
    if not (0.0 <= value < upper) or math.isnan(value):
        raise ValueError(f"{name} ({value!r}) must be in [0, {upper:g})")
    return value


@dataclass(frozen=True)
class PureDP:
    """ε-DP."""

    epsilon: float
    label = "pure DP"

    def __post_init__(self):
        _check("epsilon", self.epsilon)

    def approx(self) -> "ApproxDP":
        return ApproxDP(self.epsilon, 0.0)

    @property
    def delta(self) -> float | None:
        return None

    @property
    def rho(self) -> float | None:
        return None


@dataclass(frozen=True)
class ApproxDP:
    """(ε, δ)-DP."""

    epsilon: float
    delta: float
    label = "approximate DP"

    def __post_init__(self):
        _check("epsilon", self.epsilon)
        _check("delta", self.delta, 1.0)

    def approx(self) -> "ApproxDP":
        return self

    @property
    def rho(self) -> float | None:
        return None


@dataclass(frozen=True)
class ZCDP:
    """ρ-zCDP, stated as (ε, δ) at ``delta`` by the tight conversion."""

    rho: float
    delta: float
    label = "zCDP"

    def __post_init__(self):
        _check("rho", self.rho)
        _check("delta", self.delta, 1.0)

    def approx(self) -> ApproxDP:
        return ApproxDP(zcdp_epsilon(self.rho, self.delta), self.delta)

    @property
    def epsilon(self) -> float:
        return zcdp_epsilon(self.rho, self.delta)


Measure = PureDP | ApproxDP | ZCDP


# ---------------------------------------------------------------- zCDP <-> (ε, δ), CKS20 Prop. 12

def _log_delta_at(alpha: float, rho: float, epsilon: float) -> float:
    return (alpha - 1) * (alpha * rho - epsilon) - math.log(alpha) + (alpha - 1) * math.log1p(-1 / alpha)


def zcdp_delta(rho: float, epsilon: float) -> float:
    """The smallest δ with ρ-zCDP ⇒ (ε, δ)-DP by CKS20 Prop. 12. The exponent is convex in α with
    derivative (2α−1)ρ − ε + ln(1 − 1/α), increasing from −∞: its root is found by bisection."""
    rho, epsilon = _check("rho", rho), _check("epsilon", epsilon)
    if rho == 0.0:
        return 0.0
    lo, hi = 1.0, max(2.0, (epsilon + rho) / rho)
    while (2 * hi - 1) * rho - epsilon + math.log1p(-1 / hi) < 0:
        hi *= 2
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if (2 * mid - 1) * rho - epsilon + math.log1p(-1 / mid) < 0:
            lo = mid
        else:
            hi = mid
    return min(1.0, math.exp(_log_delta_at(hi, rho, epsilon)))


def _bisect(predicate, lo: float, hi: float) -> float:
    """The boundary of a monotone ``predicate`` (True at ``lo``, False at ``hi``) to float precision."""
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if predicate(mid) else (lo, mid)
    return lo


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The smallest ε with ρ-zCDP ⇒ (ε, δ)-DP (CKS20 Prop. 12), to float precision."""
    rho, delta = _check("rho", rho), _check("delta", delta, 1.0)
    if rho == 0.0:
        return 0.0
    if delta == 0.0:
        return math.inf
    hi = rho + 2 * math.sqrt(rho * math.log(1 / delta))  # Bun-Steinke: always sufficient
    return _bisect(lambda e: zcdp_delta(rho, e) > delta, 0.0, hi) if zcdp_delta(rho, 0.0) > delta else 0.0


def zcdp_rho(epsilon: float, delta: float) -> float:
    """The largest ρ whose tight conversion gives (ε, δ)-DP (DPSW's calibration, docs/dpsw-sketch.md §1.2)."""
    epsilon, delta = _check("epsilon", epsilon), _check("delta", delta, 1.0)
    if epsilon == 0.0 or delta == 0.0:
        raise ValueError(f"(ε={epsilon:g}, δ={delta:g}): zCDP needs ε > 0 and δ > 0 to state (ε, δ)")
    return _bisect(lambda r: zcdp_delta(r, epsilon) <= delta, 0.0, epsilon)


def bun_steinke_rho(epsilon: float, delta: float) -> float:
    """ρ with ρ + 2√(ρ ln(1/δ)) = ε (Bun and Steinke 2016, Prop. 1.3): the looser calibration."""
    ln = math.log(1.0 / delta)
    return epsilon * epsilon / (math.sqrt(epsilon + ln) + math.sqrt(ln)) ** 2


# ---------------------------------------------------------------- composition and group privacy

def compose(costs) -> Measure:
    """Basic sequential composition on the same data: pure terms add to pure; zCDP terms add ρ
    (and their δ); anything else adds (ε, δ)."""
    costs = list(costs)
    if not costs:
        return PureDP(0.0)
    if all(isinstance(c, PureDP) for c in costs):
        return PureDP(math.fsum(c.epsilon for c in costs))
    if all(isinstance(c, ZCDP) for c in costs):
        return ZCDP(math.fsum(c.rho for c in costs), min(math.fsum(c.delta for c in costs), _BELOW_ONE))
    approx = [c.approx() for c in costs]
    return ApproxDP(math.fsum(c.epsilon for c in approx), min(math.fsum(c.delta for c in approx), _BELOW_ONE))


_BELOW_ONE = 1.0 - 1e-16


def group(cost: Measure, size: int) -> Measure:
    """``cost`` for neighbours ``size`` steps apart (see the module docstring)."""
    m = int(size)
    if m < 1:
        raise ValueError(f"group size ({size!r}) must be >= 1")
    if m == 1:
        return cost
    if isinstance(cost, PureDP):
        return PureDP(m * cost.epsilon)
    if isinstance(cost, ZCDP):
        return ZCDP(m * m * cost.rho, cost.delta)
    e, d = cost.epsilon, cost.delta
    growth = m if e == 0 else math.expm1(m * e) / math.expm1(e)
    return ApproxDP(m * e, min(d * growth, _BELOW_ONE))


def calibrate_group(target: Measure, size: int) -> Measure:
    """The per-step cost whose ``group(·, size)`` is ``target``: ε/m, and δ·(e^ε' − 1)/(e^{mε'} − 1)."""
    m = int(size)
    if m < 1:
        raise ValueError(f"group size ({size!r}) must be >= 1")
    if m == 1:
        return target
    if isinstance(target, PureDP):
        return PureDP(target.epsilon / m)
    if isinstance(target, ZCDP):
        return ZCDP(target.rho / (m * m), target.delta)
    e = target.epsilon / m
    growth = m if e == 0 else math.expm1(m * e) / math.expm1(e)
    return ApproxDP(e, target.delta / growth)


def within(cost: Measure, budget: Measure, slack: float = 1e-9) -> bool:
    """True if ``cost`` does not exceed ``budget`` as (ε, δ) (relative float slack)."""
    a, b = cost.approx(), budget.approx()
    return a.epsilon <= b.epsilon * (1 + slack) and a.delta <= b.delta * (1 + slack)


def render(cost: Measure, equals: str = "=") -> list[str]:
    """``["ε=1", "δ=1e-06", "ρ=0.0244"]`` for the parameters ``cost`` has."""
    out = [f"ε{equals}{cost.epsilon:.6g}"]
    if cost.delta is not None:
        out.append(f"δ{equals}{cost.delta:.3g}")
    if cost.rho is not None:
        out.append(f"ρ{equals}{cost.rho:.4g}")
    return out
