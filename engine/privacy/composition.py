"""Generic privacy composition as pure functions: parameters -> cost (OpenDP style).

``Cost`` is a mechanism's internal (ε, δ) pair; ``compose_sequential`` adds costs on the same
packets, and ``Budget`` refuses to spend past its total **before** any noise is drawn. Typed
measures, conversions between measures and units, and group privacy are in ``measures`` and
``units``; each mechanism's own map (thresholds, noise scales) lives beside the mechanism.
"""
from __future__ import annotations

import math
from dataclasses import dataclass



@dataclass(frozen=True)
class Cost:
    """A privacy cost: (ε, δ)-DP, optionally with the ρ-zCDP it came from."""

    epsilon: float
    delta: float = 0.0
    rho: float | None = None

    def __post_init__(self):
        if not (self.epsilon >= 0 and math.isfinite(self.epsilon)):
            raise ValueError(f"epsilon ({self.epsilon!r}) must be >= 0 and finite")
        if not 0.0 <= self.delta < 1.0:
            raise ValueError(f"delta ({self.delta!r}) must be in [0, 1)")
        if self.rho is not None and not (self.rho >= 0 and math.isfinite(self.rho)):
            raise ValueError(f"rho ({self.rho!r}) must be >= 0 and finite")

    def within(self, budget: "Cost", slack: float = 1e-12) -> bool:
        """True if this cost does not exceed ``budget`` (relative float slack ``slack``)."""
        return (self.epsilon <= budget.epsilon * (1 + slack)
                and self.delta <= budget.delta * (1 + slack))


def compose_sequential(costs) -> Cost:
    """Basic composition: ε and δ add up; ρ adds up when every term has one."""
    costs = list(costs)
    if not costs:
        return Cost(0.0, 0.0, 0.0)
    rhos = [c.rho for c in costs]
    rho = None if any(r is None for r in rhos) else math.fsum(rhos)
    return Cost(math.fsum(c.epsilon for c in costs), math.fsum(c.delta for c in costs), rho)


class Budget:
    """A budget ledger: ``spend`` raises before any noise is drawn if the total would be exceeded.

    Single-release mechanisms own one ``Budget`` per instance (per epoch) sized to the configured
    (ε, δ), so a second release from the same instance is refused (docs/dpss-eehh.md P4, P5).
    """

    def __init__(self, total: Cost):
        self.total = total
        self.spent: list[Cost] = []

    def spent_total(self) -> Cost:
        return compose_sequential(self.spent)

    def spend(self, cost: Cost) -> None:
        after = compose_sequential([*self.spent, cost])
        if not after.within(self.total):
            raise RuntimeError(
                f"privacy budget exceeded: spending (ε={cost.epsilon:g}, δ={cost.delta:g}) would bring the "
                f"total to (ε={after.epsilon:g}, δ={after.delta:g}) > budget (ε={self.total.epsilon:g}, "
                f"δ={self.total.delta:g})")
        self.spent.append(cost)
