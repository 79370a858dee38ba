"""LazyHH: private heavy hitters under continual observation [001 §5, Alg 6, Thm 3; docs/lazyhh.md §6].

A d × w LazyCMS (``dptop.engine.continual.lazysketch``) plus a candidate set C kept in a hash table. Every arrival
updates the sketch and joins C if new. Every k~ arrivals (t ≡ 0 mod k~, a public schedule: P1)
OUTPUT queries the sketch for every candidate and publishes H = {(y, v_y) : v_y > τ(t)}; PRUNE then
keeps the k~ candidates with the largest estimates. Between outputs H is re-released unchanged.

Parameters follow docs/lazyhh.md §6.3 (option A by default: w = ⌈e·k~⌉; option B: w = k~), with γ derived
from the σ in use: γ = σ·sqrt(2H·ln(4N/β)), N = ⌈T/k~⌉·d·w. Thresholds: λ1 = γ + w,
λ2(t) = e·t/w + γ, τ(t) = max(t/k, t/k~ + λ1 + 2λ2(t)) + 1, release iff v > τ(t).

On a live stream (no length, a public clock: ``horizon.ClockSteps``) one output step is one cell of
the clock instead: the cell's packets enter the stream, OUTPUT runs when the clock closes the cell
and is released, the k~ schedule only prunes; the union bounds behind d and γ count the segment's
steps (docs/lazyhh.md §7.5). How many releases exist, when and over which span then depends on the
clock and the parameters only.

Privacy: (ε, δ~)-DP under continual observation, δ~ = 2δ(3/2 + e^ε + δ), for substitution of one
packet's source, for streams of at most T arrivals (Thm 3; §6.7 caveats in the guarantee notes).
Never released: the candidate set or its size, estimates that failed τ, P, node sums, hash seeds.
The numba state and kernels (LAZYHH_UPDATE, OUTPUT, PRUNE) are in ``lazyhh_kernels``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from dptop.engine.core.base import Footprint
from dptop.engine.privacy import bulknoise
from dptop.engine.continual.gaussbm import (NOISE_OS, NOISE_SEEDED, check_gaussbm_epsilon, gaussbm_sigma,
                                            tree_height)
from dptop.engine.core.packing import packed
from dptop.engine.continual.horizon import ClockSteps, ContinualAlgorithm, HorizonStatus, resolve_horizon
from dptop.engine.continual.lazyhh_kernels import (CAND_N, OUT_N, OUT_T, T_NOW, hh_state_bytes, make_hh_state,
                                                   output_step, suppression_threshold, update_batch)
from dptop.engine.continual.lazysketch import LazySketch
from dptop.engine.core.registry import register
from dptop.engine.core.release import MODEL_CONTINUAL, Release, sorted_items
from dptop.engine.core.settings import PACKETS, check_positive_int
from dptop.engine.privacy.guarantee import Guarantee
from dptop.engine.privacy.measures import ApproxDP
from dptop.engine.privacy.units import Relation, counted_unit
from dptop.engine.core.facts import NO_FACTS
from dptop.engine.core.status import DetectionLimit, optional

E = math.e


def delta_tilde(epsilon: float, delta: float) -> float:
    """δ~ = 2δ(3/2 + e^ε + δ), the δ of LazyHH's guarantee (Thm 3)."""
    return 2.0 * delta * (1.5 + math.exp(epsilon) + delta)


def delta_for(epsilon: float, target_delta_tilde: float) -> float:
    """The δ giving a target δ~ (docs/lazyhh.md §6.7): δ = (−a + sqrt(a² + 2δ~))/2 with a = 3/2 + e^ε."""
    a = 1.5 + math.exp(epsilon)
    return (-a + math.sqrt(a * a + 2.0 * target_delta_tilde)) / 2.0


