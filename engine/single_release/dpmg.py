"""DP Misra-Gries (``dpmg``): the releases of paper 002 on ``dptop.engine.baselines.misragries`` (docs/dp-misra-gries.md).

The summary has K = k~ counters (default 2k, docs/dpss-eehh.md §7) and keeps zero-count keys with the
smallest-key replacement rule, so Mode A's threshold applies. Two release modes
(``--param mode=A|pure``):

* **Mode A, discrete** (default; docs/dp-misra-gries.md §5.1, §5.3): one shared η and a fresh Z_j per
  stored key, both discrete Laplace with α = e^(−ε_A); zero-count keys are noised too (they belong
  to T), dummies are skipped. Keep iff the noisy count is >= τ = 1 + 2⌈ln(6e^ε/((e^ε+1)δ))/ε⌉
  **and** >= ñ/k, the heavy filter of docs/dpss-eehh.md §7 on a noisy length ñ = n + DLap(ε_n)
  (never the exact n, P5). Cost: (ε_A, δ) + (ε_n, 0) = (ε, δ) by basic composition (the filter is
  post-processing of both), with ε_n = 0.1ε.
* **Pure** (docs/dp-misra-gries.md §7.1–§7.2): Alg 3 (subtract γ = Σc/(K+1), keep c > γ), then noise
  on **every** universe element. Discrete form: the integer vector (K+1)c − Σc has ℓ1 sensitivity <= 2K+1, so it gets
  discrete Laplace with α = exp(−ε/(2K+1)) (exact sampler), and values are divided by K+1. The k
  largest of the ~2^128 other elements' noise are drawn exactly, level by level, from the same
  discrete law (``dptop.engine.single_release.dpmg_universe``, no floating point in the law), each given a fresh uniformly random non-multicast 128-bit label. ε-DP; the output may contain
  never-seen addresses (inherent, §7.2).

Noise is drawn in key order and the output is ordered by noisy value then key (P7, T13).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dptop.engine.single_release.dpss import by_key
from dptop.engine.single_release.epochs import Epoched
from dptop.engine.baselines.misragries import is_dummy, make_state, snapshot, state_bytes, update_batch
from dptop.engine.baselines.summary import counters
from dptop.engine.core.base import Footprint
from dptop.engine.core.registry import register
from dptop.engine.core.release import sorted_items
from dptop.engine.privacy.measures import ApproxDP, Measure, PureDP, compose
from dptop.engine.core.settings import PACKETS, check_delta, check_epsilon, check_positive_int
from dptop.engine.core.facts import NO_FACTS
from dptop.engine.single_release.dpmg_universe import universe_top_noise

MODES = ("A", "pure")
UNIVERSE_SIZE = (1 << 128) - (1 << 120)
"""Every 128-bit key outside ff00::/8 (IPv4 sources are the ::ffff:0:0/96 part of it)."""


@register
class DPMisraGries(Epoched):
    """DP Misra-Gries [002 Alg 2 / §6] with k~ counters, Mode A (discrete) or pure."""

    name = "dpmg"
    parameters = ("mode",)

    def __init__(self, settings, facts=NO_FACTS, counting=PACKETS):
        self.k = check_positive_int("k", settings.k)
        self.k_tilde = check_positive_int("k~", counters(settings))
        if self.k_tilde < self.k:
            raise ValueError(f"k~ ({self.k_tilde}) must be >= k ({self.k})")
        self.epsilon = check_epsilon(settings.epsilon)
        self.mode = str(settings.extra.get("mode", "A"))
        if self.mode not in MODES:
            raise ValueError(f"mode ({self.mode!r}) must be one of {', '.join(MODES)}")
        if self.mode == "A":
            self.delta = check_delta(settings.delta)
            self.eps_n = 0.1 * self.epsilon
            self.eps_a = self.epsilon - self.eps_n
            self.tau = dpmg_threshold_discrete(self.eps_a, self.delta)
        else:
            self.delta = None
        super().__init__(settings, facts, counting)

    def cost(self) -> Measure:
        if self.mode == "pure":
            return PureDP(self.epsilon)
        return compose([ApproxDP(self.eps_a, self.delta), PureDP(self.eps_n)])

    def notes(self):
        if self.mode == "pure":
            return (f"DP Misra-Gries pure mode (docs/dp-misra-gries.md §7.2): K={self.k_tilde} counters, "
                    f"Alg 3 offset, discrete Laplace α=exp(−ε/(2K+1)) on every universe element; "
                    f"never-seen addresses may appear",)
        return (f"DP Misra-Gries Mode A (docs/dp-misra-gries.md §5.3): K={self.k_tilde} counters, smallest-key "
                f"zero replacement, shared + per-key discrete Laplace (ε_A={self.eps_a:.4g}), keep if "
                f">= {self.tau} and >= ñ/k with noisy length ñ (ε_n={self.eps_n:.4g})",)

    def _new_state(self):
        return make_state(self.k_tilde)

    @classmethod
    def footprint(cls, settings, facts=NO_FACTS, counting=PACKETS):
        """One Misra-Gries summary of k~ counters (the open epoch's)."""
        return Footprint(state_bytes(counters(settings)), f"k~ = {counters(settings)}")

    def _feed(self, state, keys):
        update_batch(state, keys)

    def _stored(self, state):
        if state is None:
            return np.zeros((0, 2), np.uint64), np.zeros(0, np.int64), 0
        keys, counts, _, n = snapshot(state)
        real = ~is_dummy(keys)
        return keys[real], counts[real], n

    def limit(self, n):
        """Misra-Gries underestimates by <= n/(k~+1); Mode A adds two DLap(ε_A) draws and cuts at
        max(τ, ñ/k): each noise above its 5 % quantile w.p. >= 0.95 (pure mode: the same bound
        with its own scale, stated loosely)."""
        eps_a = self.eps_a if self.mode != "pure" else self.epsilon / (2 * self.k_tilde + 1)
        eps_n = self.eps_n if self.mode != "pure" else self.epsilon
        q_a, q_n = math.log(20) / eps_a, math.log(20) / eps_n
        cut = max(getattr(self, "tau", 0), math.ceil((n + q_n) / self.k))
        return math.ceil(cut + n / (self.k_tilde + 1) + 2 * q_a), n / (self.k_tilde + 1) + 2.0 / eps_a

    def _publish(self, state):
        keys, counts, n = self._stored(state)
        if self.mode == "pure":
            return self._publish_pure(keys, counts)
        n_noisy = n + self.length_noise()
        eta = self.noise.dlap(self.eps_a) if len(keys) else 0  # shared by the stored keys; none: unused
        cut = max(self.tau, math.ceil(n_noisy / self.k))
        order = by_key(keys)  # noise drawn in key order (P7)
        vals = counts[order] + eta + self.noise.dlap_array(self.eps_a, len(order))
        keep = vals >= cut
        keys = keys[order][keep]
        status = {"noisy_length": n_noisy, "mode": "A", "tau": self.tau, "k": self.k, "k_tilde": self.k_tilde}
        # Integer estimates: "v >= cut" is "v > cut − 1", the threshold in Release's sense.
        return sorted_items(keys[:, 0], keys[:, 1], vals[keep]), float(cut - 1), n_noisy, status

    def _publish_pure(self, keys, counts):
        K = self.k_tilde
        total = int(counts.sum())
        # ε/(2K+1) as an exact rational: 2K+1 bounds the ℓ1 sensitivity of the integer vector below
        scale_eps = Fraction(self.epsilon) / (2 * K + 1)
        order = by_key(keys)
        scaled = (K + 1) * counts[order] - total  # int64: |scaled| <= (K + 1)·n
        kept = scaled > 0  # Alg 3 keeps c > γ (the set P); all other elements have value 0
        noise = self.noise.dlap_array(scale_eps, int(kept.sum()))  # in key order (P7)
        rows = [(int(h), int(l), int(v) + int(z))
                for (h, l), v, z in zip(keys[order][kept].tolist(), scaled[kept].tolist(), noise.tolist())]
        taken = {(hi, lo) for hi, lo, _ in rows}
        m = UNIVERSE_SIZE - len(rows)
        for z in universe_top_noise(self.noise, self.k, m, scale_eps):
            while True:  # a distinct uniform element outside P; hi < 0xff00.. keeps it non-multicast
                label = self.noise.uniform_int(UNIVERSE_SIZE)
                key = (label >> 64, label & ((1 << 64) - 1))
                if key not in taken:
                    break
            taken.add(key)
            rows.append((*key, z))
        items = sorted_items([r[0] for r in rows], [r[1] for r in rows],
                             [r[2] / (K + 1) for r in rows], limit=self.k)
        return items, None, None, {"mode": "pure", "k": self.k, "k_tilde": K}


# --- DP-MG privacy map (docs/dp-misra-gries.md §5.3): pure functions of public parameters.

def dpmg_threshold_discrete(epsilon: float, delta: float) -> int:
    """Mode A with geometric noise: τ = 1 + 2·⌈ln(6e^ε/((e^ε + 1)δ))/ε⌉ (docs/dp-misra-gries.md §5.3);
    keep when the noisy count is >= τ."""
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    e = math.exp(epsilon)
    return 1 + 2 * math.ceil(math.log(6.0 * e / ((e + 1.0) * delta)) / epsilon)

