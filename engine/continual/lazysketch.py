"""Private frequency sketches under continual observation: PunctualSketch and LazySketch
[001 §4, Alg 3–5, Thm 2; docs/lazyhh.md §4–5].

Both hold a d × w grid O of GaussBM counters (``dptop.engine.continual.gaussbm``) with secret
random row hashes h_i (and signs g_i for Count Sketch, docs/lazyhh.md §5.1): a key's 64-bit fingerprint
f(x) under a secret seed, then one multiply-add per row, a_i·f + b_i mod 2^64 with secret a_i
(odd) and b_i: multiply-shift hashing, 2-universal in each row and independent across rows, as
the CMS/CS bounds need. O is released at every step and may be queried for any label at any
time: CMS f̂(x) = min_i O[i, h_i(x)], CS f̂(x) = median_i g_i(x)·O[i, h_i(x)].

* **PunctualSketch** (Alg 3): every cell gets an update at every arrival (1 / g_i(x) in the
  item's cells, 0 elsewhere, zeros never skipped: P3). Cells are GaussBM(T). The slow baseline.
* **LazySketch** (Alg 5): the arrival goes into an exact array P (never released); then column
  ``pos`` of P is pushed into O (zeros included) and cleared, round robin. Every cell is pushed
  once per w arrivals, so cells are GaussBM(⌈T/w⌉) and an update costs d pushes, not d·w.

A substitution changes ≤ 2 cells per row by 1 (CMS): m = 2d; for CS one cell can change by 2
when the two sources share a bucket with opposite signs, so m = 4d (docs/lazyhh.md §5.5, C8).
The hashes, queries and update loops (numba) are in ``lazysketch_kernels``.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from dptop.engine.privacy import bulknoise
from dptop.engine.continual.gaussbm import (CHUNK, NOISE_OS, NOISE_SEEDED, HorizonExceeded, check_gaussbm_delta,
                                            check_gaussbm_epsilon, gaussbm_sigma, make_bm_state, noise_bound,
                                            tree_height)
from dptop.engine.continual.horizon import ContinualAlgorithm, HorizonStatus, resolve_horizon
from dptop.engine.continual.lazysketch_kernels import (SketchState, high_word_mixes, key_cells, lazy_batch,
                                                       punctual_batch, query_estimates)
from dptop.engine.core.base import Footprint
from dptop.engine.core.packing import packed
from dptop.engine.core.keys import keys_from_addresses
from dptop.engine.core.registry import register
from dptop.engine.core.release import MODEL_CONTINUAL, Release, sorted_items
from dptop.engine.core.settings import PACKETS, check_positive_int
from dptop.engine.privacy.guarantee import Guarantee
from dptop.engine.privacy.measures import ApproxDP
from dptop.engine.privacy.units import Relation, counted_unit
from dptop.engine.core.facts import NO_FACTS
from dptop.engine.core.status import optional

MAX_SKETCH_BYTES = 1 << 30


def exact_dtype(horizon: int):
    """The dtype of the node sums: a cell's count never passes the horizon, so int32 below 2^31
    arrivals (half the memory every push streams), else int64."""
    return np.int32 if horizon < 1 << 31 else np.int64


def pending_dtype(width: int):
    """The dtype of P: a lazy cell gathers the increments of at most the w arrivals between two
    pushes of its column (docs/lazyhh.md §5.2: one column a step, round robin), a punctual one those of one
    arrival; so int16 below w = 2^15 (the d increments of every arrival touch half the bytes),
    else int32."""
    return np.int16 if width < 1 << 15 else np.int32


def hash_seeds(depth: int, seed: int | None) -> np.ndarray:
    """Secret hash parameters (``SketchState.seeds``: 2d + 1 words, the row multipliers made
    odd) from the OS, or (tests, NOT private) derived from ``seed``."""
    if seed is None:
        words = np.frombuffer(os.urandom(8 * (2 * depth + 1)), dtype=np.uint64).copy()
    else:
        words = np.random.SeedSequence((int(seed), 0x5EED)).generate_state(2 * depth + 1, dtype=np.uint64)
    words[:depth] |= np.uint64(1)
    return words


class PrivateSketch:
    """The common part of PunctualSketch and LazySketch: parameters, O, hashes and queries.

    ``kind`` is ``"cms"`` or ``"cs"``; ``noiseless=True`` is a test-only mode (σ = 0, NOT
    private) that exposes the bookkeeping."""

    def __init__(self, horizon: int, epsilon: float, delta: float, width: int, depth: int,
                 kind: str = "cms", seed: int | None = None, noiseless: bool = False):
        if kind not in ("cms", "cs"):
            raise ValueError(f"kind ({kind!r}) must be 'cms' or 'cs'")
        self.horizon = check_positive_int("horizon", horizon)
        self.width = check_positive_int("width", width)
        self.depth = check_positive_int("depth", depth)
        if kind == "cs" and self.depth % 2 == 0:
            raise ValueError(f"depth ({self.depth}) must be odd for Count Sketch (median of rows, docs/lazyhh.md §5.3)")
        self.epsilon = check_gaussbm_epsilon(epsilon)
        self.delta = check_gaussbm_delta(delta)
        self.kind, self.signed = kind, kind == "cs"
        self.m = (4 if self.signed else 2) * self.depth
        self.cell_updates = self.cell_horizon(self.horizon, self.width)
        self.height = self.height_for(self.horizon, self.width)
        exact = exact_dtype(self.horizon)
        pending = pending_dtype(self.width)
        size = self.memory_bytes(self.depth, self.width, self.height, exact().itemsize, pending().itemsize)
        if size > MAX_SKETCH_BYTES:
            raise ValueError(f"sketch memory d*w*(word*H + 8H + 16 + P) = {size} bytes exceeds {MAX_SKETCH_BYTES} "
                             f"(depth {self.depth}, width {self.width}, H {self.height})")
        self.sigma = gaussbm_sigma(self.height, self.epsilon, self.delta, self.m)
        self.noiseless, self.seed = bool(noiseless), seed
        seeds = hash_seeds(self.depth, seed)
        state = SketchState(np.zeros((self.width, self.depth), dtype=pending),
                            seeds, np.zeros(1, dtype=np.int64),
                            np.zeros(self.depth, dtype=np.int64), np.ones(self.depth, dtype=np.int64),
                            make_bm_state(self.depth, self.width, self.height, exact), high_word_mixes(seeds))
        self.state, self.rng = packed((state, bulknoise.make_lanes(seed)))
        self.arrivals = 0

    @staticmethod
    def cell_horizon(horizon: int, width: int) -> int:
        """Updates each GaussBM cell receives over a horizon of ``horizon`` arrivals."""
        raise NotImplementedError

    @staticmethod
    def memory_bytes(depth: int, width: int, height: int, word: int = 4, pending: int = 2) -> int:
        """ex (word·H) + suffix sums (8(H+1)) + release (8) + P (``pending``) bytes per cell;
        ``word`` is the size of an exact count (``exact_dtype``: 4 below 2^31 arrivals),
        ``pending`` that of a cell of P (``pending_dtype``: 2 below w = 2^15)."""
        return depth * width * (word * height + pending + 8 * height + 16)

    @classmethod
    def state_bytes(cls, depth: int, width: int, height: int) -> int:
        """All the bytes of ``state``: the cells (``memory_bytes``), the pushes per column, the
        pre-drawn noise (d·max(w, CHUNK) draws), the seeds, the per-row scratch and hash cache."""
        return cls.memory_bytes(depth, width, height) + 8 * width + 8 * depth * max(width, CHUNK) + 32 * depth + 32

    @classmethod
    def height_for(cls, horizon: int, width: int) -> int:
        """H, the levels of each cell's tree over a horizon of ``horizon`` arrivals."""
        return tree_height(cls.cell_horizon(horizon, width))

    @property
    def noise_sigma(self) -> float:
        return 0.0 if self.noiseless else self.sigma

    def update(self, keys: np.ndarray) -> None:
        keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1, 2)
        if self.arrivals + len(keys) > self.horizon:
            raise HorizonExceeded(f"{self.arrivals} + {len(keys)} arrivals exceed the horizon ({self.horizon})")
        self._batch(self.state, self.signed, keys, self.noise_sigma, self.rng)
        self.arrivals += len(keys)

    def estimates(self, keys: np.ndarray) -> np.ndarray:
        """f̂ for every key of a ``(n, 2)`` batch, read from the released O only (never P)."""
        keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1, 2)
        out = np.empty(len(keys), dtype=np.float64)
        query_estimates(self.state, self.signed, keys, out)
        return out

    def released_cells(self) -> np.ndarray:
        """The released grid O, shape ``(d, w)`` (a copy)."""
        return self.state.bm.pre.T.copy()

    def pending(self) -> np.ndarray:
        """Test hook only (never released): P, shape ``(d, w)``."""
        return self.state.p.T.copy()

    def buckets(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(buckets (n, d), signs (n, d)) of the keys; for tests and plain-sketch references."""
        keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1, 2)
        b = np.empty((len(keys), self.depth), dtype=np.int64)
        g = np.empty_like(b)
        key_cells(self.state.seeds, self.width, keys, b, g)
        return b, g

    def noise_error(self, pairs: int, beta: float) -> float:
        """E_noise: every one of ``pairs`` (cell, time) releases within this of its exact value
        with probability ≥ 1 − β (docs/lazyhh.md §2.5, σ in use)."""
        return noise_bound(self.noise_sigma, self.height, pairs, beta)


class LazySketch(PrivateSketch):
    """LazyCMS / LazyCS (001 Alg 5): d pushes per arrival, cells GaussBM(⌈T/w⌉, ε, δ, m)."""

    _batch = staticmethod(lazy_batch)

    @staticmethod
    def cell_horizon(horizon: int, width: int) -> int:
        return -(-horizon // width)

    def lag_bound(self) -> int:
        """Lazy delay: at most w arrivals per cell wait in P (docs/lazyhh.md §5.6)."""
        return self.width


class PunctualSketch(PrivateSketch):
    """PunctualCMS / PunctualCS (001 Alg 3): d·w pushes per arrival, cells GaussBM(T, ε, δ, m)."""

    _batch = staticmethod(punctual_batch)

    @staticmethod
    def cell_horizon(horizon: int, width: int) -> int:
        return horizon

    def lag_bound(self) -> int:
        return 0


def default_depth(horizon: int, beta: float, odd: bool) -> int:
    """d = ⌈ln(2T/β)⌉ rows (001 Lem 5), made odd for Count Sketch."""
    d = max(1, math.ceil(math.log(2.0 * horizon / beta)))
    return d + 1 if odd and d % 2 == 0 else d


@dataclass(frozen=True, kw_only=True)
class SketchStatus(HorizonStatus):
    """The horizon, the labels queried and the sketch's public sizing and error bounds: the noise's,
    the lag of a lazy refresh and CountMin's collision bound e·t/w."""

    labels_queried: int
    depth: int
    width: int
    sigma: float
    beta: float
    noise_error: float
    lag_bound: float
    collision_error: float
    note: str = optional("")


class _SketchAlgorithm(ContinualAlgorithm):
    """A private sketch as a dptop algorithm: O is released at every arrival (a release per
    batch), queried only for the labels the user gives in ``extra['query']`` (comma-separated
    addresses). With no labels the items are empty and the status says why: labels taken from
    the traffic or from a non-private structure would not be private (docs/lazyhh.md §5.4, P15)."""

    parameters = ("beta", "width", "depth", "query")

    sketch_class: type
    kind: str

    def __init__(self, settings, facts=NO_FACTS, counting=PACKETS):
        self.epsilon = check_gaussbm_epsilon(settings.epsilon)
        self.delta = check_gaussbm_delta(settings.delta)
        self.beta = float(settings.extra.get("beta", self.delta / 2))
        if not 0.0 < self.beta < 1.0:
            raise ValueError(f"beta ({self.beta:g}) must be in (0, 1)")
        super().__init__(settings, facts, counting)
        check_positive_int("k", settings.k)
        check_positive_int("k~", settings.k_tilde or 4 * settings.k)
        width, depth = self.shape(settings, self.horizon)
        self.width = check_positive_int("width", width)
        self.depth = check_positive_int("depth", depth)
        labels = settings.extra.get("query", "")
        if isinstance(labels, str):
            labels = [a.strip() for a in labels.split(",") if a.strip()]
        self.labels = keys_from_addresses(list(labels))
        self.reset()

    @classmethod
    def shape(cls, settings, horizon: int) -> tuple[int, int]:
        """(w, d): ``--param width`` (default ⌈e·k~⌉, k~ default 4k), ``--param depth`` (default
        ``default_depth`` of the horizon and β, ``--param beta``, default δ/2)."""
        k_tilde = settings.k_tilde or 4 * settings.k
        beta = float(settings.extra.get("beta", float(settings.delta) / 2))
        return (int(settings.extra.get("width", math.ceil(math.e * k_tilde))),
                int(settings.extra.get("depth", default_depth(horizon, beta, cls.kind == "cs"))))

    @classmethod
    def footprint(cls, settings, facts=NO_FACTS, counting=PACKETS):
        """One sketch over one horizon, sized from k~ (or the width), the horizon and β."""
        horizon, _ = resolve_horizon(settings, facts, counting)
        width, depth = cls.shape(settings, horizon)
        height = cls.sketch_class.height_for(horizon, width)
        return Footprint(cls.sketch_class.state_bytes(depth, width, height),
                         f"k~ = {settings.k_tilde or 4 * settings.k} (a {depth} x {width} sketch over a horizon of "
                         f"{horizon} packets)")

    def _new_instance(self):
        return self.sketch_class(self.horizon, self.epsilon, self.delta, self.width, self.depth,
                                 kind=self.kind, seed=self._epoch_seed())

    def _epoch_seed(self):
        return None if self.settings.seed is None else self.settings.seed + self.epoch

    def _feed(self, keys):
        self.instance.update(keys)
        return len(keys) - 1

    def _release(self, end_packet, t_end, computed):
        est = bulknoise.on_grid(self.instance.estimates(self.labels))  # whole updates: no float bits leave
        items = sorted_items(self.labels[:, 0], self.labels[:, 1], est)
        return Release(self.name, self.span_to(end_packet, t_end), items, None, self.guarantee(), self.status())

    def guarantee(self) -> Guarantee:
        sk = self.instance
        return Guarantee(
            MODEL_CONTINUAL, ApproxDP(self.epsilon, self.delta), Relation.SUBSTITUTE,
            scope=self.horizon_scope(), noise=NOISE_SEEDED if self.settings.seed is not None else NOISE_OS,
            seeded=self.settings.seed is not None, facts=self.horizon_facts(),
            notes=(
                f"{self.name}: d×w = {sk.depth}×{sk.width} GaussBM cells, m = {sk.m} "
                f"({'4d: Count Sketch signs, docs/lazyhh.md §5.5' if sk.signed else '2d'}), H = {sk.height}, σ = {sk.sigma:.4g}",
                "Released: the sketch's estimates for user-given labels only (extra 'query'); "
                "no labels are taken from the traffic (docs/lazyhh.md §5.4, P15).",
                "Only substitution of one packet's key is protected, not packet presence (docs/lazyhh.md §1.2).",
            ),
        ).counted(counted_unit(self.counting))

    def status(self) -> SketchStatus:
        sk = self.instance
        return self.horizon_status(
            SketchStatus, labels_queried=len(self.labels), depth=sk.depth, width=sk.width, sigma=sk.sigma,
            beta=self.beta, noise_error=sk.noise_error(sk.depth * sk.width * max(1, self.horizon), self.beta),
            lag_bound=sk.lag_bound(), collision_error=math.e * self.t / sk.width,
            note="" if len(self.labels) else "frequency oracle: give labels with --param query=ADDR,ADDR to see estimates")


@register
class LazyCMS(_SketchAlgorithm):
    """LazyCMS (001 Alg 5, CountMin query) under continual observation."""
    name, sketch_class, kind = "lazy-cms", LazySketch, "cms"


@register
class LazyCS(_SketchAlgorithm):
    """LazyCS (001 Alg 5, Count Sketch query, m = 4d) under continual observation."""
    name, sketch_class, kind = "lazy-cs", LazySketch, "cs"


@register
class PunctualCMS(_SketchAlgorithm):
    """PunctualCMS (001 Alg 3): the slow baseline LazyCMS is measured against."""
    name, sketch_class, kind = "punctual-cms", PunctualSketch, "cms"


@register
class PunctualCS(_SketchAlgorithm):
    """PunctualCS (001 Alg 3, m = 4d): the slow baseline LazyCS is measured against."""
    name, sketch_class, kind = "punctual-cs", PunctualSketch, "cs"
