"""Gaussian binary mechanism (GaussBM) over a grid of counters [001 §3, Alg 1, Alg 2; docs/lazyhh.md §2–3].

Every counter is a binary tree of dyadic intervals of its own updates. Each node holds its exact
sum and its **own** fresh N(0, σ²) draw, made when the node is completed; the released value after
u updates is the sum of the noisy nodes of the set bits of u (≤ H of them).

State is a ``BMState`` of preallocated arrays over a ``d × w`` grid, stored column-major
(``ex``/``nz`` per cell and level, ``pre`` the cached release per cell, ``upd`` the pushes per
column). All cells of a column are pushed together (LazySketch pushes one column per arrival, PunctualSketch and the n-counter
problem push every column), so the merge pattern is computed once per column.

Corrections of 001 used here (docs/lazyhh.md §9): the merge test runs on the counter's own 0-based update
count (C1), the query accumulates (C2), σ keeps Alg 1's factor 2 (C3), the error bound is derived
from that σ (C4), and ε must lie in (0, 1) (C5).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from dptop.engine.privacy import bulknoise
from dptop.engine.core.jit import hot, inner, ix
from dptop.engine.core.settings import check_positive_int

NOISE_OS = (
    "GaussBM node noise: Gaussian (ziggurat) from 64 interleaved xoshiro256** streams (dptop.engine.privacy.bulknoise) "
    "seeded from os.urandom, "
    "a fast non-cryptographic generator for bulk per-update noise; one fresh draw per completed tree node"
)
NOISE_SEEDED = "seeded generator (Settings.seed): reproducible, NOT private"


class HorizonExceeded(RuntimeError):
    """More updates than the horizon the noise was calibrated for (docs/lazyhh.md §2.3 step 1, §7.2)."""


def check_gaussbm_epsilon(epsilon: float) -> float:
    """ε ∈ (0, 1): the classical Gaussian mechanism behind Alg 1's σ is valid only there (docs/lazyhh.md §2.6)."""
    epsilon = float(epsilon)
    if not 0.0 < epsilon < 1.0:
        raise ValueError(
            f"epsilon ({epsilon:g}) must be in (0, 1): GaussBM uses the classical Gaussian "
            "mechanism, which is not valid for epsilon >= 1 (docs/lazyhh.md §2.6)"
        )
    return epsilon


def check_gaussbm_delta(delta: float, upper: float = 1.0) -> float:
    delta = float(delta)
    if not 0.0 < delta < upper:
        raise ValueError(f"delta ({delta:g}) must be in (0, {upper:g})")
    return delta


def tree_height(updates: int) -> int:
    """H = ⌈log2(T + 1)⌉ levels for a counter of at most T updates (docs/lazyhh.md §2.1); capacity 2^H − 1."""
    updates = check_positive_int("horizon (updates per counter)", updates)
    return updates.bit_length()


def gaussbm_sigma(height: int, epsilon: float, delta: float, m: int) -> float:
    """σ = (1/ε)·sqrt(2·h·m·ln(1.25/δ)), the standard deviation of every node (docs/lazyhh.md §2.1, §2.4)."""
    epsilon = check_gaussbm_epsilon(epsilon)
    delta = check_gaussbm_delta(delta)
    m = check_positive_int("m (counters a neighbour may change)", m)
    return math.sqrt(2.0 * height * m * math.log(1.25 / delta)) / epsilon


def noise_bound(sigma: float, height: int, pairs: int, beta: float) -> float:
    """E_noise(N, β) = σ·sqrt(2h·ln(2N/β)): with probability ≥ 1 − β every one of N
    (counter, time) releases is within this of its exact prefix sum (docs/lazyhh.md §2.5, Fact 1 + union)."""
    if not 0.0 < beta < 1.0:
        raise ValueError(f"beta ({beta:g}) must be in (0, 1)")
    return sigma * math.sqrt(2.0 * height * math.log(2.0 * pairs / beta))


CHUNK = 256
"""Arrivals per block of pre-drawn noise in the lazy kernels (the buffer holds d·max(w, CHUNK) draws)."""


