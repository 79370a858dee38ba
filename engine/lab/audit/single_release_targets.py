"""Audit targets of the single-release mechanisms, DPSS, DP Misra-Gries and EEHH over DP CountMin,
with their broken variants (registered in dptop.engine.lab.audit.cases.TARGETS): neighbour pairs
from the worst cases of docs/dpss-eehh.md and docs/dp-misra-gries.md.
"""
from __future__ import annotations

import math

from dptop.engine.lab.audit.broken import (NOISE_FACTOR, EntryTimeDPSS, EntryTimeSpaceSaving, ExactLengthDPSS,
                                           ExactLengthEEHH)
from dptop.engine.lab.audit.streams import Pair, blocks, remove_one, stream
from dptop.engine.lab.audit.structure import corollary1_violations
from dptop.engine.lab.audit.target import EpochedTarget
from dptop.engine.single_release.dpmg import DPMisraGries
from dptop.engine.single_release.dpss import DPSpaceSaving
from dptop.engine.single_release.eehh import CountMinEEHH
from dptop.engine.core.settings import Settings
from dptop.engine.baselines.spacesaving import snapshot


class DPSSTarget(EpochedTarget):
    name = "dpss"
    description = "DP SpaceSaving (docs/dpss-eehh.md §4.6), k=2, k~=4, ε=1, δ=1e-6"
    cls = DPSpaceSaving
    boundary_rule = "exact"  # which threshold formula places the boundary label (see pairs)

    def settings(self):
        return Settings(k=2, epsilon=1.0, delta=1e-6)

    def pairs(self):
        mech = self.cls(self.settings())
        return [self._boundary_pair(mech), self._isolated_pair(mech), frozen_tie_pair()]

    def structure(self, pair):
        """Corollary 1 of paper 000 on the two final summaries (dptop.engine.lab.audit.structure)."""
        mech = self.cls(self.settings())
        sides = []
        for keys in (pair.x, pair.x_prime):
            state = mech._new_state()
            mech._feed(state, keys)
            st = state.as_state() if isinstance(state, EntryTimeSpaceSaving) else state
            tracked, counts, _ = snapshot(st)
            sides.append({tuple(k): int(c) for k, c in zip(tracked.tolist(), counts)})
        return corollary1_violations(sides[0], sides[1], mech.k_tilde, len(pair.x))

    @staticmethod
    def _boundary_pair(mech) -> Pair:
        """§4.5 concrete failure: A sits on the exact-n admission threshold, B loses one packet.
        n is picked so that an integer c lies in (τ(n−1), τ(n)] of the exact-n rule."""
        k, gamma, margin = mech.k, mech.gamma, mech.margin
        for n in range(8 * k * (1 + math.ceil(gamma)), 100_000):
            c = math.floor(n / k - margin)
            if c > (n - 1) / k - margin and c > n / mech.k_tilde + 1 + gamma:
                break
        fill = [9] * (mech.k_tilde - 2)
        b = n - c - sum(fill)
        counts = {1: c, 2: b, **{3 + i: f for i, f in enumerate(fill)}}
        x = blocks(counts, seed=1)
        return Pair(f"threshold boundary (n={n}, A={c}, B={b})", stream(x), stream(remove_one(x, 2)),
                    "docs/dpss-eehh.md §4.5: with the exact n, A's value c is possible on X' only")

    @staticmethod
    def _isolated_pair(mech) -> Pair:
        """Four equal counters at m, then a new label z evicts one of them: z (m+1) is isolated
        in X, the victim in X' (§2.4 S2; the suppression term of τ must hide both)."""
        K = mech.k_tilde
        m = 200
        x = blocks({i: m for i in range(1, K + 1)}, seed=2) + [99]
        return Pair(f"isolated labels at the minimum (k~={K}, min={m})", stream(x), stream(x[:-1]),
                    "docs/dpss-eehh.md §2.4 S2: isolated labels have counters <= min C + 1")


def frozen_tie_pair() -> Pair:
    """docs/dpss-eehh.md §2.5 frozen regression (K = 5): X' = X without its first element."""
    x = [11, 10, 12, 8, 3, 2, 4, 8, 12, 11, 5, 9, 7]
    return Pair("frozen eviction ties (§2.5, K=5)", stream(x), stream(x[1:]),
                "docs/dpss-eehh.md §2.5: the entry-time rule ends with 3 isolated labels per side")


class DPSSSmallNoise(DPSSTarget):
    name = "dpss-small-noise"
    broken = True
    weak = True
    description = f"DPSS with discrete Laplace noise {NOISE_FACTOR}x too small"


