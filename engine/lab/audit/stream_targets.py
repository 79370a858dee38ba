"""Audit targets of the mechanisms that release along the stream, LazyHH (continual observation) and
the DPSW-Sketch window estimates (sliding window), with their broken variants (registered in
dptop.engine.lab.audit.cases.TARGETS): each run reads the mechanism at several public times.
"""
from __future__ import annotations

from dptop.engine.continual.lazyhh import LazyHH
from dptop.engine.core.keys import KeyBatch
from dptop.engine.core.settings import Settings
from dptop.engine.lab.audit.broken import EarlyReadDPSW, NoiselessLazyHH
from dptop.engine.lab.audit.events import features_of
from dptop.engine.lab.audit.streams import Pair, address, blocks, run_seeds, stream
from dptop.engine.lab.audit.target import Target
from dptop.engine.sliding_window.dpsw_hh import DPSWHeavyHitters


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
