"""``dpsw``: heavy hitters of the last w packets from DPSW-Sketch, without scanning the address space
(docs/dpsw-sketch.md §5).

Three ways to pick the labels, all post-processing of frozen sketches and public values (§5.2):

* ``hierarchy`` (default, §5.2 (b)): one DPSW channel per prefix level — IPv4 /8, /16, /24, /32
  (``extra['levels']``) and IPv6 /8 ... /64 in 8-bit steps (``extra['ipv6_levels']``, ``off`` to
  disable), IPv6 reported at its last level (a /64 by default). Keys that are not addresses
  (ports, protocols, pairs, networks: ``Settings.key``) take their kind's trees instead
  (``KeyKind.hierarchy``; a network kind's own keys are the last level), every level a channel of
  its own with ρ split over all of them (one family). Every channel shares the position
  counter; each family's levels split ρ equally (sequential composition), and with the shared
  counter each family may use the full ρ (§5.2 "Mixed IPv4/IPv6" [derived]). Top-down search
  ``HH_TREE``: expand only prefixes whose estimate clears ``threshold − κ_ℓ``.
* ``candidates`` (§5.2 (a)): ``extra['candidates']`` = a file of addresses / CIDR prefixes (one per
  line, ``#`` comments), fixed independently of the monitored traffic; one flat DPSW with the full ρ.
* ``domain_scan`` (§5.1, the paper's experiment): ``extra['domain_scan'] = N`` scans the synthetic
  domain of Zipf ranks 1..N (``dptop.engine.core.workload.ipv4_of_rank``); one flat DPSW with the full ρ.

Candidates are **never** taken from the monitored traffic (§5.2 (c): the label leak, P7).

Query defaults: ``plan=noise-aware``, ``estimator=sum-min``, ``debias=true`` (§4.4 (i)-(iii)) and
``scale=true`` (rescale to the window length by the plan's public coverage). All are
post-processing of frozen sketches with public numbers, so they cost no privacy. docs/dpsw-sketch.md §4.4 asks to
ship them behind flags with 004's rule as the default and to compare them on traces; the comparison
is why the default differs: on the reference setting (Zipf 1.1, w = 250000, ε = 1, depth 5, domain
scan, ``bench_window.window_experiment``) 004's rule gives F1 0.84 / 0.91 at γ = 0.005 / 0.01 and
MRE 1.6 on the top 100 (below the authors' C++), these defaults F1 0.96 / 0.96 and MRE 0.11. 004's
rule is ``plan=004 estimator=min debias=false scale=false``.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from dptop.engine.core.base import Algorithm, Footprint
from dptop.engine.sliding_window.dpsw import NOISE_OS, NOISE_SEEDED, Channel, DPSWSketch
from dptop.engine.sliding_window.dpsw_kernels import FAMILY_ANY
from dptop.engine.sliding_window.dpsw_labels import (IPV4_LEVELS, IPV6_LEVELS, children_offsets, domain_keys,
                                                     hierarchy_budget_use, hierarchy_channels, load_candidates,
                                                     parse_levels)
from dptop.engine.sliding_window.geometry import ESTIMATORS, PLANS, Geometry, rho_from_epsilon_delta
from dptop.engine.core.facts import PublicFact
from dptop.engine.privacy.bulknoise import on_grid
from dptop.engine.privacy.guarantee import Guarantee
from dptop.engine.privacy.measures import ZCDP, zcdp_epsilon
from dptop.engine.privacy.units import Relation, counted_unit
from dptop.engine.core.registry import register
from dptop.engine.core.release import MODEL_WINDOW, Release, ReleasedItem, Span
from dptop.engine.core.settings import PACKETS, check_delta, check_epsilon, check_positive_int
from dptop.engine.core.facts import NO_FACTS
from dptop.engine.core.status import AlgorithmStatus, DetectionLimit

DEFAULT_WINDOW = 100_000
"""The window w when unset, in updates (packets, or byte units when weighted by bytes)."""
NOISE_MARGIN = 4.0  # threshold / noise σ of a window estimate, at least, when γ is chosen by default
DEFAULT_SUBSTREAMS = 10  # 004 App. C: about ten substreams per window is best
_MASK64 = (1 << 64) - 1


def _flag(name: str, value) -> bool:
    text = str(value).strip().lower()
    if text not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
        raise ValueError(f"{name} ({value!r}) must be true or false")
    return text in ("1", "true", "yes", "on")


def file_window(length: int, counting=PACKETS) -> int:
    """The default window over a replay of ``length`` packets: all of its updates (up to ``cap`` per
    packet when weighted by bytes), at most ``DEFAULT_WINDOW``."""
    return max(2, min(DEFAULT_WINDOW, length * counting.cap))


@dataclass(frozen=True, kw_only=True)
class WindowStatus(AlgorithmStatus):
    """The window's public plan: mode, window w and substream length L, the threshold, the positions
    the plan covers and its sketches, the plan rule, estimator and corrections, and the packets
    still to come before the first full window."""

    mode: str
    window: int
    substream_length: int
    threshold: float
    covered: tuple[int, int]
    plan_sketches: int
    plan: str
    estimator: str
    debias: bool
    scale: bool
    packets_until_full_window: int


@register
class DPSWHeavyHitters(Algorithm):
    """DPSW-Sketch heavy hitters over the last ``window`` packets (estimate >= (γ − 1/b)·w, §5.1)."""

    name = "dpsw"
    parameters = ("substream_length", "substreams", "alpha", "depth", "width", "plan", "estimator", "debias",
                  "scale", "kappa", "max_nodes", "candidates", "domain_scan", "levels", "ipv6_levels")
    private = True
    family = "sliding window"

    @staticmethod
    def requested_cost(settings) -> ZCDP:
        """ρ-zCDP at the settings' δ, ρ from (ε, δ) by the tight conversion (engine/privacy/calibration.py)."""
        return ZCDP(rho_from_epsilon_delta(settings.epsilon, settings.delta), settings.delta)

    @staticmethod
    def settings_for_cost(settings, cost: ZCDP):
        return settings.with_(epsilon=zcdp_epsilon(cost.rho, cost.delta), delta=cost.delta)

    def __init__(self, settings, facts=NO_FACTS, counting=PACKETS):
        super().__init__(settings, facts, counting)
        self._configure(settings)
        if self.mode == "candidates":
            self.domain = load_candidates(self.domain_source)
        elif self.mode == "domain_scan":
            self.domain = domain_keys(self.domain_source)
        self.reset()
        self.noise_floor = 0.0
        if settings.gamma is None:
            self.gamma = self.default_gamma()
            self.noise_floor = NOISE_MARGIN * self.window_sigma()

    @classmethod
    def footprint(cls, settings, facts=NO_FACTS, counting=PACKETS):
        """The sketches of every channel (``DPSWSketch.nbytes``) and a scanned domain's keys, from
        the parameters as ``_configure`` reads them (no sketch is built, no domain listed)."""
        plan = cls.__new__(cls)
        plan.facts, plan.counting = facts, counting
        plan._configure(settings)
        domain = 16 * plan.domain_source if plan.mode == "domain_scan" else 0
        channels = len(plan._channels())
        return Footprint(DPSWSketch.nbytes(plan.geometry, channels, plan.depth, plan.width) + domain,
                         f"depth x width = {plan.depth} x {plan.width} ({channels} levels, window {plan.window})")

    def _configure(self, settings):
        """The window geometry, the sketch sizes and the labels' source from the parameters
        (docs/dpsw-sketch.md §4-§5); builds nothing."""
        self.settings = settings
        x = dict(settings.extra)
        window = DEFAULT_WINDOW if settings.window is None else settings.window
        self.window = check_positive_int("window", window, minimum=2)
        gamma = settings.gamma if settings.gamma is not None else 1.0 / check_positive_int("k", settings.k)
        if not 0.0 < float(gamma) < 1.0:
            raise ValueError(f"gamma ({gamma!r}) must be in (0, 1)")
        self.gamma = float(gamma)
        self.epsilon, self.delta = check_epsilon(settings.epsilon), check_delta(settings.delta)
        self.rho = rho_from_epsilon_delta(self.epsilon, self.delta)
        self.kind = self.counting.key
        if "substream_length" in x and "substreams" in x:
            raise ValueError("give either substreams or substream_length, not both")
        if "substream_length" in x:
            L = check_positive_int("substream_length", x.pop("substream_length"))
        else:
            s = check_positive_int("substreams", x.pop("substreams", DEFAULT_SUBSTREAMS))
            if s > self.window:
                raise ValueError(f"substreams ({s}) must be <= window ({self.window})")
            L = -(-self.window // s)
        self.geometry = Geometry.make(self.window, L, x.pop("alpha", "3/4"))
        self.depth = check_positive_int("depth", x.pop("depth", 5))
        self.width = check_positive_int("width", x.pop("width", 4096), minimum=2)
        if not self.gamma > 1.0 / self.width:
            raise ValueError(f"gamma ({self.gamma:g}) must be > 1/width ({1 / self.width:g}) so that the "
                             "threshold (gamma - 1/width)*window is positive")
        self.rule = str(x.pop("plan", "noise-aware"))
        if self.rule not in PLANS:
            raise ValueError(f"plan ({self.rule!r}) must be one of {PLANS}")
        self.estimator = str(x.pop("estimator", "sum-min"))
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"estimator ({self.estimator!r}) must be one of {ESTIMATORS}")
        self.debias = _flag("debias", x.pop("debias", True))
        self.scale = _flag("scale", x.pop("scale", True))
        self.kappa = float(x.pop("kappa", 2.0))
        if not self.kappa >= 0:
            raise ValueError(f"kappa ({self.kappa!r}) must be >= 0")
        self.max_nodes = check_positive_int("max_nodes", x.pop("max_nodes", math.ceil(1.0 / self.gamma)))
        candidates, scan = x.pop("candidates", None), x.pop("domain_scan", None)
        levels, levels6 = x.pop("levels", IPV4_LEVELS), x.pop("ipv6_levels", IPV6_LEVELS)
        if candidates is not None and scan is not None:
            raise ValueError("give either candidates or domain_scan, not both")
        if candidates is not None:
            self.mode, self.domain_source = "candidates", candidates
        elif scan is not None:
            self.mode, self.domain_source = "domain_scan", check_positive_int("domain_scan", scan)
        else:
            self.mode, self.domain, self.domain_source = "hierarchy", None, None
            self.levels4 = parse_levels(levels, "levels", 32)
            self.levels6 = parse_levels(levels6, "ipv6_levels", 128)
            if not self.levels4 and not self.levels6:
                raise ValueError("levels and ipv6_levels are both off: nothing to report")

    def default_gamma(self) -> float:
        """γ when unset: 1/k, raised so that the threshold (γ − 1/b)·w stands at least
        ``NOISE_MARGIN`` standard deviations of a window estimate above zero: with a smaller
        margin a prefix tree of thousands of nodes releases noise (public numbers only)."""
        return min(0.95, max(self.gamma, 1.0 / self.width + NOISE_MARGIN * self.window_sigma() / self.window))

    def window_sigma(self) -> float:
        """The largest noise σ of a leaf-level window estimate over the address families, steady state."""
        t = 2 * self.window + self.geometry.L
        return max(self.sketch.noise_std(self.sketch.plan(self.rule, self.gamma, chans[-1], t=t), chans[-1])
                   for chans in self.groups.values())

    # ---- structure
    def _channels(self):
        if self.mode != "hierarchy":
            self.groups, self.roots = {"all": [0]}, {"all": (0, 0, 0)}
            return [Channel(self.rho, FAMILY_ANY, 128)]
        chans, self.groups, self.roots = hierarchy_channels(self.rho, self.kind, self.levels4, self.levels6)
        return chans

    def reset(self):
        self.sketch = DPSWSketch(self.geometry, self._channels(), self.depth, self.width, self.settings.seed)
        self.packets = 0
        self._cache_key = None
        self._cache: Release | None = None
        self._last = None

    def update(self, keys):
        self.sketch.update(keys)

    def consume(self, batch):
        """Update only. A query of frozen sketches is post-processing (§1.2), so it runs on demand,
        when the window is shown (``live``) or released (``finish``), not at every completed
        substream: at w = 100 000 a query per substream cost ten times the ingest."""
        self.update(batch.keys)
        self.packets += len(batch)
        return []

    def live(self):
        """The heavy hitters of the current window, queried now (cached while the plan holds)."""
        self._last = self.release()
        return self._last

    def finish(self):
        self._last = self.release()
        return [self._last]

    @classmethod
    def with_defaults(cls, settings, facts=NO_FACTS, counting=PACKETS):
        """The window (when unset) on a replay: the whole stream up to DEFAULT_WINDOW updates, so
        a short capture fills its window instead of waiting for 100 000 packets that never come.
        The window counts updates: weighted by bytes, the stream is up to ``cap`` per packet."""
        if settings.window is not None or not facts.length:
            return settings
        return settings.with_(window=file_window(facts.length, counting))

    def detectable(self) -> DetectionLimit:
        """A window estimate is the frozen sketches' counts (never below the true count, up to
        the plan's public coverage) plus Gaussian noise of standard deviation σ (the plan's
        ``noise_std`` on the leaf level, steady state): a source passes w.p. >= 0.9 with a count
        of threshold + 1.2816·σ. Error: σ plus the CountMin collision bound w/b."""
        sigma = self.window_sigma()
        count = math.ceil(self.threshold + 1.2816 * sigma)
        return DetectionLimit(count, count / self.window, sigma + self.window / self.width,
                              f"a window of {self.counting.amount(self.window)}")

    # ---- queries
    @property
    def threshold(self) -> float:
        """``(γ − ζ)·w`` with ``ζ = 1/b`` (§5.1); uses ``w`` even while ``t < w``. With γ chosen by
        default, never below ``NOISE_MARGIN`` standard deviations of a window estimate: where even
        γ = 0.95 cannot stand that far above the noise (a small window, or bytes, whose G-fold
        updates shrink ρ per update G² times), labels that carried no traffic would pass."""
        return max((self.gamma - 1.0 / self.width) * self.window, self.noise_floor)

    def _plans(self):
        return {g: self.sketch.plan(self.rule, self.gamma, chans[0]) for g, chans in self.groups.items()}

    def estimate(self, keys: np.ndarray) -> np.ndarray:
        """Window estimates of full addresses (leaf level in the hierarchy: /32, or the IPv6 leaf prefix)."""
        keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1, 2)
        plans = self._plans()
        if self.mode != "hierarchy":
            return self._est(keys, 0, plans["all"])
        out = np.full(len(keys), np.nan)
        left = np.ones(len(keys), bool)
        for g, (hi, lo, base) in self.roots.items():  # each key to the first tree whose root it is under
            mask = ((1 << 128) - 1) ^ ((1 << (128 - base)) - 1)
            sel = left & ((keys[:, 0] & np.uint64(mask >> 64)) == np.uint64(hi)) & (
                (keys[:, 1] & np.uint64(mask & _MASK64)) == np.uint64(lo))
            if sel.any():
                out[sel] = self._est(keys[sel], self.groups[g][-1], plans[g])
            left &= ~sel
        return out

    def _factor(self, plan) -> float:
        """``min(t, w) / covered length`` when ``scale`` is on: the plan's public coverage misses or
        adds up to about ``L`` packets at the window's two ends; rescaling to the window length is
        post-processing with public numbers (unbiased for a steady source)."""
        covered = plan.covered[1] - plan.covered[0] + 1
        if not self.scale or covered <= 0:
            return 1.0
        return min(plan.t, self.window) / covered

    def _est(self, keys, channel: int, plan) -> np.ndarray:
        """Window estimates rounded to whole updates: the Gaussian sums' float bits never leave
        (``bulknoise.on_grid``); the search compares the same rounded values it releases."""
        raw = self.sketch.estimate(keys, channel, plan, self.estimator, self.debias) * self._factor(plan)
        return on_grid(raw)

    def release(self) -> Release:
        """The heavy hitters of the current window. The items are cached while the query plan
        holds (same frozen sketches, same answers); the span and status follow the current time."""
        plans = self._plans()
        key = tuple((g, p.t if p.t <= 0 else p.entries) for g, p in plans.items())
        if key != self._cache_key:
            self._cache = self._query(plans)
            self._cache_key = key
        t = self.sketch.t
        return dataclasses.replace(self._cache, span=Span(max(0, t - self.window), t, kind="window"),
                                   status=self._status(next(iter(plans.values())), self.threshold))

    def _query(self, plans) -> Release:
        thr = self.threshold
        items: list[ReleasedItem] = []
        if self.sketch.t > 0:
            if self.mode == "hierarchy":
                for g, chans in self.groups.items():
                    items += self._tree(g, chans, plans[g], thr)
            else:
                est = self._est(self.domain, 0, plans["all"])
                idx = np.nonzero(est >= thr)[0]
                idx = idx[np.lexsort((self.domain[idx, 1], self.domain[idx, 0], -est[idx]))][: self.max_nodes]
                items = [ReleasedItem(int(self.domain[i, 0]), int(self.domain[i, 1]), float(est[i])) for i in idx]
        items.sort(key=lambda it: (-it.estimate, it.hi, it.lo))
        t = self.sketch.t
        first = next(iter(plans.values()))
        return Release(self.name, Span(max(0, t - self.window), t, kind="window"), tuple(items),
                       threshold=thr, guarantee=self.guarantee(), status=self._status(first, thr))

    def _tree(self, group: str, chans: list[int], plan, thr: float) -> list[ReleasedItem]:
        """HH_TREE of §5.2 (b): level ℓ keeps prefixes with estimate >= thr − κ_ℓ (κ_H = 0), at most
        ``max_nodes`` of them (largest estimates), and expands their children at level ℓ+1."""
        hi, lo, base = self.roots[group]
        prefixes = [self.sketch.channels[c].prefix for c in chans]  # in the 128-bit key space
        frontier = children_offsets(base, prefixes[0]).copy()
        frontier[:, 0] |= np.uint64(hi)
        frontier[:, 1] |= np.uint64(lo)
        for i, c in enumerate(chans):
            est = self._est(frontier, c, plan)
            last = i == len(chans) - 1
            margin = 0.0
            if not last:
                margin = self.kappa * self.sketch.noise_std(plan, c)
                if not self.debias:
                    margin += self.sketch.noise_bias(plan, c, self.estimator)
                margin *= self._factor(plan)
            idx = np.nonzero(est >= thr - margin)[0]
            idx = idx[np.lexsort((frontier[idx, 1], frontier[idx, 0], -est[idx]))][: self.max_nodes]
            if last:
                pre = None if prefixes[-1] == 128 or not self.kind.address else prefixes[-1]
                return [ReleasedItem(int(frontier[j, 0]), int(frontier[j, 1]), float(est[j]), pre) for j in idx]
            kids = children_offsets(prefixes[i], prefixes[i + 1])
            frontier = (frontier[idx, None, :] | kids[None, :, :]).reshape(-1, 2)
        return []

    # ---- public description
    def budget_use(self) -> float:
        """max over positions of the ρ spent on one event, as a share of ρ (must be <= 1, §3.4)."""
        return hierarchy_budget_use(self.geometry, self.sketch.channels, self.groups, self.kind.address, self.rho)

    def guarantee(self) -> Guarantee:
        g = self.geometry
        notes = [
            f"rho = {self.rho:.6g}: the largest rho whose rho-zCDP implies (eps, delta)-DP by the tight conversion "
            f"(Canonne, Kamath and Steinke 2020)",
            f"substreams of L={self.counting.amount(g.L)}, alpha={g.alpha}, {g.m} checkpoints; budgets rho_1 = rho*alpha(2-alpha), "
            f"rho_j = rho*alpha^(j-2)(1-alpha)^3/2; per-cell noise N(0, a/rho_j), a={self.depth}",
            "queries read only frozen sketches: unlimited queries are post-processing",
            "count-based window: not DP under adding/removing packets; packet counts and timing are public",
        ]
        if self.mode == "hierarchy" and not self.kind.address:
            levels = [len(t[3]) for t in self.kind.hierarchy()]
            notes.append(f"keys: {self.kind.label}; prefix trees of {' and '.join(map(str, levels))} levels, "
                         f"one DPSW per level with rho/{sum(levels)} (sequential composition: every level sees "
                         "every packet)")
        elif self.mode == "hierarchy":
            if self.levels4:
                notes.append(f"IPv4: prefix levels /{', /'.join(map(str, self.levels4))}, one DPSW each with "
                             f"rho/{len(self.levels4)} (sequential composition)")
            if self.levels6:
                notes.append(f"IPv6: prefix levels /{', /'.join(map(str, self.levels6))}, rho/{len(self.levels6)} "
                             f"each; IPv6 sources are reported as /{self.levels6[-1]} prefixes")
            else:
                notes.append("IPv6 sources are not reported (ipv6_levels off)")
            notes.append("IPv4 and IPv6 levels share one position counter, so each family may use the full rho "
                         "(docs/dpsw-sketch.md §5.2, derived)")
        elif self.mode == "candidates":
            notes.append(f"labels from a public candidate list of {len(self.domain)} addresses (never from traffic)")
        else:
            notes.append(f"labels from a scan of the synthetic domain of {len(self.domain)} ranks")
        seeded = self.settings.seed is not None
        return Guarantee(MODEL_WINDOW, ZCDP(self.rho, self.delta), Relation.SUBSTITUTE, scope=f"last {self.counting.amount(self.window)}",
                         noise=NOISE_SEEDED if seeded else NOISE_OS, seeded=seeded,
                         notes=tuple(notes), facts=self._facts()).counted(counted_unit(self.counting))

    def _facts(self) -> tuple[PublicFact, ...]:
        """A replay's packet count when it chose the window (``with_defaults``): public under substitution."""
        n = self.facts.length
        if not n or self.window != file_window(n, self.counting) or self.window >= DEFAULT_WINDOW:
            return ()
        return tuple(PublicFact(f.name, f.value, f.provenance,
                                f"the window w = {self.window} is the file's packet count; public under substitution "
                                f"of one packet's key") for f in self.facts.assumed("stream_length"))

    def _status(self, plan, thr) -> WindowStatus:
        t = self.sketch.t
        return WindowStatus(mode=self.mode, window=self.window, substream_length=self.geometry.L, threshold=thr,
                            covered=tuple(plan.covered), plan_sketches=len(plan.entries), plan=self.rule,
                            estimator=self.estimator, debias=self.debias, scale=self.scale,
                            packets_until_full_window=max(0, self.window - t))

    def status(self) -> WindowStatus:
        return self._status(next(iter(self._plans().values())), self.threshold)
