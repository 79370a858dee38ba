"""DP SpaceSaving (DPSS): SpaceSaving with k~ counters, released once per epoch (docs/dpss-eehh.md §4).

The summary is ``dptop.engine.baselines.spacesaving`` (the paper's tie rule, §2–§3). The release is docs/dpss-eehh.md's
recommended procedure (§4.6):

1. the budget (ε, δ) is split into (ε_A, δ_A) for the counters and (ε_n, δ_n) for the stream
   length (§4.5 default split, ``accounting.split_length_budget``);
2. γ = 1 + ln(2/δ_A)/ε_A (discrete noise, strict accounting, §4.4);
3. ñ = n + DLap(ε_n), n_hi = ñ + s_n + 1 — the threshold never sees the exact n (P3);
4. τ = max(ñ/k − m, n_hi/k~ + 1 + γ), with the recall margin m <= γ (``dpss_recall_margin``):
   every item with f >= n/k is released with probability >= 1 − β together (β = 0.05); 000's −γ
   buys that at β = δ and admits more items just below n/k. The admission term only affects
   utility (§4.1), so m is free;
5. every tracked counter gets fresh discrete Laplace noise (α = e^(−ε_A)); a label is released
   iff its noisy count is > τ (strict). Noise is drawn in key order, so the output is a function
   of (T, C) and the noise only, never of slot order (T11, P12).

The release is (ε_A + ε_n, e^(ε_n)·δ_A + δ_n) = (ε, δ)-DP under add/remove of one packet.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from dptop.engine.single_release.length import check_k_tilde, length_composed_cost, length_slack, split_length_budget
from dptop.engine.single_release.epochs import Epoched
from dptop.engine.core.registry import register
from dptop.engine.core.release import sorted_items
from dptop.engine.core.settings import PACKETS, check_delta, check_epsilon, check_positive_int
from dptop.engine.baselines.spacesaving import make_state, snapshot, state_bytes, update_batch
from dptop.engine.baselines.summary import counters
from dptop.engine.core.base import Footprint
from dptop.engine.core.facts import NO_FACTS
from dptop.engine.core.status import EpochStatus, ReleaseStatus

RECALL_BETA = 0.05
"""Admission: all items with f >= n/k are released together with probability >= 1 − β
(``--param recall_beta``: larger trades recall for precision just below n/k)."""


def check_beta(beta) -> float:
    beta = float(beta)
    if not 0.0 < beta < 1.0:
        raise ValueError(f"recall_beta ({beta:g}) must be in (0, 1)")
    return beta


def by_key(keys: np.ndarray) -> np.ndarray:
    """Row order of ``keys`` sorted by (hi, lo): a data-independent order for drawing noise."""
    return np.lexsort((keys[:, 1], keys[:, 0]))


@dataclass(frozen=True, kw_only=True)
class DPSSStatus(EpochStatus):
    """The open epoch, and ``min_packets``: the epoch length below which no source can pass τ even
    without noise (from the parameters alone)."""

    min_packets: int


@dataclass(frozen=True, kw_only=True)
class DPSSFigures(ReleaseStatus):
    """What one DPSS release states beside its items: the noisy epoch length ñ, γ, the length
    slack, k and k~ (all public)."""

    noisy_length: int
    gamma: float
    length_slack: int
    k: int
    k_tilde: int


@register
class DPSpaceSaving(Epoched):
    """DPSS [000 Alg 3] with the corrections of docs/dpss-eehh.md: discrete noise, strict δ, noisy length."""

    name = "dpss"
    parameters = ("recall_beta",)

    def __init__(self, settings, facts=NO_FACTS, counting=PACKETS):
        self.k, self.k_tilde = check_k_tilde(settings.k, counters(settings))
        self.epsilon, self.delta = check_epsilon(settings.epsilon), check_delta(settings.delta)
        self.eps_a, self.delta_a, self.eps_n, self.delta_n = split_length_budget(self.epsilon, self.delta)
        self.gamma = dpss_gamma(self.eps_a, self.delta_a)
        self.recall_beta = check_beta(settings.extra.get("recall_beta", RECALL_BETA))
        self.margin = min(self.gamma, dpss_recall_margin(self.k, self.eps_a, self.eps_n, self.recall_beta))
        self.slack = length_slack(self.eps_n, self.delta_n)
        self.min_packets = dpss_min_packets(self.k, self.k_tilde, self.gamma, self.slack)
        super().__init__(settings, facts, counting)

    def cost(self):
        return length_composed_cost(self.eps_a, self.delta_a, self.eps_n, self.delta_n)

    def threshold(self, n_noisy: int) -> float:
        """τ for a released noisy length ñ (public: a function of ñ and the parameters)."""
        return dpss_threshold(n_noisy, n_noisy + self.slack + 1, self.k, self.k_tilde, self.gamma, self.margin)

    def notes(self):
        return (f"DPSS (docs/dpss-eehh.md §4.6): k={self.k}, k~={self.k_tilde}, discrete Laplace on every "
                f"tracked counter (ε_A={self.eps_a:.4g}), γ={self.gamma:.4g}, τ = max(ñ/k − m, "
                f"n_hi/k~ + 1 + γ) with noisy length ñ (ε_n={self.eps_n:.4g}, δ_n={self.delta_n:.3g}, "
                f"slack s_n={self.slack}), recall margin m={self.margin:.4g} (β={self.recall_beta:g})",)

    def epoch_status(self, **epoch):
        return DPSSStatus(**epoch, min_packets=self.min_packets)

    def limit(self, n):
        """SpaceSaving never underestimates; the release needs c + DLap(ε_A) > τ(ñ) with
        ñ = n + DLap(ε_n): each noise stays above its 5 % quantile, -ln(20)/ε, w.p. >= 0.95.
        Error: SpaceSaving's overestimate <= n/k~ plus the noise's mean magnitude."""
        q_a, q_n = math.log(20) / self.eps_a, math.log(20) / self.eps_n
        count = math.ceil(self.threshold(n + math.ceil(q_n)) + q_a) + 1
        return count, n / self.k_tilde + 1.0 / self.eps_a

    def detectable(self):
        """``Epoched.detectable`` plus ``why``: which term of τ sets the limit (a limit that rises
        with ε reads as a bug without it)."""
        limit = super().detectable()
        if limit is None or limit.count is None:
            return limit
        n = round(limit.count / limit.share)
        lead = "ñ/k − γ" if n / self.k - self.gamma >= n / self.k_tilde + 1 + self.gamma else "ñ/k~ + 1 + γ"
        return replace(limit, why=(f"τ = max(ñ/k − γ, ñ/k~ + 1 + γ), here {lead} leads: a source must hold about "
                                 f"1/k = {1 / self.k:.2%} of the epoch (the top-k rule), less the noise margin "
                                 f"γ = {self.gamma:.3g}; a larger ε shrinks γ, so the limit rises toward n/k"))

    def _new_state(self):
        return make_state(self.k_tilde)

    @classmethod
    def footprint(cls, settings, facts=NO_FACTS, counting=PACKETS):
        """One SpaceSaving summary of k~ counters (the open epoch's)."""
        return Footprint(state_bytes(counters(settings)), f"k~ = {counters(settings)}")

    def _feed(self, state, keys):
        update_batch(state, keys)

    def _publish(self, state):
        if state is None:
            keys, counts, n = np.zeros((0, 2), np.uint64), np.zeros(0, np.int64), 0
        else:
            keys, counts, n = snapshot(state)
        n_noisy = n + self.length_noise()  # ñ = n + DLap(ε_n) (§4.5 step 1)
        tau = self.threshold(n_noisy)
        order = by_key(keys)  # noise drawn in key order (P7)
        vals = counts[order] + self.noise.dlap_array(self.eps_a, len(order))
        keep = vals > tau
        keys = keys[order][keep]
        status = DPSSFigures(noisy_length=n_noisy, gamma=self.gamma, length_slack=self.slack, k=self.k,
                             k_tilde=self.k_tilde)
        return sorted_items(keys[:, 0], keys[:, 1], vals[keep]), tau, n_noisy, status


# --- DPSS privacy map (docs/dpss-eehh.md §4.4–§4.8): pure functions of public parameters.

def dpss_gamma(eps_a: float, delta_a: float) -> float:
    """γ = 1 + ln(2/δ_A)/ε_A for discrete Laplace with strict accounting (docs/dpss-eehh.md §4.4)."""
    eps_a, delta_a = check_epsilon(eps_a), check_delta(delta_a)
    return 1.0 + math.log(2.0 / delta_a) / eps_a


def dpss_threshold(n_noisy: int, n_hi: int, k: int, k_tilde: int, gamma: float, margin: float | None = None) -> float:
    """τ = max(ñ/k − m, n_hi/k~ + 1 + γ) (docs/dpss-eehh.md §4.6 step 4; m = γ unless given)."""
    return max(n_noisy / k - (gamma if margin is None else margin), n_hi / k_tilde + 1.0 + gamma)


def dpss_recall_margin(k: int, eps_a: float, eps_n: float, beta: float = RECALL_BETA) -> float:
    """m = m_A + m_n such that every item with f >= n/k (at most k of them; C >= f) passes
    ñ/k − m with probability >= 1 − β together: Pr[Z_A <= −m_A] = α^(m_A)/(1 + α) <= β/(2k) for
    each, m_A = ⌈ln(2k/(β(1 + α)))/ε_A⌉, and Pr[ñ − n >= k·m_n] <= β/2, m_n = ln(2/(β(1 + α_n)))/(ε_n·k)."""
    k, eps_a, eps_n = check_positive_int("k", k), check_epsilon(eps_a), check_epsilon(eps_n)
    alpha, alpha_n = math.exp(-eps_a), math.exp(-eps_n)
    m_a = math.ceil(math.log(2 * k / (beta * (1 + alpha))) / eps_a)
    return m_a + math.log(2 / (beta * (1 + alpha_n))) / (eps_n * k)


def dpss_k_tilde_for(n_min: int, k: int, gamma: float, slack: int | None = None) -> int:
    """Smallest k~ for which the admission term binds on an epoch of ``n_min`` packets
    (docs/dpss-eehh.md §4.8): k~ >= n/(n/k − 1 − 2γ), or (n + s_n + 1)/(n/k − 1 − 2γ) with the
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

