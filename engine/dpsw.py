"""DPSW-Sketch: private frequencies over the last w packets (spec dpsw-sketch.md, seed 004).

The stream is cut into substreams of ``L`` items. Each substream owns ``2m-1`` Private Count-Min
Sketches (PCMS, §2): the whole ``C_1``, ``m-1`` prefixes ``C_j`` (its first ``I[j]`` items) and
``m-1`` suffixes ``C'_j`` (its last ``I[j]`` items), with the data-independent checkpoint list ``I``
of §3.2. Every cell of every PCMS gets its own ``N(0, a/ρ_j)`` draw when the PCMS is created
(§3.5 NEW_SUBSTREAM) and only +1s afterwards. **Frozen rule** (§0, §9 P1/P2): a PCMS is read only
once its whole public range has been absorbed, and no write reaches it after that; a query is then
post-processing, so queries are unlimited (§1.2). This module implements 004 with the spec's fixes
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
* hashing: per channel and row a 64-bit keyed mix (``engine.keys.hash_key``) with seeds from
  ``os.urandom`` (§11 asks for 2-universal; privacy does not depend on it);
* query rules (§4.4, all post-processing of frozen PCMSs and public numbers): ``plan="004"``
  (this class's default, §4.1) or ``"noise-aware"`` (§4.4 (i)); ``estimator="min"`` (default,
  per-sketch min) or ``"sum-min"`` (§4.4 (ii)); ``debias`` adds the public constant of §4.4 (iii).
  The ``dpsw`` algorithm (engine/dpsw_hh.py) picks its own defaults from measurements.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import numpy as np

import functools

from engine.bulknoise import fill_normal, make_rng
from engine.jit import inner, kernel
from engine.keys import hash_key, random_seed64
from engine.settings import check_delta, check_epsilon, check_positive_int

WHOLE, PREFIX, SUFFIX = 0, 1, 2
MIN_WIDTH = 64
PLANS = ("004", "noise-aware")
ESTIMATORS = ("min", "sum-min")
FAMILY_ANY, FAMILY_V4, FAMILY_V6 = 0, 4, 6

NOISE_OS = ("PCMS cell noise: Gaussian N(0, a/rho_j), one draw per cell at sketch creation, from "
            "xoshiro256** (engine.bulknoise) seeded from os.urandom")
NOISE_SEEDED = "seeded generator (Settings.seed): reproducible, NOT private"


# ---------------------------------------------------------------- privacy maps (pure functions)

def rho_from_epsilon_delta(epsilon: float, delta: float) -> float:
    """ρ with ρ + 2·sqrt(ρ·ln(1/δ)) = ε, in the stable form ε²/(√(ε+ln(1/δ)) + √(ln(1/δ)))² (§1.2)."""
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    ln = math.log(1.0 / delta)
    return epsilon * epsilon / (math.sqrt(epsilon + ln) + math.sqrt(ln)) ** 2


def as_alpha(alpha) -> Fraction:
    """α as an exact rational in (0, 1): floats go through their shortest decimal (0.95 -> 19/20)."""
    try:
        value = Fraction(str(alpha)) if isinstance(alpha, float) else Fraction(alpha)
    except (ValueError, TypeError, ZeroDivisionError):
        raise ValueError(f"alpha ({alpha!r}) must be a number in (0, 1), e.g. 0.75 or '3/4'") from None
    if not 0 < value < 1:
        raise ValueError(f"alpha ({alpha!r}) must be in (0, 1)")
    return value


def checkpoints(length: int, alpha) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(I, I')`` of §3.2 (closed form, exact arithmetic): ``I[0] = L``, ``I[k+1] = ⌈(1−α)I[k]⌉``
    (or ``I[k] − 1``) down to 1; ``I'[j] = L − I[j] + 1`` is the 1-based start of suffix ``j``."""
    length = check_positive_int("substream length L", length)
    alpha = as_alpha(alpha)
    keep_num, den = alpha.denominator - alpha.numerator, alpha.denominator
    out = [length]
    while out[-1] > 1:
        x = out[-1]
        y = -((-x * keep_num) // den)
        out.append(min(y, x - 1))
    return tuple(out), tuple(length - v + 1 for v in out)


def budgets(rho: float, alpha, m: int) -> tuple[float, ...]:
    """Per-PCMS budgets of §3.4: ``ρ_1 = ρα(2−α)``, ``ρ_j = ρα^(j−2)(1−α)³/2`` (index 0 is ``ρ_1``)."""
    a = float(as_alpha(alpha))
    return (rho * a * (2 - a),) + tuple(rho * a ** (j - 2) * (1 - a) ** 3 / 2 for j in range(2, m + 1))


def position_costs(I, Ip, rhos) -> np.ndarray:
    """``cost(p)`` of §3.4 for p = 1..L: the budget of every PCMS that contains position p."""
    L = I[0]
    p = np.arange(1, L + 1)
    cost = np.full(L, rhos[0])
    for q in range(1, len(I)):
        cost += rhos[q] * (p <= I[q]) + rhos[q] * (p >= Ip[q])
    return cost


def sketch_widths(width: int, I) -> tuple[int, ...]:
    """``b_j``: power of two >= ``b·I[j]/L``, clipped to ``[min(64, b), b]`` (module docstring)."""
    L = I[0]
    out = []
    for n in I:
        need = -(-width * n // L)
        out.append(max(min(MIN_WIDTH, width), min(width, 1 << max(0, need - 1).bit_length())))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def expected_max_normal(a: int) -> float:
    """``c_a = E[max of a iid N(0,1)]`` (so a min over ``a`` noisy cells is biased by ``−c_a·σ``, §4.2)."""
    if a == 1:
        return 0.0
    x = np.linspace(-12.0, 12.0, 48001)
    cdf = np.array([0.5 * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x])
    # E[max] = ∫ (1 − F^a) dx over x > 0 − ∫ F^a dx over x < 0
    integrand = np.where(x >= 0, 1.0 - cdf ** a, -(cdf ** a))
    return float(np.sum((integrand[1:] + integrand[:-1]) * 0.5) * (x[1] - x[0]))


# ---------------------------------------------------------------- geometry and query plans (§4.1)

class PlanEntry(NamedTuple):
    kind: int  # WHOLE, PREFIX or SUFFIX
    k: int  # 1-based substream index
    q: int  # 0-based index into I (q = 0 is the whole substream)


class Plan(NamedTuple):
    t: int
    entries: tuple[PlanEntry, ...]
    covered: tuple[int, int]  # 1-based global positions [start, end] the plan counts (public)


@dataclass(frozen=True)
class Geometry:
    """The public structure (§3): window ``w``, substream length ``L``, ``α``, ``I``, ``I'``, ``K`` slots."""

    w: int
    L: int
    alpha: Fraction
    I: tuple[int, ...]
    Ip: tuple[int, ...]

    @classmethod
    def make(cls, w: int, L: int, alpha) -> "Geometry":
        w = check_positive_int("window", w, minimum=2)
        L = check_positive_int("substream length L", L)
        if L > w:
            raise ValueError(f"substream length L ({L}) must be <= window ({w})")
        I, Ip = checkpoints(L, alpha)
        return cls(w, L, as_alpha(alpha), I, Ip)

    @property
    def m(self) -> int:
        return len(self.I)

    @property
    def K(self) -> int:
        """Ring slots: ``⌈w/L⌉ + 1`` retained substreams (§11)."""
        return -(-self.w // self.L) + 1

    def substream_start(self, k: int) -> int:
        return (k - 1) * self.L + 1

    def entry_range(self, e: PlanEntry) -> tuple[int, int]:
        """Global positions ``[start, end]`` of a PCMS (§3.3)."""
        s = self.substream_start(e.k)
        if e.kind == PREFIX:
            return s, s + self.I[e.q] - 1
        if e.kind == SUFFIX:
            return s + self.Ip[e.q] - 1, s + self.L - 1
        return s, s + self.L - 1

    def plan(self, t: int, rule: str = "004", sigma=None, gamma: float = 0.0) -> Plan:
        """PLAN(t) of §4.1 (``rule="004"``) or the noise-aware choice of §4.4 (i), which for each
        partial substream picks the option minimising ``γ·|misaligned items| + σ_option`` (option
        "nothing" included); both depend only on ``t`` and public parameters."""
        if t <= 0:
            return Plan(t, (), (1, 0))
        w, L, I, Ip = self.w, self.L, self.I, self.Ip
        s = max(t - w + 1, 1)
        l, lo = -(-t // L), -(-s // L)
        c = t - (l - 1) * L
        S_l = self.substream_start(l)
        if rule == "004":
            y = next(q for q in range(self.m) if I[q] <= c)
            new = PlanEntry(WHOLE if y == 0 else PREFIX, l, y)
            end = S_l + I[y] - 1
        else:
            options = [(gamma * c, None, S_l - 1)]
            options += [(gamma * (c - I[q]) + sigma[q], PlanEntry(WHOLE if q == 0 else PREFIX, l, q), S_l + I[q] - 1)
                        for q in range(self.m) if I[q] <= c]
            _, new, end = min(options, key=lambda o: o[0])
        tail = (new,) if new is not None else ()
        if lo == l:
            return Plan(t, tail, (S_l, end))
        qs = s - (lo - 1) * L  # window start inside substream l'
        S_o = self.substream_start(lo)
        if rule == "004":
            x = max(q for q in range(self.m) if Ip[q] <= qs)
            old, start = PlanEntry(WHOLE if x == 0 else SUFFIX, lo, x), S_o + Ip[x] - 1
        else:
            options = [(gamma * (L - qs + 1), None, S_o + L)]
            options += [(gamma * abs(qs - Ip[q]) + sigma[q], PlanEntry(WHOLE if q == 0 else SUFFIX, lo, q),
                         S_o + Ip[q] - 1) for q in range(self.m)]
            _, old, start = min(options, key=lambda o: o[0])
        head = (old,) if old is not None else ()
        middle = tuple(PlanEntry(WHOLE, k, 0) for k in range(lo + 1, l))
        return Plan(t, head + middle + tail, (start, end))


# ---------------------------------------------------------------- numba state and kernels

class DPSWState(NamedTuple):
    cells: np.ndarray  # float64[H*S]   every channel's PCMS cells, flat (channel block of S cells)
    off: np.ndarray  # int64[n_sk]      offset of sketch id inside a channel block
    width: np.ndarray  # int64[n_sk]    columns of sketch id
    shift: np.ndarray  # uint64[n_sk]   column = hash >> shift
    sigma: np.ndarray  # float64[H, n_sk] noise standard deviation sqrt(a/ρ_j)
    I: np.ndarray  # int64[m]
    Ip: np.ndarray  # int64[m]
    seeds: np.ndarray  # uint64[H, a]
    mask: np.ndarray  # uint64[H, 2]    channel key = (hi & mask[0], lo & mask[1])
    family: np.ndarray  # int64[H]       FAMILY_ANY / FAMILY_V4 / FAMILY_V6
    rng: np.ndarray  # uint64[4]
    clock: np.ndarray  # int64[3]       t (items so far), k (current substream), p (position in it)
    owner: np.ndarray  # int64[n_sk]    substream whose PCMS the id holds (instrumentation + checks)
    start: np.ndarray  # int64[n_sk]    global range of the PCMS
    end: np.ndarray  # int64[n_sk]
    writes: np.ndarray  # int64[n_sk]   items added since creation
    last: np.ndarray  # int64[n_sk]     position of the last write (-1: none)
    geom: np.ndarray  # int64[5]        L, m, K, a, S


@inner
def _is_v4(hi, lo):
    return hi == np.uint64(0) and (lo >> np.uint64(32)) == np.uint64(0xFFFF)


@kernel
def _new_substream(st, k, t):
    """NEW_SUBSTREAM(k) of §3.5: fresh noise in the slot's whole + suffix sketches and the prefix block."""
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
            o = ch * S + st.off[sid]
            fill_normal(st.rng, st.cells[o:o + a * st.width[sid]], st.sigma[ch, sid])
        for sid in range(K * m, K * m + m - 1):
            o = ch * S + st.off[sid]
            fill_normal(st.rng, st.cells[o:o + a * st.width[sid]], st.sigma[ch, sid])


@kernel
def _ingest(st, keys):
    """PROCESS(e) of §3.5 for every key of the batch (FREEZE is implicit: a PCMS is never written
    past its public end position, and reads check ``end <= t``)."""
    L, m, K, a, S = st.geom[0], st.geom[1], st.geom[2], st.geom[3], st.geom[4]
    H = st.sigma.shape[0]
    ids = np.empty(2 * m - 1, dtype=np.int64)
    hs = np.empty(a, dtype=np.uint64)
    t, k, p = st.clock[0], st.clock[1], st.clock[2]
    for i in range(keys.shape[0]):
        t += 1
        p += 1
        if p > L:
            p = 1
            k += 1
            _new_substream(st, k, t)
        slot = (k - 1) % K
        ids[0] = slot * m
        n = 1
        for q in range(1, m):  # prefixes: p <= I[q]; I decreasing
            if p > st.I[q]:
                break
            ids[n] = K * m + q - 1
            n += 1
        for q in range(1, m):  # suffixes: p >= I'[q]; I' increasing
            if p < st.Ip[q]:
                break
            ids[n] = slot * m + q
            n += 1
        for j in range(n):
            st.writes[ids[j]] += 1
            st.last[ids[j]] = t
        hi = keys[i, 0]
        lo = keys[i, 1]
        v4 = _is_v4(hi, lo)
        for ch in range(H):
            fam = st.family[ch]
            if (fam == FAMILY_V4 and not v4) or (fam == FAMILY_V6 and v4):
                continue  # the other family's position: a no-op for this channel
            kh = hi & st.mask[ch, 0]
            kl = lo & st.mask[ch, 1]
            for r in range(a):
                hs[r] = hash_key(kh, kl, st.seeds[ch, r])
            base = ch * S
            for j in range(n):
                sid = ids[j]
                o = base + st.off[sid]
                wd = st.width[sid]
                sh = st.shift[sid]
                for r in range(a):
                    st.cells[o + r * wd + np.int64(hs[r] >> sh)] += 1.0
    st.clock[0] = t
    st.clock[1] = k
    st.clock[2] = p


@kernel
def _estimate(st, ch, ids, keys, sum_min, out):
    """ESTIMATE of §4.1 for every key over the PCMSs ``ids`` of channel ``ch``: the sum of per-sketch
    row minima (``sum_min=False``) or the row minimum of per-row sums (§4.4 (ii))."""
    a, S = st.geom[3], st.geom[4]
    base = ch * S
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
            o = base + st.off[sid]
            wd = st.width[sid]
            sh = st.shift[sid]
            best = np.inf
            for r in range(a):
                v = st.cells[o + r * wd + np.int64(hs[r] >> sh)]
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

    def _build(self) -> None:
        g, a = self.geometry, self.depth
        m, K = g.m, g.K
        qs = [q for _ in range(K) for q in range(m)] + list(range(1, m))  # I-index of every sketch id
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
        n_sk = len(qs)
        self.state = DPSWState(
            cells=np.zeros(H * S, dtype=np.float64), off=off, width=width,
            shift=np.array([64 - (int(v).bit_length() - 1) for v in width], dtype=np.uint64),
            sigma=sigma, I=np.array(g.I, dtype=np.int64), Ip=np.array(g.Ip, dtype=np.int64),
            seeds=seeds, mask=masks, family=np.array([c.family for c in self.channels], dtype=np.int64),
            rng=make_rng(self.seed),
            clock=np.array([0, 0, g.L], dtype=np.int64),
            owner=np.full(n_sk, -1, dtype=np.int64), start=np.zeros(n_sk, dtype=np.int64),
            end=np.full(n_sk, np.iinfo(np.int64).max, dtype=np.int64),
            writes=np.zeros(n_sk, dtype=np.int64), last=np.full(n_sk, -1, dtype=np.int64),
            geom=np.array([g.L, m, K, a, S], dtype=np.int64))

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
