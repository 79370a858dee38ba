"""DPSW-Sketch: private frequencies over the last w packets (docs/dpsw-sketch.md, seed 004).

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
address family was written since the last reset (``_fresh``). This module implements 004 with the fixes of docs/dpsw-sketch.md
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
from typing import NamedTuple

import numpy as np

from dptop.engine.privacy.bulknoise import add_normal_stream, make_rng
from dptop.engine.core.jit import hot, inner, ix, kernel
from dptop.engine.core.keys import LO_MULTIPLIER, hash_key, mix64, random_seed64
from dptop.engine.core.settings import check_positive_int
from dptop.engine.sliding_window.geometry import (ESTIMATORS, PREFIX, SUFFIX, Geometry, Plan,
                                                  PlanEntry, budgets, expected_max_normal,
                                                  sketch_widths)

FAMILY_ANY, FAMILY_V4, FAMILY_V6 = 0, 4, 6

NOISE_OS = ("PCMS cell noise: Gaussian N(0, a/rho_j), one draw per cell, from a xoshiro256** stream per "
            "sketch instance (dptop.engine.privacy.bulknoise) keyed from os.urandom, added when the frozen "
            "sketch is first read")
NOISE_SEEDED = "seeded generator (Settings.seed): reproducible, NOT private"


# ---------------------------------------------------------------- numba state and kernels

class DPSWState(NamedTuple):
    cells: np.ndarray  # int32[H*S]     every channel's PCMS counts, flat (channel block of S cells)
    off: np.ndarray  # int64[n_sk]      offset of sketch id inside a channel block
    width: np.ndarray  # int64[n_sk]    columns of sketch id
    shift: np.ndarray  # uint64[n_sk]   column = hash >> shift
    sigma: np.ndarray  # float64[H, n_sk] noise standard deviation sqrt(a/ρ_j)
    I: np.ndarray  # int64[m]
    Ip: np.ndarray  # int64[m]
    seeds: np.ndarray  # uint64[H, a]
    mask: np.ndarray  # uint64[H, 2]    channel key = (hi & mask[0], lo & mask[1])
    family: np.ndarray  # int64[H]       FAMILY_ANY / FAMILY_V4 / FAMILY_V6
    rng: np.ndarray  # uint64[4]      the noise generator's key (one stream per PCMS instance)
    seen: np.ndarray  # uint8[2, n_sk]  items of IPv4 [0] / other [1] keys written since the id's last reset
    clock: np.ndarray  # int64[3]       t (items so far), k (current substream), p (position in it)
    owner: np.ndarray  # int64[n_sk]    substream whose PCMS the id holds (instrumentation + checks)
    start: np.ndarray  # int64[n_sk]    global range of the PCMS
    end: np.ndarray  # int64[n_sk]
    writes: np.ndarray  # int64[n_sk]   items added since creation
    last: np.ndarray  # int64[n_sk]     position of the last write (-1: none)
    geom: np.ndarray  # int64[5]        L, m, K, a, S
    hm: np.ndarray  # uint64[H*a]     mix64(kh ^ seed) ^ seed per channel row, for the channel's high word hk[ch]
    hk: np.ndarray  # uint64[H]
    ids: np.ndarray  # int64[2m - 1]  ingest scratch: the sketch ids holding the current position
    rows: np.ndarray  # uint64[(2m-1)*a] ingest scratch: the first cell of each row of each sketch in ids
    shs: np.ndarray  # uint64[2m - 1]  ingest scratch: the column shift of each sketch in ids


@inner
def _is_v4(hi, lo):
    return hi == np.uint64(0) and (lo >> np.uint64(32)) == np.uint64(0xFFFF)


@kernel
def _new_substream(st, k, t):
    """NEW_SUBSTREAM(k) of §3.5: fresh instances (zero counts) of the slot's whole + suffix sketches and the prefix block."""
    L, m, K, a, S = st.geom[0], st.geom[1], st.geom[2], st.geom[3], st.geom[4]
    slot = (k - 1) % K
    for q in range(m):
        sid = slot * m + q
        st.start[sid] = t + st.Ip[q] - 1
        st.end[sid] = t + L - 1
        st.owner[sid] = k
        st.writes[sid] = 0
        st.last[sid] = -1
    for q in range(1, m):
        sid = K * m + q - 1
        st.start[sid] = t
        st.end[sid] = t + st.I[q] - 1
        st.owner[sid] = k
        st.writes[sid] = 0
        st.last[sid] = -1
    for ch in range(st.sigma.shape[0]):
        for sid in range(slot * m, slot * m + m):
            _fresh(st, ch, sid, a, S)
        for sid in range(K * m, K * m + m - 1):
            _fresh(st, ch, sid, a, S)
    for sid in range(slot * m, slot * m + m):
        st.seen[0, sid] = 0
        st.seen[1, sid] = 0
    for sid in range(K * m, K * m + m - 1):
        st.seen[0, sid] = 0
        st.seen[1, sid] = 0