@dataclass(frozen=True)
class LazyHHParams:
    """Every derived constant of one LazyHH instance (docs/lazyhh.md §6.3), computable before any data."""

    k: int
    k_tilde: int
    epsilon: float
    delta: float
    beta: float
    horizon: int
    option: str
    depth: int
    width: int
    height: int
    sigma: float
    gamma: float

    @classmethod
    def build(cls, k, k_tilde, epsilon, delta, beta, horizon, option="A", steps=0) -> "LazyHHParams":
        """Validate (docs/lazyhh.md §6.1, L13) and derive d, w, H, σ, γ (docs/lazyhh.md §6.3).
        ``steps``: output steps on the public clock per horizon besides the k~ schedule (§7.5):
        each estimates up to 2k~ candidates, so the union bounds behind d and γ count them too."""
        k = check_positive_int("k", k)
        k_tilde = check_positive_int("k~", k_tilde)
        if k_tilde <= k:
            raise ValueError(f"k~ ({k_tilde}) must be > k ({k}) (docs/lazyhh.md §6.1)")
        epsilon = check_gaussbm_epsilon(epsilon)
        delta = float(delta)
        if not 0.0 < delta < 0.5:
            raise ValueError(f"delta ({delta:g}) must be in (0, 0.5) (docs/lazyhh.md §6.1, Lem 6)")
        beta = float(beta)
        if not 0.0 < beta < delta:
            raise ValueError(f"beta ({beta:g}) must be in (0, delta = {delta:g}) (docs/lazyhh.md §6.1)")
        horizon = check_positive_int("horizon", horizon)
        if horizon < k_tilde:
            raise ValueError(f"horizon ({horizon}) must be >= k~ ({k_tilde}) (docs/lazyhh.md §6.1)")
        if option not in ("A", "B"):
            raise ValueError(f"option ({option!r}) must be 'A' (w = ceil(e k~)) or 'B' (w = k~)")
        steps = int(steps)
        depth = math.ceil(math.log(4.0 * (horizon + k_tilde * steps) / beta))
        width = math.ceil(E * k_tilde) if option == "A" else k_tilde
        height = tree_height(LazySketch.cell_horizon(horizon, width))
        sigma = gaussbm_sigma(height, epsilon, delta, 2 * depth)
        pairs = (-(-horizon // k_tilde) + steps) * depth * width
        gamma = sigma * math.sqrt(2.0 * height * math.log(4.0 * pairs / beta))
        return cls(k, k_tilde, epsilon, delta, beta, horizon, option, depth, width, height, sigma, gamma)

    @property
    def delta_tilde(self) -> float:
        return delta_tilde(self.epsilon, self.delta)

    def threshold(self, t: int) -> float:
        """τ(t): a released estimate must exceed it (docs/lazyhh.md §6.5 OUTPUT step 1)."""
        return float(suppression_threshold(t, self.k, self.k_tilde, self.width, self.gamma))

    def tau1_binds_after(self) -> float | None:
        """The t after which τ1 = t/k is the binding threshold (None: never), docs/lazyhh.md §6.9."""
        slope = 1.0 / self.k - 1.0 / self.k_tilde - 2.0 * E / self.width
        if slope <= 0:
            return None
        return (self.gamma + self.width + 2.0 * self.gamma) / slope


def detection_limit(p: LazyHHParams) -> tuple[int, float]:
    """(count released w.p. >= 0.9 by t = T, error bound of an estimate): LazySketch never
    underestimates but for its Gaussian noise, bounded by γ w.p. >= 1 − β (docs/lazyhh.md §6.3), so a count
    of τ(T) + γ passes; the error is the CountMin collision bound e·T/w plus γ."""
    T = p.horizon
    return math.ceil(p.threshold(T) + p.gamma), E * T / p.width + p.gamma


def clock_steps(settings, facts) -> int:
    """Output steps on the public clock per horizon (a live segment's cells, §7.5); 0 on a replay."""
    clock = ClockSteps.of(settings, facts)
    return 0 if clock is None else clock.segment


LIVE_SHARES = (0.3, 0.1)
"""The source shares whose release time a live panel states up front."""


def release_after(p: LazyHHParams, share: float) -> int | None:
    """Arrivals into a horizon (segment) after which a source sending ``share`` of them is
    released with probability >= 0.9: the first output step t (a multiple of k~) with
    share·t >= τ(t) + γ, as ``detection_limit``; None when no t <= T qualifies. Exact from the two
    linear pieces of τ (docs/lazyhh.md §6.3): t(share − 1/k) >= γ + 1 and
    t(share − 1/k~ − 2e/w) >= 4γ + w + 1."""
    need = 0.0
    for slope, height in ((share - 1.0 / p.k, p.gamma + 1.0),
                          (share - 1.0 / p.k_tilde - 2.0 * E / p.width, 4.0 * p.gamma + p.width + 1.0)):
        if slope <= 0:
            return None
        need = max(need, height / slope)
    t = max(1, math.ceil(need / p.k_tilde)) * p.k_tilde
    while t <= p.horizon and share * t < p.threshold(t) + p.gamma:  # float rounding at the boundary
        t += p.k_tilde
    return t if t <= p.horizon else None


def shortest_stream(settings, share: float) -> int | None:
    """The smallest horizon T at which a source with ``share`` of the packets passes (None: none
    up to 2^40), searched over powers of two and then bisected."""
    def passes(T):
        p = LazyHH._params(settings.with_(horizon=T))
        return detection_limit(p)[0] <= share * T

    lo = max(2, (settings.k_tilde or 4 * settings.k))
    hi = lo
    while not passes(hi):
        hi *= 2
        if hi > 1 << 40:
            return None
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if not passes(mid) else (lo, mid)
    return hi


class LazyHHInstance:
    """One LazyHH run over one horizon: the sketch, the candidates and the last output."""

    def __init__(self, params: LazyHHParams, seed: int | None = None, noiseless: bool = False):
        self.params = params
        self.sketch = LazySketch(params.horizon, params.epsilon, params.delta, params.width, params.depth,
                                 kind="cms", seed=seed, noiseless=noiseless)
        table_seed = None if seed is None else np.uint64(np.random.SeedSequence((seed, 0x7AB)).generate_state(1)[0])
        self.state, self.sketch.rng = packed((make_hh_state(self.sketch, params.k_tilde, table_seed),
                                              self.sketch.rng))
        self.sketch.state = self.state.sk  # one block for the sketch, its lanes and the candidates

    @property
    def t(self) -> int:
        return int(self.state.meta[T_NOW])

    def update(self, keys: np.ndarray) -> int:
        """Process keys (within the horizon); the batch index of the last output step, or -1."""
        p = self.params
        if self.t + len(keys) > p.horizon:
            raise ValueError(f"{self.t} + {len(keys)} arrivals exceed the horizon ({p.horizon})")
        last = update_batch(self.state, keys, self.sketch.noise_sigma, self.sketch.rng,
                         float(p.k), np.int64(p.k_tilde), p.gamma)
        self.sketch.arrivals = self.t
        return int(last)

    def output_now(self) -> None:
        """OUTPUT(t) now, at the arrivals seen so far (a step of the public clock, docs/lazyhh.md
        §7.5): every candidate estimated, those above τ(t) published; no PRUNE (the k~ schedule
        keeps |C| <= 2k~)."""
        p = self.params
        output_step(self.state, np.int64(self.t), float(p.k), np.int64(p.k_tilde), p.gamma)

    def output(self):
        """(keys (m, 2), estimates (m,), τ, t) of the last OUTPUT; empty with t = 0 before it."""
        st = self.state
        m = int(st.meta[OUT_N])
        keys = np.stack([st.out_hi[:m], st.out_lo[:m]], axis=1)
        return keys, st.out_val[:m].copy(), float(st.out_tau[0]), int(st.meta[OUT_T])

    def _candidates(self) -> np.ndarray:
        """Test hook only (never released, P2): the current candidate keys."""
        n = int(self.state.meta[CAND_N])
        return np.stack([self.state.cand_hi[:n], self.state.cand_lo[:n]], axis=1)


@dataclass(frozen=True, kw_only=True)
class LazyHHStatus(HorizonStatus):
    """The horizon, the threshold τ(t) now and ``packets_until_output`` (the next output time), the
    t after which τ1 = t/k binds (None: never), the public parameters, and on a restarting live
    stream ``release_times``: when sources of a given share are released at the current rate."""

    threshold: float
    packets_until_output: int | None
    tau1_binds_after: float | None
    k: int
    k_tilde: int
    depth: int
    width: int
    sigma: float
    gamma: float
    delta_tilde: float
    release_times: str = optional("")
    note: str = optional("")


@dataclass(frozen=True, kw_only=True)
class LazyHHFigures(LazyHHStatus):
    """What one LazyHH release states: the status at that moment and ``output_at``, the output
    step t it was computed at (None: none yet)."""

    output_at: int | None


@register
class LazyHH(ContinualAlgorithm):
    """LazyHH as a dptop algorithm: k = ``Settings.k``, k~ = ``Settings.k_tilde`` (default 4k,
    001 Fig 4c), β = ``extra['beta']`` (default δ/2), width option ``extra['option']`` ('A')."""

    name = "lazyhh"
    parameters = ("beta", "option")

    def __init__(self, settings, facts=NO_FACTS, counting=PACKETS):
        k = check_positive_int("k", settings.k)
        k_tilde = check_positive_int("k~", settings.k_tilde or 4 * k)
        super().__init__(settings, facts, counting, minimum_horizon=k_tilde)
        beta = float(settings.extra.get("beta", float(settings.delta) / 2))
        self.params = LazyHHParams.build(k, k_tilde, settings.epsilon, settings.delta, beta, self.horizon,
                                         str(settings.extra.get("option", "A")), clock_steps(settings, facts))
        self.reset()

    @staticmethod
    def requested_cost(settings) -> ApproxDP:
        """(ε, δ~) of Thm 3 for the settings' (ε, δ) (engine/privacy/calibration.py)."""
        return ApproxDP(settings.epsilon, delta_tilde(settings.epsilon, settings.delta))

    @staticmethod
    def settings_for_cost(settings, cost: ApproxDP):
        return settings.with_(epsilon=cost.epsilon, delta=delta_for(cost.epsilon, cost.delta))

    @classmethod
    def with_defaults(cls, settings, facts=NO_FACTS, counting=PACKETS):
        """k~ (when unset): for a replay, the multiple of k among 2, 4, 8, 16 whose a-priori
        detection share at the horizon is smallest (001 Fig 4c: k~/k = 4 in general; short streams
        favour other ones); on a live stream (segments, no length), the multiple among 4 ... 64
        (k~ <= 2^12) that releases a 10 % source earliest in a segment (``release_after``)."""
        if settings.k_tilde is not None:
            return settings
        if facts.length is None and settings.horizon is None:
            multiples = [m for m in (4, 8, 16, 32, 64) if m * settings.k <= 1 << 12] or [4]

            def later(m):
                t = release_after(cls._params(settings.with_(k_tilde=m * settings.k), facts), LIVE_SHARES[-1])
                return (t is None, t or 0, m)

            return settings.with_(k_tilde=min(multiples, key=later) * settings.k)
        best = min((4, 2, 8, 16), key=lambda m: detection_limit(
            cls._params(settings.with_(k_tilde=m * settings.k), facts, counting))[0])
        return settings.with_(k_tilde=best * settings.k)

    @staticmethod
    def _params(settings, facts=NO_FACTS, counting=PACKETS) -> LazyHHParams:
        k = check_positive_int("k", settings.k)
        k_tilde = check_positive_int("k~", settings.k_tilde or 4 * k)
        horizon, _ = resolve_horizon(settings, facts, counting, k_tilde)
        beta = float(settings.extra.get("beta", float(settings.delta) / 2))
        return LazyHHParams.build(k, k_tilde, settings.epsilon, settings.delta, beta, horizon,
                                  str(settings.extra.get("option", "A")), clock_steps(settings, facts))

    def detectable(self) -> DetectionLimit:
        count, error = detection_limit(self.params)
        T = self.params.horizon
        out = DetectionLimit(count, count / T, error, f"the horizon of T = {T} arrivals")
        if self.restart:
            out = replace(out, over=f"each segment of T = {T} arrivals",
                          after=tuple((share, release_after(self.params, share)) for share in LIVE_SHARES))
        if count > 0.1 * T:
            need = shortest_stream(self.settings, 0.1)
            out = replace(out, note=(f"at ε = {self.params.epsilon:g} a source needs {count} of the {T} packets; "
                                     + (f"a 10 % source is released on streams of >= {need} packets" if need else
                                        "no stream up to 2^40 packets releases a 10 % source")))
        return out

    @classmethod
    def footprint(cls, settings, facts=NO_FACTS, counting=PACKETS):
        """One instance over one horizon: its sketch and 2k~ candidates (``_params``)."""
        p = cls._params(settings, facts, counting)
        height = LazySketch.height_for(p.horizon, p.width)
        return Footprint(hh_state_bytes(p.depth, p.width, height, p.k_tilde),
                         f"k~ = {p.k_tilde} (a {p.depth} x {p.width} sketch over a horizon of {p.horizon} packets)")

    def _new_instance(self):
        seed = None if self.settings.seed is None else self.settings.seed + self.epoch
        return LazyHHInstance(self.params, seed=seed)

    def _feed(self, keys):
        return self.instance.update(keys)

    def _output_now(self):
        """OUTPUT(t) at the close of a step of the public clock (docs/lazyhh.md §7.5)."""
        self.instance.output_now()

    def _release(self, end_packet, t_end, computed):
        keys, vals, tau, t_out = self.instance.output()
        items = sorted_items(keys[:, 0], keys[:, 1], bulknoise.on_grid(vals))  # whole updates: no float bits
        threshold = tau if t_out else self.params.threshold(self.t)
        status = self._status(LazyHHFigures, output_at=t_out)
        return Release(self.name, self.span_to(end_packet, t_end), items, threshold, self.guarantee(), status)

    def guarantee(self) -> Guarantee:
        p = self.params
        return Guarantee(
            MODEL_CONTINUAL, ApproxDP(p.epsilon, p.delta_tilde), Relation.SUBSTITUTE,
            scope=self.horizon_scope(), noise=NOISE_SEEDED if self.settings.seed is not None else NOISE_OS,
            seeded=self.settings.seed is not None, facts=self.horizon_facts(),
            notes=(
                f"δ~ = 2δ(3/2 + e^ε + δ) = {p.delta_tilde:.3g} from δ = {p.delta:g} (Thm 3); β = {p.beta:g}.",
                f"LazyCMS d×w = {p.depth}×{p.width} (option {p.option}), H = {p.height}, σ = {p.sigma:.4g}, "
                + (f"γ = {p.gamma:.4g}; output recomputed at the close of every cell of the public clock (one "
                 f"output step, §7.5), re-released in between; the k~ = {p.k_tilde} schedule only prunes."
                 if self.clock is not None else
                 f"γ = {p.gamma:.4g}; output recomputed every k~ = {p.k_tilde} arrivals, re-released in between."),
                "Released: labels whose LazyCMS estimate exceeds τ(t) = max(t/k, t/k~ + λ1 + 2λ2) + 1; "
                "never the candidate set, its size or failed estimates.",
                "Only substitution of one packet's key is protected, not packet presence (docs/lazyhh.md §1.2).",
                "Thm 3's proof treats the common candidate set as fixed (docs/lazyhh.md §6.7 caveat).",
            ),
        ).counted(counted_unit(self.counting))

    def status(self) -> LazyHHStatus:
        """Public facts: horizon, packets seen, τ at the current t and when τ1 = t/k takes over.
        All are functions of t and the parameters (never of the candidates, P2)."""
        return self._status(LazyHHStatus)

    def _status(self, status_type: type[LazyHHStatus], **more) -> LazyHHStatus:
        p = self.params
        binds = p.tau1_binds_after()
        tau = p.threshold(self.t)
        release_times = note = ""
        rate = self.arrival_rate()
        if self.restart and rate:
            seen = []
            for share in LIVE_SHARES:
                t = release_after(p, share)
                seen.append(f"a {share:.0%} source after ≈ {t / rate:,.0f} s" if t else f"a {share:.0%} source never")
            release_times = (f"at the current {rate:,.0f} packets/s, {' and '.join(seen)} of each segment "
                             f"of {p.horizon:,} packets (≈ {p.horizon / rate:,.0f} s)")
        if binds is None or self.t < binds:
            note = (f"suppression: an item is released only once its estimate exceeds τ = {tau:.0f} "
                    f"packets (at t = {self.t}); τ falls to t/k only after t = "
                    + ("never within this horizon" if binds is None or binds > p.horizon else f"{binds:.0f}"))
        if release_times:
            note = "; ".join(x for x in (release_times, note) if x)
        return self.horizon_status(
            status_type, threshold=tau,
            packets_until_output=None if self.exhausted else p.k_tilde - self.t % p.k_tilde,
            tau1_binds_after=binds, k=p.k, k_tilde=p.k_tilde, depth=p.depth, width=p.width,
            sigma=p.sigma, gamma=p.gamma, delta_tilde=p.delta_tilde, release_times=release_times, note=note, **more)
