"""Central releases of summaries merged from several capture points (trusted collector).

Capture points keep **non-private** summaries per public epoch (``dptop.engine.baselines.merge``)
and ship them; the collector merges them and releases once per epoch with fresh noise. Every
packet lies in one capture point's stream and one epoch, so the releases compose in parallel as in
a single process.

* ``MergedDPMG`` (``dpmg``) — DP Misra-Gries on the bounded-memory merge (docs/dp-misra-gries.md §8).
  Merged neighbours differ by exactly 1, in the same direction, on at most K keys (K = k~ counters
  per capture point), so Mode A's shared-offset release does not apply; this is the threshold
  variant §8 names [derived constants]. Every stored counter gets discrete Laplace with
  α = exp(−ε_A/K) (ℓ1 sensitivity K on the keys both sides store). A key stored on one side only
  has count 1 there; with c'' the larger side restricted to the smaller side's keys,
  |Pr[M(c') ∈ E] − Pr[M(c'') ∈ E]| <= δ₁ = K·Pr[Z >= t], and the two directions give
  (ε_A, e^(ε_A)·δ₁)-DP. So t = ⌈ln(K·e^(ε_A)/((1 + α)·δ))·K/ε_A⌉ and a key is kept iff its noisy
  count is >= 1 + t and >= ñ/k (noisy length ñ, ε_n = 0.1ε, as Mode A). Error O(K·log(K/δ)/ε).
* ``MergedEEHH`` (``eehh-cms``) — EEHH over the summed CountMin (docs/dpss-eehh.md §6). Capture points
  keep noise-free CountMin sketches hashed with the collector's secret seeds and track their own
  top-k~ labels by their local estimates; the collector sums the cells, adds the cell noise once
  (the sum is the sketch of the union stream, so the noisy sum is the single-process DP sketch)
  and releases the final query of every tracked label. [derived; needs review] A label tracked on
  one side of a neighbouring pair only is untracked at every other capture point, so §6.2's
  argument per capture point (envelope 2t/w, no noise) bounds its true count by n/k~ + 2n/w + 1;
  its merged estimate is then <= n/k~ + 4n/w + ψ + 1 <= τ2. The depth covers T_max arrivals plus
  the final queries of up to A·k~ labels (A capture points).

The end of the module declares both as mergeable in the registry (``EpochMerge``).
"""
from __future__ import annotations

import math

import numpy as np

from dptop.engine.baselines.merge import MGSummarizer, MGSummary, SketchSummary, derive_seeds, merge_all, unique_keys
from dptop.engine.core.mergeable import EpochMerge
from dptop.engine.core.registry import declare_mergeable
from dptop.engine.core.release import sorted_items
from dptop.engine.core.settings import PACKETS, check_delta, check_epsilon, check_positive_int
from dptop.engine.single_release.dpmg import DPMGFigures, DPMisraGries
from dptop.engine.single_release.dpss import by_key
from dptop.engine.single_release.eehh import CountMinEEHH, cms_depth, cms_threshold, next_pow2, sketch_psi
from dptop.engine.single_release.eehh_kernels import N, SIZE, EEState, make_ee_state, tracked, update_batch
from dptop.engine.single_release.length import LENGTH_SHARE, length_slack, split_length_budget
from dptop.engine.core.facts import NO_FACTS


def merged_mg_threshold(epsilon: float, delta: float, capacity: int) -> int:
    """t of the merged DP-MG release: the smallest integer with K·Pr[Z >= t] <= δ·e^(−ε) for
    discrete Laplace α = exp(−ε/K), Pr[Z >= t] = α^t/(1 + α); keep when noisy >= 1 + t."""
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    K = check_positive_int("k~", capacity)
    alpha = math.exp(-epsilon / K)
    return max(0, math.ceil(math.log(K * math.exp(epsilon) / ((1.0 + alpha) * delta)) * K / epsilon))


class MergedDPMG(DPMisraGries):
    """DP Misra-Gries released once per epoch from merged K-counter summaries (§8 threshold variant)."""

    def __init__(self, settings, facts=NO_FACTS, counting=PACKETS):
        if str(settings.extra.get("mode", "A")) != "A":
            raise ValueError(f"dpmg mode ({settings.extra['mode']!r}): merged sketches have only the "
                             f"threshold release of docs/dp-misra-gries.md §8; leave mode at A in cluster mode")
        super().__init__(settings, facts, counting)
        self.t = merged_mg_threshold(self.eps_a, self.delta, self.k_tilde)

    def notes(self):
        return (f"DP Misra-Gries on summaries merged from several capture points (docs/dp-misra-gries.md §8): "
                f"K={self.k_tilde} counters each, bounded-memory merge, discrete Laplace α=exp(−ε_A/K) "
                f"per counter (ε_A={self.eps_a:.4g}), keep if >= {1 + self.t} and >= ñ/k with noisy "
                f"length ñ (ε_n={self.eps_n:.4g})",)

    def summarizer(self, master: bytes, epoch: int) -> MGSummarizer:
        """A capture point's summarizer for ``epoch``: Alg 1 with K = k~ counters."""
        return MGSummarizer(self.k_tilde)

    def state_of(self, summary: MGSummary) -> MGSummary:
        """The merged summary is the release's state as it is."""
        return summary

    def _publish(self, state: MGSummary | None):
        summary = state or MGSummary.empty(self.k_tilde)
        n_noisy = summary.n + self.noise.dlap(self.eps_n)
        cut = max(1 + self.t, math.ceil(n_noisy / self.k))
        his, los, vals = [], [], []
        for j in by_key(summary.keys).tolist():  # summaries are key-sorted already; noise in key order
            v = int(summary.counts[j]) + self.noise.dlap(self.eps_a, sensitivity=self.k_tilde)
            if v >= cut:
                his.append(int(summary.keys[j, 0]))
                los.append(int(summary.keys[j, 1]))
                vals.append(v)
        status = DPMGFigures(noisy_length=n_noisy, mode="merged", tau=1 + self.t, k=self.k, k_tilde=self.k_tilde)
        return sorted_items(his, los, vals), float(cut - 1), n_noisy, status