class BMState(NamedTuple):
    """Level-major, then column-major grid (``ex[level, j, i]``): the d cells of a column are
    contiguous, since they are pushed together, and a level of consecutive columns is contiguous,
    so a lazy sketch, which pushes columns round robin, walks each level's memory in order (the
    hardware prefetcher streams it; columns are cold by the time their turn comes round).

    Instead of each node's noisy value the cell keeps, for every occupied level b, ``sx[b]`` = Σ
    over the occupied levels b' ≥ b of the noisy node values (``sx[H]`` = 0; a free level's row
    is stale and never read). A new node on level L only needs ``sx[L] = (exact + own draw) +
    sx[A]`` with A the next occupied level above L (or H), so a push writes one suffix row, and
    every value is a fresh sum of node values (no subtraction, no drift). A push to level 0 (half
    of them) reads the sum above it from the release itself and writes the release alone, so
    rows 0 and 1 of ``sx`` are never read, never written and their memory never touched
    (``push_column``).
    """

    ex: np.ndarray  # int64 or int32[H, w, d] exact node sums (0 on free levels)
    sx: np.ndarray  # float64[H+1, w, d] suffix sums of the noisy node values (occupied levels, row H = 0)
    pre: np.ndarray  # float64[w, d]     cached release per cell (= sx[..., 0])
    upd: np.ndarray  # int64[w]          pushes so far per column (0-based index of the next one)
    z: np.ndarray  # float64[d·max(w, CHUNK)] pre-drawn N(0, 1), each used by exactly one node


def make_bm_state(depth: int, width: int, height: int, exact=np.int64) -> BMState:
    """Empty trees for a ``depth × width`` grid of counters with ``height`` levels each; node
    sums of dtype ``exact`` (int32 halves the memory a push streams, where no sum can pass 2^31)."""
    return BMState(
        np.zeros((height, width, depth), dtype=exact),
        np.zeros((height + 1, width, depth), dtype=np.float64),
        np.zeros((width, depth), dtype=np.float64),
        np.zeros(width, dtype=np.int64),
        np.zeros(depth * max(width, CHUNK), dtype=np.float64),
    )


@inner
def push_column(ex, sx, pre, upd, j, inc, sigma, z, zo, clear):
    """GBM_PUSH(inc[j, i]) into every cell (i, j) of column ``j`` (docs/lazyhh.md §2.3), arrays of a
    ``BMState``; cell i's new node draws ``z[zo + i]``; ``clear`` zeroes ``inc[j]`` after it.

    The new node lands on level L = number of trailing ones of u: the completed siblings below
    it are merged into it (exact sums added, levels cleared) and it gets its own fresh draw,
    never the children's noise (P12); its suffix sum adds that of the next occupied level above
    (the next set bit of u, or the zero row H). The caller guarantees u < 2^H − 1 (the classes
    check the horizon before any kernel runs) and that each draw of ``z`` is used once. Half the
    pushes land on level 0 and a quarter on level 1: each takes one fused loop. On level 0 the
    sum above the new node is the release so far: the last push landed on the lowest set bit of
    u, the first occupied level above, and wrote that level's suffix sum into ``pre`` too (0 before
    any push, as row H). So a level-0 push adds to ``pre`` in place and never reads ``sx``, whose
    rows are cold by the time a column's turn comes round (bit for bit the same values). Then
    only a push from level 1 up reads ``sx``, always a row above its own, so rows 0 and 1 are
    never read and never written. Per-packet helpers take arrays rather than state tuples (in
    numba a tuple costs 50–80 ns per call: reference counting that is not pruned); the kernels
    calling this one run without it."""
    d = ex.shape[2]
    u = upd[j]
    out = pre[j]
    src = inc[j]
    if u & 1 == 0:  # level 0
        node = ex[0, j]
        for i in range(d):
            e = src[i]
            if clear:
                src[i] = 0
            node[i] = e
            out[i] = (e + sigma * z[ix(zo + i)]) + out[i]
        upd[j] = u + 1
        return
    level = trailing_zeros(~u)
    rest = u >> (level + 1)
    top = ex.shape[0] if rest == 0 else level + 1 + trailing_zeros(rest)
    node = ex[level, j]  # free before this push (bit ``level`` of u is 0)
    above = sx[top, j]
    if level == 1:  # merge the one level below in the same loop
        below = ex[0, j]
        for i in range(d):
            e = src[i] + below[i]
            if clear:
                src[i] = 0
            below[i] = 0
            node[i] = e
            out[i] = (e + sigma * z[ix(zo + i)]) + above[i]
        upd[j] = u + 1
        return
    sums = sx[level, j]
    for i in range(d):
        node[i] = src[i]
    for b in range(level):  # level by level over the column: contiguous, vectorised loops
        below = ex[b, j]
        for i in range(d):
            node[i] += below[i]
            below[i] = 0
    for i in range(d):
        v = (node[i] + sigma * z[ix(zo + i)]) + above[i]
        sums[i] = v
        out[i] = v
    if clear:
        for i in range(d):
            src[i] = 0
    upd[j] = u + 1


