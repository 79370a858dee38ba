"""Mechanisms under audit and the neighbour pairs that stress them (dptop.engine.lab.audit.statistics).

Each **target** wraps one release mechanism of ``engine/`` (or a deliberately broken variant of it)
and gives: the (ε, δ) it claims, neighbour pairs (X, X') chosen from the worst cases of docs/, and
``sample(keys, runs, seed)`` — the output records of ``runs`` independent runs on one stream.

Real mechanisms: ``dpss``, ``dpmg``, ``eehh-cms``, ``lazyhh``, ``dpsw``, ``laplace-count``.
Broken variants, built by subclassing or reconfiguring the real classes (never by copying them):

* ``*-small-noise``: the real mechanism with a noise source whose discrete Laplace scale is
  ``NOISE_FACTOR`` times too small (``WeakNoise``);
* ``dpss-exact-n``, ``eehh-cms-exact-n``: DPSS / EEHH whose threshold uses the exact stream length
  (docs/dpss-eehh.md §4.5, P3);
* ``dpss-wrong-tie``: DPSS over a SpaceSaving whose recency is set only on insertion (§2.5);
* ``lazyhh-noiseless``: LazyHH whose sketch adds no Gaussian tree noise (docs/lazyhh.md §6.7);
* ``dpsw-early-read``: DPSW whose query plan reads the open substream's sketch before it is
  complete (docs/dpsw-sketch.md §9 P1).

Speed: SpaceSaving and Misra-Gries summaries are deterministic functions of the stream, so those
targets build the summary once and draw only the release noise per run (``Epoched._publish`` on the
same state: every call draws fresh noise, exactly the distribution of a fresh run). Mechanisms with
randomness at creation (EEHH hashes and cell noise, LazyHH, DPSW) are rebuilt for every run.
A ``seed`` makes the whole audit reproducible (seeded generators: same distributions, NOT private).
"""
from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np

from dptop.engine.lab.audit.statistics import AuditResult, PairAudit, audit_pair, features_of
from dptop.engine.lab.audit.structure import corollary1_violations
from dptop.engine.single_release.dpmg import DPMisraGries
from dptop.engine.single_release.dpss import DPSpaceSaving
from dptop.engine.sliding_window.dpsw_hh import DPSWHeavyHitters
from dptop.engine.single_release.eehh import CountMinEEHH
from dptop.engine.core.keys import KeyBatch
from dptop.engine.continual.lazyhh import LazyHH
from dptop.engine.privacy.noise import NoiseSource
from dptop.engine.core.settings import Range, Settings
from dptop.engine.baselines.spacesaving import snapshot
from dptop.engine.lab.audit.broken import (NOISE_FACTOR, EarlyReadDPSW, EntryTimeDPSS, EntryTimeSpaceSaving,
                                       ExactLengthDPSS, ExactLengthEEHH, NoiselessLazyHH, WeakNoise)
from dptop.engine.lab.audit.streams import Pair, run_seeds, address, blocks, remove_one, stream
from dptop.engine.lab.audit.user_level import USER_LEVEL_TARGETS

# ---------------------------------------------------------------- targets

class Target:
    """A mechanism under audit: claimed (ε, δ), neighbour pairs, and a sampler of output records."""

    name = ""
    broken = False
    description = ""

    def claimed(self) -> tuple[float, float]:
        raise NotImplementedError

    def pairs(self) -> list[Pair]:
        raise NotImplementedError

    def sample(self, keys: np.ndarray, runs: int, seed: int | None) -> list[dict]:
        raise NotImplementedError

    def structure(self, pair: Pair) -> list[str]:
        """White-box check of the proof's premise on ``pair`` (none by default)."""
        return []


class EpochedTarget(Target):
    """A single-release mechanism (DPSS, DP-MG, EEHH): one whole-stream epoch per run."""

    cls = DPSpaceSaving
    weak = False
    fresh_state = False  # True: randomness at creation (EEHH), rebuild the state every run

    def settings(self) -> Settings:
        raise NotImplementedError

    def make(self, seed):
        mech = self.cls(self.settings().with_(seed=seed))
        if self.weak:
            mech.noise = WeakNoise(seed)
        return mech

    def claimed(self):
        g = self.cls(self.settings()).guarantee()
        return g.epsilon, g.delta or 0.0

    def sample(self, keys, runs, seed):
        mech = self.make(seed)
        out = []
        state = None
        for _ in range(runs):
            if state is None or self.fresh_state:
                state = mech._new_state()
                mech._feed(state, keys)
            items, _, _, status = mech._publish(state)  # fresh release noise on every call
            out.append(features_of(items, status.noisy_length))
        return out


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
        """Corollary 1 of seed 000 on the two final summaries (dptop.engine.lab.audit.structure)."""
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


