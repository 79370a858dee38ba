"""DPSW-Sketch: private frequencies over the last w packets (docs/dpsw-sketch.md, paper 004).

The stream is cut into substreams of ``L`` items. Each substream owns ``2m-1`` Private Count-Min
Sketches (PCMS, §2): the whole ``C_1``, ``m-1`` prefixes ``C_j`` (its first ``I[j]`` items) and
``m-1`` suffixes ``C'_j`` (its last ``I[j]`` items), with the data-independent checkpoint list ``I``
of §3.2. Every cell of every PCMS gets its own ``N(0, a/ρ_j)`` draw and only +1s. **Frozen rule**
(§0, §9 P1/P2): a PCMS is read only once its whole public range has been absorbed, and no write
reaches it after that; a query is then post-processing, so queries are unlimited (§1.2).

When the noise is drawn [design]: the cells hold the exact counts only (int32: a count never
exceeds ``L``), and a read adds the noise to a copy of each frozen PCMS it reads. Each PCMS instance
(channel, sketch id, owning substream) has its own stream of a generator keyed from ``os.urandom``
at build (``bulknoise.add_normal_stream``), so its noise is the same on every read, independent of
the data and of every other instance: the frozen sketch a query reads is distributed exactly as if
the noise had been drawn at creation, and output does not depend on when (or whether) earlier
queries ran. Sketches that expire unread never draw noise: at w = 100 000 nearly all of them, which
made the per-substream draws cost as much as the ingest; and no cell ever holds noise, so half the
bytes of float64 cells serve, and cells of a family no item reached are never touched. A new
instance reuses the cells of the expired one and clears them only if an item of its channel's
address family was written since the last reset (``dpsw_kernels._fresh``). This module implements 004 with the fixes of docs/dpsw-sketch.md
(§8 D5-D9): variance ``a/ρ_j``, prefixes frozen at their checkpoint, the newest complete substream
included, suffix ``l'`` (not ``l``), suffix ranges holding ``I[j]`` items.

One ``DPSWSketch`` holds several *channels* sharing one position counter and one substream
geometry (§5.2 (b)): channel ``c`` counts ``key & mask_c`` of the events of its address family and
takes a no-op at the other family's positions (§5.2 "Mixed IPv4/IPv6"). A flat DPSW is one
channel over full keys.

Design choices not in 004 [design]:
* widths: a PCMS over ``I[j]`` items has ``b_j`` = the power of two >= ``b·I[j]/L`` (at least 64,
  at most ``b``) columns, so its Count-Min collision error ``n_j/b_j`` stays ``≈ L/b`` while the
  noise drawn per substream drops about tenfold (widths never affect privacy: σ² = a/ρ_j);
* hashing: per channel and row a 64-bit keyed mix (``dptop.engine.core.keys.hash_key``) with seeds from
  ``os.urandom`` (§11 asks for 2-universal; privacy does not depend on it);
* query rules (§4.4, all post-processing of frozen PCMSs and public numbers): ``plan="004"``
  (this class's default, §4.1) or ``"noise-aware"`` (§4.4 (i)); ``estimator="min"`` (default,
  per-sketch min) or ``"sum-min"`` (§4.4 (ii)); ``debias`` adds the public constant of §4.4 (iii).
  The ``dpsw`` algorithm (dpsw_hh.py) picks its own defaults from measurements.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dptop.engine.privacy.bulknoise import make_rng
from dptop.engine.core.keys import random_seed64
from dptop.engine.core.settings import check_positive_int
from dptop.engine.sliding_window.dpsw_kernels import (FAMILY_ANY, DPSWState, estimate_keys, hash_cache,
                                                      instance_noise, process_batch)
from dptop.engine.sliding_window.geometry import (ESTIMATORS, PREFIX, SUFFIX, Geometry, Plan,
                                                  PlanEntry, budgets, expected_max_normal,
                                                  sketch_widths)

NOISE_OS = ("PCMS cell noise: Gaussian N(0, a/rho_j), one draw per cell, from a xoshiro256** stream per "
            "sketch instance (dptop.engine.privacy.bulknoise) keyed from os.urandom, added when the frozen "
            "sketch is first read")
NOISE_SEEDED = "seeded generator (Settings.seed): reproducible, NOT private"


@dataclass(frozen=True)
class Channel:
    """One DPSW instance of a hierarchy (§5.2 (b)): counts ``key & mask`` of one address family."""

    rho: float
    family: int = FAMILY_ANY
    prefix: int = 128  # prefix length in the 128-bit key space (IPv4 a.b.c.d/8 is /104)

    def masks(self) -> tuple[int, int]:
        full = ((1 << 128) - 1) ^ ((1 << (128 - self.prefix)) - 1)
        return full >> 64, full & ((1 << 64) - 1)


class DPSWSketch:
    """DPSW-Sketch over ``channels`` sharing one position counter (§3, §5.2 (b)).

    ``update(keys)`` ingests a key batch; ``plan(rule)`` is the public query plan at the current
    ``t``; ``estimate(keys, channel, plan)`` answers from frozen PCMSs only and raises if a plan would
    read anything else (a privacy bug, §4.1). ``record_reads`` switches on the test hook that logs
    every PCMS read (sketch id, owner substream, its writes and last write at read time).
    """

    def __init__(self, geometry: Geometry, channels, depth: int = 5, width: int = 4096,
                 seed: int | None = None):
        self.geometry = g = geometry
        self.channels = tuple(channels)
        if not self.channels:
            raise ValueError("channels (empty) must hold at least one channel")
        for c in self.channels:
            if not (c.rho > 0 and math.isfinite(c.rho)):
                raise ValueError(f"channel rho ({c.rho!r}) must be > 0 and finite")
            if not 1 <= c.prefix <= 128:
                raise ValueError(f"channel prefix ({c.prefix}) must be in [1, 128]")
        if g.L >= 1 << 31:
            raise ValueError(f"substream length L ({g.L}) must be < 2^31: a cell counts at most L items, in int32")
        self.depth = check_positive_int("depth", depth)
        self.width = check_positive_int("width", width, minimum=2)
        if self.width & (self.width - 1) or self.width > 1 << 30:
            raise ValueError(f"width ({self.width}) must be a power of two <= 2^30")
        self.seed = seed
        self.widths = sketch_widths(self.width, g.I)
        self.rhos = tuple(budgets(c.rho, g.alpha, g.m) for c in self.channels)
        self.record_reads = False
        self.reads: list[tuple[PlanEntry, int, int, int, int]] = []  # entry, id, writes, last write, t
        self._build()

    # ---- layout
    def sketch_id(self, e: PlanEntry) -> int:
        g = self.geometry
        if e.kind == PREFIX:
            return g.K * g.m + e.q - 1
        return ((e.k - 1) % g.K) * g.m + (e.q if e.kind == SUFFIX else 0)

    @staticmethod
    def _indices(g: Geometry) -> list[int]:
        """The I-index of every sketch id (``sketch_id``'s layout)."""
        return [q for _ in range(g.K) for q in range(g.m)] + list(range(1, g.m))

    @classmethod
    def nbytes(cls, geometry: Geometry, channels: int, depth: int, width: int) -> int:
        """The bytes ``_build`` allocates for ``channels`` channels of depth x width sketches,
        from the geometry and the sizes alone: the int32 cells, and per sketch its layout, noise scales
        and clock; the seeds and masks per channel."""
        qs = cls._indices(geometry)
        widths = sketch_widths(width, geometry.I)
        cells = 4 * channels * depth * sum(widths[q] for q in qs)
        per_sketch = len(qs) * (8 * 8 + 8 * channels + 2)
        return cells + per_sketch + 8 * channels * (depth + 3) + 8 * (len(geometry.I) + len(geometry.Ip)) + 64

    def _build(self) -> None:
        g, a = self.geometry, self.depth
        qs = self._indices(g)
        width = np.array([self.widths[q] for q in qs], dtype=np.int64)
        off = np.concatenate([[0], np.cumsum(a * width)[:-1]]).astype(np.int64)
        S = int(np.sum(a * width))
        H = len(self.channels)
        sigma = np.array([[math.sqrt(a / rhos[q]) for q in qs] for rhos in self.rhos], dtype=np.float64)
        if self.seed is not None:
            seeds = np.random.default_rng(self.seed).integers(0, 2**64, size=(H, a), dtype=np.uint64)
        else:
            seeds = np.array([[random_seed64() for _ in range(a)] for _ in range(H)], dtype=np.uint64)
        masks = np.array([c.masks() for c in self.channels], dtype=np.uint64)
        hm, hk = hash_cache(seeds)
        n_sk = len(qs)
        self.state = DPSWState(
            cells=np.zeros(H * S, dtype=np.int32), off=off, width=width,
            shift=np.array([64 - (int(v).bit_length() - 1) for v in width], dtype=np.uint64),
            sigma=sigma, I=np.array(g.I, dtype=np.int64), Ip=np.array(g.Ip, dtype=np.int64),
            seeds=seeds, mask=masks, family=np.array([c.family for c in self.channels], dtype=np.int64),
            rng=make_rng(self.seed),
            seen=np.zeros((2, n_sk), dtype=np.uint8),
            clock=np.array([0, 0, g.L], dtype=np.int64),
            owner=np.full(n_sk, -1, dtype=np.int64), start=np.zeros(n_sk, dtype=np.int64),
            end=np.full(n_sk, np.iinfo(np.int64).max, dtype=np.int64),
            writes=np.zeros(n_sk, dtype=np.int64), last=np.full(n_sk, -1, dtype=np.int64),
            geom=np.array([g.L, g.m, g.K, a, S], dtype=np.int64), hm=hm, hk=hk,
            ids=np.zeros(2 * g.m - 1, dtype=np.int64), rows=np.zeros((2 * g.m - 1) * a, dtype=np.uint64),
            shs=np.zeros(2 * g.m - 1, dtype=np.uint64))

    def reset(self) -> None:
        """Forget everything: new hash seeds, new noise (a new instance, §9 P11)."""
        self._build()
        self.reads = []

    @property
    def t(self) -> int:
        return int(self.state.clock[0])

    @property
    def memory_bytes(self) -> int:
        return int(self.state.cells.nbytes)

    # ---- verbs
    def update(self, keys: np.ndarray) -> None:
        if len(keys):
            process_batch(self.state, np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1, 2))

    def noise(self, channel: int, sid: int) -> np.ndarray:
        """The noise a read adds to PCMS ``sid`` of ``channel`` as now owned: for tests."""
        out = np.empty(self.depth * int(self.state.width[sid]), dtype=np.float64)
        instance_noise(self.state, channel, sid, out)
        return out

    def sigmas(self, channel: int = 0) -> tuple[float, ...]:
        """Noise standard deviation of the PCMS at each I-index (public)."""
        return tuple(math.sqrt(self.depth / r) for r in self.rhos[channel])

    def plan(self, rule: str = "004", gamma: float = 0.0, channel: int = 0, t: int | None = None) -> Plan:
        return self.geometry.plan(self.t if t is None else t, rule, self.sigmas(channel), gamma)

    def plan_ids(self, plan: Plan) -> np.ndarray:
        """Sketch ids of ``plan``; raises unless every one is a complete PCMS of the named substream."""
        st, g = self.state, self.geometry
        if plan.t > self.t:
            raise RuntimeError(f"plan for t={plan.t} is ahead of the stream (t={self.t})")
        ids = np.array([self.sketch_id(e) for e in plan.entries], dtype=np.int64)
        for e, sid in zip(plan.entries, ids):
            lo, hi = g.entry_range(e)
            if not (st.owner[sid] == e.k and st.end[sid] == hi and hi <= self.t and st.writes[sid] == hi - lo + 1):
                raise RuntimeError(f"privacy invariant violated: plan reads sketch {e} that is not frozen "
                                   f"(owner {st.owner[sid]}, end {st.end[sid]}, t {self.t})")
            if self.record_reads:
                self.reads.append((e, int(sid), int(st.writes[sid]), int(st.last[sid]), self.t))
        return ids

    def estimate(self, keys: np.ndarray, channel: int = 0, plan: Plan | None = None,
                 estimator: str = "min", debias: bool = False) -> np.ndarray:
        """Window frequency estimates of ``keys`` (§4.1) from frozen PCMSs of ``channel``."""
        if estimator not in ESTIMATORS:
            raise ValueError(f"estimator ({estimator!r}) must be one of {ESTIMATORS}")
        plan = self.plan() if plan is None else plan
        ids = self.plan_ids(plan)
        keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1, 2)
        out = np.empty(len(keys), dtype=np.float64)
        estimate_keys(self.state, channel, ids, keys, estimator == "sum-min", out)
        if debias:
            out += self.noise_bias(plan, channel, estimator)
        return out

    def noise_bias(self, plan: Plan, channel: int = 0, estimator: str = "min") -> float:
        """``c_a·Σσ_k`` (min) or ``c_a·√Σσ_k²`` (sum-min): the public expected shortfall of the
        estimate caused by taking minima over noisy rows (§4.2, §4.4 (iii))."""
        sig = np.array([self.sigmas(channel)[e.q] for e in plan.entries])
        c = expected_max_normal(self.depth)
        return float(c * (np.sqrt(np.sum(sig ** 2)) if estimator == "sum-min" else np.sum(sig)))

    def noise_std(self, plan: Plan, channel: int = 0) -> float:
        """``√Σσ_k²`` over the plan: the public noise scale of one estimate."""
        return float(math.sqrt(sum(self.sigmas(channel)[e.q] ** 2 for e in plan.entries)))