@hot
def _push_steps(st, incs, sigma, rng):
    """Alg 2: at every step s each counter (i, j) receives incs[s, j, i] (zeros included, P3)."""
    ex, sx, pre, upd, z = st
    w, d = pre.shape
    for s in range(incs.shape[0]):
        if sigma > 0.0:
            bulknoise.fill_normal(rng, z, 1.0)
        for j in range(w):
            push_column(ex, sx, pre, upd, j, incs[s], sigma, z, j * d, False)


class GaussBM:
    """n = d·w independent GaussBM counters fed together (001 Alg 2, the n-counters problem).

    (ε, δ)-DP under continual observation for m-neighbouring inputs (Def 2, Thm 1) as long as
    every counter receives at most ``horizon`` updates. ``noiseless=True`` is a test-only mode
    (σ = 0, NOT private) used to check the tree against plain prefix sums.
    """

    def __init__(self, horizon: int, epsilon: float, delta: float, m: int = 1,
                 shape: tuple[int, int] = (1, 1), seed: int | None = None, noiseless: bool = False):
        self.horizon = check_positive_int("horizon", horizon)
        self.height = tree_height(self.horizon)
        self.sigma = gaussbm_sigma(self.height, epsilon, delta, m)
        self.epsilon, self.delta, self.m = float(epsilon), float(delta), int(m)
        d = check_positive_int("depth", shape[0])
        w = check_positive_int("width", shape[1])
        self.noiseless = bool(noiseless)
        self.seed = seed
        self.state = make_bm_state(d, w, self.height)
        self.rng = bulknoise.make_lanes(seed)

    @property
    def noise_sigma(self) -> float:
        """σ actually applied (0 in the noiseless test mode)."""
        return 0.0 if self.noiseless else self.sigma

    @property
    def capacity(self) -> int:
        """Largest number of updates the trees hold: 2^H − 1 ≥ horizon."""
        return (1 << self.height) - 1

    @property
    def updates(self) -> int:
        return int(self.state.upd[0])

    def update(self, increments: np.ndarray) -> None:
        """Push ``increments`` of shape ``(steps, d, w)`` (or ``(d, w)`` for one step), every
        counter at every step. Raises ``HorizonExceeded`` (pushing nothing) past the horizon."""
        incs = np.ascontiguousarray(increments, dtype=np.int64)
        if incs.ndim == 2:
            incs = incs[None]
        shape = self.state.pre.shape[::-1]
        if incs.shape[1:] != shape:
            raise ValueError(f"increments shape {incs.shape[1:]} does not match counters {shape}")
        if self.updates + len(incs) > self.horizon:  # also keeps every tree below 2^H − 1 (push_column)
            raise HorizonExceeded(
                f"{self.updates} + {len(incs)} updates exceed the horizon ({self.horizon}) the noise was calibrated for"
            )
        _push_steps(self.state, np.ascontiguousarray(incs.transpose(0, 2, 1)), self.noise_sigma, self.rng)

    def release(self) -> np.ndarray:
        """The released prefix sums of every counter, shape ``(d, w)``, 0 before the first update."""
        return self.state.pre.T.copy()

    def error_bound(self, pairs: int, beta: float) -> float:
        """E_noise(pairs, β) for the σ in use (docs/lazyhh.md §2.5)."""
        return noise_bound(self.noise_sigma, self.height, pairs, beta)