class LazyHHTarget(Target):
    name = "lazyhh"
    cls = LazyHH
    description = ("LazyHH (docs/lazyhh.md §6), k=2, k~=8, ε=0.9, δ=1e-6, horizon 2^15; outputs at "
                   "t=k~·j around the boundary and at the end")
    horizon = 1 << 15

    def settings(self, seed=None):
        return Settings(k=2, epsilon=0.9, delta=1e-6, horizon=self.horizon, seed=seed)

    def claimed(self):
        g = LazyHH(self.settings()).guarantee()
        return g.epsilon, g.delta

    def __init__(self):
        k_tilde = LazyHH(self.settings()).params.k_tilde
        self.boundary = k_tilde * (self.horizon // (2 * k_tilde))  # an output step t = k~·j

    def pairs(self):
        n = self.horizon
        x = blocks({1: int(0.85 * n), **{10 + i: (n - int(0.85 * n)) // 16 for i in range(16)}}, seed=6)
        x = (x + [1] * n)[:n]  # exactly the horizon: 85 % label 1, the rest 16 background labels
        x_new = list(x)
        x_new[self.boundary - 1] = 500  # a never-seen label arriving exactly at the output step
        sub = list(x)
        pos = sub.index(1, n // 3)
        sub[pos] = 11
        return [
            Pair("candidate entering at an output step", stream(x_new), stream(x),
                 "docs/lazyhh.md §6.5-6.6: the label joins C at t = k~·j, on one side only"),
            Pair("heavy label substituted once", stream(x), stream(sub),
                 "docs/lazyhh.md §6.7: substitution changes two counts by 1"),
        ]

    def sample(self, keys, runs, seed):
        cuts = [self.boundary, len(keys)]
        out = []
        for s in run_seeds(seed, 11, runs):
            mech = self.cls(self.settings(s))
            rec, start = {}, 0
            for c in cuts:
                mech.consume(KeyBatch(keys[start:c]))
                start = c
                rel = mech.release()
                rec.update(features_of(rel.items, None, prefix=f"t={c} "))
            out.append(rec)
        return out


class LazyHHNoiseless(LazyHHTarget):
    name = "lazyhh-noiseless"
    broken = True
    cls = NoiselessLazyHH
    description = "LazyHH whose sketch adds no Gaussian tree noise (docs/lazyhh.md §6.7)"


class DPSWTarget(Target):
    name = "dpsw"
    description = ("DPSW-Sketch window estimates (docs/dpsw-sketch.md §4), w=64, L=16, width 64, depth 3, "
                   "ε=1, δ=1e-6, scale off (raw window sums: the public rescaling is post-processing); "
                   "queried inside a substream, at its edge and just after")
    cls = DPSWHeavyHitters
    window, length = 64, 16

    def settings(self, seed=None):
        return Settings(k=4, epsilon=1.0, delta=1e-6, window=self.window, seed=seed,
                        extra={"substream_length": self.length, "width": 64, "depth": 3,
                               "domain_scan": 1, "scale": "off"})

    def claimed(self):
        g = self.cls(self.settings()).guarantee()
        return g.epsilon, g.delta

    def __init__(self):
        L = self.length
        self.n = 4 * L + 8
        self.times = (2 * L + 4, 3 * L - 2, 3 * L, 3 * L + 1, self.n)  # query times (public)

    def pairs(self):
        L, n = self.length, self.n
        x = [1 if i % 2 == 0 else 2 + (i % 7) for i in range(n)]
        x[3 * L - 1] = 1  # the last packet of substream 3 is the probed label's
        sub = list(x)
        sub[2 * L + 8] = 50  # a packet of label 1 between the two queries inside substream 3
        edge = list(x)
        edge[3 * L - 1] = 50  # ... substituted: the window edge, substream 3 freezes at t = 3L
        return [
            Pair("substitution inside the open substream", stream(x), stream(sub),
                 "docs/dpsw-sketch.md §9 P1: consecutive reads of a growing sketch differ by exact counts"),
            Pair("substitution at a substream edge", stream(x), stream(edge),
                 "docs/dpsw-sketch.md §3.2-4.1: the window's edge sketch freezes at t = 3L"),
        ]

    def sample(self, keys, runs, seed):
        probe = stream([1])
        out = []
        for s in run_seeds(seed, 13, runs):
            mech = self.cls(self.settings(s))
            rec, start, prev = {}, 0, None
            for t in self.times:
                mech.update(keys[start:t])
                start = t
                v = float(mech.estimate(probe)[0])
                rec[f"estimate {address(1)} at t={t}"] = v
                if prev is not None:
                    rec[f"estimate change to t={t}"] = v - prev
                prev = v
            out.append(rec)
        return out


class DPSWEarlyRead(DPSWTarget):
    name = "dpsw-early-read"
    broken = True
    cls = EarlyReadDPSW
    description = "DPSW whose plan reads the open substream's sketch before it is complete (§9 P1)"


class LaplaceCount(Target):
    """The known-answer mechanism: the stream length plus discrete Laplace(1/ε) noise (dptop.engine.privacy.noise).
    Its privacy loss is exactly ε: the event {output >= n} has probability 1/(1+α) on the longer
    stream and α/(1+α) on the shorter (α = e^−ε)."""

    name = "laplace-count"
    description = "packet count + discrete Laplace(1/ε), ε=1 (exact privacy loss ε)"
    epsilon = 1.0
    factor = 1

    def claimed(self):
        return self.epsilon, 0.0

    def pairs(self):
        return [Pair("one packet more", stream([1] * 10), stream([1] * 9), "count sensitivity 1")]

    def sample(self, keys, runs, seed):
        noise = NoiseSource(seed)
        eps = Fraction(self.epsilon) * self.factor
        return [{"count": float(len(keys) + noise.dlap(eps))} for _ in range(runs)]


class LaplaceSmallNoise(LaplaceCount):
    name = "laplace-small-noise"
    broken = True
    factor = 2
    description = "packet count + discrete Laplace noise 2x too small (privacy loss 2ε)"


TARGETS = {t.name: t for t in (
    DPSSTarget, DPMGTarget, EEHHTarget, LazyHHTarget, DPSWTarget, LaplaceCount,
    DPSSSmallNoise, DPSSExactN, DPSSWrongTie, DPMGSmallNoise, EEHHExactN, LazyHHNoiseless, DPSWEarlyRead,
    LaplaceSmallNoise)}
TARGETS.update({t.name: t for t in USER_LEVEL_TARGETS})


def target(name: str) -> Target:
    if name not in TARGETS:
        raise ValueError(f"unknown audit mechanism {name!r}; known: {', '.join(TARGETS)}")
    return TARGETS[name]()


def run(name: str, runs: int, confidence: float = 0.95, seed: int | None = None,
        events: int = 3, progress=None) -> AuditResult:
    """Audit one target over all its pairs with ``runs`` runs per side. The error probability
    1 − confidence is split evenly over the pairs (and, inside ``audit_pair``, over the events)."""
    return run_target(target(name), runs, confidence, seed, events, progress)


RUNS = Range("runs", 4, 10**8, integer=True)
CONFIDENCE = Range("confidence", 0, 1, open_low=True, open_high=True)
EVENTS = Range("events", 1, 1000, integer=True)
"""Events tested per neighbour pair."""


def run_target(tgt: Target, runs: int, confidence: float = 0.95, seed: int | None = None,
               events: int = 3, progress=None) -> AuditResult:
    """``run`` for a target instance (the monitor's product-path targets use it too)."""
    CONFIDENCE.check(confidence)
    RUNS.check(runs)
    EVENTS.check(events)
    name = tgt.name
    eps, delta = tgt.claimed()
    pairs = tgt.pairs()
    alpha = (1.0 - confidence) / len(pairs)
    t0 = time.perf_counter()
    audits: list[PairAudit] = []
    for i, pair in enumerate(pairs):
        sx = None if seed is None else seed * 1000 + 2 * i
        sxp = None if seed is None else seed * 1000 + 2 * i + 1
        rx = tgt.sample(pair.x, runs, sx)
        rxp = tgt.sample(pair.x_prime, runs, sxp)
        audits.append(audit_pair(rx, rxp, eps, delta, alpha, events, pair.name, pair.note))
        audits[-1].structural = tgt.structure(pair)
        if progress:
            progress(audits[-1])
    return AuditResult(name, tgt.broken, eps, delta, confidence, runs, audits,
                       time.perf_counter() - t0, tgt.description)