@inner
def _fresh(st, ch, sid, a, S):
    """A new PCMS instance in the cells of the one ``sid`` held: zero counts. The cells are cleared
    only if an item of the channel's family was written since the last reset (``seen``); otherwise
    they are still zero (at w = 100 000 with IPv4 traffic the IPv6 levels are never written: two
    thirds of the zeroing)."""
    fam = st.family[ch]
    if fam == FAMILY_V4:
        written = st.seen[0, sid]
    elif fam == FAMILY_V6:
        written = st.seen[1, sid]
    else:
        written = st.seen[0, sid] | st.seen[1, sid]
    if written:
        o = ch * S + st.off[sid]
        st.cells[o:o + a * st.width[sid]] = 0


@kernel
def _noise_of(st, ch, sid, out):
    """The noise PCMS ``sid`` of channel ``ch`` holds or will hold, in ``out`` (a test hook)."""
    out[:] = 0.0
    add_normal_stream(st.rng, ch, sid, st.owner[sid], out, st.sigma[ch, sid])


@inner
def _segment_end(I, Ip, m, L, p):
    """The last position of the run that starts at position ``p + 1``, in which every position
    lies in the same sketches: the run ends before the next prefix end ``I[q]`` or suffix start
    ``I'[q]`` is crossed, or at ``L``."""
    e = L
    for q in range(1, m):
        if I[q] > p and I[q] < e:
            e = I[q]
        if Ip[q] - 1 > p and Ip[q] - 1 < e:
            e = Ip[q] - 1
    return e


@hot
def _ingest(st, keys):
    """PROCESS(e) of §3.5 for every key of the batch (FREEZE is implicit: a PCMS is never written
    past its public end position, and reads check ``end <= t``). The batch is cut into runs of
    positions that lie in the same sketches (between two checkpoints of §3.2): the sketch ids and
    their clocks are set once per run, and each channel then takes the whole run in turn, so only
    that channel's sketches are in the cache while it counts. No allocation and no reference
    counting in the per-item loops."""
    L, m, K, a, S = st.geom[0], st.geom[1], st.geom[2], st.geom[3], st.geom[4]
    ids, rows, shs, cells, off, width, shift = st.ids, st.rows, st.shs, st.cells, st.off, st.width, st.shift
    I, Ip, writes, last, seen = st.I, st.Ip, st.writes, st.last, st.seen
    family, mask, seeds, hm, hk = st.family, st.mask, st.seeds.reshape(-1), st.hm, st.hk
    H = family.shape[0]
    t, k, p = st.clock[0], st.clock[1], st.clock[2]
    i0 = 0
    nk = keys.shape[0]
    while i0 < nk:
        if p >= L:
            p = 0
            k += 1
            _new_substream(st, k, t + 1)
        e = _segment_end(I, Ip, m, L, p)
        i1 = min(nk, i0 + e - p)
        slot = (k - 1) % K
        ids[0] = slot * m
        n = 1
        for q in range(1, m):  # prefixes: p <= I[q]; I decreasing
            if p + 1 > I[q]:
                break
            ids[n] = K * m + q - 1
            n += 1
        for q in range(1, m):  # suffixes: p >= I'[q]; I' increasing
            if p + 1 < Ip[q]:
                break
            ids[n] = slot * m + q
            n += 1
        n4 = 0
        for i in range(i0, i1):
            if _is_v4(keys[i, 0], keys[i, 1]):
                n4 += 1
        t += i1 - i0
        p += i1 - i0
        for j in range(n):
            writes[ids[j]] += i1 - i0
            last[ids[j]] = t
            if n4 > 0:
                seen[0, ids[j]] = 1
            if n4 < i1 - i0:
                seen[1, ids[j]] = 1
        for ch in range(H):
            fam = family[ch]
            if (fam == FAMILY_V4 and n4 == 0) or (fam == FAMILY_V6 and n4 == i1 - i0):
                continue  # no item of the channel's family in this run
            m0, m1, f0 = mask[ch, 0], mask[ch, 1], ch * a
            for j in range(n):  # the first cell of every row of every sketch the run reaches
                sid = ids[j]
                for r in range(a):
                    rows[j * a + r] = np.uint64(ch * S + off[sid] + r * width[sid])
                shs[j] = shift[sid]
            for i in range(i0, i1):
                hi = keys[ix(i), 0]
                lo = keys[ix(i), 1]
                if fam != FAMILY_ANY and (fam == FAMILY_V4) != _is_v4(hi, lo):
                    continue  # the other family's position: a no-op for this channel
                kh = hi & m0
                if kh != hk[ch]:  # hash_key's inner mix per row, kept for the channel's last high word
                    for r in range(a):
                        hm[f0 + r] = mix64(kh ^ seeds[f0 + r]) ^ seeds[f0 + r]
                    hk[ch] = kh
                x = (lo & m1) * LO_MULTIPLIER
                for r in range(a):  # hash_key(kh, lo & m1, seed) of every row
                    h = mix64(hm[f0 + r] ^ x)
                    for j in range(n):
                        cells[ix(rows[j * a + r] + (h >> shs[j]))] += np.int32(1)
        i0 = i1
    st.clock[0] = t
    st.clock[1] = k
    st.clock[2] = p


