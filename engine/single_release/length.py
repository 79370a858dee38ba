"""The noisy stream length ñ shared by DPSS and EEHH (docs/dpss-eehh.md §4.5): its share of the budget,
its public slack and the composed cost. Thresholds never use the exact n (pitfall P3)."""
from __future__ import annotations

import math

from dptop.engine.core.settings import check_delta, check_epsilon, check_positive_int
from dptop.engine.privacy.measures import ApproxDP

LENGTH_SHARE = 0.1
"""Share of ε and δ spent on the noisy stream length ñ (docs/dpss-eehh.md §4.5 default split)."""


def split_length_budget(epsilon: float, delta: float, share: float = LENGTH_SHARE) -> tuple[float, float, float, float]:
    """Total (ε, δ) -> (ε_A, δ_A, ε_n, δ_n) with ε_n = share·ε, δ_n = share·δ and
    δ_A = (δ − δ_n)/e^(ε_n), so that ``length_composed_cost`` gives back (ε, δ) (§4.5)."""
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    if not 0.0 < share < 1.0:
        raise ValueError(f"length share ({share:g}) must be in (0, 1)")
    eps_n, delta_n = share * epsilon, share * delta
    return epsilon - eps_n, (delta - delta_n) / math.exp(eps_n), eps_n, delta_n


def length_slack(eps_n: float, delta_n: float) -> int:
    """s_n = ⌈ln(1/((1 + α_n)·δ_n))/ε_n⌉, α_n = e^(−ε_n): Pr[Z_n <= −s_n] <= δ_n (§4.5 step 2)."""
    eps_n, delta_n = check_epsilon(eps_n), check_delta(delta_n)
    alpha = math.exp(-eps_n)
    return max(0, math.ceil(math.log(1.0 / ((1.0 + alpha) * delta_n)) / eps_n))


def length_composed_cost(eps_a: float, delta_a: float, eps_n: float, delta_n: float) -> ApproxDP:
    """A release whose threshold uses ñ: (ε_A + ε_n, e^(ε_n)·δ_A + δ_n) (docs/dpss-eehh.md §4.5)."""
    return ApproxDP(eps_a + eps_n, math.exp(eps_n) * delta_a + delta_n)


def check_k_tilde(k: int, k_tilde: int) -> tuple[int, int]:
    """k >= 1 and k~ > k (docs/dpss-eehh.md §4.6 step 1)."""
    k = check_positive_int("k", k)
    k_tilde = check_positive_int("k~", k_tilde)
    if not k_tilde > k:
        raise ValueError(f"k~ ({k_tilde}) must be > k ({k})")
    return k, k_tilde



def public_length(settings, facts) -> tuple[int | None, str]:
    """The length every epoch's release must fit, from parameters and public facts (``facts``,
    engine/core/facts.py): the count epoch, or the whole stream when it is one epoch and its length
    is known (a declared length, else the replayed file's packet count: public under substitution,
    an assumed fact under add/remove that the release must name, ``length_facts``); None for time
    epochs and live capture, whose lengths are not public."""
    if settings.epoch_packets is not None:
        return settings.epoch_packets, "an epoch"
    if settings.epoch_seconds is None and facts.length:
        return facts.length, "the whole stream"
    return None, "an epoch"


def length_facts(settings, facts) -> tuple:
    """The facts ``public_length`` sized the release from that no guarantee covers (to list)."""
    if settings.epoch_packets is None and settings.epoch_seconds is None:
        return facts.assumed("stream_length")
    return ()
