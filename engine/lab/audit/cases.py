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

import time

from dptop.engine.core.settings import Range
from dptop.engine.lab.audit.single_release_targets import (DPMGSmallNoise, DPMGTarget, DPSSExactN, DPSSSmallNoise,
                                                           DPSSTarget, DPSSWrongTie, EEHHExactN, EEHHTarget)
from dptop.engine.lab.audit.statistics import AuditResult, PairAudit, audit_pair
from dptop.engine.lab.audit.stream_targets import DPSWEarlyRead, DPSWTarget, LazyHHNoiseless, LazyHHTarget
from dptop.engine.lab.audit.target import LaplaceCount, LaplaceSmallNoise, Target
from dptop.engine.lab.audit.user_level import USER_LEVEL_TARGETS

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