@kernel
def _estimate(st, ch, ids, keys, sum_min, out):
    """ESTIMATE of §4.1 for every key over the PCMSs ``ids`` of channel ``ch``: the sum of per-sketch
    row minima (``sum_min=False``) or the row minimum of per-row sums (§4.4 (ii)). The PCMSs are
    read as a copy of their counts plus their instance's noise (``vals``, for this call only). No
    key, no read."""
    if keys.shape[0] == 0:
        return
    a, S = st.geom[3], st.geom[4]
    base = ch * S
    start = np.empty(ids.shape[0] + 1, dtype=np.int64)
    start[0] = 0
    for j in range(ids.shape[0]):
        start[j + 1] = start[j] + a * st.width[ids[j]]
    vals = np.empty(start[-1], dtype=np.float64)
    for j in range(ids.shape[0]):
        sid = ids[j]
        o = base + st.off[sid]
        for u in range(start[j + 1] - start[j]):
            vals[start[j] + u] = st.cells[o + u]
        add_normal_stream(st.rng, ch, sid, st.owner[sid], vals[start[j]:start[j + 1]], st.sigma[ch, sid])
    hs = np.empty(a, dtype=np.uint64)
    rows = np.empty(a, dtype=np.float64)
    for i in range(keys.shape[0]):
        kh = keys[i, 0] & st.mask[ch, 0]
        kl = keys[i, 1] & st.mask[ch, 1]
        for r in range(a):
            hs[r] = hash_key(kh, kl, st.seeds[ch, r])
            rows[r] = 0.0
        total = 0.0
        for j in range(ids.shape[0]):
            sid = ids[j]
            wd = st.width[sid]
            sh = st.shift[sid]
            best = np.inf
            for r in range(a):
                v = vals[start[j] + r * wd + np.int64(hs[r] >> sh)]
                rows[r] += v
                if v < best:
                    best = v
            total += best
        if sum_min:
            total = np.inf if ids.shape[0] else 0.0
            for r in range(a):
                if rows[r] < total:
                    total = rows[r]
        out[i] = total


@kernel
def _fill_mixes(seeds, hm):
    for f in range(seeds.size):
        hm[f] = mix64(seeds.reshape(-1)[f]) ^ seeds.reshape(-1)[f]


def _hash_cache(seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ingest's per-channel hash cache (``hm``, ``hk``), filled for the high word 0."""
    hm = np.zeros(seeds.size, dtype=np.uint64)
    _fill_mixes(seeds, hm)
    return hm, np.zeros(seeds.shape[0], dtype=np.uint64)


# ---------------------------------------------------------------- the engine

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
        hm, hk = _hash_cache(seeds)
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
            _ingest(self.state, np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1, 2))

    def noise(self, channel: int, sid: int) -> np.ndarray:
        """The noise a read adds to PCMS ``sid`` of ``channel`` as now owned: for tests."""
        out = np.empty(self.depth * int(self.state.width[sid]), dtype=np.float64)
        _noise_of(self.state, channel, sid, out)
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
        _estimate(self.state, channel, ids, keys, estimator == "sum-min", out)
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
