"""Privacy maps as pure functions: parameters -> cost (OpenDP style; HOUSE_STYLE.md).

Everything here is arithmetic on public parameters, with explicit edge cases and exact-value tests
(tests/test_accounting.py). The budget of a release is fixed from these functions **before** any
noise is drawn; asking for more than the configured total raises.

* ``Cost``, ``compose_sequential``, ``zcdp_to_approx_dp``, ``group_privacy``: generic maps.
* ``split_length_budget``, ``length_slack``, ``length_composed_cost``: the noisy stream length
  ñ of dpss-eehh.md §4.5 (thresholds never use the exact n, pitfall P3).
* ``dpss_gamma``, ``dpss_threshold``, ``dpss_min_packets``: DPSS release (§4.4–§4.8).
* ``dpmg_threshold_discrete``: DP Misra-Gries Mode A with geometric noise (dp-misra-gries.md §5.3).
* ``eehh_run_delta``, ``cms_depth``, ``cs_depth``, ``sketch_psi``, ``cms_threshold``,
  ``cs_threshold``: error-envelope heavy hitters (dpss-eehh.md §6.2–§6.4).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from engine.settings import check_delta, check_epsilon, check_positive_int

LENGTH_SHARE = 0.1
"""Share of ε and δ spent on the noisy stream length ñ (dpss-eehh.md §4.5 default split)."""


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


def zcdp_to_approx_dp(rho: float, delta: float) -> Cost:
    """ρ-zCDP implies (ρ + 2·sqrt(ρ·ln(1/δ)), δ)-DP (Bun and Steinke 2016, Prop. 1.3)."""
    if not (rho >= 0 and math.isfinite(rho)):
        raise ValueError(f"rho ({rho!r}) must be >= 0 and finite")
    delta = check_delta(delta)
    return Cost(rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)), delta, rho)


def group_privacy(cost: Cost, size: int) -> Cost:
    """(ε, δ) for neighbours ``size`` add/remove steps apart: (mε, m·e^((m−1)ε)·δ)
    (dp-misra-gries.md §1.4 uses the looser m·e^(mε)·δ; this is the standard exact form)."""
    m = check_positive_int("group size", size)
    return Cost(m * cost.epsilon, min(m * math.exp((m - 1) * cost.epsilon) * cost.delta, 1 - 1e-16))


def split_length_budget(epsilon: float, delta: float) -> tuple[float, float, float, float]:
    """Total (ε, δ) -> (ε_A, δ_A, ε_n, δ_n) with ε_n = 0.1ε, δ_n = 0.1δ and
    δ_A = (δ − δ_n)/e^(ε_n), so that ``length_composed_cost`` gives back (ε, δ) (§4.5)."""
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    eps_n, delta_n = LENGTH_SHARE * epsilon, LENGTH_SHARE * delta
    return epsilon - eps_n, (delta - delta_n) / math.exp(eps_n), eps_n, delta_n


def length_slack(eps_n: float, delta_n: float) -> int:
    """s_n = ⌈ln(1/((1 + α_n)·δ_n))/ε_n⌉, α_n = e^(−ε_n): Pr[Z_n <= −s_n] <= δ_n (§4.5 step 2)."""
    eps_n, delta_n = check_epsilon(eps_n), check_delta(delta_n)
    alpha = math.exp(-eps_n)
    return max(0, math.ceil(math.log(1.0 / ((1.0 + alpha) * delta_n)) / eps_n))


def length_composed_cost(eps_a: float, delta_a: float, eps_n: float, delta_n: float) -> Cost:
    """A release whose threshold uses ñ: (ε_A + ε_n, e^(ε_n)·δ_A + δ_n) (dpss-eehh.md §4.5)."""
    return Cost(eps_a + eps_n, math.exp(eps_n) * delta_a + delta_n)


def dpss_gamma(eps_a: float, delta_a: float) -> float:
    """γ = 1 + ln(2/δ_A)/ε_A for discrete Laplace with strict accounting (dpss-eehh.md §4.4)."""
    eps_a, delta_a = check_epsilon(eps_a), check_delta(delta_a)
    return 1.0 + math.log(2.0 / delta_a) / eps_a


def check_k_tilde(k: int, k_tilde: int) -> tuple[int, int]:
    """k >= 1 and k~ > k (dpss-eehh.md §4.6 step 1)."""
    k = check_positive_int("k", k)
    k_tilde = check_positive_int("k~", k_tilde)
    if not k_tilde > k:
        raise ValueError(f"k~ ({k_tilde}) must be > k ({k})")
    return k, k_tilde


def dpss_threshold(n_noisy: int, n_hi: int, k: int, k_tilde: int, gamma: float) -> float:
    """τ = max(ñ/k − γ, n_hi/k~ + 1 + γ) (dpss-eehh.md §4.6 step 4)."""
    return max(n_noisy / k - gamma, n_hi / k_tilde + 1.0 + gamma)


def dpss_k_tilde_for(n_min: int, k: int, gamma: float, slack: int | None = None) -> int:
    """Smallest k~ for which the admission term binds on an epoch of ``n_min`` packets
    (dpss-eehh.md §4.8): k~ >= n/(n/k − 1 − 2γ), or (n + s_n + 1)/(n/k − 1 − 2γ) with the
    noisy-length slack s_n. Needs n/k > 1 + 2γ."""
    n_min, k = check_positive_int("n_min", n_min), check_positive_int("k", k)
    room = n_min / k - 1.0 - 2.0 * gamma
    if not room > 0:
        raise ValueError(f"n_min ({n_min}) must exceed k·(1 + 2γ) = {k * (1 + 2 * gamma):.6g} for any k~ to work")
    top = n_min if slack is None else n_min + slack + 1
    return math.ceil(top / room)


def dpss_min_packets(k: int, k_tilde: int, gamma: float, slack: int) -> int:
    """Smallest n at which a single source holding all n packets clears τ with zero noise
    (ñ = n, n_hi = n + s_n + 1): below it nothing can pass except by noise (GUI hint)."""
    n = math.ceil(((slack + 1) / k_tilde + 1.0 + gamma) / (1.0 - 1.0 / k_tilde))
    while n <= dpss_threshold(n, n + slack + 1, k, k_tilde, gamma):
        n += 1
    return n


def dpmg_threshold_discrete(epsilon: float, delta: float) -> int:
    """Mode A with geometric noise: τ = 1 + 2·⌈ln(6e^ε/((e^ε + 1)δ))/ε⌉ (dp-misra-gries.md §5.3);
    keep when the noisy count is >= τ."""
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    e = math.exp(epsilon)
    return 1 + 2 * math.ceil(math.log(6.0 * e / ((e + 1.0) * delta)) / epsilon)


def eehh_run_delta(eps_s: float, delta_s: float) -> float:
    """δ_run = δ_S/(1 + e^(ε_S)): per-run failure budget with strict accounting (§6.3)."""
    return check_delta(delta_s) / (1.0 + math.exp(check_epsilon(eps_s)))


def _check_t_max(t_max: int) -> int:
    return check_positive_int("t_max", t_max)


def cms_depth(t_max: int, k_tilde: int, delta_run: float) -> int:
    """d = ⌈log2(2(T_max + k~)/δ_run)⌉ rows for width >= 2k~ (dpss-eehh.md §6.3, D8)."""
    return math.ceil(math.log2(2.0 * (_check_t_max(t_max) + k_tilde) / delta_run))


def cs_depth(t_max: int, k_tilde: int, delta_run: float) -> int:
    """Odd d >= ln(2(T_max + k~)/δ_run)/0.7255 rows (dpss-eehh.md §6.4 step 1)."""
    d = math.ceil(math.log(2.0 * (_check_t_max(t_max) + k_tilde) / delta_run) / 0.7255)
    return d if d % 2 == 1 else d + 1


def sketch_scale(depth: int, eps_s: float) -> float:
    """Cell noise scale b = 2d/ε_S (ℓ1 sensitivity 2d covers replace-one too; §6.3)."""
    return 2.0 * depth / check_epsilon(eps_s)


def sketch_psi(scale: float, depth: int, width: int, delta_run: float) -> float:
    """ψ with d·w·Pr[|Z| > ψ] <= δ_run/2 for discrete Laplace of scale b (§6.3 "Noise"):
    Pr[|Z| > ψ] <= (2/(1 + α))·e^(−ψ/b), so ψ = b·ln(2dw·(2/(1 + α))/δ_run)."""
    alpha = math.exp(-1.0 / scale)
    return scale * math.log(2.0 * depth * width * (2.0 / (1.0 + alpha)) / delta_run)


def cms_threshold(n_noisy: int, n_hi: int, k: int, k_tilde: int, width: int, psi: float) -> float:
    """τ = max(ñ/k, n_hi/k~ + 2γ1(n_hi) + ψ + 1) with γ1(t) = 2t/w + ψ (§6.2, §6.3)."""
    gamma1 = 2.0 * n_hi / width + psi
    return max(n_noisy / k, n_hi / k_tilde + 2.0 * gamma1 + psi + 1.0)


def cs_threshold(n_noisy: int, n_hi: int, k: int, k_tilde: int, width: int, psi: float,
                 f2_up: float) -> float:
    """τ = max(ñ/k, n_hi/k~ + 3(E_cs + ψ) + 1), E_cs = 4·sqrt(F2_up/w) (§6.4 steps 2 and 4)."""
    e_cs = 4.0 * math.sqrt(max(f2_up, 0.0) / width)
    return max(n_noisy / k, n_hi / k_tilde + 3.0 * (e_cs + psi) + 1.0)


class Budget:
    """A budget ledger: ``spend`` raises before any noise is drawn if the total would be exceeded.

    Single-release mechanisms own one ``Budget`` per instance (per epoch) sized to the configured
    (ε, δ), so a second release from the same instance is refused (dpss-eehh.md P4, P5).
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