class MergedEEHH(CountMinEEHH):
    """EEHH over a CountMin summed from ``agents`` capture points, noised once at the collector."""

    length_shares = (LENGTH_SHARE,)

    def __init__(self, settings, agents: int, facts=NO_FACTS, counting=PACKETS):
        self.agents = check_positive_int("agents", agents)
        n = settings.epoch_packets
        if settings.extra.get("t_max") is None and n is not None:
            # a merged count epoch holds up to ``agents`` epochs of n packets
            _, _, eps_n, delta_n = split_length_budget(settings.epsilon, settings.delta)
            total = self.agents * n
            t_max = max(2 * total, total + 2 * length_slack(eps_n, delta_n) + 2)
            settings = settings.with_(extra={**settings.extra, "t_max": t_max})
        super().__init__(settings, facts, counting)

    def _size(self):
        """§6.3's log2 depth at w = 2k~: the merged tracking is not the single sketch's (notes)."""
        return (next_pow2(2 * self.k_tilde),
                cms_depth(self.t_max, self.agents * self.k_tilde, self.delta_run))

    def _psi(self):
        return sketch_psi(self.scale, self.depth, self.width, self.delta_run)

    def _threshold(self, state, n_noisy, n_hi):
        return cms_threshold(n_noisy, n_hi, self.k, self.k_tilde, self.width, self.psi)

    def notes(self):
        return (f"EEHH over DP CountMin summed from {self.agents} capture points: k={self.k}, "
                f"k~={self.k_tilde} tracked per capture point, d={self.depth}, w={self.width}, cell noise "
                f"discrete Laplace b={self.scale:.4g} added once by the collector, ψ={self.psi:.4g}, "
                f"T_max={self.t_max}; final-query release, corrected threshold",
                "[derived; needs review] per-capture-point tracking on noise-free sketches: a label "
                "tracked on one side only has true count <= n/k~ + 2n/w + 1, below τ2 (merged.py)")

    def epoch_seeds(self, master: bytes, epoch: int) -> np.ndarray:
        """The (d, 5) multiply-shift row seeds of ``epoch``, derived from the collector's secret."""
        return derive_seeds(master, f"{self.name}/epoch/{epoch}", 5 * self.depth).reshape(self.depth, 5)

    def agent_state(self, hseed: np.ndarray) -> EEState:
        """A capture point's noise-free sketch with the shipped seeds and its own tracker."""
        return self._state(np.zeros((self.depth, self.width), np.int64), hseed, self.k_tilde)

    def summarizer(self, master: bytes, epoch: int) -> "EEHHSummarizer":
        """A capture point's summarizer for ``epoch``, hashing with that epoch's shared seeds."""
        return EEHHSummarizer(self, self.epoch_seeds(master, epoch))

    def state_of(self, summary: SketchSummary) -> EEState:
        """The summed cells plus fresh cell noise, tracking the union of every capture point's labels."""
        noise = self.noise.discrete_laplace_array(self.scale_exact, self.depth * self.width)
        st = self._state(summary.cells + noise.reshape(self.depth, self.width), summary.seeds,
                         max(1, len(summary.candidates)))
        m = len(summary.candidates)
        st.slot_hi[:m], st.slot_lo[:m] = summary.candidates[:, 0], summary.candidates[:, 1]
        st.meta[SIZE], st.meta[N] = m, summary.n
        return st

    def _state(self, cells, hseed, slots) -> EEState:
        return make_ee_state(cells, hseed, np.zeros_like(hseed, np.uint64), slots)


class EEHHSummarizer:
    """A capture point's side of ``MergedEEHH`` for one epoch."""

    def __init__(self, algorithm: MergedEEHH, hseed: np.ndarray):
        self.state = algorithm.agent_state(hseed)

    def update(self, keys: np.ndarray) -> None:
        update_batch(self.state, keys, False)

    def summary(self) -> SketchSummary:
        st = self.state
        return SketchSummary(st.cells.copy(), st.hseed.copy(), unique_keys(tracked(st)), int(st.meta[N]))


declare_mergeable(DPMisraGries, EpochMerge(
    MGSummary, lambda settings, facts, agents: MergedDPMG(settings, facts), merge_all))
declare_mergeable(CountMinEEHH, EpochMerge(
    SketchSummary, lambda settings, facts, agents: MergedEEHH(settings, agents, facts), merge_all))