class DPSSExactN(DPSSTarget):
    name = "dpss-exact-n"
    broken = True
    cls = ExactLengthDPSS
    description = "DPSS whose threshold uses the exact stream length n (docs/dpss-eehh.md §4.5)"


class DPSSWrongTie(DPSSTarget):
    name = "dpss-wrong-tie"
    broken = True
    cls = EntryTimeDPSS
    description = "DPSS over SpaceSaving with recency set only on insertion (docs/dpss-eehh.md §2.5)"

    def settings(self):
        return Settings(k=2, k_tilde=5, epsilon=1.0, delta=1e-6)


class DPMGTarget(EpochedTarget):
    name = "dpmg"
    description = "DP Misra-Gries Mode A (docs/dp-misra-gries.md §5.3), k=4, K=8, ε=1, δ=1e-6"
    cls = DPMisraGries

    def settings(self):
        return Settings(k=4, epsilon=1.0, delta=1e-6)

    def pairs(self):
        K = self.cls(self.settings()).k_tilde
        sizes = [400, 300, 200, 100, 60, 40, 20, 10][:K]
        base = blocks({i + 1: c for i, c in enumerate(sizes)}, seed=3)
        s1 = Pair("decrement-all (S1)", stream(base + [99]), stream(base),
                  "docs/dp-misra-gries.md §4 S1: the extra packet decrements all K counters")
        partial = blocks({i + 1: c for i, c in enumerate(sizes[:-1])}, seed=4)
        s4 = Pair("new key in a free slot (S4)", stream(partial + [99]), stream(partial),
                  "docs/dp-misra-gries.md §4 S4: a key of count 1 on one side only")
        s3 = Pair("one counter (S3)", stream(base), stream(remove_one(base, 1)),
                  "docs/dp-misra-gries.md §4 S3: one shared counter differs by 1")
        return [s1, s3, s4]


class DPMGSmallNoise(DPMGTarget):
    name = "dpmg-small-noise"
    broken = True
    weak = True
    description = f"DP Misra-Gries with discrete Laplace noise {NOISE_FACTOR}x too small"


class EEHHTarget(EpochedTarget):
    name = "eehh-cms"
    description = "EEHH over DP CountMin (docs/dpss-eehh.md §6.2-6.3), k=2, k~=8, ε=1, δ=1e-6, T_max=2^15"
    cls = CountMinEEHH
    fresh_state = True

    def settings(self):
        return Settings(k=2, epsilon=1.0, delta=1e-6, extra={"t_max": 1 << 15})

    def pairs(self):
        heavy = blocks({1: 24_000, 2: 2_000, 3: 1_000, **{10 + i: 50 for i in range(20)}}, seed=5)  # 28,000
        near_min = heavy + [77] * 3
        return [
            Pair("heavy label loses one packet", stream(heavy), stream(remove_one(heavy, 1)),
                 "docs/dpss-eehh.md §6.5: sketch cells change by 1 in each row"),
            Pair("label near the heap minimum loses its last arrival", stream(near_min),
                 stream(near_min[:-1]), "docs/dpss-eehh.md §12 T15: tracked on one side only"),
            self._boundary_pair(self.cls(self.settings())),
        ]

    @staticmethod
    def _boundary_pair(mech) -> Pair:
        """§4.5 for EEHH: two labels only (no evictions, collisions rare), n even so that the
        exact-n rule admits A's value n/k on X' (n − 1 packets) but not on X; A's count puts the
        median of its estimate, c + min_r Z_r, at n/k (median of the min of d DLap(b):
        b·ln(2(1 − 2^(−1/d))))."""
        n = 20_000
        shift = mech.scale * math.log(2 * (1 - 0.5 ** (1 / mech.depth)))
        c = round(n / mech.k - shift)
        x = blocks({1: c, 2: n - c}, seed=6)
        return Pair(f"threshold boundary (n={n}, A={c})", stream(x), stream(remove_one(x, 2)),
                    "docs/dpss-eehh.md §4.5: with the exact n, A's value n/k is possible on X' only")


class EEHHExactN(EEHHTarget):
    name = "eehh-cms-exact-n"
    broken = True
    cls = ExactLengthEEHH
    description = ("EEHH over DP CountMin whose thresholds and \"epoch too long\" test use the exact stream length "
                   "n (docs/dpss-eehh.md §4.5, P3), T_max = 27,999: one packet below the heavy pair's longer stream")

    def settings(self):
        return super().settings().with_(extra={"t_max": 27_999})
